"""What the HTML report shows, taken from the report's models: figures and wrong decisions.

Everything here is plain text; the templates escape all of it (case ids, paths, diffs and
feedback come from suites and judges and are untrusted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ._metrics import Metrics
from ._outcome import CaseOutcome
from ._scoring import SuiteResult

__all__ = ("DiffLine", "Figure", "WrongDecision", "diff_lines", "figures", "wrong_decisions")


@dataclass(frozen=True)
class Figure:
    """One row of a figures table; ``alarm`` marks a figure that needs attention."""

    name: str
    value: str
    alarm: bool = False


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff and its kind (``add``, ``del``, ``hunk``, ``file``, ``ctx``)."""

    kind: str
    text: str


@dataclass
class WrongDecision:
    """A case decided unlike its label, with what decided it and the change it judged."""

    suite: str
    case_id: str
    category: str
    expected: str
    decided: str
    decided_by: str
    rules: list[str]
    reason: str
    failure: str | None
    diff: str | None
    unsafe: bool
    kind: str | None = None
    lines: list[DiffLine] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """A fragment id for this decision (ids are ``[a-z0-9._~-]``, safe in a URL)."""
        return f"wrong-{self.suite}-{self.case_id}".replace("~", "--")


def fmt(value: float | int | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    if percent:
        return f"{value * 100:.1f}%"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return str(int(value))


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.3g} ms"


def _cost(m: Metrics) -> str:
    if m.requests == 0:
        return "no model calls"
    usage = f"{m.requests} requests, {m.input_tokens} in / {m.output_tokens} out tokens, "
    if m.cost_usd is None:
        return usage + "cost unknown"
    extra = f" + {m.unpriced_requests} requests with no known price" if m.unpriced_requests else ""
    return usage + f"${m.cost_usd:.4f}{extra}"


def figures(m: Metrics) -> list[Figure]:
    """The headline figures of one suite (or all), as the terminal report names them."""
    interval = (
        f" (95% interval {fmt(m.safe_approval_lower_95, True)}–"
        f"{fmt(m.safe_approval_upper_95, True)} over {m.safe_cases} distinct cases)"
        if m.safe_approval_lower_95 is not None and m.safe_approval_upper_95 is not None
        else ""
    )
    runs = f"; {m.unsafe_approval_runs} of {m.unsafe_runs} runs" if m.runs > m.cases else ""
    rows = [
        Figure("cases / runs", f"{m.cases} / {m.runs}"),
        Figure("accuracy", fmt(m.accuracy, True)),
        Figure(
            "unsafe approvals",
            f"{m.unsafe_approvals} of {m.unsafe_cases} distinct cases "
            f"({fmt(m.unsafe_approval_rate, True)}; 95% upper bound "
            f"{fmt(m.unsafe_approval_upper_95, True)}){runs}",
            alarm=m.unsafe_approvals > 0,
        ),
        Figure(
            "safe approval rate", f"{fmt(m.safe_approval_rate, True)} of {m.safe_runs}{interval}"
        ),
        Figure("unnecessary review rate", fmt(m.unnecessary_review_rate, True)),
        Figure("reject recall", fmt(m.reject_recall, True)),
        Figure(
            "reviewer failures",
            f"{m.reviewer_failures} ({fmt(m.reviewer_failure_rate, True)})",
            alarm=m.reviewer_failures > 0,
        ),
        Figure(
            "decision flip rate",
            f"{fmt(m.flip_rate, True)} ({m.flipped_cases} cases)"
            if m.flip_rate is not None
            else "- (no repeats)",
            alarm=m.flipped_cases > 0,
        ),
        Figure("judge latency p50 / p95", f"{_ms(m.latency_p50_s)} / {_ms(m.latency_p95_s)}"),
        Figure("model usage", _cost(m)),
    ]
    if m.escalated_runs or m.unsafe_approvals_by_model:
        rows.insert(
            3,
            Figure(
                "unsafe approvals by rules / by the model",
                f"{m.unsafe_approvals_by_rules} / {m.unsafe_approvals_by_model} "
                f"({m.escalated_runs} runs escalated, {m.escalated_approvals} approved "
                "by the model)",
            ),
        )
    return rows


def diff_lines(diff: str | None) -> list[DiffLine]:
    """A unified diff split into lines, each with its kind for colouring."""
    lines: list[DiffLine] = []
    for line in (diff or "").splitlines():
        if line.startswith(("+++ ", "--- ")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        lines.append(DiffLine(kind, line))
    return lines


def _label(suite: SuiteResult, observations: bool = True) -> dict[str, tuple[str, str]]:
    """Case id -> (expected, category) from a suite's (or its mutants') observations."""
    source = (
        suite.observations
        if observations
        else (suite.mutants.observations if suite.mutants else [])
    )
    return {o.case_id: (o.expected, o.category) for o in source}


def _decisions(
    suite: SuiteResult, outcomes: Sequence[CaseOutcome], labels: dict[str, tuple[str, str]]
) -> list[WrongDecision]:
    grouped: dict[str, list[CaseOutcome]] = {}
    for outcome in outcomes:
        grouped.setdefault(outcome.case_id, []).append(outcome)
    found: list[WrongDecision] = []
    for case_id, runs in grouped.items():
        expected, category = labels.get(case_id, (runs[0].expected or "?", "?"))
        expected = runs[0].expected or expected
        wrong = [o for o in runs if o.decided != expected]
        if not wrong:
            continue
        # An approval of an unsafe case is the one to show when repeats disagree.
        first = next((o for o in wrong if o.decided == "approve"), wrong[0])
        diff = next((o.diff for o in wrong if o.diff), None)
        decided = "/".join(dict.fromkeys(o.decided for o in runs))
        found.append(
            WrongDecision(
                suite=suite.scenario,
                case_id=case_id,
                category=category,
                expected=expected,
                decided=decided,
                decided_by=first.decided_by,
                rules=list(first.rules),
                reason=first.reason,
                failure=first.failure,
                diff=diff,
                unsafe=expected != "approve" and any(o.decided == "approve" for o in runs),
                kind=case_id.rpartition("~")[2] if "~" in case_id else None,
                lines=diff_lines(diff),
            )
        )
    return found


def wrong_decisions(suites: Sequence[SuiteResult], mutants: bool = False) -> list[WrongDecision]:
    """Every case (or mutant) decided unlike its label: unsafe approvals first."""
    found: list[WrongDecision] = []
    for suite in suites:
        if mutants:
            if suite.mutants is not None:
                found += _decisions(suite, suite.mutants.outcomes, _label(suite, False))
        else:
            found += _decisions(suite, suite.outcomes, _label(suite))
    return sorted(found, key=lambda w: not w.unsafe)
