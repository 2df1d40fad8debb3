"""Run cases through real VSH and a judge: never commit, verify the host after every run."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
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

__all__ = (
    "CaseRunner",
    "chunk_cases",
    "lane_order",
    "lanes_for",
    "plan_families",
    "run_case",
    "run_families",
    "run_family",
)

_MIN_CHUNK = 4
"""Runs that share a before-state stay on one workspace in chunks of at least this many."""

Unit = tuple[int, int, EvalCase]
"""A family index, the case's position in its family (0 = the labelled case), the case."""


def plan_families(suite: Suite, mutants: bool = False) -> list[list[EvalCase]]:
    """Each case, followed by its mutants when asked (one unit of work)."""
    return [[case, *(case_mutants(suite, case) if mutants else [])] for case in suite.cases]


def lanes_for(hook: JudgeHook, concurrency: int) -> int:
    """How many runs of one suite go at once.

    A rule set decides on the loop (synchronous CPU work): two lanes overlap one run's
    VSH preview (native, in a thread) with another's decision; more would only open more
    workspaces. Other judges wait on I/O (models): ``concurrency`` lanes.
    """
    return 2 if getattr(hook.judge, "inline", False) else max(1, concurrency)


class CaseRunner:
    """Runs one suite's cases with one hook on shared, materialised before-states.

    Runs that share a before-state reuse an idle workspace of it (a new one is made only
    when all of them are busy); each run previews (one thread hand-off), is judged on the
    loop (bounded by ``limiter``) with ``CURRENT_CASE`` set, and the host folder is then
    compared byte for byte with the before-state: a difference fails that run with
    ``WorkspaceChanged`` and the folder is materialised again. The first run of a labelled
    case records its diff signature; a ``MutantCase`` whose diff does not match its
    origin's is ``Skipped``. ``close()`` removes every workspace.
    """

    def __init__(
        self,
        suite: Suite,
        hook: JudgeHook,
        *,
        scratch: Path | None = None,
        limiter: anyio.CapacityLimiter | None = None,
        on_run_done: Callable[[], None] | None = None,
        signatures: Mapping[str, Signature | None] | None = None,
    ) -> None:
        self.suite = suite
        self.hook = hook
        self.directory = scratch or fast_scratch()
        self.limiter = limiter
        self.on_run_done = on_run_done
        self.signatures: dict[str, Signature | None] = dict(signatures or {})
        self._idle: dict[str, list[Workspace]] = {}
        self._made: list[Workspace] = []
        self._slots: dict[str, anyio.Semaphore] = {}

    def share(self, cases: Sequence[EvalCase], lanes: int) -> None:
        """Bound the workspaces of each before-state for runs of ``cases``, ``lanes`` at a
        time: one per chunk of its runs, as ``run_families`` cuts them (``_chunks``). A run
        whose before-state has all its workspaces busy waits for one."""
        units: list[Unit] = [(0, 0, case) for case in cases]
        counts: dict[str, int] = {}
        for chunk in _chunks(units, lanes):
            key = before_key(chunk[0][2])
            counts[key] = counts.get(key, 0) + 1
        self._slots = {key: anyio.Semaphore(count) for key, count in counts.items()}

    async def _judge(self, case: EvalCase, workspace: Workspace, first: bool) -> RunResult:
        try:
            simulation = await anyio.to_thread.run_sync(workspace.simulate, case)
        except Exception as error:
            if isinstance(case, MutantCase):
                return Skipped(case_id=case.id, reason=f"the mutant does not run: {error}"[:300])
            return CaseError.of(case.id, error)
        if first and not isinstance(case, MutantCase):
            self.signatures[case.id] = (
                diff_signature(simulation.evidence) if simulation.evidence else None
            )
        if isinstance(case, MutantCase):
            problem = case.mismatch(self.signatures, simulation)
            if problem is not None:
                return Skipped(case_id=case.id, reason=problem)
        verdict: Verdict | None = None
        tracebacks: list[str] = []
        if simulation.evidence is not None:
            async with self.limiter or nullcontext():
                token = CURRENT_CASE.set(case)
                sink = TRACEBACKS.set(tracebacks)
                try:
                    verdict = await self.hook.decide(simulation.evidence)
                finally:
                    TRACEBACKS.reset(sink)
                    CURRENT_CASE.reset(token)
        return outcome_of(case, simulation, verdict, tracebacks)

    async def _on(self, case: EvalCase, workspace: Workspace, first: bool) -> RunResult:
        try:
            result = await self._judge(case, workspace, first)
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
                    f"check the judge {self.hook.judge.id!r} for side effects"
                ),
            )
        return result

    def warm(self, cases: Sequence[EvalCase]) -> None:
        """Materialise one workspace per before-state of ``cases`` and open the runtime its
        first case previews on (synchronous: run it in a thread while the loop waits, e.g.
        on the experiment's import). A failure is left for the run to meet and report."""
        for case in cases:
            key = before_key(case)
            if self._idle.get(key):
                continue
            try:
                workspace = Workspace.create(self.suite, case, self.directory)
            except Exception:
                continue
            self._made.append(workspace)
            self._idle.setdefault(key, []).append(workspace)
            with contextlib.suppress(Exception):
                workspace.runtime(case.language, 0)

    async def _take(self, key: str, case: EvalCase) -> Workspace:
        pool = self._idle.setdefault(key, [])
        if pool:
            return pool.pop()
        workspace = await anyio.to_thread.run_sync(
            Workspace.create, self.suite, case, self.directory
        )
        self._made.append(workspace)
        return workspace

    async def run(self, case: EvalCase, *, first: bool = True) -> RunResult:
        """One run of ``case`` (``first``: its first repeat) on an idle workspace of its
        before-state; a workspace that cannot be made fails the run."""
        key = before_key(case)
        try:
            async with self._slots.get(key) or nullcontext():
                try:
                    workspace = await self._take(key, case)
                except Exception as error:
                    return CaseError.of(case.id, error)
                try:
                    return await self._on(case, workspace, first)
                finally:
                    self._idle[key].append(workspace)
        finally:
            if self.on_run_done is not None:
                self.on_run_done()

    async def run_chunk(self, cases: Sequence[tuple[EvalCase, bool]]) -> list[RunResult]:
        """Runs one after another on one workspace (the cases share a before-state)."""
        return [await self.run(case, first=first) for case, first in cases]

    async def close(self) -> None:
        """Remove every workspace made (shielded: runs even when cancelled)."""
        made, self._made = self._made, []
        self._idle.clear()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_close_all, made)


