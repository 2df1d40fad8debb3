"""The eval report: terminal (rich), JSON and Markdown renderings, and CI gates."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import BaseModel, Field
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ._metrics import LABELS, Metrics
from ._mutants import MUTATION_KINDS
from ._names import GATE_METRICS, versions
from ._outcome import RunFailure
from ._scoring import MutantKindRow, SuiteResult

__all__ = (
    "GATE_METRICS",
    "REPORT_SCHEMA_VERSION",
    "EvalReport",
    "Gate",
    "GateError",
    "render_markdown",
    "render_terminal",
    "versions",
    "wrong_decisions",
)

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_GATE = re.compile(
    r"^\s*(?:([a-z0-9][a-z0-9-]*)\s*:\s*)?([a-z_0-9]+)\s*(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)\s*$"
)
REPORT_SCHEMA_VERSION = 3
"""Version of the ``--json`` layout; 2 added versions, digests, expected, coverage; 3 the
safe-approval interval (``safe_cases``, ``safe_approved_cases``, ``safe_approval_*_95``)."""


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
    """``[suite:]metric op number``, e.g. ``unsafe_approvals>0``: trips (fails CI) when true.

    With a suite (``service-config:safe_approval_rate<0.5``) the gate reads that suite's
    figures; without one, the overall figures.
    """

    metric: str
    op: str
    value: float
    suite: str | None = None

    @classmethod
    def parse(cls, expression: str) -> Gate:
        match = _GATE.match(expression)
        if not match:
            raise GateError(
                f"--fail-if {expression!r}: expected [SUITE:]METRIC OP NUMBER such as "
                f"'unsafe_approvals>0' or 'service-config:safe_approval_rate<0.5' "
                f"(OP is one of {' '.join(_OPS)})"
            )
        suite, metric, op, value = match.groups()
        if metric not in GATE_METRICS:
            raise GateError(
                f"--fail-if {expression!r}: unknown metric; use one of {', '.join(GATE_METRICS)}"
            )
        return cls(metric=metric, op=op, value=float(value), suite=suite)

    @property
    def label(self) -> str:
        return f"{self.suite}:{self.metric}" if self.suite else self.metric

    def _actual(self, report: EvalReport) -> float | int | str | None:
        """The figure, or a string saying why there is none."""
        suites = report.suites
        metrics = report.overall
        mutants = report.mutants
        failures = len(report.run_failures)
        if self.suite is not None:
            chosen = [s for s in report.suites if s.scenario == self.suite]
            if not chosen:
                ran = ", ".join(s.scenario for s in report.suites) or "none"
                return f"suite {self.suite!r} was not run (ran: {ran})"
            suites = chosen
            metrics = chosen[0].metrics
            mutants = chosen[0].mutants.metrics if chosen[0].mutants else None
            failures = len(chosen[0].run_failures)
        if self.metric == "run_failures":
            return failures
        if self.metric.startswith("mutant_"):
            if mutants is None:
                return "no mutants were run (add --mutants)"
            name = self.metric.removeprefix("mutant_")
            if name == "safe_drift":
                return sum(len(s.mutants.safe_drift_cases) for s in suites if s.mutants)
            if name == "skipped":
                return sum(len(s.mutants.skipped) for s in suites if s.mutants)
            value: float | int | None = getattr(mutants, name)
            return value
        value = getattr(metrics, self.metric)
        return value

    def check(self, report: EvalReport) -> str | None:
        """The reason the gate trips, or None.

        A gate never passes on missing data: a metric without data (no safe cases for
        ``safe_approval_rate``, no mutants for a ``mutant_*`` gate, a suite that was not
        run) trips with a message saying so.
        """
        actual = self._actual(report)
        if isinstance(actual, str):
            return f"{self.label}: {actual}; the gate cannot pass without data"
        if actual is None:
            return (
                f"{self.label}: no data (nothing in this run measures it); "
                "the gate cannot pass without data"
            )
        if not _OPS[self.op](float(actual), self.value):
            return None
        return f"{self.label} = {_fmt(actual)} (gate: {self.label}{self.op}{_fmt(self.value)})"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class EvalReport(BaseModel):
    """Every suite's result and the overall metrics (also the ``--json`` format)."""

    schema_version: int = Field(
        default=REPORT_SCHEMA_VERSION, description="Version of this report's layout."
    )
    created: str = Field(default_factory=_now, description="When the run ended (UTC, ISO 8601).")
    versions: dict[str, str] = Field(
        default_factory=versions, description="vsh-ai, VSH, Pydantic AI and Python versions."
    )
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
        ("safe approval rate", _safe_rate(m)),
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
            f"cost {_cost(m)}",
        ),
    ]


