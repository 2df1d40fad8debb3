"""DBOS integration (implementation of :mod:`vsh_ai.dbos`): the config, the workflow's
approval loop, and the approver's side (send a decision, read what a workflow waits for).

The messages are :mod:`vsh_ai._dbos_messages`; the wait inside the workflow is
:mod:`vsh_ai._dbos_wait`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

try:
    from dbos import DBOS, DBOSClient, DBOSConfig, WorkflowSerializationFormat
    from dbos import error as dbos_error
    from pydantic_ai.durable_exec import dbos as _dbos_integration  # noqa: F401  (the extra)
except ImportError as _error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "vsh_ai.dbos needs DBOS and Pydantic AI's DBOS integration: pip install 'vsh-ai[dbos]'"
    ) from _error

from pydantic import ValidationError
from pydantic_ai import DeferredToolRequests
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.run import AgentRunResult

from ._dbos_messages import (
    APPROVAL_TOPIC,
    PENDING_EVENT,
    ApprovalMessage,
    CallDecision,
    PendingApprovals,
)
from ._dbos_wait import wait_for_decisions

__all__ = (
    "DATABASE_URL_ENV",
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

_log = logging.getLogger("vsh_ai.dbos")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
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
    ``log_level`` defaults to ``"WARNING"``: DBOS's own default (``"INFO"``) prints some
    75 lines (migrations, queues, shutdown) on every launch; pass ``log_level="INFO"``
    to see them.
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
        "log_level": "WARNING",
        **options,
    }
    return cast(DBOSConfig, config)


# -- inside the workflow -------------------------------------------------------------------


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
        results = await wait_for_decisions(requests, request_id, timeout_s, topic)
        result = await agent.run(
            message_history=result.all_messages(), deferred_tool_results=results, **run_kwargs
        )
    return result


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
