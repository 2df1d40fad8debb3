"""DBOS integration (implementation of :mod:`vsh_ai.dbos`)."""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

try:
    from dbos import DBOS, DBOSClient, DBOSConfig
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

__all__ = (
    "APPROVAL_TOPIC",
    "DATABASE_URL_ENV",
    "PENDING_EVENT",
    "ApprovalMessage",
    "CallDecision",
    "Outcome",
    "PendingApprovals",
    "PendingCall",
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

_log = logging.getLogger("vsh_ai.dbos")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CLOCK_SLACK_S = 0.05  # a wait that returns this close to its deadline has timed out


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
        if not value.strip() or _CONTROL.search(value):
            raise ValueError("principal must be printable text naming who decided")
        return value.strip()


def _parse(raw: object, request_id: str, pending: set[str]) -> ApprovalMessage | None:
    """A valid message for this round naming only pending calls; anything else is junk."""
    try:
        message = ApprovalMessage.model_validate(raw)
    except ValidationError as error:
        _log.warning("ignored a malformed approval message (%d errors)", error.error_count())
        return None
    if message.request_id != request_id:
        _log.warning("ignored an approval message for another request (%s)", message.request_id)
        return None
    unknown = set(message.decisions) - pending
    if unknown:
        _log.warning("ignored an approval message naming %d call(s) not pending", len(unknown))
        return None
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
    transaction it bound to the call.

    Decisions may arrive in several messages; a denial wins over an approval of the same
    call, whatever the order. Junk is never an approval: a message that does not
    validate, names another round's ``request_id`` or a call that is not pending is
    logged and ignored; only ``approve: true`` approves.

    On timeout every undecided call is denied with a message saying so; the toolset
    records the denial durably (the change is never committed) and the agent sees it.
    Set the toolset's ``approval_ttl`` at least as long as ``timeout_s`` (e.g. both
    ``7 * 86400`` for a week): an approval older than ``approval_ttl`` commits nothing
    and reports ``stale``. External deferred calls (``CallDeferred``) are not handled:
    they raise.
    """
    if DBOS.workflow_id is None:
        raise RuntimeError("run_with_approvals must be called inside a @DBOS.workflow")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s}")
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
        # Unique per agent run (``<workflow id>:<step>`` under DBOSDurability), so a late
        # message for one round can never decide another, even across several loops.
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
    while set(decided) != pending:
        remaining = deadline - await _clock()
        if remaining <= _CLOCK_SLACK_S:
            break
        raw = await DBOS.recv_async(topic, timeout_seconds=remaining)
        if raw is None:  # the timeout, or a junk ``None``: the clock decides which
            continue
        message = _parse(raw, request_id, pending)
        if message is None:
            continue
        for call_id, decision in message.decisions.items():
            earlier = decided.get(call_id)
            if earlier is None or (earlier[0].approve and not decision.approve):
                decided[call_id] = (decision, message.principal)  # a denial is never undone
    approvals: dict[str, bool | DeferredToolApprovalResult] = {}
    metadata: dict[str, dict[str, Any]] = {}
    outcome: dict[str, Outcome] = {}
    for call_id in sorted(pending):
        if call_id not in decided:
            approvals[call_id] = ToolDenied(
                f"No decision arrived within {timeout_s:g}s, so this change was denied "
                "automatically and will not be committed. Ask the user before submitting "
                "it again."
            )
            outcome[call_id] = "timed_out"
            continue
        decision, principal = decided[call_id]
        if decision.approve is True:
            approvals[call_id] = True
            metadata[call_id] = {"principal": principal}
            outcome[call_id] = "approved"
        else:
            note = f": {decision.message}" if decision.message else ""
            approvals[call_id] = ToolDenied(f"Denied by {principal}{note}")
            outcome[call_id] = "denied"
    resolved = view.model_copy(update={"state": "resolved", "outcome": outcome})
    await DBOS.set_event_async(PENDING_EVENT, resolved.model_dump(mode="json"))
    return DeferredToolResults(approvals=approvals, metadata=metadata)


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
    validated before it is sent; the workflow validates it again.
    """
    message = _message(request_id, principal, approve, deny)
    if client is not None:
        client.send(workflow_id, message, topic)
    else:
        DBOS.send(workflow_id, message, topic)


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
    if client is not None:
        await client.send_async(workflow_id, message, topic)
    else:
        await DBOS.send_async(workflow_id, message, topic)


def _pending(raw: object) -> PendingApprovals | None:
    if raw is None:
        return None
    try:
        return PendingApprovals.model_validate(raw)
    except ValidationError as error:
        raise ValueError(
            f"the workflow's {PENDING_EVENT!r} event is not a vsh-ai pending-approval record"
        ) from error


def pending_approvals(
    workflow_id: str, *, wait_s: float = 0.0, client: DBOSClient | None = None
) -> PendingApprovals | None:
    """What ``workflow_id`` waits for (``state="waiting"``) or how its last round ended.

    None when the workflow has not asked for any approval (within ``wait_s`` seconds).
    """
    if client is not None:
        raw = client.get_event(workflow_id, PENDING_EVENT, wait_s)
    else:
        raw = DBOS.get_event(workflow_id, PENDING_EVENT, wait_s)
    return _pending(raw)


async def pending_approvals_async(
    workflow_id: str, *, wait_s: float = 0.0, client: DBOSClient | None = None
) -> PendingApprovals | None:
    """:func:`pending_approvals` for async code."""
    if client is not None:
        raw = await client.get_event_async(workflow_id, PENDING_EVENT, wait_s)
    else:
        raw = await DBOS.get_event_async(workflow_id, PENDING_EVENT, wait_s)
    return _pending(raw)