def _interval(m: Metrics) -> str:
    """The safe-approval rate's two-sided 95% interval, ``[lo–hi]`` (``-`` without data)."""
    if m.safe_approval_lower_95 is None or m.safe_approval_upper_95 is None:
        return "-"
    return f"[{_fmt(m.safe_approval_lower_95, True)}–{_fmt(m.safe_approval_upper_95, True)}]"


def _safe_rate(m: Metrics) -> str:
    """``75.0% of 40 (95% interval 58.8%–87.3% over 40 distinct cases)``."""
    text = _fmt(m.safe_approval_rate, True) + f" of {m.safe_runs}"
    if m.safe_approval_lower_95 is None or m.safe_approval_upper_95 is None:
        return text
    return text + (
        f" (95% interval {_fmt(m.safe_approval_lower_95, True)}–"
        f"{_fmt(m.safe_approval_upper_95, True)}: {m.safe_approved_cases} of {m.safe_cases} "
        "distinct cases approved on every run)"
    )


def _cost(m: Metrics) -> str:
    if m.requests == 0:
        return "$0 (no model calls)"
    if m.cost_usd is None:
        return "unknown (no price known for this model)"
    if m.unpriced_requests:
        return f"${m.cost_usd:.4f} + {m.unpriced_requests} requests with no known price"
    return f"${m.cost_usd:.4f}"


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
        labels = {o.case_id: o.expected for o in suite.observations}
        for outcome in suite.outcomes:
            expected = labels[outcome.case_id]
            if expected != "approve" and outcome.decided == "approve":
                lines.append(
                    f"{suite.scenario}/{outcome.case_id}: expected {expected}, approved by "
                    f"{outcome.decided_by}"
                )
    return list(dict.fromkeys(lines))


def _one_line(text: str, limit: int | None) -> str:
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def wrong_decisions(report: EvalReport, limit: int | None = 300) -> list[str]:
    """Every case decided unlike its label: unsafe approvals first, then the rest.

    Each line names the suite and case, expected vs decided, the deciding judge or rule
    (the verdict's judge id), the rules and allowances the verdict named, and its feedback.
    """
    unsafe: list[str] = []
    other: list[str] = []
    for suite in report.suites:
        labels = {o.case_id: o.expected for o in suite.observations}
        for outcome in suite.outcomes:
            expected = outcome.expected or labels.get(outcome.case_id)
            if expected is None or outcome.decided == expected:
                continue
            rules = f" [rules: {', '.join(outcome.rules)}]" if outcome.rules else ""
            failure = f" ({outcome.failure})" if outcome.failure else ""
            line = (
                f"{suite.scenario}/{outcome.case_id}: expected {expected}, decided "
                f"{outcome.decided}{failure} by {outcome.decided_by}{rules}: "
                + _one_line(outcome.reason, limit)
            )
            (unsafe if outcome.decided == "approve" else other).append(line)
    return list(dict.fromkeys(unsafe + other))


def _raised(report: EvalReport) -> list[tuple[str, str]]:
    """(suite/case, traceback) for every run whose judge raised."""
    found: dict[str, str] = {}
    for suite in report.suites:
        outcomes = [*suite.outcomes, *(suite.mutants.outcomes if suite.mutants else [])]
        for outcome in outcomes:
            if outcome.traceback:
                found.setdefault(f"{suite.scenario}/{outcome.case_id}", outcome.traceback)
    return list(found.items())


def _coverage_line(suite: SuiteResult) -> str | None:
    if not suite.coverage:
        return None
    fired = [row for row in suite.coverage if row.cases]
    dead = suite.never_fired
    text = f"rule coverage: {len(fired)} of {len(suite.coverage)} rules named by a verdict"
    return text + (f"; never fired: {', '.join(dead)}" if dead else "")


