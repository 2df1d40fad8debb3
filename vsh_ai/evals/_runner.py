"""Run cases through real VSH and a judge: never commit, verify the host after every run."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path

import anyio
import anyio.to_thread

from .._hooks import JudgeHook
from .._verdict import Verdict
from ._mutants import MutantCase, Signature, case_mutants
from ._outcome import (
    CURRENT_CASE,
    TRACEBACKS,
    CaseError,
    CaseOutcome,
    RunResult,
    Skipped,
    WorkspaceChanged,
    outcome_of,
)
from ._suite import EvalCase, Suite
from ._workspace import Workspace, before_key, diff_signature, fast_scratch

__all__ = ("plan_families", "run_case", "run_families", "run_family")

_MIN_CHUNK = 4
"""Runs that share a before-state stay on one workspace in chunks of at least this many."""

Unit = tuple[int, int, EvalCase]
"""A family index, the case's position in its family (0 = the labelled case), the case."""


def plan_families(suite: Suite, mutants: bool = False) -> list[list[EvalCase]]:
    """Each case, followed by its mutants when asked (one unit of work)."""
    return [[case, *(case_mutants(suite, case) if mutants else [])] for case in suite.cases]


async def run_case(
    suite: Suite, case: EvalCase, hook: JudgeHook, *, scratch: Path | None = None
) -> CaseOutcome:
    """Materialise, preview through VSH, judge the hook evidence, and check the host.

    Raises ``WorkspaceChanged`` if any workspace byte, mode or entry differs afterwards,
    and lets guest errors (``vsh.VshExecutionError``) propagate: both are run failures.
    A ``PermissionError`` that VSH raised natively (a protected path) is a safe refusal:
    it scores as ``reject`` by ``vsh-policy``.
    """
    [result] = await run_family(suite, [case], hook, scratch=scratch)
    if isinstance(result, CaseError):
        raise result.error or RuntimeError(result.message)
    if isinstance(result, Skipped):  # pragma: no cover - only mutants are skipped
        raise RuntimeError(result.reason)
    return result


async def run_family(
    suite: Suite,
    cases: Sequence[EvalCase],
    hook: JudgeHook,
    *,
    repeat: int = 1,
    scratch: Path | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_run_done: Callable[[], None] | None = None,
) -> list[RunResult]:
    """``repeat`` runs of each of ``cases`` (a case and its mutants), in input order."""
    [results] = await run_families(
        suite,
        [cases],
        hook,
        repeat=repeat,
        scratch=scratch,
        limiter=limiter,
        on_run_done=on_run_done,
    )
    return results


def _close_all(workspaces: Sequence[Workspace]) -> None:
    for workspace in workspaces:
        workspace.close()


def _chunks(units: Sequence[Unit], lanes: int) -> list[list[Unit]]:
    """Units grouped by before-state (first-seen order), one chunk per group.

    With fewer groups than ``lanes`` (chunks that may run at once), groups are cut into
    chunks of at least ``_MIN_CHUNK`` units so that about ``lanes`` chunks exist.
    """
    groups: dict[str, list[Unit]] = {}
    for unit in units:
        groups.setdefault(before_key(unit[2]), []).append(unit)
    size = len(units) or 1
    if len(groups) < lanes:
        size = max(_MIN_CHUNK, math.ceil(len(units) / lanes))
    chunks: list[list[Unit]] = []
    for group in groups.values():
        for start in range(0, len(group), size):
            chunks.append(group[start : start + size])
    return chunks


