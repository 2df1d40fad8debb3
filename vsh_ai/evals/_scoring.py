"""Score a suite: its runs, the pydantic-evals experiment (``_experiment``), metrics, rule
coverage and mutant rows."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, Field

from .._hooks import Judge, JudgeHook, judge_digest
from ._metrics import Metrics, Observation, compute_metrics
from ._mutants import MUTATION_KINDS, MutantCase, Signature
from ._outcome import CaseError, CaseOutcome, RunFailure, RunResult, Skipped, Traced, traced_hook
from ._runner import CaseRunner, lanes_for, plan_families, run_families
from ._split import RemoteLane, SuiteQueue
from ._suite import EvalCase, Suite

__all__ = (
    "Labelled",
    "MutantKindRow",
    "MutantResult",
    "RuleCoverage",
    "SuiteResult",
    "coverage_of",
    "evaluate_suite",
    "observation_of",
    "rule_inventory",
    "score_labelled",
    "suite_result",
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
) -> SuiteResult:
    """Score ``judge`` on ``suite`` with the production fail-closed hook semantics.

    The labelled cases run as a pydantic-evals experiment (``score_labelled``): each
    case's task is its real run, so the experiment's spans hold the judge's. ``limiter``
    caps judge calls in flight across suites run together; ``on_case_done`` is called
    after each run (progress bars). ``mutants`` also scores every case's mutants
    (``families``, default ``plan_families(suite, mutants)``), reported apart.
    """
    if families is None:
        families = plan_families(suite, mutants)
    hook = traced_hook(judge, timeout=hook_timeout, max_concurrency=concurrency)
    labelled = await score_labelled(
        suite,
        judge,
        hook,
        repeat=repeat,
        concurrency=concurrency,
        scratch=scratch,
        limiter=limiter,
        on_run_done=on_case_done,
        progress=progress,
    )
    mutant_runs = None
    if any(len(family) > 1 for family in families):
        mutant_runs = await run_families(
            suite,
            [family[1:] for family in families],
            hook,
            repeat=repeat,
            concurrency=concurrency,
            scratch=scratch,
            limiter=limiter,
            on_run_done=on_case_done,
            signatures=labelled.signatures,
        )
    return suite_result(suite, judge, labelled, mode=mode, families=families, mutants=mutant_runs)


@dataclass
class Labelled:
    """A suite's labelled cases, run by the experiment: each case's runs in suite order,
    and their diff signatures (what their mutants must reproduce)."""

    runs: list[list[RunResult]]
    signatures: dict[str, Signature | None]
    repeat: int


async def score_labelled(
    suite: Suite,
    judge: Judge,
    hook: JudgeHook,
    *,
    repeat: int = 1,
    concurrency: int = 8,
    scratch: Path | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_run_done: Callable[[], None] | None = None,
    progress: bool = False,
    remote: RemoteLane | None = None,
) -> Labelled:
    """Run the suite's labelled cases as its pydantic-evals experiment (``_experiment``).

    With ``remote`` (a worker process, ``_split``) the runs are shared with it: this
    process's lanes start at once (pydantic-evals is imported meanwhile) and the
    experiment waits for each case's runs.
    """
    if remote is not None:
        return await _score_shared(
            suite,
            judge,
            hook,
            remote,
            repeat=repeat,
            scratch=scratch,
            limiter=limiter,
            on_run_done=on_run_done,
            progress=progress,
        )
    runner = CaseRunner(suite, hook, scratch=scratch, limiter=limiter, on_run_done=on_run_done)
    # Materialise the before-states and open their runtimes (native work, in a thread)
    # while pydantic-evals is imported (about 1 s of CPU, mostly Pydantic AI).
    warming = threading.Thread(target=runner.warm, args=(suite.cases,), daemon=True)
    warming.start()
    try:
        try:
            from ._experiment import run_experiment  # pydantic-evals: only when scored
        finally:
            await anyio.to_thread.run_sync(warming.join)
        experiment = await run_experiment(
            suite,
            judge.id,
            runner,
            repeat=repeat,
            lanes=lanes_for(hook, concurrency),
            progress=progress,
        )
    finally:
        await runner.close()
    return Labelled(experiment.runs(suite, repeat), runner.signatures, repeat)


async def _score_shared(
    suite: Suite,
    judge: Judge,
    hook: JudgeHook,
    remote: RemoteLane,
    *,
    repeat: int,
    scratch: Path | None,
    limiter: anyio.CapacityLimiter | None,
    on_run_done: Callable[[], None] | None,
    progress: bool,
) -> Labelled:
    runner = CaseRunner(suite, hook, scratch=scratch, limiter=limiter)
    # One local lane per suite: suites run together, so their lanes already overlap one
    # run's preview (a thread) with another's decision; two per suite measured slower
    # (more workspaces, more hand-offs: 10.2-11.5 s against 8.4-9.1 s on the bundled six).
    queue = SuiteQueue(suite, runner, repeat, 1, on_run_done)
    remote.add(queue)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(queue.run_lanes)
            # pydantic-evals is imported in a thread: the lanes run on the loop meanwhile
            name = f"{__package__}._experiment"
            await anyio.to_thread.run_sync(importlib.import_module, name)
            from ._experiment import run_experiment

            experiment = await run_experiment(
                suite, judge.id, runner, repeat=repeat, progress=progress, queue=queue
            )
    finally:
        await runner.close()
    return Labelled(experiment.runs(suite, repeat), runner.signatures, repeat)


def suite_result(
    suite: Suite,
    judge: Judge,
    labelled: Labelled,
    *,
    mode: str,
    families: Sequence[Sequence[EvalCase]],
    mutants: Sequence[Sequence[RunResult]] | None = None,
) -> SuiteResult:
    """The scored suite: its labelled runs and, when run, its mutants' (``families``
    without their first case, in order)."""
    outcomes = [r for runs in labelled.runs for r in runs if isinstance(r, CaseOutcome)]
    by_id = {case.id: case for case in suite.cases}
    observations = [observation_of(by_id[o.case_id], o) for o in outcomes]
    failures = [
        RunFailure(case_id=r.case_id, error=r.message)
        for runs in labelled.runs
        for r in runs
        if isinstance(r, CaseError)
    ]
    mutant_result = None
    if mutants is not None:
        combined = [[*origin, *rest] for origin, rest in zip(labelled.runs, mutants, strict=True)]
        mutant_result = _mutant_result(families, combined, labelled.repeat)
    return SuiteResult(
        scenario=suite.scenario,
        judge=judge.id,
        mode=mode,
        policy=suite.policy,
        repeat=labelled.repeat,
        outcomes=outcomes,
        observations=observations,
        metrics=compute_metrics(observations),
        judge_digest=judge_digest(judge),
        coverage=coverage_of(judge, outcomes),
        run_failures=failures,
        mutants=mutant_result,
    )