def _close_all(workspaces: Sequence[Workspace]) -> None:
    for workspace in workspaces:
        workspace.close()


def _chunks(units: Sequence[Unit], lanes: int) -> list[list[Unit]]:
    """Units grouped by before-state (first-seen order), each group cut into chunks of at
    most ``len(units) / lanes`` units (and at least ``_MIN_CHUNK``).

    A chunk runs on one workspace, one run after another; ``lanes`` chunks may run at
    once. Capping the size keeps a before-state shared by many runs from becoming one
    long chunk that the other lanes wait for (with a model judge, its runs would wait for
    the model one at a time: measured, the last half of a bundled-suite eval at one or two
    model calls in flight out of 16).
    """
    groups: dict[str, list[Unit]] = {}
    for unit in units:
        groups.setdefault(before_key(unit[2]), []).append(unit)
    size = max(_MIN_CHUNK, math.ceil(len(units) / max(1, lanes)))
    chunks: list[list[Unit]] = []
    for group in groups.values():
        for start in range(0, len(group), size):
            chunks.append(group[start : start + size])
    return chunks


def _by_before_state(cases: Sequence[EvalCase]) -> list[list[EvalCase]]:
    """``cases`` grouped by before-state, groups and cases in first-seen order."""
    groups: dict[str, list[EvalCase]] = {}
    for case in cases:
        groups.setdefault(before_key(case), []).append(case)
    return list(groups.values())


