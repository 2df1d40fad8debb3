"""Compare two eval reports (two judges, or one judge before and after a change)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ._gates import fmt as _fmt
from ._metrics import LABELS, Metrics
from ._outcome import CaseOutcome
from ._report import EvalReport
from ._report_markdown import md_table as _md_table
from ._report_markdown import md_text as _md_text
from ._scoring import SuiteResult

__all__ = (
    "Comparison",
    "Disagreement",
    "ReportError",
    "compare_reports",
    "load_report",
    "render_comparison_markdown",
    "render_comparison_terminal",
)


class ReportError(ValueError):
    """A report file that cannot be read as a ``vsh-ai eval --json`` report."""


class Side(BaseModel):
    """One report's decision on a case: decided, by whom, the rules named, the feedback."""

    decided: str
    decided_by: str
    rules: list[str]
    reason: str

    @classmethod
    def of(cls, outcomes: list[CaseOutcome]) -> Side:
        first = outcomes[0]
        decided = "/".join(dict.fromkeys(o.decided for o in outcomes))  # flips show as a/b
        return cls(
            decided=decided, decided_by=first.decided_by, rules=first.rules, reason=first.reason
        )

    def text(self, limit: int = 160) -> str:
        rules = f" [rules: {', '.join(self.rules)}]" if self.rules else ""
        reason = " ".join(self.reason.split())
        reason = reason if len(reason) <= limit else reason[: limit - 1] + "…"
        return f"{self.decided} by {self.decided_by}{rules}: {reason}"


class Disagreement(BaseModel):
    """A case the two reports decided differently."""

    suite: str
    case_id: str
    expected: str | None
    a: Side
    b: Side

    @property
    def rank(self) -> int:
        """Unsafe approvals first, then other wrong-vs-right differences, then the rest."""
        unsafe = self.expected not in (None, "approve") and "approve" in (
            self.a.decided,
            self.b.decided,
        )
        right = self.expected in (self.a.decided, self.b.decided)
        return 0 if unsafe else 1 if right else 2


class Comparison(BaseModel):
    """Two reports side by side: disagreements first, then per-suite figures."""

    a_label: str
    b_label: str
    suites: list[tuple[str, SuiteResult | None, SuiteResult | None]]
    disagreements: list[Disagreement]
    agreed: int
    overall: tuple[Metrics, Metrics]


