"""Inside a vsh-ai DBOS workflow: publish what it waits for, receive the decisions.

:func:`wait_for_decisions` is one approval round of
:func:`~vsh_ai.dbos.run_with_approvals`: it publishes
:class:`~vsh_ai.dbos.PendingApprovals`, reads the approval topic (DBOS's notifications
table, one step per accepted message, junk skipped) until every call is decided or the
deadline passes, and resolves the round into ``DeferredToolResults``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any, cast

import sqlalchemy as sa
from dbos import DBOS
from dbos import error as dbos_error
from pydantic import ValidationError
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.tools import DeferredToolApprovalResult

from ._dbos_messages import (
    PENDING_EVENT,
    ApprovalMessage,
    CallDecision,
    IgnoredReason,
    Outcome,
    PendingApprovals,
    PendingCall,
)
from .toolset._principal import quoted

__all__ = ("wait_for_decisions",)

_log = logging.getLogger("vsh_ai.dbos")
_CLOCK_SLACK_S = 0.05  # a wait that returns this close to its deadline has timed out
_LOGGED_PER_STEP = 10  # ignored messages logged per receive step (all are counted)


def _parse(raw: object, request_id: str, pending: set[str]) -> ApprovalMessage | IgnoredReason:
    """A valid message for this round naming only pending calls, or why it is ignored."""
    try:
        message = ApprovalMessage.model_validate(raw)
    except ValidationError as error:
        refused = (e for e in error.errors() if e["type"] != "missing")
        if any(tuple(e["loc"][:1]) == ("principal",) for e in refused):
            return "invalid_principal"
        return "invalid"
    if message.request_id != request_id:
        return "other_round"
    if set(message.decisions) - pending:
        return "not_pending"
    return message


# -- inside the workflow -------------------------------------------------------------------


def _now() -> float:
    return time.time()


async def _clock() -> float:
    """Wall-clock seconds, recorded as a step so a replay sees the same reading."""
    return await DBOS.run_step_async({"name": "vsh-ai.clock"}, _now)


async def wait_for_decisions(
    requests: DeferredToolRequests, request_id: str, timeout_s: float, topic: str
) -> DeferredToolResults:
    calls = tuple(
        PendingCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args_as_dict(),
            metadata=requests.metadata.get(call.tool_call_id, {}),
        )
        for call in requests.approvals
    )
    pending = {call.tool_call_id for call in calls}
    deadline = await _clock() + timeout_s
    view = PendingApprovals(
        request_id=request_id, state="waiting", calls=calls, deadline_unix_s=deadline
    )
    await DBOS.set_event_async(PENDING_EVENT, view.model_dump(mode="json"))
    decided: dict[str, tuple[CallDecision, str]] = {}
    ignored: Counter[str] = Counter()
    failure = ""
    inbox = _Inbox.open(topic, request_id, pending, deadline)
    try:
        while set(decided) != pending:
            message, junk = await inbox.next()
            ignored.update(junk)
            if message is None:
                break  # the deadline
            for call_id, decision in message.decisions.items():
                earlier = decided.get(call_id)
                if earlier is None or (earlier[0].approve and not decision.approve):
                    decided[call_id] = (decision, message.principal)  # a denial is never undone
            if junk and set(decided) != pending:  # show what was ignored, while waiting
                counts = cast(dict[IgnoredReason, int], dict(ignored))
                update = view.model_copy(update={"ignored": counts})
                await DBOS.set_event_async(PENDING_EVENT, update.model_dump(mode="json"))
        await inbox.close()
    except dbos_error.DBOSUnexpectedStepError:
        raise  # the workflow's code changed under a recorded run: not ours to paper over
    except Exception as error:  # the channel failed (the database): deny, never leave pending
        _log.error("approval wait failed (%s): undecided calls are denied", type(error).__name__)
        failure = type(error).__name__
    return await _resolve(view, pending, decided, ignored, timeout_s, failure)


async def _resolve(
    view: PendingApprovals,
    pending: set[str],
    decided: dict[str, tuple[CallDecision, str]],
    ignored: Counter[str],
    timeout_s: float,
    failure: str,
) -> DeferredToolResults:
    approvals: dict[str, bool | DeferredToolApprovalResult] = {}
    metadata: dict[str, dict[str, Any]] = {}
    outcome: dict[str, Outcome] = {}
    for call_id in sorted(pending):
        if call_id not in decided:
            if failure:
                why = f"Waiting for a decision failed ({failure})"
            else:
                why = f"No decision arrived within {timeout_s:g}s"
            approvals[call_id] = ToolDenied(
                f"{why}, so this change was denied automatically and will not be committed. "
                "Ask the user before submitting it again."
            )
            outcome[call_id] = "timed_out"
            continue
        decision, principal = decided[call_id]
        if decision.approve is True:
            approvals[call_id] = True
            metadata[call_id] = {"principal": principal}
            outcome[call_id] = "approved"
        else:
            approvals[call_id] = ToolDenied(_denial_text(principal, decision.message))
            outcome[call_id] = "denied"
    counts = cast(dict[IgnoredReason, int], dict(ignored))
    resolved = view.model_copy(update={"state": "resolved", "outcome": outcome, "ignored": counts})
    await DBOS.set_event_async(PENDING_EVENT, resolved.model_dump(mode="json"))
    return DeferredToolResults(approvals=approvals, metadata=metadata)


def _denial_text(principal: str, note: str) -> str:
    """What the agent reads when a person denies: the approver's words only as quoted data."""
    text = f"Denied by a person (principal {quoted(principal)})."
    if note:
        text += f" Their note, quoted: {quoted(note)}"
    return text