def chunk_cases(cases: Sequence[EvalCase], size: int = 8) -> list[list[EvalCase]]:
    """``cases`` grouped by before-state (first-seen order), each group cut into even
    pieces of at most ``size``: what one lane runs on one workspace."""
    chunks: list[list[EvalCase]] = []
    for group in _by_before_state(cases):
        pieces = math.ceil(len(group) / size)
        step = math.ceil(len(group) / pieces)
        chunks.extend(group[start : start + step] for start in range(0, len(group), step))
    return chunks


def lane_order(cases: Sequence[EvalCase], lanes: int) -> list[EvalCase]:
    """``cases`` reordered so that runs taken ``lanes`` at a time share few before-states.

    Cases are grouped by before-state and the groups cut into ``lanes`` contiguous
    stretches; the stretches are then interleaved (first of each, second of each, ...).
    Runs started together come from different stretches, so they rarely need the same
    before-state at once and each stretch keeps reusing one workspace.
    """
    grouped = [case for group in _by_before_state(cases) for case in group]
    lanes = max(1, min(lanes, len(grouped)))
    size = math.ceil(len(grouped) / lanes) if grouped else 0
    stretches = [grouped[start : start + size] for start in range(0, len(grouped), size or 1)]
    return [s[i] for i in range(size) for s in stretches if i < len(s)]


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
    signatures: Mapping[str, Signature | None] | None = None,
    runner: CaseRunner | None = None,
) -> list[list[RunResult]]:
    """Run every family's cases; results per family in input order (case by case, repeats
    together).

    Families hold a labelled case and its mutants; with ``signatures`` (the labelled
    cases' diffs, from runs made elsewhere) a family may hold mutants only. Runs of one
    before-state go in chunks on one workspace (``CaseRunner``), so that the suite's lanes
    (``lanes_for``) can run at once. Labelled cases run first, their mutants after.
    With ``runner`` (its hook and signatures are used, its workspaces kept open for
    later calls) the runs go on that runner's workspaces.
    """
    results: list[list[RunResult | None]] = [[None] * (len(f) * repeat) for f in families]
    owned = runner is None
    if runner is None:
        runner = CaseRunner(
            suite,
            hook,
            scratch=scratch,
            limiter=limiter,
            on_run_done=on_run_done,
            signatures=signatures,
        )
    width = lanes_for(hook, concurrency)

    async def lane(chunk: list[Unit], lanes: anyio.CapacityLimiter) -> None:
        async with lanes:
            done = await runner.run_chunk(
                [(case, slot == 0) for _, _, case in chunk for slot in range(repeat)]
            )
        for index, (family, position, _) in enumerate(chunk):
            for slot in range(repeat):
                results[family][position * repeat + slot] = done[index * repeat + slot]

    def is_mutant(case: EvalCase) -> bool:
        return isinstance(case, MutantCase)

    units: list[Unit] = [
        (index, position, case)
        for index, family in enumerate(families)
        for position, case in enumerate(family)
    ]
    try:
        for phase in (
            [u for u in units if not is_mutant(u[2])],
            [u for u in units if is_mutant(u[2])],
        ):
            if not phase:
                continue
            lanes = anyio.CapacityLimiter(width)
            async with anyio.create_task_group() as group:
                for chunk in _chunks(phase, width):
                    group.start_soon(lane, chunk, lanes)
    finally:
        if owned:
            await runner.close()
    done: list[list[RunResult]] = []
    for index, family_results in enumerate(results):
        row: list[RunResult] = []
        for slot, result in enumerate(family_results):
            if result is None:  # pragma: no cover - every slot is filled above
                result = CaseError.of(families[index][slot // repeat].id, RuntimeError("not run"))
            row.append(result)
        done.append(row)
    return done
