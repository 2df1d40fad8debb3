"""Run suites' mutants in worker processes (both cores), results in input order.

The labelled cases run in the parent, as its pydantic-evals experiment; their diff
signatures travel with the mutants, which must reproduce them.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

import anyio

from .. import _process
from .._hooks import JudgeHook
from ._mutants import Signature
from ._outcome import RunResult, traced_hook
from ._runner import CaseRunner, run_families
from ._suite import EvalCase, Suite

__all__ = (
    "Chunk",
    "WorkerError",
    "close_started",
    "default_workers",
    "give_back",
    "idle_cpus",
    "run_in_pool",
    "start_workers",
    "take_worker",
)

Chunk = tuple[int, list[int]]
"""A suite index and the indices of the families a worker runs for it."""

_HOOKS: dict[tuple[str, str | None, str | None, int], JudgeHook] = {}


def _cpu_times() -> tuple[int, int] | None:
    """(idle, total) clock ticks of all CPUs so far (Linux ``/proc/stat``), else None."""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    return fields[3] + fields[4], sum(fields)  # idle + iowait; user ... steal


_SAMPLE = (time.monotonic(), _cpu_times())
"""Taken at import: ``idle_cpus`` measures from here (the caller's imports are the window)."""


def idle_cpus() -> float | None:
    """CPUs idle lately (since this module's import if that was 0.2-10 s ago, else over
    the next 0.1 s), counting this process's own work as busy; None off Linux."""
    started, first = _SAMPLE
    if first is None:
        return None
    if not 0.2 <= time.monotonic() - started <= 10:
        first = _cpu_times()
        time.sleep(0.1)
    last = _cpu_times()
    if first is None or last is None or last[1] <= first[1]:
        return None
    return (os.cpu_count() or 1) * (last[0] - first[0]) / (last[1] - first[1])


def default_workers() -> int:
    """Worker processes to use: 2 when this process may run on two CPUs or more and at
    least half a CPU beside its own was idle lately (``idle_cpus``), else 1.

    On a machine already busy extra processes get no extra CPU and only add start-up
    work, so the run stays in one process. The idle time is measured, not the load
    average: that lags a minute, so runs back to back would see their own load. Without
    ``/proc/stat`` the 1-minute load average below the CPU count decides. Results are
    identical either way; only the wall time differs.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    if cpus < 2:
        return 1
    idle = idle_cpus()
    if idle is not None:
        return 2 if idle >= 0.5 else 1
    try:  # pragma: no cover - Linux has /proc/stat
        busy = os.getloadavg()[0] >= cpus
    except OSError:  # pragma: no cover - no load average on this platform
        busy = False
    return 1 if busy else 2


def _hook(suite: Suite, judge: str | None, stress: str | None, concurrency: int) -> JudgeHook:
    from ._run import EvalOptions, build_judge

    key = (str(suite.path), judge, stress, concurrency)
    if key not in _HOOKS:
        built, _ = build_judge(
            suite, EvalOptions(judge=judge, stress=stress, concurrency=concurrency)
        )
        _HOOKS[key] = traced_hook(built, max_concurrency=concurrency)
    return _HOOKS[key]


class _Served:
    """A worker's state across jobs: per suite and judge, one ``CaseRunner`` whose
    materialised workspaces and open runtimes later jobs reuse, and one limiter."""

    def __init__(self) -> None:
        self.suites: dict[str, Suite] = {}
        self.runners: dict[tuple[str, str | None, str | None, int], CaseRunner] = {}

    async def work(
        self,
        suite: Suite | str | tuple[str, Suite],
        families: list[list[EvalCase]],
        judge: str | None,
        stress: str | None,
        repeat: int,
        concurrency: int,
        scratch: Path | None,
        signatures: Mapping[str, Signature | None],
    ) -> tuple[list[list[RunResult]], dict[str, Signature | None]]:
        """Run some families of one suite with a judge built from its spec; the runs, and
        the diff signatures of the labelled cases among them. ``suite`` is the suite, or
        (the first time) a key and the suite, then the key alone."""
        if isinstance(suite, tuple):
            self.suites[suite[0]] = suite[1]
            key, suite = suite
        elif isinstance(suite, str):
            key, suite = suite, self.suites[suite]
        else:
            key = f"{suite.path}"
        hook = _hook(suite, judge, stress, concurrency)
        slot = (key, judge, stress, concurrency)
        runner = self.runners.get(slot)
        if runner is None:
            runner = CaseRunner(
                suite, hook, scratch=scratch, limiter=anyio.CapacityLimiter(concurrency)
            )
            self.runners[slot] = runner
        known = set(runner.signatures)
        runner.signatures.update(signatures)
        runs = await run_families(
            suite, families, hook, repeat=repeat, concurrency=concurrency, runner=runner
        )
        found = {k: v for k, v in runner.signatures.items() if k not in known | signatures.keys()}
        return runs, found

    async def close(self) -> None:
        for runner in self.runners.values():
            await runner.close()


def _chunks(sizes: Sequence[Sequence[int]], workers: int) -> list[Chunk]:
    """Split families (sizes in runs) into about 8 chunks per worker, suite by suite."""
    total = sum(sum(s) for s in sizes)
    target = max(8, total // (workers * 8))
    chunks: list[Chunk] = []
    for suite_index, suite_sizes in enumerate(sizes):
        current: list[int] = []
        weight = 0
        for family, size in enumerate(suite_sizes):
            current.append(family)
            weight += size
            if weight >= target:
                chunks.append((suite_index, current))
                current, weight = [], 0
        if current:
            chunks.append((suite_index, current))
    # Biggest first keeps both workers busy until the end.
    return sorted(chunks, key=lambda c: -sum(sizes[c[0]][i] for i in c[1]))


class WorkerError(RuntimeError):
    """A worker process failed outside any case (it could not build the judge, or died)."""


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack(">Q", len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError
    (size,) = struct.unpack(">Q", header)
    return pickle.loads(stream.read(size))


class _Worker:
    """A ``python -c "...; _serve()"`` child fed chunks over its stdin/stdout.

    A plain child process, not ``multiprocessing``: nothing re-imports the caller's
    ``__main__`` (scripts without a main guard work), and ``sys.path`` travels along.
    """

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from vsh_ai.evals._pool import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "LOGFIRE_IGNORE_NO_CONFIG": "1"},
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self._sent: dict[int, str] = {}
        _send(self.stdin, list(sys.path))

    def run(
        self, job: tuple[Any, ...]
    ) -> tuple[list[list[RunResult]], dict[str, Signature | None]]:
        """One job (``_Served.work``'s arguments) and its reply."""
        self.submit(job)
        return self.collect()

    def finish(self) -> None:
        """Tell the worker there is no more work (it exits once it has cleaned up)."""
        with contextlib.suppress(OSError):
            self.stdin.close()

    def submit(self, job: tuple[Any, ...]) -> None:
        """Send a job without waiting (replies come in order: ``collect``); a suite
        travels once, then by key."""
        suite = job[0]
        key = self._sent.get(id(suite))
        if key is None:
            key = self._sent[id(suite)] = f"{len(self._sent)}:{suite.path}"
            job = ((key, suite), *job[1:])
        else:
            job = (key, *job[1:])
        _send(self.stdin, job)

    def collect(self) -> tuple[list[list[RunResult]], dict[str, Signature | None]]:
        """The reply to the oldest job not yet collected."""
        try:
            kind, value = _receive(self.stdout)
        except EOFError:
            raise WorkerError(
                f"eval worker {self.process.pid} exited ({self.process.poll()})"
            ) from None
        if kind == "error":
            raise WorkerError(value)
        return cast(tuple[list[list[RunResult]], dict[str, Signature | None]], value)

    def close(self) -> None:
        self.finish()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_STARTED: list[_Worker] = []


def start_workers(count: int) -> None:
    """Start ``count`` workers now (each imports for about a second) for the next pool run,
    so their start-up overlaps the caller's own work (planning mutants, building judges)."""
    while len(_STARTED) < count:
        _STARTED.append(_Worker())


def close_started() -> None:
    """Stop workers started in advance that no pool run took (all told first, so they
    clean up at the same time, then waited for)."""
    for worker in _STARTED:
        worker.finish()
    while _STARTED:
        _STARTED.pop().close()


def give_back(worker: _Worker) -> None:
    """Keep a worker that is still healthy for the next pool run (``close_started`` stops
    it if none takes it)."""
    if worker.process.poll() is None:
        _STARTED.append(worker)
    else:
        worker.close()


def take_worker() -> _Worker:
    """A worker started in advance (``start_workers``), or a new one."""
    try:
        return _STARTED.pop()
    except IndexError:
        return _Worker()


def run_in_pool(
    suites: Sequence[Suite],
    plans: Sequence[Sequence[Sequence[EvalCase]]],
    *,
    judge: str | None,
    stress: str | None,
    repeat: int,
    concurrency: int,
    workers: int,
    scratch: Path | None = None,
    on_runs_done: Callable[[int, int], None] | None = None,
    signatures: Sequence[Mapping[str, Signature | None]] | None = None,
) -> list[list[list[RunResult]]]:
    """Every family of every suite, run by ``workers`` child processes.

    ``plans`` holds each suite's families (``plan_families``, or mutants only with the
    suite's ``signatures``); returns their results in order, the same as running them in
    process. ``on_runs_done(suite_index, runs)`` reports progress.
    """
    sizes = [[len(family) * repeat for family in plan] for plan in plans]
    results: list[list[list[RunResult]]] = [[[] for _ in plan] for plan in plans]
    queue: deque[Chunk] = deque(_chunks(sizes, workers))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def drain() -> None:
        worker = take_worker()
        try:
            while not errors:
                with lock:
                    if not queue:
                        return
                    suite_index, families = queue.popleft()
                job = (
                    suites[suite_index],
                    [list(plans[suite_index][i]) for i in families],
                    judge,
                    stress,
                    repeat,
                    concurrency,
                    scratch,
                    dict(signatures[suite_index]) if signatures else {},
                )
                done, _ = worker.run(job)
                for family, result in zip(families, done, strict=True):
                    results[suite_index][family] = result
                if on_runs_done is not None:
                    on_runs_done(suite_index, sum(sizes[suite_index][i] for i in families))
        except BaseException as error:  # reported by the caller's thread
            errors.append(error)
        finally:
            worker.close()

    threads = [threading.Thread(target=drain, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def _serve() -> None:
    """Worker main: read jobs from stdin, write results to stdout, until EOF."""
    _process.at_start()  # a process of vsh-ai's own, like `vsh-ai` (`_cli.script`)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed by a judge must not corrupt the pipe
    sys.path[:] = _receive(stdin)
    os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
    anyio.run(_serve_jobs, stdin, stdout)
    _process.at_exit()  # the caller waits for this exit


async def _serve_jobs(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    served = _Served()
    try:
        while True:
            try:
                job = await anyio.to_thread.run_sync(_receive, stdin)
            except EOFError:
                return
            try:
                reply: tuple[str, Any] = ("ok", await served.work(*job))
            except Exception as error:
                reply = ("error", f"{type(error).__name__}: {error}")
            _send(stdout, reply)
    finally:
        await served.close()


if __name__ == "__main__":
    _serve()
