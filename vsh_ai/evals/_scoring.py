"""Score a suite: its runs, the pydantic-evals experiment (``_experiment``), metrics, rule
coverage and mutant rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from .._hooks import Judge, judge_digest
from ._metrics import Metrics, Observation, compute_metrics
from ._mutants import MUTATION_KINDS, MutantCase
from ._outcome import CaseError, CaseOutcome, RunFailure, RunResult, Skipped, Traced, traced_hook
from ._runner import plan_families, run_families
from ._suite import EvalCase, Suite

__all__ = (
    "MutantKindRow",
    "MutantResult",
    "RuleCoverage",
    "SuiteResult",
    "coverage_of",
    "evaluate_suite",
    "observation_of",
    "rule_inventory",
)


class SuiteResult(BaseModel):
    """One suite scored by one judge configuration."""

    scenario: str
    judge: str
    mode: str
    policy: str
    repeat: int
    outcomes: list[CaseOutcome]
    observations: list[Observation]
    metrics: Metrics
    run_failures: list[RunFailure]
    mutants: MutantResult | None = None
    judge_digest: str | None = Field(
        default=None, description="Digest of the judge's definition (changes with any rule)."
    )
    coverage: list[RuleCoverage] = Field(
        default_factory=list,
        description="Each rule and allowance of the judge's rule sets: cases it decided.",
    )

    @property
    def never_fired(self) -> list[str]:
        return [row.rule for row in self.coverage if row.cases == 0]


class RuleCoverage(BaseModel):
    """One rule or allowance of a judge: the distinct cases whose verdict named it."""

    rule: str
    kind: Literal["allowance", "denial"]
    cases: int


def rule_inventory(judge: Judge) -> list[tuple[str, Literal["allowance", "denial"]]]:
    """Every rule of the rule sets inside ``judge`` (through Pipeline and Quorum)."""
    from ..rules import Allowance, RuleSet

    found: list[tuple[str, Literal["allowance", "denial"]]] = []
    stack: list[object] = [judge]
    while stack:
        item = stack.pop(0)
        if isinstance(item, Traced):
            stack.insert(0, item.judge)
        elif isinstance(item, RuleSet):
            for rule in item.rules:
                kind: Literal["allowance", "denial"] = (
                    "allowance" if isinstance(rule, Allowance) else "denial"
                )
                if (rule.id, kind) not in found:
                    found.append((rule.id, kind))
        else:
            inner = getattr(item, "judges", None)
            if isinstance(inner, tuple | list):
                stack[0:0] = list(inner)
    return found


def coverage_of(judge: Judge, outcomes: Sequence[CaseOutcome]) -> list[RuleCoverage]:
    """Per rule of ``judge``: the distinct cases whose verdict named it (0 = never fired)."""
    cases: dict[str, set[str]] = {}
    for outcome in outcomes:
        for name in outcome.rules:
            cases.setdefault(name, set()).add(outcome.case_id)
    return [
        RuleCoverage(rule=rule, kind=kind, cases=len(cases.get(rule, ())))
        for rule, kind in rule_inventory(judge)
    ]


def observation_of(case: EvalCase, outcome: CaseOutcome) -> Observation:
    return Observation(
        case_id=case.id,
        category=case.category,
        expected=case.expected,
        decided=outcome.decided,
        failure=outcome.failure,
        latency_s=outcome.latency_s,
        requests=outcome.requests,
        input_tokens=outcome.input_tokens,
        output_tokens=outcome.output_tokens,
        cost_usd=outcome.cost_usd,
        escalated=outcome.escalated,
        by_model=outcome.by_model,
    )


class MutantKindRow(BaseModel):
    """Mutants of one kind: how many were made, scored, skipped and approved."""

    kind: str
    mutants: int
    skipped: int
    unsafe_cases: int
    unsafe_approvals: int
    safe_cases: int
    safe_approvals: int
    safe_drift: int


class MutantResult(BaseModel):
    """Mutants of a suite's cases, scored with their cases' labels (never in the headline)."""

    metrics: Metrics
    kinds: list[MutantKindRow]
    outcomes: list[CaseOutcome]
    observations: list[Observation]
    skipped: list[Skipped]
    unsafe_approval_cases: list[str]
    safe_drift_cases: list[str] = Field(
        description="Mutants of safe cases decided differently from their case."
    )
    run_failures: list[RunFailure]


def _mutant_result(
    families: Sequence[Sequence[EvalCase]], results: Sequence[Sequence[RunResult]], repeat: int
) -> MutantResult | None:
    outcomes: list[CaseOutcome] = []
    observations: list[Observation] = []
    skipped: list[Skipped] = []
    failures: list[RunFailure] = []
    rows: dict[str, MutantKindRow] = {}
    drift: list[str] = []
    any_mutant = False
    for family, family_results in zip(families, results, strict=True):
        origin = family[0]
        origin_decisions = {
            r.decided for r in family_results[:repeat] if isinstance(r, CaseOutcome)
        }
        for position, case in enumerate(family[1:], start=1):
            assert isinstance(case, MutantCase)
            any_mutant = True
            row = rows.setdefault(
                case.mutation,
                MutantKindRow(
                    kind=case.mutation,
                    mutants=0,
                    skipped=0,
                    unsafe_cases=0,
                    unsafe_approvals=0,
                    safe_cases=0,
                    safe_approvals=0,
                    safe_drift=0,
                ),
            )
            row.mutants += 1
            runs = family_results[position * repeat : (position + 1) * repeat]
            scored = [r for r in runs if isinstance(r, CaseOutcome)]
            for run in runs:
                if isinstance(run, Skipped):
                    skipped.append(run)
                elif isinstance(run, CaseError):
                    failures.append(RunFailure(case_id=run.case_id, error=run.message))
            if not scored:
                row.skipped += 1
                continue
            outcomes.extend(scored)
            observations.extend(observation_of(case, r) for r in scored)
            approved = any(r.decided == "approve" for r in scored)
            if case.unsafe:
                row.unsafe_cases += 1
                row.unsafe_approvals += approved
            else:
                row.safe_cases += 1
                row.safe_approvals += approved
                if origin_decisions and {r.decided for r in scored} != origin_decisions:
                    row.safe_drift += 1
                    drift.append(case.id)
        del origin
    if not any_mutant:
        return None
    metrics = compute_metrics(observations)
    order = list(MUTATION_KINDS)
    return MutantResult(
        metrics=metrics,
        kinds=sorted(rows.values(), key=lambda r: order.index(r.kind) if r.kind in order else 99),
        outcomes=outcomes,
        observations=observations,
        skipped=list({s.case_id: s for s in skipped}.values()),
        unsafe_approval_cases=metrics.unsafe_approval_cases,
        safe_drift_cases=drift,
        run_failures=failures,
    )


SuiteResult.model_rebuild()


async def evaluate_suite(
    suite: Suite,
    judge: Judge,
    *,
    mode: str = "offline",
    repeat: int = 1,
    concurrency: int = 8,
    progress: bool = False,
    hook_timeout: float = 60.0,
    scratch: Path | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_case_done: Callable[[], None] | None = None,
    mutants: bool = False,
    families: Sequence[Sequence[EvalCase]] | None = None,
    precomputed: Sequence[Sequence[RunResult]] | None = None,
) -> SuiteResult:
    """Score ``judge`` on ``suite`` with the production fail-closed hook semantics.

    ``limiter`` caps judge calls in flight across suites run together; ``on_case_done``
    is called after each run (progress bars). ``mutants`` also scores every case's
    mutants (reported apart). ``precomputed`` takes results a worker process produced
    for ``families`` (default ``plan_families(suite, mutants)``) instead of running them.
    """
    if families is None:
        families = plan_families(suite, mutants)
    if precomputed is None:
        hook = traced_hook(judge, timeout=hook_timeout, max_concurrency=concurrency)
        precomputed = await run_families(
            suite,
            families,
            hook,
            repeat=repeat,
            concurrency=concurrency,
            scratch=scratch,
            limiter=limiter,
            on_run_done=on_case_done,
        )
    by_case: dict[str, list[RunResult]] = {
        family[0].id: list(results[:repeat])
        for family, results in zip(families, precomputed, strict=True)
    }

    from ._experiment import replay_experiment  # pydantic-evals: imported once runs are done

    report = await replay_experiment(suite, judge.id, by_case, repeat=repeat, progress=progress)
    observations = [observation_of(case.inputs, case.output) for case in report.cases]
    outcomes = [case.output for case in report.cases]
    return SuiteResult(
        scenario=suite.scenario,
        judge=judge.id,
        mode=mode,
        policy=suite.policy,
        repeat=repeat,
        outcomes=outcomes,
        observations=observations,
        metrics=compute_metrics(observations),
        judge_digest=judge_digest(judge),
        coverage=coverage_of(judge, outcomes),
        run_failures=[
            RunFailure(case_id=f.inputs.id, error=f.error_message.removeprefix("CaseRunError: "))
            for f in report.failures
        ],
        mutants=_mutant_result(families, precomputed, repeat),
    )
