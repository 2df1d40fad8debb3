"""Labelled cases run by this process and a worker process at once (both cores).

A rule-set eval is CPU-bound on one event loop. With a second core, one worker process
(``_pool``'s) takes chunks of labelled cases (grouped by before-state) from the right of
every suite's queue while this process's lanes take them from the left; the pydantic-evals
experiment then only waits for each case's runs (``SuiteQueue.result``). Results are the
same run for run: every run previews in real VSH, is judged by a judge built from the same
spec, and has its host folder compared byte for byte, wherever it runs. A worker that fails
gives its chunk back, and this process runs it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.lowlevel

from ._mutants import Signature
from ._outcome import CaseError, RunResult
from ._pool import give_back, take_worker
from ._runner import CaseRunner, chunk_cases
from ._suite import EvalCase, Suite

__all__ = ("IN_FLIGHT", "RemoteLane", "SuiteQueue")

IN_FLIGHT = 4
"""Jobs sent to the worker ahead of their replies."""


class SuiteQueue:
    """One suite's labelled cases in chunks, taken from the left here and from the right by
    the ``RemoteLane``; each case's runs (``repeat`` of them) are awaited by case id."""

    def __init__(
        self,
        suite: Suite,
        runner: CaseRunner,
        repeat: int,
        lanes: int,
        on_run_done: Callable[[], None] | None = None,
    ) -> None:
        self.suite = suite
        self.runner = runner
        self.repeat = repeat
        self.lanes = lanes
        self.on_run_done = on_run_done
        self._chunks: deque[list[EvalCase]] = deque(chunk_cases(suite.cases))
        self._lock = threading.Lock()
        self._remote = 0
        self._results: dict[str, list[RunResult]] = {}
        self._ready = {case.id: anyio.Event() for case in suite.cases}
        self._changed = anyio.Event()

    def remaining(self) -> int:
        with self._lock:
            return sum(len(chunk) for chunk in self._chunks)

    def take_right(self) -> list[EvalCase] | None:
        """A chunk for the worker (from a thread), or None when none is left."""
        with self._lock:
            if not self._chunks:
                return None
            self._remote += 1
            return self._chunks.pop()

    def _take_left(self) -> list[EvalCase] | None:
        with self._lock:
            return self._chunks.popleft() if self._chunks else None

    def deliver(
        self,
        cases: Sequence[EvalCase],
        runs: Sequence[Sequence[RunResult]] | None,
        signatures: Mapping[str, Signature | None],
    ) -> None:
        """On the loop: the worker's runs of ``cases``, or None (it failed: they go back)."""
        with self._lock:
            self._remote -= 1
            if runs is None:
                self._chunks.appendleft(list(cases))
        if runs is not None:
            self.runner.signatures.update(signatures)
            for case, case_runs in zip(cases, runs, strict=True):
                self._done(case, list(case_runs))
        self._changed.set()
        self._changed = anyio.Event()

    def _done(self, case: EvalCase, runs: list[RunResult]) -> None:
        self._results[case.id] = runs
        if self.on_run_done is not None:
            for _ in runs:
                self.on_run_done()
        self._ready[case.id].set()

    async def lane(self) -> None:
        """Run chunks from the left until none is left here or with the worker."""
        while True:
            chunk = self._take_left()
            if chunk is None:
                with self._lock:
                    remote = self._remote
                if not remote:
                    return
                await self._changed.wait()
                continue
            for case in chunk:
                runs = [await self.runner.run(case, first=slot == 0) for slot in range(self.repeat)]
                self._done(case, runs)

    async def run_lanes(self) -> None:
        async with anyio.create_task_group() as group:
            for _ in range(self.lanes):
                group.start_soon(self.lane)

    async def result(self, case: EvalCase, slot: int) -> RunResult:
        """The ``slot``-th run of ``case``, once it is done (here or in the worker)."""
        await self._ready[case.id].wait()
        runs = self._results[case.id]
        if slot < len(runs):
            return runs[slot]
        return CaseError.of(case.id, RuntimeError(f"run {slot + 1} of {case.id!r} was not made"))


