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
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

import anyio

from .._hooks import JudgeHook
from ._mutants import Signature
from ._outcome import RunResult, traced_hook
from ._runner import run_families
from ._suite import EvalCase, Suite

__all__ = (
    "Chunk",
    "WorkerError",
    "close_started",
    "default_workers",
    "run_in_pool",
    "start_workers",
)

Chunk = tuple[int, list[int]]
"""A suite index and the indices of the families a worker runs for it."""

_HOOKS: dict[tuple[str, str | None, str | None, int], JudgeHook] = {}


def default_workers() -> int:
    """Worker processes to use: the idle CPUs this process may run on, at most 2.

    On a machine already busy (1-minute load at or above its CPU count) extra processes
    get no extra CPU and only add start-up work, so the run stays in one process.
    Results are identical either way; only the wall time differs.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0] >= cpus
    except OSError:  # pragma: no cover - no load average on this platform
        busy = False
    return 1 if busy else max(1, min(2, cpus))


def _hook(suite: Suite, judge: str | None, stress: str | None, concurrency: int) -> JudgeHook:
    from ._run import EvalOptions, build_judge

    key = (str(suite.path), judge, stress, concurrency)
    if key not in _HOOKS:
        built, _ = build_judge(
            suite, EvalOptions(judge=judge, stress=stress, concurrency=concurrency)
        )
        _HOOKS[key] = traced_hook(built, max_concurrency=concurrency)
    return _HOOKS[key]


def _work(
    suite: Suite,
    families: list[list[EvalCase]],
    judge: str | None,
    stress: str | None,
    repeat: int,
    concurrency: int,
    scratch: Path | None,
    signatures: Mapping[str, Signature | None],
) -> list[list[RunResult]]:
    """In a worker: run some families of one suite with a judge built from its spec."""
    os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
    hook = _hook(suite, judge, stress, concurrency)
    limiter = anyio.CapacityLimiter(concurrency)

    async def go() -> list[list[RunResult]]:
        return await run_families(
            suite,
            families,
            hook,
            repeat=repeat,
            concurrency=concurrency,
            scratch=scratch,
            limiter=limiter,
            signatures=signatures,
        )

    return anyio.run(go)


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
        _send(self.stdin, list(sys.path))

    def run(self, job: tuple[Any, ...]) -> list[list[RunResult]]:
        _send(self.stdin, job)
        try:
            kind, value = _receive(self.stdout)
        except EOFError:
            raise WorkerError(
                f"eval worker {self.process.pid} exited ({self.process.poll()})"
            ) from None
        if kind == "error":
            raise WorkerError(value)
        return cast(list[list[RunResult]], value)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.stdin.close()
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
    """Stop workers started in advance that no pool run took."""
    while _STARTED:
        _STARTED.pop().close()


def _take_worker() -> _Worker:
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
        worker = _take_worker()
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
                done = worker.run(job)
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
    """Worker main loop: read jobs from stdin, write results to stdout, until EOF."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed by a judge must not corrupt the pipe
    sys.path[:] = _receive(stdin)
    while True:
        try:
            job = _receive(stdin)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("ok", _work(*job))
        except Exception as error:
            reply = ("error", f"{type(error).__name__}: {error}")
        _send(stdout, reply)


if __name__ == "__main__":
    _serve()
