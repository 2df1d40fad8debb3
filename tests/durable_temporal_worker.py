"""Temporal worker processes for the crash matrix (tests/test_durable_temporal.py).

``python tests/durable_temporal_worker.py PHASE ADDRESS CASE_DIR...``; every
``CASE_DIR/case.json`` names the case's path, journal, call key and crash point; the
case's task queue is the directory's name. Agents: tests/durable_temporal_agent.py.

- ``start``: imports Temporal, Pydantic AI and vsh-ai once, then forks one worker per
  case (before any Temporal or VSH runtime exists: nothing native crosses the fork).
  The child dies with ``os._exit(CRASH_CODE)`` at the case's point, after writing the
  point's name to ``CASE_DIR/crashed_at``: ``before_preview`` (``WorkspaceDriver.run``
  or ``preview`` entered, nothing ran), ``after_prepare`` (the journal's prepared
  record is written, nothing committed), ``before_finish`` (VSH committed, the
  journal's final record is not written), ``after_commit`` (``WorkspaceDriver.run``
  returned: committed; also without a journal), ``activity_returned`` (the tool
  activity returned to the Temporal worker, which has not reported it to the server: a
  worker interceptor). ``stall_before_prepare`` / ``stall_after_prepare`` freeze the
  child instead (SIGSTOP: a paused VM, a long GC), and record in ``CASE_DIR/resumed``
  how its call ended once the test lets it go on. The parent prints one JSON line
  ``{case_dir: exit code, "stopped" or null}`` when every child has exited or frozen
  (or at its deadline); it stays alive while a child is frozen, and on SIGTERM it
  SIGKILLs its children and exits.
- ``recover``: one process, no crash, one worker per case's task queue, until SIGTERM.
  A case whose tool runs in workflow code (``inline``) gets a worker without a workflow
  cache: every workflow task replays the history, and runs the tool again.

A crashing worker caches no workflow (``max_cached_workflows=0``): its workflow tasks
go to the shared task queue, not to a sticky queue of its own, so a new worker takes
over without waiting for the sticky queue's schedule-to-start timeout (10 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)

import vsh_ai  # noqa: F401  (imported once, before the fork)
from vsh_ai.toolset import _driver as _toolset_runtime
from vsh_ai.toolset import _journal as _toolset_journal

CRASH_CODE = 86
POINTS = (
    "none",
    "before_preview",
    "after_prepare",
    "before_finish",
    "after_commit",
    "activity_returned",
    "stall_before_prepare",
    "stall_after_prepare",
)
START_DEADLINE_S = 45.0


# -- crash injection (in a start child only) ---------------------------------------------


def _die(point: str) -> None:
    (Path(os.environ["VSH_AI_TEMPORAL_CASE_DIR"]) / "crashed_at").write_text(point)
    os._exit(CRASH_CODE)


_STALLED = threading.Lock()


def _stall(point: str) -> None:
    """Stop this whole process (a frozen, not dead, worker) here, until someone sends
    SIGCONT.

    The stop is sent to this thread (``pthread_kill``), which stops before its next
    instruction. ``os.kill(os.getpid(), ...)`` sends it to the process: the kernel hands it
    to another thread (the event loop's), and this one runs on until that thread has
    stopped the group; measured, 157 of 200 times it got past the next statement. Here that
    meant the freeze "before prepare" landed after the journal's record, or inside its
    lock or VSH's commit, and the worker taking over waited 10 s on the journal's lock and
    reported a failure (CI at 7221480). Once per process: a worker resumed before the
    takeover finished can take the call's retry, and must not freeze again.
    """
    if not _STALLED.acquire(blocking=False):
        return
    marker = {"point": point, "pid": os.getpid()}
    (Path(os.environ["VSH_AI_TEMPORAL_CASE_DIR"]) / "stalled_at").write_text(json.dumps(marker))
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def _wrap(owner: Any, name: str, point: str, *, before: bool) -> None:
    original: Callable[..., Any] = getattr(owner, name)
    act = _stall if point.startswith("stall_") else _die

    async def crashing(*args: Any, **kwargs: Any) -> Any:
        if before:
            act(point)
        value = await original(*args, **kwargs)
        if not before:
            act(point)
        return value

    def crashing_sync(*args: Any, **kwargs: Any) -> Any:
        if before:
            act(point)
        value = original(*args, **kwargs)
        if not before:
            act(point)
        return value

    setattr(owner, name, crashing if asyncio.iscoroutinefunction(original) else crashing_sync)


class _DieAfterToolActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        value = await self.next.execute_activity(input)
        if activity.info().activity_type.endswith("__call_tool"):
            _die("activity_returned")
        return value


class _Crash(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _DieAfterToolActivity(next)


def install_crash(path: str, point: str) -> list[Interceptor]:
    driver, journal = _toolset_runtime.WorkspaceDriver, _toolset_journal.CommitJournal
    if point == "before_preview":
        _wrap(driver, "run" if path == "auto" else "preview", point, before=True)
    elif point == "after_prepare":
        _wrap(journal, "prepare", point, before=False)
    elif point == "before_finish":
        _wrap(journal, "finish", point, before=True)
    elif point == "after_commit":
        _wrap(driver, "run" if path == "auto" else "hooked_commit", point, before=False)
    elif point == "activity_returned":
        return [_Crash()]
    elif point.startswith("stall_"):
        _wrap(journal, "prepare", point, before=point == "stall_before_prepare")
        _record_outcome(driver)
    return []


def _record_outcome(driver: Any) -> None:
    """After a stalled worker resumes: what its ``WorkspaceDriver.run`` ended with."""
    original = driver.run

    async def run(*args: Any, **kwargs: Any) -> Any:
        path = Path(os.environ["VSH_AI_TEMPORAL_CASE_DIR"]) / "resumed"
        try:
            value = await original(*args, **kwargs)
        except BaseException as error:
            path.write_text(f"raised {type(error).__name__}: {error}")
            raise
        outcome = value[1]
        state = getattr(outcome, "state", type(outcome).__name__)
        path.write_text(f"returned {state}")
        return value

    driver.run = run


# -- one worker ---------------------------------------------------------------------------


async def serve(
    address: str,
    queues: list[str],
    interceptors: list[Interceptor],
    *,
    crash: bool,
    frozen: bool,
    uncached: frozenset[str] = frozenset(),
) -> None:
    from durable_temporal_workflow import CaseWorkflow

    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    # A frozen worker's open long-polls still receive tasks: the server hands the retries
    # of the call to them (seen: every retry up to maximum_attempts swallowed). One
    # activity slot means no poll is open while the frozen call runs.
    workers = [
        Worker(
            client,
            task_queue=queue,
            workflows=[CaseWorkflow],
            interceptors=interceptors,
            max_cached_workflows=0 if crash or queue in uncached else 1000,
            max_concurrent_activities=1 if frozen else None,
        )
        for queue in queues
    ]
    await asyncio.gather(*(worker.run() for worker in workers))


def crash_child(address: str, case_dir: Path) -> None:
    """Serve one case until its crash point; never returns."""
    os.dup2(2, 1)  # the parent's stdout is its report: a child (even a frozen one) must not hold it
    code = 0
    try:
        case = json.loads((case_dir / "case.json").read_text())
        os.environ["VSH_AI_TEMPORAL_CASE_DIR"] = str(case_dir)
        os.environ["VSH_AI_TEMPORAL_CASES"] = json.dumps([str(case_dir)])
        point = case["point"]
        assert point in POINTS, point
        interceptors = install_crash(case["path"], point)
        import durable_temporal_agent  # noqa: F401  (builds the agent in this process)

        frozen = point.startswith("stall_")
        runner = serve(address, [case_dir.name], interceptors, crash=True, frozen=frozen)
        asyncio.run(runner)
    except BaseException:
        (case_dir / "error-start.txt").write_text(traceback.format_exc())
        code = 3
    os._exit(code)


def recover(address: str, cases: list[str]) -> int:
    """One process serves every case (one worker per task queue) until SIGTERM."""

    def stop(*_: Any) -> None:
        print("{}", flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a hang's stacks, on demand
    os.environ["VSH_AI_TEMPORAL_CASES"] = json.dumps(cases)
    import durable_temporal_agent  # noqa: F401  (builds every case's agent)

    queues = [Path(case).name for case in cases]
    # A case whose VSH tool runs in workflow code: no workflow cache, so every workflow task
    # replays the history from the start, and the tool with it.
    uncached = frozenset(
        Path(case).name
        for case in cases
        if json.loads((Path(case) / "case.json").read_text()).get("inline")
    )
    asyncio.run(serve(address, queues, [], crash=False, frozen=False, uncached=uncached))
    return 0


def main(argv: list[str]) -> int:
    phase, address, *cases = argv
    assert phase in ("start", "recover"), phase
    if phase == "recover":
        return recover(address, cases)
    children: dict[int, str] = {}
    for case_dir in cases:
        pid = os.fork()
        if pid == 0:
            crash_child(address, Path(case_dir))
        children[pid] = case_dir
    codes: dict[str, int | str | None] = dict.fromkeys(cases)
    frozen: list[int] = []
    reported = False

    def report() -> None:
        nonlocal reported
        if not reported:
            print(json.dumps(codes), flush=True)
            reported = True

    def stop(*_: Any) -> None:
        for pid in [*children, *frozen]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in [*children, *frozen]:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        report()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    deadline = time.monotonic() + START_DEADLINE_S
    while children and time.monotonic() < deadline:
        for pid, case_dir in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if done and os.WIFSTOPPED(status):
                codes[case_dir] = "stopped"
                frozen.append(pid)
                del children[pid]
            elif done:
                codes[case_dir] = os.waitstatus_to_exitcode(status)
                del children[pid]
        time.sleep(0.02)
    if frozen:
        # A frozen worker stays alive (and our child: were we to exit, the kernel would wake
        # it with SIGHUP + SIGCONT) until the test has resumed it and sends SIGTERM.
        report()
        while True:
            signal.pause()
    stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
