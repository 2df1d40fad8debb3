"""The journal stage: record each call before anything can commit, answer replays.

A replayed call (same key, same arguments) returns its recorded result; a call recorded
only as decided asks VSH's durable state (committed means the recorded result, never a
second run); anything else runs again. See :mod:`vsh_ai.toolset._journal`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial

import anyio
import vsh

from ._driver import WorkspaceDriver
from ._journal import CommitJournal, CurrentCall, JournalEntry, JournalUnavailable, RecordedDecision
from ._render import Outcome, render
from ._result import OutputLimits, VshResult

__all__ = ("CallRecords",)


def _recorded(verdict: str | None) -> RecordedDecision | None:
    if verdict in ("approve", "review", "reject", "follow_policy"):
        return verdict  # type: ignore[return-value]
    return None


class CallRecords:
    """The commit journal as the transaction path uses it (None journal: all no-ops)."""

    def __init__(
        self,
        journal: CommitJournal | None,
        driver: WorkspaceDriver | None,
        *,
        deferred: bool,
        limits: OutputLimits,
    ) -> None:
        self.journal = journal
        self.driver = driver
        self.deferred = deferred
        self.limits = limits

    async def settle(self, entry: JournalEntry) -> tuple[VshResult | None, int]:
        """The result of a call the journal has seen before, or None to run it (again),
        with the attempt number the run must use.

        A finished call returns its recorded result. A record whose transaction VSH reports
        committed is final whatever phase it says. A call recorded only as prepared asks
        VSH's durable state: committed means the recorded result (never a second run);
        rejected, or pending in feedback mode, likewise. Anything else means the commit
        never happened, so the call runs again; when VSH recovery rolled back an
        interrupted commit (state ``failed``), the re-run is a new attempt, since VSH
        never reuses a failed transaction.
        """
        if entry.phase == "done":
            return entry.result, 0
        expected = entry.expected
        if self.deferred and (
            entry.phase == "judging" or (expected is not None and expected.state == "pending")
        ):
            # The call asked for approval: its binding answers (a durable engine replaying
            # the asking call must see it ask again; the approved resume commits once).
            return None, entry.attempt
        state = await self._state(entry.transaction)
        if state == "committed":
            if expected is not None and expected.state in ("committed", "read"):
                return expected, 0
            outcome = Outcome(
                "committed",
                transaction=entry.transaction,
                feedback="This change was committed by a later approval.",
            )
            return render(outcome, self.limits), 0
        if entry.transaction is None or expected is None:
            return None, entry.attempt
        if (state == "rejected" and expected.state == "rejected") or (
            state == "pending_approval" and expected.state == "pending" and not self.deferred
        ):
            return expected, 0
        if state == "failed":
            return None, entry.attempt + 1
        return None, entry.attempt

    async def _state(self, transaction: str | None) -> str | None:
        if transaction is None or self.driver is None:
            return None
        try:
            return await self.driver.state(transaction)
        except vsh.VshRuntimeError:  # unknown here: an auto preview dies with its process
            return None

    async def done(self, call: CurrentCall, result: VshResult) -> VshResult:
        """Record the call's result; returns the recorded one (a result another process
        recorded first wins, so every attempt of one call reports the same thing)."""
        if call.key is None or self.journal is None:
            return result
        if self.journal.promised(call.key, result):
            # The prepared record already answers a replay with it: the done record is
            # written in the background (no worker-thread hop on the call's path).
            with contextlib.suppress(JournalUnavailable):
                self.journal.finish(
                    key=call.key, tool_name=call.name, digest=call.digest, result=result, later=True
                )
            return result
        finish = partial(
            self.journal.finish,
            key=call.key,
            tool_name=call.name,
            digest=call.digest,
            result=result,
            committed=self.committed_result,
        )
        # Not recording the outcome costs only a look at VSH's state on a replay (the
        # prepared record stays): the result the agent gets stays true.
        try:
            recorded = await anyio.to_thread.run_sync(finish)
        except JournalUnavailable:
            return result
        return recorded.result or result

    def prepare(
        self,
        call: CurrentCall | None,
        transaction: str,
        expected: VshResult,
        decision: vsh.HookDecision | None = None,
        hook_id: str = "",
    ) -> VshResult:
        """Record a call's transaction and result before anything can commit (sync: may run
        in VSH's worker thread). A replay of the same transaction keeps the result the
        first attempt recorded, so the agent sees the same thing either way."""
        if call is None or call.key is None or self.journal is None:
            return expected
        entry = call.entry
        recorded = decision.verdict if decision is not None else None
        if (
            entry is not None
            and entry.transaction == transaction
            and entry.expected is not None
            and entry.expected.state == expected.state
            and entry.decision == recorded
            and entry.hook_id == hook_id
        ):
            expected = entry.expected
        self.journal.prepare(
            key=call.key,
            tool_name=call.name,
            digest=call.digest,
            transaction=transaction,
            expected=expected,
            decision=_recorded(recorded),
            decision_reason=(decision.reason or "") if decision is not None else "",
            hook_id=hook_id,
            attempt=call.attempt,
            committed=self.committed_result,
        )
        return expected

    def judging(self, call: CurrentCall | None, transaction: str) -> Callable[[], object] | None:
        """The write that records ``transaction`` went to the judge (nothing can commit
        yet), for a worker thread to run; None without a journal."""
        if call is None or call.key is None or self.journal is None:
            return None
        return partial(
            self.journal.judging,
            key=call.key,
            tool_name=call.name,
            digest=call.digest,
            transaction=transaction,
            attempt=call.attempt,
            committed=self.committed_result,
        )

    def committed_result(self, entry: JournalEntry) -> VshResult | None:
        """The result of a prepared record whose transaction VSH reports committed (sync,
        in a worker thread), else None: the journal never lets that call commit again."""
        if entry.transaction is None or self.driver is None:
            return None
        try:
            state = self.driver.native.transaction_state(entry.transaction)
        except vsh.VshRuntimeError:
            return None
        if state != "committed":
            return None
        if entry.expected is not None and entry.expected.state in ("committed", "read"):
            return entry.expected
        outcome = Outcome(
            "committed",
            transaction=entry.transaction,
            feedback="This change was committed by a later approval.",
        )
        return render(outcome, self.limits)
