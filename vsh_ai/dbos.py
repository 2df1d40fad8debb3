"""Durable agents on DBOS: a VshToolset agent whose approvals wait across restarts.

Install with ``pip install 'vsh-ai[dbos]'``. Give the agent Pydantic AI's
``DBOSDurability`` capability (``from pydantic_ai.durable_exec.dbos import
DBOSDurability``), call :func:`run_with_approvals` inside your own ``@DBOS.workflow``,
and approve from anywhere with :func:`send_approval`::

    agent = Agent(model, toolsets=[VshToolset(ws, approval="deferred", approval_ttl=7 * 86400)],
                  output_type=[str, DeferredToolRequests], capabilities=[DBOSDurability()])

    @DBOS.workflow()
    async def change(task: str) -> str:
        result = await run_with_approvals(agent, task, timeout_s=7 * 86400)
        return str(result.output)

What is durable (recorded in the DBOS system database, replayed after a crash): every
model request (a DBOS step), the pending-approval event, every message received, the
clock readings that bound the wait, and so the wait itself: a process killed while
waiting is recovered by the next process that launches DBOS with the same application
version, and keeps waiting for what is left of ``timeout_s``. What is not a step: the
tool calls. They run again on recovery; the toolset's approval bindings and commit
journal (under the workspace's ``.vsh-runtime``) make a replayed call report its
recorded outcome instead of committing twice.

Messages on the approval topic are validated in the workflow: anything that cannot be
decoded (a class the worker cannot import, bytes that are not a pickle, an unknown
format), does not validate, names an unacceptable principal (control, separator and bidi
characters are refused), another round or a call that is not pending is consumed and
counted (``PendingApprovals.ignored``, by reason, never its content), costs no agent turn
and no workflow step, and never ends the wait. A person's denial reaches the agent with
their principal and note as quoted data only. :func:`send_approval` and
:func:`pending_approvals` raise :class:`WorkflowNotWaiting` for a workflow that is
unknown, has ended (finished, failed, cancelled) without a resolved round, or (sending)
whose current round is another or already resolved.

The default call key of :class:`~vsh_ai.VshToolset` is stable under ``DBOSDurability`` and
under the deprecated ``DBOSAgent`` (whose run id changes on every execution: the key then
comes from the workflow id and the recorded model response); an agent whose model
requests are not DBOS steps, inside a workflow, cannot be replayed safely and its first
tool call is refused.

:func:`dbos_config` keeps DBOS quiet (``log_level="WARNING"`` unless you pass one).
Nothing here is SQLite-specific beyond :func:`dbos_config`'s default URL: pass a
``postgresql://`` URL (or set ``VSH_AI_DBOS_DATABASE_URL``) and the same code runs on
Postgres. Trust: whoever can write to the system database can send approvals; the
principal in a message is what the approver claims, recorded as such, not authenticated.
"""

from __future__ import annotations

from ._dbos import (
    DATABASE_URL_ENV,
    WorkflowNotWaiting,
    dbos_config,
    pending_approvals,
    pending_approvals_async,
    run_with_approvals,
    send_approval,
    send_approval_async,
)
from ._dbos_messages import (
    APPROVAL_TOPIC,
    PENDING_EVENT,
    ApprovalMessage,
    CallDecision,
    IgnoredReason,
    Outcome,
    PendingApprovals,
    PendingCall,
)

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
