"""CI gates (``--fail-if``) and the one exit status a run reports.

A run's exit status is computed once (:func:`exit_status`) and used both for the process
exit and for the report's final verdict line, so the two cannot disagree.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ._metrics import REVIEWER_FAILURES
from ._names import GATE_METRICS

if TYPE_CHECKING:
    from ._report import EvalReport

__all__ = (
    "ACCEPTS_CASE_FAILURES",
    "ACCEPTS_MUTANT_FAILURES",
    "ExitStatus",
    "Gate",
    "GateError",
    "exit_status",
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

ACCEPTS_CASE_FAILURES = frozenset({"reviewer_failures", "reviewer_failure_rate"})
"""A ``--fail-if`` on one of these replaces the implicit ``reviewer_failures>0`` gate."""
ACCEPTS_MUTANT_FAILURES = frozenset({"mutant_reviewer_failures", "mutant_reviewer_failure_rate"})
"""The same for the mutants' implicit ``mutant_reviewer_failures>0`` gate."""


class GateError(ValueError):
    """A ``--fail-if`` expression that cannot be parsed."""


def fmt(value: float | int | None, percent: bool = False) -> str:
    """A figure as the reports print it: ``-`` for no data, ``12.5%``, ``0.683``, ``3``."""
    if value is None:
        return "-"
    if percent:
        return f"{value * 100:.1f}%"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return str(int(value))


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
        return f"{self.label} = {fmt(actual)} (gate: {self.label}{self.op}{fmt(self.value)})"


@dataclass(frozen=True)
class ExitStatus:
    """What ``vsh-ai eval`` exits with, and why.

    ``code``: 0 ok; 1 a gate tripped (a ``--fail-if`` or the implicit reviewer-failure
    gate); 2 some case could not be run (its figures are incomplete).
    """

    code: int
    tripped: tuple[str, ...] = ()
    """Why each gate tripped, user gates first."""
    run_failures: int = 0


def _failure_kinds(outcomes: Sequence[object]) -> str:
    counts = Counter(
        failure
        for outcome in outcomes
        if (failure := getattr(outcome, "failure", None)) in REVIEWER_FAILURES
    )
    return ", ".join(f"{kind} {n}" for kind, n in counts.most_common())


def _implicit_failures(report: EvalReport, gates: Sequence[Gate]) -> list[str]:
    """The implicit gates: a reviewer that failed (judge exception, provider error,
    time-out, invalid output, ...) fails the run unless a gate of the user's accepts a rate.

    Stress runs are exempt: their models fail on purpose (that is what they measure).
    """
    chosen = {gate.metric for gate in gates}
    judged = [s for s in report.suites if not s.mode.startswith("stress:")]
    reasons: list[str] = []
    if not chosen & ACCEPTS_CASE_FAILURES:
        failed = sum(s.metrics.reviewer_failures for s in judged)
        runs = sum(s.metrics.runs for s in judged)
        if failed:
            kinds = _failure_kinds([o for s in judged for o in s.outcomes])
            reasons.append(
                f"reviewer failures = {failed} of {runs} runs ({kinds}): the judge itself "
                "failed and those cases were scored as the review they fell back to; fix the "
                "judge, or accept a rate with --fail-if 'reviewer_failure_rate>0.05'"
            )
    if not chosen & ACCEPTS_MUTANT_FAILURES:
        mutants = [s.mutants for s in judged if s.mutants is not None]
        failed = sum(m.metrics.reviewer_failures for m in mutants)
        if failed:
            runs = sum(m.metrics.runs for m in mutants)
            kinds = _failure_kinds([o for m in mutants for o in m.outcomes])
            reasons.append(
                f"mutant_reviewer_failures = {failed} of {runs} mutant runs ({kinds}); fix "
                "the judge, or accept a rate with --fail-if 'mutant_reviewer_failure_rate>0.05'"
            )
    return reasons


def exit_status(report: EvalReport, gates: Sequence[Gate] = ()) -> ExitStatus:
    """The run's exit status: 2 on run failures, else 1 when any gate trips, else 0.

    Besides the ``--fail-if`` gates, reviewer failures trip an implicit gate (see
    :func:`_implicit_failures`): a run whose judge raised or whose model calls failed does
    not exit 0 unless a ``reviewer_failures``/``reviewer_failure_rate`` gate says how many
    are acceptable.
    """
    tripped = [reason for gate in gates if (reason := gate.check(report)) is not None]
    tripped += _implicit_failures(report, gates)
    code = 2 if report.run_failures else 1 if tripped else 0
    return ExitStatus(code=code, tripped=tuple(tripped), run_failures=len(report.run_failures))