class RemoteLane:
    """One worker process serving every suite's queue, the fullest first, until all are empty.

    ``serve`` runs in a thread (``anyio.to_thread.run_sync``): it sends chunks as jobs and
    hands their runs to the loop. ``suites`` counts the queues to come; ``add`` registers
    each, ``close`` says no more will come (``serve`` then ends once the queues are empty).
    """

    def __init__(
        self,
        *,
        judge: str | None,
        stress: str | None,
        repeat: int,
        concurrency: int,
        scratch: Path | None,
        suites: int,
    ) -> None:
        self._job = (judge, stress, repeat, concurrency, scratch)
        self._queues: list[SuiteQueue] = []
        self._waiting = suites
        self._condition = threading.Condition()
        self.failure: str | None = None

    def add(self, queue: SuiteQueue) -> None:
        with self._condition:
            self._queues.append(queue)
            self._waiting -= 1
            self._condition.notify_all()

    def close(self) -> None:
        """No more suites will come (also after a failure): ``serve`` returns once the
        queues it has are empty."""
        with self._condition:
            self._waiting = 0
            self._condition.notify_all()

    def _next(self) -> tuple[SuiteQueue, list[EvalCase]] | None:
        with self._condition:
            while True:
                for queue in sorted(self._queues, key=lambda q: -q.remaining()):
                    chunk = queue.take_right()
                    if chunk is not None:
                        return queue, chunk
                if self._waiting <= 0:
                    return None
                self._condition.wait()

    def serve(self) -> None:
        """Feed the worker until the queues are empty, keeping ``IN_FLIGHT`` jobs queued
        in its pipe (it never waits for this process's loop to take a reply); replies
        are read by a second thread, in order, and handed to the loop. A worker that
        cannot start takes nothing: this process's lanes run every chunk."""
        try:
            worker = take_worker()
        except OSError as error:
            self.failure = f"the eval worker did not start: {error}"
            return
        token = anyio.from_thread.run_sync(anyio.lowlevel.current_token)
        sent: deque[tuple[SuiteQueue, list[EvalCase]] | None] = deque()
        ready = threading.Condition()
        room = threading.Semaphore(IN_FLIGHT)
        failed: list[str] = []

        def hand(
            queue: SuiteQueue,
            chunk: list[EvalCase],
            runs: Sequence[Sequence[RunResult]] | None,
            signatures: Mapping[str, Signature | None],
        ) -> None:
            anyio.from_thread.run_sync(queue.deliver, chunk, runs, signatures, token=token)

        def read() -> None:
            while True:
                with ready:
                    while not sent:
                        ready.wait()
                    item = sent.popleft()
                if item is None:
                    return
                queue, chunk = item
                if failed:  # after a failure: every chunk still out goes back
                    hand(queue, chunk, None, {})
                    room.release()
                    continue
                try:
                    runs, signatures = worker.collect()
                except Exception as error:  # WorkerError: it died or raised outside a case
                    failed.append(f"{type(error).__name__}: {error}")
                    self.failure = failed[0]
                    room.release()
                    hand(queue, chunk, None, {})
                else:
                    room.release()  # the next job may go while the loop takes these runs
                    hand(queue, chunk, runs, signatures)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        judge, stress, repeat, concurrency, scratch = self._job
        try:
            while True:
                room.acquire()
                taken = None if failed else self._next()
                if taken is None:
                    break
                queue, chunk = taken
                families = [[case] for case in chunk]
                try:
                    worker.submit(
                        (queue.suite, families, judge, stress, repeat, concurrency, scratch, {})
                    )
                except Exception as error:  # the worker is gone, or the job cannot travel
                    failed.append(f"{type(error).__name__}: {error}")
                    self.failure = failed[0]
                    anyio.from_thread.run_sync(queue.deliver, chunk, None, {})
                    break
                with ready:
                    sent.append(taken)
                    ready.notify()
        finally:
            with ready:
                sent.append(None)
                ready.notify()
            reader.join()
            if failed:
                worker.close()
            else:
                give_back(worker)  # warm (imports, judges) for the mutants' pool
