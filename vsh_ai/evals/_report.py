"""The eval report: terminal (rich), JSON and Markdown renderings, and CI gates."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

from pydantic import BaseModel, Field
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ._metrics import LABELS, Metrics
from ._mutants import MUTATION_KINDS
from ._runner import MutantKindRow, RunFailure, SuiteResult

__all__ = ("GATE_METRICS", "EvalReport", "Gate", "GateError", "render_markdown", "render_terminal")

GATE_METRICS = (
    "unsafe_approvals",
    "unsafe_approval_rate",
    "unsafe_approval_upper_95",
    "safe_approval_rate",
    "unnecessary_review_rate",
    "reject_recall",
    "reviewer_failures",
    "reviewer_failure_rate",
    "flip_rate",
    "accuracy",
    "latency_p50_s",
    "latency_p95_s",
    "run_failures",
    "unsafe_approvals_by_rules",
    "unsafe_approvals_by_model",
    "escalated_approvals",
    "mutant_unsafe_approvals",
    "mutant_unsafe_approval_upper_95",
    "mutant_unsafe_approvals_by_rules",
    "mutant_safe_approval_rate",
    "mutant_safe_drift",
    "mutant_skipped",
)
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_GATE = re.compile(r"^\s*([a-z_0-9]+)\s*(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)\s*$")


_ZERO = dict.fromkeys(
    (
        "mutants",
        "skipped",
        "unsafe_cases",
        "unsafe_approvals",
        "safe_cases",
        "safe_approvals",
        "safe_drift",
    ),
    0,
)


class GateError(ValueError):
    """A ``--fail-if`` expression that cannot be parsed."""


class Gate(BaseModel):
    """``metric op number``, e.g. ``unsafe_approvals>0``: trips (fails CI) when true."""

    metric: str
    op: str
    value: float

    @classmethod
    def parse(cls, expression: str) -> Gate:
        match = _GATE.match(expression)
        if not match:
            raise GateError(
                f"--fail-if {expression!r}: expected METRIC OP NUMBER such as "
                f"'unsafe_approvals>0' (OP is one of {' '.join(_OPS)})"
            )
        metric, op, value = match.groups()
        if metric not in GATE_METRICS:
            raise GateError(
                f"--fail-if {expression!r}: unknown metric; use one of {', '.join(GATE_METRICS)}"
            )
        return cls(metric=metric, op=op, value=float(value))

    def check(self, report: EvalReport) -> str | None:
        """The reason the gate trips, or None.

        A metric without data never trips, except a ``mutant_*`` gate on a run without
        mutants: that trips with a message, so a CI gate cannot pass by omission.
        """
        actual: float | int | None
        if self.metric == "run_failures":
            actual = len(report.run_failures)
        elif self.metric.startswith("mutant_"):
            if report.mutants is None:
                return f"{self.metric}: no mutants were run (add --mutants)"
            name = self.metric.removeprefix("mutant_")
            if name == "safe_drift":
                actual = report.mutant_safe_drift
            elif name == "skipped":
                actual = report.mutant_skipped
            else:
                actual = getattr(report.mutants, name)
        else:
            actual = getattr(report.overall, self.metric)
        if actual is None or not _OPS[self.op](float(actual), self.value):
            return None
        return f"{self.metric} = {_fmt(actual)} (gate: {self.metric}{self.op}{_fmt(self.value)})"


class EvalReport(BaseModel):
    """Every suite's result and the overall metrics (also the ``--json`` format)."""

    suites: list[SuiteResult]
    overall: Metrics
    run_failures: list[RunFailure]
    mutants: Metrics | None = Field(
        default=None, description="All suites' mutants together (with --mutants)."
    )
    workers: int = Field(default=1, description="Processes that ran the cases.")

    @property
    def mutant_safe_drift(self) -> int:
        return sum(len(s.mutants.safe_drift_cases) for s in self.suites if s.mutants)

    @property
    def mutant_skipped(self) -> int:
        return sum(len(s.mutants.skipped) for s in self.suites if s.mutants)

    @property
    def mutant_kinds(self) -> list[MutantKindRow]:
        """Per mutation kind, summed over suites."""
        rows: dict[str, MutantKindRow] = {}
        for suite in self.suites:
            for row in suite.mutants.kinds if suite.mutants else []:
                total = rows.setdefault(
                    row.kind, MutantKindRow.model_validate({**row.model_dump(), **_ZERO})
                )
                for name in _ZERO:
                    setattr(total, name, getattr(total, name) + getattr(row, name))
        order = list(MUTATION_KINDS)
        return sorted(rows.values(), key=lambda r: order.index(r.kind) if r.kind in order else 99)

    def gate_failures(self, gates: list[Gate]) -> list[str]:
        return [reason for gate in gates if (reason := gate.check(self)) is not None]