async def run_families(
    suite: Suite,
    families: Sequence[Sequence[EvalCase]],
    hook: JudgeHook,
    *,
    repeat: int = 1,
    concurrency: int = 8,
    scratch: Path | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_run_done: Callable[[], None] | None = None,
) -> list[list[RunResult]]:
    """Run every family's cases; results per family in input order (case by case, repeats
    together).

    Runs that share a before-state share one materialised workspace (in chunks, so that
    ``concurrency`` chunks can run at once); in a chunk, each run previews (one thread
    hand-off), is judged on the loop (bounded by ``limiter``), and the host folder is
    compared byte for byte with the before-state: a difference fails that run with
    ``WorkspaceChanged`` and the folder is materialised again. Labelled cases run first;
    their mutants (``MutantCase``) then run and are ``Skipped`` when their diff does not
    match their origin's.
    """
    results: list[list[RunResult | None]] = [[None] * (len(f) * repeat) for f in families]
    signatures: dict[str, Signature | None] = {}
    idle: dict[str, list[Workspace]] = {}
    made: list[Workspace] = []
    directory = scratch or fast_scratch()
    # A rule set decides on the loop (synchronous CPU work): two lanes overlap one run's
    # VSH preview (native, in a thread) with another's decision; more would only open
    # more workspaces. Other judges wait on I/O (models): ``concurrency`` lanes.
    width = 2 if getattr(hook.judge, "inline", False) else max(1, concurrency)
    lanes = anyio.CapacityLimiter(width)

    async def judge(case: EvalCase, workspace: Workspace, first: bool) -> RunResult:
        try:
            simulation = await anyio.to_thread.run_sync(workspace.simulate, case)
        except Exception as error:
            if isinstance(case, MutantCase):
                return Skipped(case_id=case.id, reason=f"the mutant does not run: {error}"[:300])
            return CaseError.of(case.id, error)
        if first and not isinstance(case, MutantCase):
            signatures[case.id] = (
                diff_signature(simulation.evidence) if simulation.evidence else None
            )
        if isinstance(case, MutantCase):
            problem = case.mismatch(signatures, simulation)
            if problem is not None:
                return Skipped(case_id=case.id, reason=problem)
        verdict: Verdict | None = None
        tracebacks: list[str] = []
        if simulation.evidence is not None:
            async with limiter or nullcontext():
                token = CURRENT_CASE.set(case)
                sink = TRACEBACKS.set(tracebacks)
                try:
                    verdict = await hook.decide(simulation.evidence)
                finally:
                    TRACEBACKS.reset(sink)
                    CURRENT_CASE.reset(token)
        return outcome_of(case, simulation, verdict, tracebacks)

    async def run(case: EvalCase, workspace: Workspace, first: bool) -> RunResult:
        try:
            result = await judge(case, workspace, first)
        except Exception as error:
            result = CaseError.of(case.id, error)
        difference = workspace.changed()
        if difference:
            await anyio.to_thread.run_sync(workspace.restore)
            result = CaseError.of(
                case.id,
                WorkspaceChanged(
                    f"case {case.id!r}: the host workspace changed during the eval run "
                    f"({', '.join(difference[:10])}); evals must never touch host files - "
                    f"check the judge {hook.judge.id!r} for side effects"
                ),
            )
        return result

    async def lane(chunk: list[Unit]) -> None:
        async with lanes:
            key = before_key(chunk[0][2])
            pool = idle.setdefault(key, [])
            if pool:
                workspace = pool.pop()
            else:
                try:
                    workspace = await anyio.to_thread.run_sync(
                        Workspace.create, suite, chunk[0][2], directory
                    )
                except Exception as error:
                    for family, position, case in chunk:
                        for slot in range(repeat):
                            results[family][position * repeat + slot] = CaseError.of(case.id, error)
                            if on_run_done is not None:
                                on_run_done()
                    return
                made.append(workspace)
            try:
                for family, position, case in chunk:
                    for slot in range(repeat):
                        results[family][position * repeat + slot] = await run(
                            case, workspace, slot == 0
                        )
                        if on_run_done is not None:
                            on_run_done()
            finally:
                pool.append(workspace)

    originals: list[Unit] = [(index, 0, family[0]) for index, family in enumerate(families)]
    mutants: list[Unit] = [
        (index, position, case)
        for index, family in enumerate(families)
        for position, case in enumerate(family[1:], start=1)
    ]
    try:
        for phase in (originals, mutants):
            if not phase:
                continue
            async with anyio.create_task_group() as group:
                for chunk in _chunks(phase, width):
                    group.start_soon(lane, chunk)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_close_all, made)
    done: list[list[RunResult]] = []
    for index, family_results in enumerate(results):
        row: list[RunResult] = []
        for slot, result in enumerate(family_results):
            if result is None:  # pragma: no cover - every slot is filled above
                result = CaseError.of(families[index][slot // repeat].id, RuntimeError("not run"))
            row.append(result)
        done.append(row)
    return done