# -- the approval topic: messages taken one at a time, junk skipped -------------------------


class _Inbox:
    """The workflow's messages on one topic, for one round.

    ``DBOS.recv`` decodes a message before it records it; a message that does not decode
    (a class the worker cannot import, bytes that are not a pickle, an unknown
    serialization) raises there, stays unconsumed, and fails every later ``recv`` too:
    the workflow ends in ERROR with its calls pending. So the wait reads DBOS's own
    notifications table instead, in one DBOS step per accepted message: the step consumes
    junk (counted by reason, logged without content) and returns the next valid message,
    or nothing at the deadline. The accepted message is marked consumed by the next step
    (or :meth:`close`), so one a crash interrupts is read again, never lost. Steps are
    ``preemptible``: cancelling the workflow ends the wait.

    Should this DBOS version's tables not look as expected, it falls back to
    ``DBOS.recv`` (a message that does not decode then denies the round's undecided
    calls instead of leaving them pending).
    """

    def __init__(
        self, topic: str, request_id: str, pending: set[str], deadline: float, table: bool
    ) -> None:
        self.topic, self.request_id, self.pending = topic, request_id, sorted(pending)
        self.deadline, self.table = deadline, table
        self.taken: list[tuple[str, int]] = []  # accepted, not yet marked consumed

    @classmethod
    def open(cls, topic: str, request_id: str, pending: set[str], deadline: float) -> _Inbox:
        table = _notifications() is not None
        if not table:
            _log.warning("DBOS notifications table not found: receiving with DBOS.recv")
        return cls(topic, request_id, pending, deadline, table)

    async def next(self) -> tuple[ApprovalMessage | None, dict[str, int]]:
        """The next valid message (None at the deadline) and the junk skipped, by reason."""
        if not self.table:
            return await self._recv()
        workflow_id = DBOS.workflow_id
        assert workflow_id is not None
        taken = await DBOS.run_step_async(
            {"name": "vsh-ai.receive", "preemptible": True},
            _take,
            workflow_id,
            self.topic,
            self.request_id,
            self.pending,
            self.deadline,
            self.taken,
        )
        self.taken = []
        if taken["uuid"] is not None:
            self.taken = [(taken["uuid"], taken["step"])]
        message = taken["message"]
        junk: dict[str, int] = taken["ignored"]
        return (ApprovalMessage.model_validate(message) if message else None), junk

    async def close(self) -> None:
        if self.table and self.taken:
            workflow_id = DBOS.workflow_id
            assert workflow_id is not None
            await DBOS.run_step_async(
                {"name": "vsh-ai.received"}, _consume, workflow_id, self.taken
            )

    async def _recv(self) -> tuple[ApprovalMessage | None, dict[str, int]]:
        junk: Counter[str] = Counter()
        while True:
            remaining = self.deadline - await _clock()
            if remaining <= _CLOCK_SLACK_S:
                return None, dict(junk)
            raw = await DBOS.recv_async(self.topic, timeout_seconds=remaining)
            if raw is None:  # the timeout, or a junk ``None``: the clock decides which
                continue
            parsed = _parse(raw, self.request_id, set(self.pending))
            if isinstance(parsed, ApprovalMessage):
                return parsed, dict(junk)
            _log.warning("ignored a message on the approval topic: %s", parsed)
            junk[parsed] += 1


