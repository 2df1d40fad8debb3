"""DBOS integration (implementation of :mod:`vsh_ai.dbos`)."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

try:
    import sqlalchemy as sa
    from dbos import DBOS, DBOSClient, DBOSConfig, WorkflowSerializationFormat
    from dbos import error as dbos_error
    from pydantic_ai.durable_exec import dbos as _dbos_integration  # noqa: F401  (the extra)
except ImportError as _error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "vsh_ai.dbos needs DBOS and Pydantic AI's DBOS integration: pip install 'vsh-ai[dbos]'"
    ) from _error

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import DeferredToolApprovalResult

from .toolset._principal import check_principal, quoted

__all__ = (
    "APPROVAL_TOPIC",
    "DATABASE_URL_ENV",
    "PENDING_EVENT",
    "ApprovalMessage",
    "CallDecision",
    "IgnoredReason",
    "Outcome",
    "PendingApprovals",
    "PendingCall",
    "WorkflowNotWaiting",
    "dbos_config",
    "pending_approvals",
    "pending_approvals_async",
    "run_with_approvals",
    "send_approval",
    "send_approval_async",
)

DATABASE_URL_ENV = "VSH_AI_DBOS_DATABASE_URL"
"""Environment variable naming the DBOS system database when ``database_url`` is not given."""
APPROVAL_TOPIC = "vsh-ai.approval"
"""DBOS message topic the workflow receives approvals on."""
PENDING_EVENT = "vsh-ai.pending"
"""DBOS event key under which a workflow publishes what it waits for."""

Outcome = Literal["approved", "denied", "timed_out"]
"""How a pending call ended: approved, denied by a person, or denied when the wait ran out."""

IgnoredReason = Literal["undecodable", "invalid", "invalid_principal", "other_round", "not_pending"]
"""Why a message on the approval topic was ignored: it could not be decoded (unpickled,
parsed), did not validate, named an unacceptable principal, named another round, or named
a call that is not pending."""

_log = logging.getLogger("vsh_ai.dbos")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_CLOCK_SLACK_S = 0.05  # a wait that returns this close to its deadline has timed out
_LOGGED_PER_STEP = 10  # ignored messages logged per receive step (all are counted)
_ACTIVE = frozenset(("PENDING", "ENQUEUED", "DELAYED"))  # DBOS states that may still ask


class WorkflowNotWaiting(RuntimeError):
    """The workflow is unknown, or no longer waits for this decision (it finished, failed,
    was cancelled, or the round is over): a decision sent now would be ignored."""


def dbos_config(
    name: str,
    *,
    database_url: str | None = None,
    directory: str | os.PathLike[str] | None = None,
    application_version: str = "1",
    **options: Any,
) -> DBOSConfig:
    """A DBOS config: ``DBOS(config=dbos_config("my-app")); DBOS.launch()``.

    The system database is ``database_url``, else ``$VSH_AI_DBOS_DATABASE_URL``, else a
    SQLite file ``<directory>/<name>.sqlite`` (``directory`` defaults to the current
    folder). For Postgres pass e.g. ``postgresql://user:pass@host:5432/dbname``, or set
    the variable: code written for the SQLite default then runs on Postgres unchanged.

    ``application_version`` is pinned (DBOS's default is a hash of the workflow code):
    a restarted process recovers only the pending workflows of its own version, and an
    approval that waits for days should survive an unrelated deploy. Change it when a
    workflow's sequence of steps changes, so old runs are not replayed by new code.
    ``options`` are further DBOS config keys (``executor_id``, ``log_level``, ...).
    """
    if not _NAME.match(name):
        raise ValueError(
            f"DBOS application name {name!r}: use letters, digits, '.', '_' or '-' "
            "(it names the SQLite file)"
        )
    if not application_version or not application_version.strip():
        raise ValueError("application_version must be a non-empty string")
    if database_url is not None and directory is not None:
        raise ValueError("pass database_url or directory, not both")
    url = database_url or os.environ.get(DATABASE_URL_ENV) or None
    if url is None:
        folder = Path(directory) if directory is not None else Path.cwd()
        url = f"sqlite:///{(folder / f'{name}.sqlite').absolute()}"
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": url,
        "application_version": application_version,
        **options,
    }
    return cast(DBOSConfig, config)


# -- what the workflow publishes and receives ------------------------------------------------


class PendingCall(BaseModel):
    """One tool call waiting for a decision, as the approver sees it."""

    model_config = ConfigDict(frozen=True)

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="the toolset's approver view: transaction, changes, diff, risk flags",
    )


class PendingApprovals(BaseModel):
    """The value of a workflow's ``PENDING_EVENT``: what it waits for, or how that ended."""

    model_config = ConfigDict(frozen=True)

    request_id: str = Field(description="echo it in the approval: binds it to this round")
    state: Literal["waiting", "resolved"]
    calls: tuple[PendingCall, ...]
    deadline_unix_s: float = Field(description="when undecided calls are denied")
    outcome: dict[str, Outcome] = Field(default_factory=dict)
    ignored: dict[IgnoredReason, int] = Field(
        default_factory=dict,
        description="messages ignored so far in this round, by reason (never their content)",
    )


class CallDecision(BaseModel):
    """A decision on one call: ``approve`` must be the JSON boolean ``true`` to approve."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approve: StrictBool
    message: str = Field(default="", max_length=2000)


class ApprovalMessage(BaseModel):
    """What an approver sends: decisions for calls of one round, and who decided."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = Field(min_length=1, max_length=300)
    principal: str = Field(min_length=1, max_length=200)
    decisions: dict[str, CallDecision] = Field(min_length=1)

    @field_validator("principal")
    @classmethod
    def _principal(cls, value: str) -> str:
        return check_principal(value)  # refused, never cleaned: see toolset._principal


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


async def run_with_approvals(
    agent: AbstractAgent[Any, Any],
    user_prompt: str | None = None,
    *,
    timeout_s: float = 600.0,
    topic: str = APPROVAL_TOPIC,
    **run_kwargs: Any,
) -> AgentRunResult[Any]:
    """Run ``agent`` inside a DBOS workflow, waiting durably for each human approval.

    Whenever the run ends with ``DeferredToolRequests``, the workflow publishes a
    :class:`PendingApprovals` under ``PENDING_EVENT`` (read it with
    :func:`pending_approvals`), receives :class:`ApprovalMessage` values on ``topic``
    until every pending call is decided or ``timeout_s`` has passed, then resumes the
    same conversation with the decisions, looping until the output is final. Approvals
    carry the approver's principal to the toolset, which commits exactly the
    transaction it bound to the call. Works with an agent that has ``DBOSDurability``
    and with the deprecated ``DBOSAgent`` (each of its runs a child workflow).

    Decisions may arrive in several messages; a denial wins over an approval of the same
    call, whatever the order. Junk is never an approval, and never ends the wait: a
    message that cannot be decoded (unpickled, parsed), does not validate, names an
    unacceptable principal (see :func:`~vsh_ai.toolset._principal.check_principal`),
    another round's ``request_id`` or a call that is not pending is consumed, logged and
    counted (``PendingApprovals.ignored``, by reason; never its content), and the wait goes
    on. Only ``approve: true`` approves. Junk costs no agent turn and no workflow step.

    On timeout every undecided call is denied with a message saying so; the toolset
    records the denial durably (the change is never committed) and the agent sees it.
    Should the approval channel itself fail (the system database), every undecided call
    is denied the same way: the workflow never ends with a call left pending. Set the
    toolset's ``approval_ttl`` at least as long as ``timeout_s`` (e.g. both ``7 * 86400``
    for a week): an approval older than ``approval_ttl`` commits nothing and reports
    ``stale``. External deferred calls (``CallDeferred``) are not handled: they raise.
    ``run_id`` is refused: each round is a new agent run and names itself.
    """
    if DBOS.workflow_id is None:
        raise RuntimeError("run_with_approvals must be called inside a @DBOS.workflow")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s}")
    if "run_id" in run_kwargs:
        raise ValueError(
            "run_with_approvals runs the agent once per approval round, and each run needs "
            "its own run id: do not pass run_id (DBOSDurability derives a replay-stable one)"
        )
    _warn_short_ttl(agent, timeout_s)
    result: AgentRunResult[Any] = await agent.run(user_prompt, **run_kwargs)
    run_kwargs.pop("message_history", None)
    run_kwargs.pop("deferred_tool_results", None)
    round_number = 0
    while isinstance(result.output, DeferredToolRequests):
        requests = result.output
        if requests.calls:
            raise RuntimeError(
                f"run_with_approvals handles approvals only; {len(requests.calls)} external "
                "deferred call(s) need your own handling"
            )
        round_number += 1
        # Unique per agent run (``<workflow id>:<step>`` under DBOSDurability; under
        # DBOSAgent the run id a recorded child workflow returned), so a late message for
        # one round can never decide another, even across several loops.
        request_id = result.run_id or f"{DBOS.workflow_id}:round-{round_number}"
        results = await _wait_for_decisions(requests, request_id, timeout_s, topic)
        result = await agent.run(
            message_history=result.all_messages(), deferred_tool_results=results, **run_kwargs
        )
    return result


