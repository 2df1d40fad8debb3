"""Labelled cases shared with a worker process (``vsh_ai.evals._split``): the same runs,
whichever process makes them, and a worker that dies costs nothing but time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from vsh_ai import Evidence, Verdict
from vsh_ai.evals import EvalOptions, find_suites, load_suite, run_evals
from vsh_ai.evals._outcome import CaseOutcome, traced_hook
from vsh_ai.evals._pool import close_started, default_workers, idle_cpus
from vsh_ai.evals._run import build_judge
from vsh_ai.evals._runner import CaseRunner, chunk_cases
from vsh_ai.evals._split import RemoteLane, SuiteQueue
from vsh_ai.evals._suite import Suite
from vsh_ai.evals._workspace import before_key

pytestmark = pytest.mark.anyio

PARENT = "VSH_AI_TEST_SPLIT_PARENT"


class DiesInWorker:
    """Approves in the test's own process; ends any other process at once."""

    id = "dies-in-worker"

    async def review(self, evidence: Evidence) -> Verdict:
        if os.getpid() != int(os.environ[PARENT]):
            os._exit(3)
        return Verdict(decision="approve", reason=f"pid {os.getpid()}", judge=self.id)


def _key(outcome: Any) -> tuple[Any, ...]:
    return (outcome.case_id, outcome.decided, outcome.decided_by, outcome.reason, outcome.rules)


async def _shared(
    suite: Suite, judge: str | None, *, lanes: int, remote_first: bool = False
) -> tuple[RemoteLane, list[Any]]:
    """Runs of ``suite`` by ``lanes`` local lanes and a worker (``remote_first``: the
    worker serves until it stops before any local lane starts)."""
    built, _ = build_judge(suite, EvalOptions(judge=judge))
    runner = CaseRunner(suite, traced_hook(built, max_concurrency=16))
    queue = SuiteQueue(suite, runner, repeat=1, lanes=lanes)
    remote = RemoteLane(judge=judge, stress=None, repeat=1, concurrency=16, scratch=None, suites=1)
    remote.add(queue)
    try:
        if remote_first:
            await anyio.to_thread.run_sync(remote.serve)
        async with anyio.create_task_group() as group:
            if not remote_first:
                group.start_soon(anyio.to_thread.run_sync, remote.serve)
            group.start_soon(queue.run_lanes)
            results = [await queue.result(case, 0) for case in suite.cases]
    finally:
        await runner.close()
        close_started()  # the worker given back for a later pool run
    return remote, results


async def test_a_worker_alone_makes_the_runs_this_process_makes() -> None:
    """No local lane: every chunk goes to the worker, and each run (decision, deciding
    rule, reason) is the one made in process, with the diff signature mutants need."""
    [path] = find_suites(["data-cleanup"])
    suite = load_suite(path)
    inline = await run_evals([suite], EvalOptions(workers=1))
    remote, results = await _shared(suite, None, lanes=0)
    assert remote.failure is None
    assert all(isinstance(r, CaseOutcome) for r in results)
    assert [_key(r) for r in results] == [_key(o) for o in inline.suites[0].outcomes]


async def test_a_worker_that_dies_gives_its_chunks_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker exits on its first job: that chunk and any sent after it run here,
    every case gets its run, and the failure is kept."""
    monkeypatch.setenv(PARENT, str(os.getpid()))
    [path] = find_suites(["dependency-updates"])
    suite = load_suite(path)
    spec = "tests.test_evals_split:DiesInWorker"
    remote, results = await _shared(suite, spec, lanes=1, remote_first=True)
    assert remote.failure is not None
    assert "exited" in remote.failure
    assert [r.case_id for r in results] == [c.id for c in suite.cases]
    assert all(isinstance(r, CaseOutcome) for r in results)
    judged = {r.reason for r in results if r.reason.startswith("pid ")}
    assert judged == {f"pid {os.getpid()}"}  # every judged run was made here


async def test_a_worker_that_cannot_start_leaves_every_chunk_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_process() -> None:
        raise OSError("no more processes")

    monkeypatch.setattr("vsh_ai.evals._split.take_worker", no_process)
    [path] = find_suites(["dependency-updates"])
    suite = load_suite(path)
    remote, results = await _shared(suite, None, lanes=1)
    assert remote.failure == "the eval worker did not start: no more processes"
    assert [r.case_id for r in results] == [c.id for c in suite.cases]
    assert all(isinstance(r, CaseOutcome) for r in results)


async def test_run_evals_shares_labelled_cases_and_reports_two_processes() -> None:
    paths = find_suites(["data-cleanup", "dependency-updates"])
    inline = await run_evals(paths, EvalOptions(workers=1))
    shared = await run_evals(paths, EvalOptions(workers=2))
    assert (inline.workers, shared.workers) == (1, 2)
    assert [[_key(o) for o in s.outcomes] for s in shared.suites] == [
        [_key(o) for o in s.outcomes] for s in inline.suites
    ]
    assert shared.overall.confusion == inline.overall.confusion


def test_chunks_keep_one_before_state_and_every_case_once() -> None:
    suite = load_suite(find_suites(["service-config"])[0])
    chunks = chunk_cases(suite.cases, size=8)
    assert sorted(c.id for chunk in chunks for c in chunk) == sorted(c.id for c in suite.cases)
    for chunk in chunks:
        assert 1 <= len(chunk) <= 8
        assert len({before_key(case) for case in chunk}) == 1


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="Linux: idle time from /proc/stat")
def test_a_busy_machine_keeps_the_run_in_one_process() -> None:
    """With every CPU kept busy by other processes, no idle CPU is seen and no worker is
    started (the measure is the idle time now, not the lagging load average)."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        time.sleep(0.3)
        idle = idle_cpus()
        assert idle is not None
        assert 0 <= idle < 0.5
        assert default_workers() == 1
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