def _fmt(value: float | int | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    if percent:
        return f"{value * 100:.1f}%"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return str(int(value))


def _headline(m: Metrics) -> list[tuple[str, str]]:
    latency = (
        f"{_fmt(m.latency_p50_s * 1000 if m.latency_p50_s is not None else None)} / "
        f"{_fmt(m.latency_p95_s * 1000 if m.latency_p95_s is not None else None)} ms"
    )
    return [
        ("cases / runs", f"{m.cases} / {m.runs}"),
        ("accuracy", _fmt(m.accuracy, True)),
        (
            "unsafe approvals",
            f"{m.unsafe_approvals} of {m.unsafe_cases} distinct cases "
            f"({_fmt(m.unsafe_approval_rate, True)}, 95% upper bound "
            f"{_fmt(m.unsafe_approval_upper_95, True)})"
            + (f"; {m.unsafe_approval_runs} of {m.unsafe_runs} runs" if m.runs > m.cases else ""),
        ),
        *(
            [
                (
                    "  by rules / by the model",
                    f"{m.unsafe_approvals_by_rules} approved by rules (or a non-model judge); "
                    f"{m.unsafe_approvals_by_model} escalated and approved by the model",
                ),
                (
                    "escalated to the model",
                    f"{m.escalated_runs} runs, {m.escalated_approvals} approved by the model",
                ),
            ]
            if m.escalated_runs or m.unsafe_approvals_by_model
            else []
        ),
        ("safe approval rate", _fmt(m.safe_approval_rate, True) + f" of {m.safe_runs}"),
        ("unnecessary review rate", _fmt(m.unnecessary_review_rate, True)),
        ("reject recall", _fmt(m.reject_recall, True)),
        ("reviewer failures", f"{m.reviewer_failures} ({_fmt(m.reviewer_failure_rate, True)})"),
        (
            "decision flip rate",
            f"{_fmt(m.flip_rate, True)} ({m.flipped_cases} cases)"
            if m.flip_rate is not None
            else "- (no repeats)",
        ),
        ("judge latency p50 / p95", latency),
        (
            "model usage",
            f"{m.requests} requests, {m.input_tokens} in / {m.output_tokens} out tokens, "
            f"cost {'unknown' if m.cost_usd is None else f'${m.cost_usd:.4f}'}",
        ),
    ]


def _confusion_rows(m: Metrics) -> list[list[str]]:
    return [[e, *(str(m.confusion[e][d]) for d in LABELS)] for e in LABELS]


def _category_rows(m: Metrics) -> list[list[str]]:
    return [
        [
            c.category,
            str(c.runs),
            f"{c.correct}/{c.runs}",
            str(c.unsafe_approvals) if c.unsafe_runs else "-",
            f"{c.safe_approvals}/{c.safe_runs}" if c.safe_runs else "-",
        ]
        for c in m.categories
    ]


_CATEGORY_COLUMNS = ["category", "runs", "correct", "unsafe approvals", "safe approved"]


def _unsafe_lines(report: EvalReport) -> list[str]:
    lines = []
    for suite in report.suites:
        for outcome in suite.outcomes:
            expected = next(o.expected for o in suite.observations if o.case_id == outcome.case_id)
            if expected != "approve" and outcome.decided == "approve":
                lines.append(
                    f"{suite.scenario}/{outcome.case_id}: expected {expected}, approved by "
                    f"{outcome.decided_by}"
                )
    return list(dict.fromkeys(lines))


def render_terminal(report: EvalReport, console: Console | None = None) -> None:
    """Print the report: unsafe approvals first, then per-suite and overall figures."""
    console = console or Console()
    unsafe = _unsafe_lines(report)
    if unsafe:
        console.print(Text(f"UNSAFE APPROVALS ({len(unsafe)})", style="bold red"))
        for line in unsafe:
            console.print(f"  [red]✗[/red] {escape(line)}", emoji=False)
    else:
        console.print(Text("No unsafe approvals.", style="bold green"))
    if report.run_failures:
        console.print(Text(f"RUN FAILURES ({len(report.run_failures)})", style="bold red"))
        for failure in report.run_failures:
            error = escape(failure.error.strip()[-300:])  # guest text: never markup
            console.print(f"  [red]![/red] {failure.case_id}: {error}", emoji=False)
    summary = Table(title="Suites", title_justify="left")
    columns = ["suite", "mode", "cases", "unsafe ok'd (95% ≤)", "safe ok'd", "rej. recall"]
    if report.mutants is not None:
        columns.append("mutants: unsafe ok'd")
    for column in columns:
        summary.add_column(column)
    for suite in report.suites:
        m = suite.metrics
        row = [
            suite.scenario,
            suite.mode,
            str(m.cases),
            f"{m.unsafe_approvals}/{m.unsafe_cases} (≤{_fmt(m.unsafe_approval_upper_95, True)})",
            _fmt(m.safe_approval_rate, True),
            _fmt(m.reject_recall, True),
        ]
        if report.mutants is not None:
            mm = suite.mutants.metrics if suite.mutants else None
            row.append(f"{mm.unsafe_approvals}/{mm.unsafe_cases}" if mm else "-")
        summary.add_row(*row)
    console.print(summary)
    for suite in report.suites:
        title = f"{suite.scenario}: judge {suite.judge}, {suite.mode}"
        _print_metrics(console, title, suite.metrics, len(report.suites) == 1)
    if len(report.suites) > 1:
        _print_metrics(console, "overall", report.overall, True)
    if report.mutants is not None:
        _print_mutants(console, report)


_KIND_COLUMNS = [
    "mutation",
    "mutants",
    "skipped",
    "unsafe approved",
    "safe approved",
    "safe drift",
]


def _kind_rows(report: EvalReport) -> list[list[str]]:
    return [
        [
            row.kind,
            str(row.mutants),
            str(row.skipped),
            f"{row.unsafe_approvals}/{row.unsafe_cases}",
            f"{row.safe_approvals}/{row.safe_cases}",
            str(row.safe_drift),
        ]
        for row in report.mutant_kinds
    ]


def _mutant_lines(report: EvalReport) -> list[str]:
    lines = []
    for suite in report.suites:
        if suite.mutants is None:
            continue
        for outcome in suite.mutants.outcomes:
            if outcome.case_id in suite.mutants.unsafe_approval_cases:
                lines.append(
                    f"{suite.scenario}/{outcome.case_id}: approved by {outcome.decided_by}"
                )
    return list(dict.fromkeys(lines))


def _mutant_headline(report: EvalReport) -> list[tuple[str, str]]:
    m = report.mutants
    assert m is not None
    return [
        (
            "mutant unsafe approvals",
            f"{m.unsafe_approvals} of {m.unsafe_cases} distinct unsafe mutants "
            f"({_fmt(m.unsafe_approval_rate, True)}, 95% upper bound "
            f"{_fmt(m.unsafe_approval_upper_95, True)}); "
            f"{m.unsafe_approvals_by_rules} by rules, {m.unsafe_approvals_by_model} "
            "escalated and approved by the model",
        ),
        (
            "mutant safe approval rate",
            f"{_fmt(m.safe_approval_rate, True)} of {m.safe_runs}; safe drift "
            f"{report.mutant_safe_drift} (decided unlike their case)",
        ),
        ("mutants scored / skipped", f"{m.cases} / {report.mutant_skipped}"),
    ]


def _print_mutants(console: Console, report: EvalReport) -> None:
    console.rule("[bold]MUTANTS (scored with their cases' labels; not in the figures above)")
    lines = _mutant_lines(report)
    if lines:
        console.print(Text(f"UNSAFE APPROVALS AMONG MUTANTS ({len(lines)})", style="bold red"))
        for line in lines[:50]:
            console.print(f"  [red]✗[/red] {escape(line)}", emoji=False)
        if len(lines) > 50:
            console.print(f"  ... and {len(lines) - 50} more (see --json)")
    else:
        console.print(Text("No unsafe approvals among mutants.", style="bold green"))
    headline = Table(show_header=False, box=None, padding=(0, 2))
    for name, value in _mutant_headline(report):
        headline.add_row(name, value)
    kinds = Table(title="by mutation kind", title_justify="left")
    for column in _KIND_COLUMNS:
        kinds.add_column(column)
    for row in _kind_rows(report):
        kinds.add_row(*row)
    console.print(Group(headline, kinds))


def _print_metrics(console: Console, title: str, m: Metrics, with_categories: bool) -> None:
    headline = Table(show_header=False, box=None, padding=(0, 2))
    for name, value in _headline(m):
        headline.add_row(name, value)
    confusion = Table(title="expected ↓ / decided →", title_justify="left")
    for column in ("", *LABELS):
        confusion.add_column(column, justify="right")
    for row in _confusion_rows(m):
        confusion.add_row(*row)
    categories = Table(title="per category", title_justify="left")
    for column in _CATEGORY_COLUMNS:
        categories.add_column(column)
    for row in _category_rows(m):
        categories.add_row(*row)
    console.rule(f"[bold]{title}")
    console.print(Group(headline, confusion, *([categories] if with_categories else [])))


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: EvalReport) -> str:
    """The report as Markdown (for CI summaries and pull requests)."""
    out = ["# vsh-ai eval report", ""]
    unsafe = _unsafe_lines(report)
    out += ["## Unsafe approvals", ""]
    out += [f"- {line}" for line in unsafe] or ["None."]
    if report.run_failures:
        out += ["", "## Run failures", ""]
        out += [f"- `{f.case_id}`: {f.error.strip().splitlines()[-1]}" for f in report.run_failures]
    sections = [(f"{s.scenario} — {s.judge} ({s.mode})", s.metrics) for s in report.suites]
    for title, m in [*sections, ("Overall", report.overall)]:
        out += ["", f"## {title}", ""]
        out += [_md_table(["metric", "value"], [list(row) for row in _headline(m)]), ""]
        out += [_md_table(["expected \\ decided", *LABELS], _confusion_rows(m)), ""]
        out += [_md_table(_CATEGORY_COLUMNS, _category_rows(m))]
    if report.mutants is not None:
        out += [
            "",
            "## Mutants",
            "",
            "Scored with their cases' labels; not in the figures above.",
            "",
        ]
        out += [_md_table(["metric", "value"], [list(row) for row in _mutant_headline(report)])]
        out += ["", "### Unsafe approvals among mutants", ""]
        out += [f"- {line}" for line in _mutant_lines(report)] or ["None."]
        out += ["", "### By mutation kind", "", _md_table(_KIND_COLUMNS, _kind_rows(report))]
    return "\n".join(out) + "\n"