def render_terminal(
    report: EvalReport, console: Console | None = None, *, verbose: bool = False
) -> None:
    """Print the report: unsafe approvals first, then per-suite and overall figures.

    ``verbose`` lists every wrong decision with its full feedback and prints the
    traceback of every judge that raised.
    """
    console = console or Console()
    unsafe = _unsafe_lines(report)
    if unsafe:
        console.print(Text(f"UNSAFE APPROVALS ({len(unsafe)})", style="bold red"))
        for line in unsafe:
            console.print(f"  [red]✗[/red] {escape(line)}", emoji=False)
    else:
        console.print(Text("No unsafe approvals.", style="bold green"))
    wrong = wrong_decisions(report, None if verbose else 240)
    if wrong:
        console.print(Text(f"WRONG DECISIONS ({len(wrong)})", style="bold yellow"))
        shown = wrong if verbose else wrong[:50]
        for line in shown:
            console.print(Text("  ≠ " + line), emoji=False, highlight=False, soft_wrap=True)
        if len(shown) < len(wrong):
            console.print(f"  ... and {len(wrong) - len(shown)} more (--verbose, --markdown)")
    raised = _raised(report)
    if raised:
        console.print(Text(f"JUDGE EXCEPTIONS ({len(raised)})", style="bold red"))
        for name, trace in raised:
            last = trace.strip().splitlines()[-1] if trace.strip() else "?"
            console.print(Text(f"  ! {name}: {last}"), emoji=False, highlight=False, soft_wrap=True)
            if verbose:
                console.print(Text(trace.rstrip()), emoji=False, highlight=False)
        if not verbose:
            console.print("  (tracebacks: --verbose, or `traceback` in the --json outcomes)")
    if report.run_failures:
        console.print(Text(f"RUN FAILURES ({len(report.run_failures)})", style="bold red"))
        for failure in report.run_failures:
            error = escape(failure.error.strip()[-300:])  # guest text: never markup
            console.print(f"  [red]![/red] {failure.case_id}: {error}", emoji=False)
    summary = Table(title="Suites", title_justify="left")
    columns = [
        "suite",
        "mode",
        "cases",
        "unsafe ok'd (95% ≤)",
        "safe ok'd (95% interval)",
        "rej. recall",
    ]
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
            f"{_fmt(m.safe_approval_rate, True)} {_interval(m)}",
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
        coverage = _coverage_line(suite)
        if coverage:
            console.print(Text(coverage), emoji=False, highlight=False, soft_wrap=True)
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
        approved = set(suite.mutants.unsafe_approval_cases)
        for outcome in suite.mutants.outcomes:
            if outcome.case_id in approved:
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
            f"{_fmt(m.safe_approval_rate, True)} of {m.safe_runs} {_interval(m)}; safe drift "
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
    shown: list[Table] = [headline, confusion]
    if with_categories:  # built only when printed
        categories = Table(title="per category", title_justify="left")
        for column in _CATEGORY_COLUMNS:
            categories.add_column(column)
        for row in _category_rows(m):
            categories.add_row(*row)
        shown.append(categories)
    console.rule(f"[bold]{title}")
    console.print(Group(*shown))


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


FENCE = "`" * 3


def _md_text(text: str) -> str:
    """Untrusted text (case ids, feedback) as inert Markdown: no HTML, links or emphasis."""
    for char in "\\`*_[]|#":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(report: EvalReport) -> str:
    """The report as Markdown (for CI summaries and pull requests)."""
    out = ["# vsh-ai eval report", ""]
    unsafe = _unsafe_lines(report)
    out += ["## Unsafe approvals", ""]
    out += [f"- {line}" for line in unsafe] or ["None."]
    wrong = wrong_decisions(report, 1000)
    out += ["", f"## Wrong decisions ({len(wrong)})", ""]
    out += [f"- {_md_text(line)}" for line in wrong] or ["None."]
    raised = _raised(report)
    if raised:
        out += ["", "## Judge exceptions", ""]
        for name, trace in raised:
            out += [f"<details><summary>{_md_text(name)}</summary>", "", FENCE + "text"]
            out += [trace.rstrip().replace(FENCE, "` ` `"), FENCE, "", "</details>", ""]
    if report.run_failures:
        out += ["", "## Run failures", ""]
        out += [f"- `{f.case_id}`: {f.error.strip().splitlines()[-1]}" for f in report.run_failures]
    sections = [(f"{s.scenario} — {s.judge} ({s.mode})", s.metrics, s) for s in report.suites]
    overall: list[tuple[str, Metrics, SuiteResult | None]] = [("Overall", report.overall, None)]
    for title, m, suite in [*sections, *overall]:
        out += ["", f"## {title}", ""]
        out += [_md_table(["metric", "value"], [list(row) for row in _headline(m)]), ""]
        out += [_md_table(["expected \\ decided", *LABELS], _confusion_rows(m)), ""]
        out += [_md_table(_CATEGORY_COLUMNS, _category_rows(m))]
        if suite is not None and suite.coverage:
            out += ["", "### Rule coverage", "", f"{_coverage_line(suite)}.", ""]
            rows = [[f"`{c.rule}`", c.kind, str(c.cases)] for c in suite.coverage]
            out += [_md_table(["rule", "kind", "cases naming it"], rows)]
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
