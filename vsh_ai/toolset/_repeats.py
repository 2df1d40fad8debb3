"""The same transaction met again: an identical earlier request, or another process
committing the very same transaction at the same moment (a durable engine's retry while
the first attempt goes on). VSH's durable state says what it came to; the call reports
that, never a failure that invites a second run.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import anyio
import vsh
from pydantic_ai import ModelRetry

from ._hook import evidence_of
from ._journal import CURRENT_CALL
from ._render import Outcome
from ._result import ToolState, VshResult, redact

if TYPE_CHECKING:
    from ._transaction import Transactions

__all__ = ("ALREADY_REFUSED", "Repeats")

ALREADY_REFUSED = (
    "This identical change (same program and intent, same files) was already refused "
    "(rejected by the reviewer or denied by a person). Do not resubmit it; follow the "
    "earlier feedback or ask the user."
)

_DUPLICATE = re.compile(
    r"(?:duplicate transaction:|pending artifact already exists for) ([0-9a-f]{16,})"
)
# VSH states of a transaction that a process is committing right now (its outcome follows).
_IN_FLIGHT = frozenset(("reserved", "revalidating", "committing"))
_SETTLE_WAIT_S = 10.0
_RACED_NOTE = (
    "An identical request (same program and intent on the same files) from another process "
    "committed this exact transaction at the same moment; the change is on the host once."
)


class Repeats:
    """How :class:`~vsh_ai.toolset._transaction.Transactions` answers a transaction VSH
    already knows (its helpers: rendering, the judge path, the driver)."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    async def contended(
        self, receipt: vsh.Receipt, expected: list[VshResult], *, code: str, read_only: bool
    ) -> VshResult:
        """VSH refused this process's commit step because another process holds the very
        same transaction: wait until VSH's durable state settles, then report it.

        Committed means the change is on the host once: the result this call promised (a
        durable engine's retry of this call sees what the first attempt would have seen),
        with a note when no call key says it is the same call. Pending or rejected are
        reported as for an identical earlier request; anything else is a failure whose
        outcome is not known yet (never "nothing was committed").
        """
        transaction = receipt.transaction
        state = await self._settled_state(transaction)
        if state == "committed":
            self.tx.take_evidence(transaction, pending=False)
            done: ToolState = "read" if read_only else "committed"
            call = CURRENT_CALL.get()
            entry = call.entry if call is not None else None
            if expected:
                promised: VshResult | None = expected[-1]
            else:  # lost before recording: what an earlier attempt of this call promised
                same = entry is not None and entry.transaction == transaction
                promised = entry.expected if entry is not None and same else None
            if promised is not None and promised.state != done:
                promised = None
            if promised is None:
                return self.tx.render(
                    Outcome(done, receipt=receipt, program=code, feedback=_RACED_NOTE)
                )
            if call is not None and call.key is not None:
                return promised  # the same call (same key and arguments): what it promised
            return promised.model_copy(update={"feedback": _RACED_NOTE})
        if state == "stale":
            self.tx.take_evidence(transaction, pending=False)
            return self.tx.stale(receipt=receipt, program=code)
        if state in ("pending_approval", "rejected"):
            return await self.earlier(transaction, code)
        self.tx.take_evidence(transaction, pending=False)
        return self.tx.failed(
            "Another process was resolving this identical transaction (same program and "
            f"intent on the same files) at the same moment, and VSH reports it {state!r}: "
            "whether it commits is not known yet. Re-read the files it writes before "
            "submitting again.",
            retry=True,
        )

    async def _settled_state(self, transaction: str) -> str:
        """VSH's state of ``transaction`` once no process is committing it (bounded wait)."""
        deadline = time.monotonic() + _SETTLE_WAIT_S
        while True:
            try:
                state = await self.tx.driver.state(transaction)
            except vsh.VshRuntimeError:
                return "unknown"
            if state not in _IN_FLIGHT or time.monotonic() > deadline:
                return state
            await anyio.sleep(0.02)

    async def duplicate(self, error: vsh.VshStateError, code: str) -> VshResult:
        """The same program and intent on the same base again: report the earlier one."""
        match = _DUPLICATE.search(str(error))
        if match is None:
            return self.tx.failed(
                "VSH refused the transaction (VshStateError).",
                retry=True,
                detail=redact(str(error)),
            )
        return await self.earlier(match.group(1), code)

    async def earlier(self, transaction: str, code: str) -> VshResult:
        """What an identical earlier request's ``transaction`` came to."""
        state = await self._settled_state(transaction)
        call = CURRENT_CALL.get()
        entry = call.entry if call is not None else None
        if (
            state == "pending_approval"
            and entry is not None
            and entry.transaction == transaction
            and (entry.phase == "judging" or entry.decision == "approve")
        ):
            # This call's earlier attempt stopped while the judge was deciding (VSH kept the
            # transaction pending, no decision was ever recorded: ask the judge now), or
            # after an approval it recorded but before VSH resolved it (the hook replays
            # the signed decision; if that attempt is still going on, VSH lets one commit).
            try:
                reopened = await self.tx.driver.reopen(transaction)
            except vsh.VshStaleError:
                return self.tx.stale()
            if reopened is not None and reopened[1].state == "pending_approval":
                receipt = reopened[1]
                check = self.tx.host_check(time.time_ns())
                return await self.tx.judge(
                    receipt, call, check, code=code, read_only=receipt.changed_paths == 0
                )
            state = await self.tx.driver.state(transaction)
        if state == "pending_approval":
            # Re-read its exact changes and diff: an approver (deferred mode) must see
            # what approving this transaction would commit, never "no changes".
            try:
                reopened = await self.tx.driver.reopen(transaction)
            except vsh.VshStaleError:
                return self.tx.stale()
            if reopened is not None and reopened[1].state == "pending_approval":
                event, receipt = reopened
                evidence = evidence_of(event)
                if self.tx.config.deferred:  # what binding it records, as a fresh run
                    self.tx.remember_committed_view(
                        transaction,
                        self.tx.render(Outcome("committed", receipt=receipt, evidence=evidence)),
                    )
                    if evidence is not None and self.tx.hook is not None:
                        self.tx.hook.keep_pending(transaction, evidence)
                return self.tx.render(
                    Outcome(
                        "pending",
                        receipt=receipt,
                        evidence=evidence,
                        program=code,
                        feedback="An identical request (same program and intent) is already "
                        "waiting for approval.",
                    )
                )
            state = await self.tx.driver.state(transaction)
        if state == "rejected":
            return self.tx.render(
                Outcome("rejected", transaction=transaction, feedback=ALREADY_REFUSED)
            )
        if state == "committed":
            return self.tx.render(
                Outcome("committed", transaction=transaction, feedback=_RACED_NOTE)
            )
        raise ModelRetry(
            "This exact program and intent was already submitted on the current workspace "
            "and was not committed. Do not repeat it; change the program if you need a "
            "different outcome."
        )
