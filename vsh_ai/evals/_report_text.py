"""What an eval report says, shared by its terminal and Markdown renderings.

Figures as text (headline rows, table cells, the legend), the wrong decisions, rule
coverage split into the rules someone wrote and the checks every rule set has built in,
and the one final verdict line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._gates import ExitStatus, fmt
from ._metrics import LABELS, Metrics
from ._scoring import RuleCoverage, SuiteResult

if TYPE_CHECKING:
    from ._report import EvalReport

__all__ = (
    "BUILT_IN_CHECKS",
    "CATEGORY_COLUMNS",
    "COVERAGE_LEGEND",
    "KIND_COLUMNS",
    "LEGEND",
    "SUITE_COLUMNS",
    "Coverage",
    "category_rows",
    "confusion_rows",
    "cost",
    "coverage_of_suite",
    "headline",
    "interval",
    "judged_by",
    "kind_rows",
    "mutant_headline",
    "mutant_lines",
    "one_line",
    "raised",
    "suite_row",
    "unsafe_lines",
    "verdict_line",
    "wrong_counts",
    "wrong_decisions",
    "wrong_split",
    "wrong_summary",
)

BUILT_IN_CHECKS = {
    "completeness": "evidence incomplete",
    "reads": "the program read secret-bearing bytes",
    "unproven": "no allowance proved a change",
}
"""Names verdicts give to what every rule set does without a rule in the file."""

SUITE_COLUMNS = ("suite", "cases", "unsafe approved", "safe approved", "rejects caught")
LEGEND = (
    (
        "unsafe approved",
        "cases labelled review or reject that the judge approved, of all such cases; "
        "≤ is the 95% upper bound on that rate (0 of n still allows about 3/n)",
    ),
    (
        "safe approved",
        "runs of cases labelled approve that went through without a human; the 95% range "
        "of that rate is over distinct cases",
    ),
    ("rejects caught", "runs of cases labelled reject that the judge rejected (reject recall)"),
    ("confusion matrix", "expected (the label) down, decided across"),
)
"""What the column headers and figures mean, printed under the suites table."""


def interval(m: Metrics) -> str:
    """The safe-approval rate's two-sided 95% interval, ``lo–hi`` (``-`` without data)."""
    if m.safe_approval_lower_95 is None or m.safe_approval_upper_95 is None:
        return "-"
    return f"{fmt(m.safe_approval_lower_95, True)}–{fmt(m.safe_approval_upper_95, True)}"


def judged_by(report: EvalReport) -> str | None:
    """``each suite's own judge file (rules)`` when that is so (no judge column needed)."""
    modes = {s.mode for s in report.suites}
    if len(modes) == 1 and all(s.judge == s.scenario for s in report.suites):
        return f"each suite's own judge ({modes.pop()})"
    return None


def suite_row(suite: SuiteResult, *, with_judge: bool = True) -> list[str]:
    """One suite as the suites table shows it (:data:`SUITE_COLUMNS`, with ``judge``
    second unless ``with_judge`` is false)."""
    m = suite.metrics
    unsafe = (
        f"{m.unsafe_approvals} of {m.unsafe_cases} (≤ {fmt(m.unsafe_approval_upper_95, True)})"
        if m.unsafe_cases
        else "- (no unsafe cases)"
    )
    safe = (
        f"{fmt(m.safe_approval_rate, True)} (95%: {interval(m)})"
        if m.safe_runs
        else "- (no safe cases)"
    )
    judge = [f"{suite.judge} ({suite.mode})"] if with_judge else []
    return [suite.scenario, *judge, str(m.cases), unsafe, safe, fmt(m.reject_recall, True)]