def load_report(path: Path) -> EvalReport:
    """Read a ``vsh-ai eval --json`` report; ``ReportError`` says why it cannot."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ReportError(f"{path}: cannot read the report ({error.strerror})") from None
    try:
        return EvalReport.model_validate_json(text)
    except ValidationError as error:
        raise ReportError(
            f"{path}: not a vsh-ai eval --json report ({error.error_count()} problem(s), "
            f"first: {error.errors()[0]['msg']})"
        ) from None


def _by_case(suite: SuiteResult) -> dict[str, list[CaseOutcome]]:
    found: dict[str, list[CaseOutcome]] = {}
    for outcome in suite.outcomes:
        found.setdefault(outcome.case_id, []).append(outcome)
    return found


def compare_reports(
    a: EvalReport, b: EvalReport, a_label: str = "A", b_label: str = "B"
) -> Comparison:
    """Match suites by scenario and cases by id; list every case decided differently."""
    names = list(dict.fromkeys([s.scenario for s in a.suites] + [s.scenario for s in b.suites]))
    suites: list[tuple[str, SuiteResult | None, SuiteResult | None]] = []
    disagreements: list[Disagreement] = []
    agreed = 0
    for name in names:
        left = next((s for s in a.suites if s.scenario == name), None)
        right = next((s for s in b.suites if s.scenario == name), None)
        suites.append((name, left, right))
        if left is None or right is None:
            continue
        cases_a, cases_b = _by_case(left), _by_case(right)
        labels = {o.case_id: o.expected for o in [*left.observations, *right.observations]}
        for case_id in [c for c in cases_a if c in cases_b]:
            side_a, side_b = Side.of(cases_a[case_id]), Side.of(cases_b[case_id])
            if side_a.decided == side_b.decided:
                agreed += 1
                continue
            expected = cases_a[case_id][0].expected or labels.get(case_id)
            disagreements.append(
                Disagreement(suite=name, case_id=case_id, expected=expected, a=side_a, b=side_b)
            )
    disagreements.sort(key=lambda d: d.rank)
    return Comparison(
        a_label=a_label,
        b_label=b_label,
        suites=suites,
        disagreements=disagreements,
        agreed=agreed,
        overall=(a.overall, b.overall),
    )


def _judge(suite: SuiteResult | None) -> str:
    if suite is None:
        return "(not run)"
    digest = f" {suite.judge_digest[:12]}" if suite.judge_digest else ""
    return f"{suite.judge} ({suite.mode}){digest}"


def _figures(m: Metrics) -> list[str]:
    return [
        f"{m.unsafe_approvals}/{m.unsafe_cases}",
        _fmt(m.unsafe_approval_upper_95, True),
        _fmt(m.safe_approval_rate, True),
        _fmt(m.reject_recall, True),
        _fmt(m.accuracy, True),
    ]


_FIGURES = [
    "unsafe approvals",
    "≤ 95% bound",
    "safe approved",
    "rejects caught",
    "decided as labelled",
]
_LEGEND = (
    "unsafe approvals: cases labelled review or reject that were approved, of all such "
    "cases, with the 95% upper bound on that rate; safe approved: runs labelled approve "
    "that went through without a human; rejects caught: reject recall. A → B per figure."
)


def render_comparison_terminal(comparison: Comparison, console: Console) -> None:
    """The figures side by side first (with a legend), then every case decided differently
    (unsafe approvals first), then one line with how many."""
    c = comparison
    total = len(c.disagreements) + c.agreed
    console.print(Text(f"A = {c.a_label}\nB = {c.b_label}", style="bold"), emoji=False)
    table = Table(title="figures, A → B", title_justify="left")
    for column in ["suite", *_FIGURES]:
        table.add_column(column)
    rows: list[tuple[str, SuiteResult | None, SuiteResult | None]] = list(c.suites)
    for name, left, right in rows:
        fa = _figures(left.metrics) if left else ["-"] * len(_FIGURES)
        fb = _figures(right.metrics) if right else ["-"] * len(_FIGURES)
        table.add_row(name, *(f"{x} → {y}" for x, y in zip(fa, fb, strict=True)))
    oa, ob = (_figures(m) for m in c.overall)
    table.add_row("overall", *(f"{x} → {y}" for x, y in zip(oa, ob, strict=True)))
    console.print(table)
    console.print(Text(_LEGEND, style="dim"), emoji=False, highlight=False, soft_wrap=True)
    for name, left, right in rows:
        console.print(
            Text(f"{name}: A {_judge(left)}; B {_judge(right)}"), emoji=False, highlight=False
        )
    for d in c.disagreements:
        console.print(
            Text(
                f"  ≠ {d.suite}/{d.case_id} (expected {d.expected or '?'})\n"
                f"      A: {d.a.text()}\n      B: {d.b.text()}"
            ),
            emoji=False,
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        Text(f"{len(c.disagreements)} of {total} shared cases decided differently", style="bold"),
        emoji=False,
    )


def _side_by_side(a: Metrics | None, b: Metrics | None) -> str:
    columns = [
        "expected \\ decided",
        *(f"A {d}" for d in LABELS),
        "",
        *(f"B {d}" for d in LABELS),
    ]
    rows = []
    for e in LABELS:
        left = [str(a.confusion[e][d]) if a else "-" for d in LABELS]
        right = [str(b.confusion[e][d]) if b else "-" for d in LABELS]
        rows.append([e, *left, "", *right])
    return _md_table(columns, rows)


def _bar(value: float | None, width: int = 20) -> str:
    if value is None:
        return "-"
    filled = round(value * width)
    return "█" * filled + "░" * (width - filled) + f" {value * 100:.0f}%"


def render_comparison_markdown(comparison: Comparison) -> str:
    """Disagreements first, then per suite: figures, confusion matrices side by side, and
    per-category accuracy bars."""
    c = comparison
    out = ["# vsh-ai comparison", "", f"- **A**: {_md_text(c.a_label)}"]
    out += [f"- **B**: {_md_text(c.b_label)}", ""]
    out += [f"## Disagreements ({len(c.disagreements)} of {len(c.disagreements) + c.agreed})", ""]
    if c.disagreements:
        rows = [
            [
                _md_text(f"{d.suite}/{d.case_id}"),
                d.expected or "?",
                _md_text(d.a.text(300)),
                _md_text(d.b.text(300)),
            ]
            for d in c.disagreements
        ]
        out += [_md_table(["case", "expected", "A", "B"], rows)]
    else:
        out += ["None: both decided every shared case alike."]
    for name, left, right in [*c.suites, ("overall", None, None)]:
        a = left.metrics if left else (c.overall[0] if name == "overall" else None)
        b = right.metrics if right else (c.overall[1] if name == "overall" else None)
        out += ["", f"## {_md_text(name)}", ""]
        if name != "overall":
            out += [f"A: {_md_text(_judge(left))}; B: {_md_text(_judge(right))}", ""]
        figures = [
            [label, x, y]
            for label, x, y in zip(
                _FIGURES,
                _figures(a) if a else ["-"] * 5,
                _figures(b) if b else ["-"] * 5,
                strict=True,
            )
        ]
        out += [_md_table(["figure", "A", "B"], figures), "", _side_by_side(a, b)]
        if a and b:
            names = sorted({r.category for r in a.categories} | {r.category for r in b.categories})
            bars = []
            for category in names:
                ra = next((r for r in a.categories if r.category == category), None)
                rb = next((r for r in b.categories if r.category == category), None)
                bars.append(
                    [
                        _md_text(category),
                        f"`{_bar(ra.correct / ra.runs if ra and ra.runs else None)}`",
                        f"`{_bar(rb.correct / rb.runs if rb and rb.runs else None)}`",
                    ]
                )
            out += ["", "Correct decisions per category:", ""]
            out += [_md_table(["category", "A", "B"], bars)]
    return "\n".join(out) + "\n"