async def _wait_for_decisions(
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


def _warn_short_ttl(agent: AbstractAgent[Any, Any], timeout_s: float) -> None:
    from .toolset import VshToolset

    for toolset in getattr(agent, "toolsets", ()):
        if isinstance(toolset, VshToolset) and toolset.approval_ttl < timeout_s:
            _log.warning(
                "approval wait %gs is longer than the toolset's approval_ttl %gs: a late "
                "approval commits nothing and reports stale",
                timeout_s,
                toolset.approval_ttl,
            )


# -- outside the workflow ------------------------------------------------------------------


def _message(
    request_id: str,
    principal: str,
    approve: Iterable[str],
    deny: Mapping[str, str] | Iterable[str],
) -> dict[str, Any]:
    denials = dict(deny) if isinstance(deny, Mapping) else dict.fromkeys(deny, "")
    approvals = list(approve)
    both = set(approvals) & set(denials)
    if both:
        raise ValueError(f"call(s) both approved and denied: {sorted(both)}")
    decisions: dict[str, CallDecision] = {
        call_id: CallDecision(approve=True) for call_id in approvals
    }
    decisions.update(
        {call_id: CallDecision(approve=False, message=text) for call_id, text in denials.items()}
    )
    message = ApprovalMessage(request_id=request_id, principal=principal, decisions=decisions)
    return message.model_dump(mode="json")


def send_approval(
    workflow_id: str,
    *,
    request_id: str,
    principal: str,
    approve: Iterable[str] = (),
    deny: Mapping[str, str] | Iterable[str] = (),
    client: DBOSClient | None = None,
    topic: str = APPROVAL_TOPIC,
) -> None:
    """Send decisions to a waiting workflow (``deny`` maps call ids to messages).

    ``request_id`` comes from :func:`pending_approvals`. Uses ``client`` (a
    ``DBOSClient`` on the same system database: an approver UI needs no workflow
    code) or, without one, the launched ``DBOS`` of this process. The message is
    validated before it is sent (as JSON); the workflow validates it again.

    Raises :class:`WorkflowNotWaiting` (nothing is sent) when the workflow is unknown,
    finished, failed or cancelled, or its current round is not ``request_id`` or is
    already resolved. A round can still end between this check and the message's
    arrival (its deadline): the workflow then ignores the message.
    """
    message = _message(request_id, principal, approve, deny)
    _check_round(workflow_id, _view(workflow_id, client, 0.0), request_id)
    portable = WorkflowSerializationFormat.PORTABLE
    if client is not None:
        client.send(workflow_id, message, topic, serialization_type=portable)
    else:
        DBOS.send(workflow_id, message, topic, serialization_type=portable)


async def send_approval_async(
    workflow_id: str,
    *,
    request_id: str,
    principal: str,
    approve: Iterable[str] = (),
    deny: Mapping[str, str] | Iterable[str] = (),
    client: DBOSClient | None = None,
    topic: str = APPROVAL_TOPIC,
) -> None:
    """:func:`send_approval` for async code."""
    message = _message(request_id, principal, approve, deny)
    _check_round(workflow_id, await _view_async(workflow_id, client, 0.0), request_id)
    portable = WorkflowSerializationFormat.PORTABLE
    if client is not None:
        await client.send_async(workflow_id, message, topic, serialization_type=portable)
    else:
        await DBOS.send_async(workflow_id, message, topic, serialization_type=portable)


def pending_approvals(
    workflow_id: str, *, wait_s: float = 0.0, client: DBOSClient | None = None
) -> PendingApprovals | None:
    """What ``workflow_id`` waits for (``state="waiting"``) or how its last round ended
    (``state="resolved"``, also once the workflow has finished).

    None when the running workflow has not asked for any approval (within ``wait_s``
    seconds). Raises :class:`WorkflowNotWaiting` when the workflow is unknown, or has
    ended (finished, failed, cancelled) without asking or while a round was still
    waiting: nothing will ever read a decision for it.
    """
    return _view(workflow_id, client, wait_s)


async def pending_approvals_async(
    workflow_id: str, *, wait_s: float = 0.0, client: DBOSClient | None = None
) -> PendingApprovals | None:
    """:func:`pending_approvals` for async code."""
    return await _view_async(workflow_id, client, wait_s)


def _view(workflow_id: str, client: DBOSClient | None, wait_s: float) -> PendingApprovals | None:
    status = _status(workflow_id, client)
    wait = wait_s if status in _ACTIVE else 0.0  # an ended workflow publishes nothing more
    if client is not None:
        raw = client.get_event(workflow_id, PENDING_EVENT, wait)
    else:
        raw = DBOS.get_event(workflow_id, PENDING_EVENT, wait)
    # The status again: it may have ended during the wait (and had published before).
    return _judge(workflow_id, _pending(raw), _status(workflow_id, client) if wait else status)


async def _view_async(
    workflow_id: str, client: DBOSClient | None, wait_s: float
) -> PendingApprovals | None:
    status = await asyncio.to_thread(_status, workflow_id, client)
    wait = wait_s if status in _ACTIVE else 0.0
    if client is not None:
        raw = await client.get_event_async(workflow_id, PENDING_EVENT, wait)
    else:
        raw = await DBOS.get_event_async(workflow_id, PENDING_EVENT, wait)
    if wait:
        status = await asyncio.to_thread(_status, workflow_id, client)
    return _judge(workflow_id, _pending(raw), status)


def _status(workflow_id: str, client: DBOSClient | None) -> str | None:
    """The workflow's DBOS status (``PENDING``, ``SUCCESS``, ``ERROR``, ...), None if unknown."""
    if client is not None:
        try:
            return str(client.retrieve_workflow(workflow_id).get_status().status)
        except dbos_error.DBOSNonExistentWorkflowError:
            return None
    found = DBOS.get_workflow_status(workflow_id)
    return None if found is None else str(found.status)


def _judge(
    workflow_id: str, view: PendingApprovals | None, status: str | None
) -> PendingApprovals | None:
    if status is None:
        raise WorkflowNotWaiting(f"no DBOS workflow has the id {workflow_id!r}")
    if status in _ACTIVE or (view is not None and view.state == "resolved"):
        return view
    if view is None:
        raise WorkflowNotWaiting(
            f"workflow {workflow_id!r} is {status} and never asked for an approval"
        )
    raise WorkflowNotWaiting(
        f"workflow {workflow_id!r} is {status}: it stopped while round {view.request_id!r} "
        "waited, and will never read a decision for it (its calls were not committed)"
    )


def _check_round(workflow_id: str, view: PendingApprovals | None, request_id: str) -> None:
    if view is None:
        raise WorkflowNotWaiting(f"workflow {workflow_id!r} has not asked for an approval yet")
    if view.request_id != request_id:
        raise WorkflowNotWaiting(
            f"round {request_id!r} is not the current round of workflow {workflow_id!r} "
            f"({view.request_id!r}, {view.state}): read pending_approvals() again"
        )
    if view.state != "waiting":
        decided = ", ".join(f"{k}: {v}" for k, v in sorted(view.outcome.items()))
        raise WorkflowNotWaiting(
            f"round {request_id!r} of workflow {workflow_id!r} is already resolved ({decided})"
        )


def _pending(raw: object) -> PendingApprovals | None:
    if raw is None:
        return None
    try:
        return PendingApprovals.model_validate(raw)
    except ValidationError as error:
        raise ValueError(
            f"the workflow's {PENDING_EVENT!r} event is not a vsh-ai pending-approval record"
        ) from error