def headline(m: Metrics) -> list[tuple[str, str]]:
    """The figures of one suite (or all), as (name, value) rows."""
    latency = (
        f"{fmt(m.latency_p50_s * 1000 if m.latency_p50_s is not None else None)} / "
        f"{fmt(m.latency_p95_s * 1000 if m.latency_p95_s is not None else None)} ms"
    )
    rejects = m.confusion["reject"]
    reject_cases = sum(rejects.values())
    return [
        ("cases", f"{m.cases}" + (f" ({m.runs} runs)" if m.runs != m.cases else "")),
        ("decided as labelled", fmt(m.accuracy, True)),
        (
            "unsafe approvals",
            f"{m.unsafe_approvals} of {m.unsafe_cases} unsafe cases "
            f"({fmt(m.unsafe_approval_rate, True)}; 95% upper bound "
            f"{fmt(m.unsafe_approval_upper_95, True)})"
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
        ("safe approved", _safe_rate(m)),
        ("safe sent to review", fmt(m.unnecessary_review_rate, True)),
        (
            "rejects caught",
            fmt(m.reject_recall, True) + (f" of {reject_cases} runs" if reject_cases else ""),
        ),
        ("reviewer failures", f"{m.reviewer_failures} ({fmt(m.reviewer_failure_rate, True)})"),
        (
            "flips across repeats",
            f"{fmt(m.flip_rate, True)} ({m.flipped_cases} cases)"
            if m.flip_rate is not None
            else "- (no repeats)",
        ),
        ("judge latency p50 / p95", latency),
        (
            "model usage",
            f"{m.requests} requests, {m.input_tokens} in / {m.output_tokens} out tokens, "
            f"cost {cost(m)}",
        ),
    ]


def _safe_rate(m: Metrics) -> str:
    """``75.0% of 40 runs (95% interval 58.8%–87.3%: 30 of 40 distinct cases ...)``."""
    text = fmt(m.safe_approval_rate, True) + f" of {m.safe_runs} runs"
    if m.safe_approval_lower_95 is None or m.safe_approval_upper_95 is None:
        return text
    return text + (
        f" (95% interval {interval(m)}: {m.safe_approved_cases} of {m.safe_cases} "
        "distinct cases approved on every run)"
    )


def cost(m: Metrics) -> str:
    if m.requests == 0:
        return "$0 (no model calls)"
    if m.cost_usd is None:
        return "unknown (no price known for this model)"
    if m.unpriced_requests:
        return f"${m.cost_usd:.4f} + {m.unpriced_requests} requests with no known price"
    return f"${m.cost_usd:.4f}"


def confusion_rows(m: Metrics) -> list[list[str]]:
    return [[e, *(str(m.confusion[e][d]) for d in LABELS)] for e in LABELS]


CATEGORY_COLUMNS = ["category", "runs", "correct", "unsafe approvals", "safe approved"]


def category_rows(m: Metrics) -> list[list[str]]:
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


def one_line(text: str, limit: int | None) -> str:
    """``text`` on one line, cut to ``limit`` characters with a final ``…``."""
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def unsafe_lines(report: EvalReport) -> list[str]:
    """``suite/case: expected reject, approved by judge`` per unsafe approval."""
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


def wrong_split(report: EvalReport, limit: int | None = 300) -> tuple[list[str], list[str]]:
    """The wrong decisions as (unsafe approvals, the rest), one line each.

    Each line names the suite and case, expected vs decided, the deciding judge or rule
    (the verdict's judge id), the rules and allowances the verdict named, and its feedback
    (cut to ``limit`` characters with ``…``; ``None`` keeps it whole).
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
                + one_line(outcome.reason, limit)
            )
            (unsafe if outcome.decided == "approve" else other).append(line)
    return list(dict.fromkeys(unsafe)), list(dict.fromkeys(other))


def wrong_decisions(report: EvalReport, limit: int | None = 300) -> list[str]:
    """Every case decided unlike its label: unsafe approvals first, then the rest
    (see :func:`wrong_split`)."""
    unsafe, other = wrong_split(report, limit)
    return unsafe + other


_WRONG_KINDS = (
    ("approve", "review", "review of safe work", "reviews of safe work"),
    ("approve", "reject", "reject of safe work", "rejects of safe work"),
    ("review", "reject", "reject of a review case", "rejects of review cases"),
    ("reject", "review", "review of a reject case", "reviews of reject cases"),
)


def wrong_counts(m: Metrics) -> list[str]:
    """Wrong decisions other than unsafe approvals, by kind, from the confusion matrix
    (runs): ``["5 reviews of safe work", "1 reject of a review case"]``."""
    found = []
    for expected, decided, one, many in _WRONG_KINDS:
        n = m.confusion[expected][decided]
        if n:
            found.append(f"{n} {one if n == 1 else many}")
    return found


def raised(report: EvalReport) -> list[tuple[str, str]]:
    """(suite/case, traceback) for every run whose judge raised."""
    found: dict[str, str] = {}
    for suite in report.suites:
        outcomes = [*suite.outcomes, *(suite.mutants.outcomes if suite.mutants else [])]
        for outcome in outcomes:
            if outcome.traceback:
                found.setdefault(f"{suite.scenario}/{outcome.case_id}", outcome.traceback)
    return list(found.items())


@dataclass(frozen=True)
class Coverage:
    """A suite's rule coverage: the rules written in the judge, and the built-in checks."""

    written: tuple[RuleCoverage, ...]
    built_in: tuple[tuple[str, int], ...]
    """(check, distinct cases) for each built-in check a verdict named."""

    @property
    def never_fired(self) -> list[str]:
        return [row.rule for row in self.written if row.cases == 0]

    def text(self) -> str:
        fired = sum(row.cases > 0 for row in self.written)
        text = f"{fired} of {len(self.written)} written rules fired (named by a verdict)"
        if self.never_fired:
            text += f"; never fired: {', '.join(self.never_fired)}"
        if self.built_in:
            text += "; built-in checks: " + ", ".join(
                f"{name} {n} case{'s' * (n != 1)}" for name, n in self.built_in
            )
        return text


COVERAGE_LEGEND = (
    "A rule without an id is named by its type. Built-in checks run in every rule set, "
    "written or not: "
    + "; ".join(f"{name} ({meaning})" for name, meaning in BUILT_IN_CHECKS.items())
    + "."
)


def coverage_of_suite(suite: SuiteResult) -> Coverage | None:
    """The suite's coverage, or None when its judge has no rule set."""
    if not suite.coverage:
        return None
    cases: dict[str, set[str]] = {}
    for outcome in suite.outcomes:
        for name in outcome.rules:
            cases.setdefault(name, set()).add(outcome.case_id)
    built_in = tuple((name, len(cases[name])) for name in BUILT_IN_CHECKS if cases.get(name))
    written = tuple(row for row in suite.coverage if row.rule not in BUILT_IN_CHECKS)
    return Coverage(written=written, built_in=built_in)


KIND_COLUMNS = ["mutation", "mutants", "skipped", "unsafe approved", "safe approved", "safe drift"]


def kind_rows(report: EvalReport) -> list[list[str]]:
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


def mutant_lines(report: EvalReport) -> list[str]:
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


def mutant_headline(report: EvalReport) -> list[tuple[str, str]]:
    m = report.mutants
    assert m is not None
    return [
        (
            "mutant unsafe approvals",
            f"{m.unsafe_approvals} of {m.unsafe_cases} distinct unsafe mutants "
            f"({fmt(m.unsafe_approval_rate, True)}, 95% upper bound "
            f"{fmt(m.unsafe_approval_upper_95, True)}); "
            f"{m.unsafe_approvals_by_rules} by rules, {m.unsafe_approvals_by_model} "
            "escalated and approved by the model",
        ),
        (
            "mutant safe approval rate",
            f"{fmt(m.safe_approval_rate, True)} of {m.safe_runs} (95% interval {interval(m)}); "
            f"safe drift {report.mutant_safe_drift} (decided unlike their case)",
        ),
        ("mutants scored / skipped", f"{m.cases} / {report.mutant_skipped}"),
        ("mutant reviewer failures", f"{m.reviewer_failures}"),
    ]


def verdict_line(report: EvalReport, status: ExitStatus) -> str:
    """The report's last line: cases, unsafe approvals with their bound, the safe-approval
    rate, wrong decisions by kind, failures, and the exit status the command returns.

    ``565 cases · 0 unsafe approvals (95% upper bound 0.8%) · safe approved 97.4% ·
    wrong: 5 reviews of safe work · exit 0``
    """
    m = report.overall
    parts = [f"{m.cases} cases" + (f" ({m.runs} runs)" if m.runs != m.cases else "")]
    noun = "approval" if m.unsafe_approvals == 1 else "approvals"
    if m.unsafe_cases:
        parts.append(
            f"{m.unsafe_approvals} unsafe {noun} "
            f"(95% upper bound {fmt(m.unsafe_approval_upper_95, True)})"
        )
    else:
        parts.append("no unsafe cases")
    parts.append(
        f"safe approved {fmt(m.safe_approval_rate, True)}" if m.safe_runs else "no safe cases"
    )
    wrong = wrong_counts(m)
    if wrong:
        parts.append("wrong: " + ", ".join(wrong))
    else:
        parts.append("no other wrong decisions" if m.unsafe_approvals else "wrong: none")
    if report.mutants is not None:
        mm = report.mutants
        parts.append(f"mutants: {mm.unsafe_approvals} of {mm.unsafe_cases} unsafe approved")
    if m.reviewer_failures:
        parts.append(f"{m.reviewer_failures} reviewer failure{'s' * (m.reviewer_failures != 1)}")
    if status.run_failures:
        parts.append(f"{status.run_failures} case(s) could not run")
    tripped = len(status.tripped)
    reason = (
        " (cases could not run)"
        if status.code == 2
        else f" ({tripped} gate{'s' * (tripped != 1)} tripped)"
        if tripped
        else ""
    )
    parts.append(f"exit {status.code}{reason}")
    return " · ".join(parts)


def wrong_summary(unsafe: Sequence[str], m: Metrics) -> str:
    """``1 unsafe approval, 5 reviews of safe work`` (what the wrong decisions hold)."""
    kinds = [f"{len(unsafe)} unsafe approval{'s' * (len(unsafe) != 1)}"] if unsafe else []
    return ", ".join(kinds + wrong_counts(m))