def _notifications() -> tuple[Any, Any] | None:
    """DBOS's system database and its notifications table, when they look as expected."""
    try:
        from dbos._dbos import _get_dbos_instance

        system = _get_dbos_instance()._sys_db
        table = system.tables.notifications
        names = ("destination_uuid", "topic", "message", "serialization", "message_uuid")
        if not all(name in table.c for name in (*names, "consumed", "created_at_epoch_ms")):
            return None
    except Exception:
        return None
    return system, table


def _found() -> tuple[Any, Any]:
    found = _notifications()
    if found is None:
        raise RuntimeError("DBOS's notifications table is no longer reachable")
    return found


def _rows(workflow_id: str, topic: str) -> list[tuple[str, str, str | None]]:
    """The oldest unconsumed messages on ``topic`` (uuid, serialized value, format)."""
    system, table = _found()
    query = (
        sa.select(table.c.message_uuid, table.c.message, table.c.serialization)
        .where(*_addressed(system, table, workflow_id), table.c.topic == topic)
        .where(table.c.consumed == sa.false())
        .order_by(table.c.created_at_epoch_ms.asc(), table.c.message_uuid.asc())
        .limit(16)
    )
    with system.engine.begin() as connection:
        return [(str(r[0]), str(r[1]), r[2]) for r in connection.execute(query).fetchall()]


def _consume(workflow_id: str, taken: list[tuple[str, int]]) -> None:
    """Mark messages consumed, each by the step that took it (as DBOS.recv would)."""
    system, table = _found()
    with system.engine.begin() as connection:
        for message_uuid, step in taken:
            connection.execute(
                sa.update(table)
                .where(*_addressed(system, table, workflow_id))
                .where(table.c.message_uuid == message_uuid)
                .values(consumed=True, consumed_by_function_id=step)
            )


def _addressed(system: Any, table: Any, workflow_id: str) -> list[Any]:
    scoped = getattr(system, "_wf", None)  # shard-aware, where DBOS shards
    if scoped is not None:
        return list(scoped(table, workflow_id, "destination_uuid"))
    return [table.c.destination_uuid == workflow_id]


def _decode(raw: str, serialization: str | None) -> object:
    """The message as DBOS.recv would decode it (pickle, portable JSON, the app's own)."""
    from dbos._serialization import deserialize_value

    system, _ = _found()
    return deserialize_value(raw, serialization, system.serializer)


async def _take(
    workflow_id: str,
    topic: str,
    request_id: str,
    pending: list[str],
    deadline: float,
    taken: list[tuple[str, int]],
) -> dict[str, Any]:
    """The step: mark the last accepted message consumed, then skip (consume) junk until a
    valid message arrives or the deadline passes. Its output is recorded."""
    step = DBOS.step_id
    assert step is not None
    if taken:
        await asyncio.to_thread(_consume, workflow_id, taken)
    ignored: Counter[str] = Counter()  # by reason: the record stays small whatever arrives
    system, _ = _found()
    poll = min(1.0, max(0.01, getattr(system, "_notification_listener_polling_interval_sec", 1)))
    while True:
        for message_uuid, raw, serialization in await asyncio.to_thread(_rows, workflow_id, topic):
            reason: IgnoredReason
            try:
                value = _decode(raw, serialization)
            except Exception as error:
                reason, detail = "undecodable", f" ({type(error).__name__})"
            else:
                parsed = _parse(value, request_id, set(pending))
                if isinstance(parsed, ApprovalMessage):
                    return {
                        "message": parsed.model_dump(mode="json"),
                        "uuid": message_uuid,
                        "step": step,
                        "ignored": dict(ignored),
                    }
                reason, detail = parsed, ""
            if sum(ignored.values()) < _LOGGED_PER_STEP:  # a flood is not a log flood
                _log.warning("ignored a message on the approval topic: %s%s", reason, detail)
            ignored[reason] += 1
            await asyncio.to_thread(_consume, workflow_id, [(message_uuid, step)])
        remaining = deadline - time.time()
        if remaining <= _CLOCK_SLACK_S:
            return {"message": None, "uuid": None, "step": step, "ignored": dict(ignored)}
        await asyncio.sleep(min(poll, remaining))
