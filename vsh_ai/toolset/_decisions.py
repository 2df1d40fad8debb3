"""Decisions a person recorded in the inbox, as the ``DeferredToolResults`` of a resume.

``vsh-ai inbox`` records each decision in the signed binding store
(:meth:`~vsh_ai.toolset._bindings.ApprovalStore.decide`); :func:`recorded_decisions` (the
body of ``VshToolset.decisions``) reads them back for the calls of a
``DeferredToolRequests`` and answers each the way the application would by hand: an
approval carries the approver as its ``principal``, a denial is
:func:`~vsh_ai.toolset._principal.denial` with the approver's reason. The resume then
commits exactly the transaction the approver saw (the binding names it), or reports it
stale. Each approval's metadata names its ``transaction`` and ``binding``
(:func:`~vsh_ai.toolset._bindings.binding_digest`): a resume whose call is bound to another
transaction (e.g. a later run reusing the call id with other content) refuses it.
"""

from __future__ import annotations

import math
import time
from typing import Any

import anyio
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from ._bindings import ApprovalBinding, ApprovalStore, binding_digest
from ._driver import now_ms
from ._principal import denial

__all__ = ("recorded_decisions",)

_ENDED_BEFORE = "nobody (the request had ended before a decision)"


async def recorded_decisions(
    store: ApprovalStore,
    requests: DeferredToolRequests,
    *,
    ttl: float,
    wait: float | None = None,
    poll: float = 0.25,
) -> DeferredToolResults:
    """The decided calls of ``requests`` that this store bound, as ``DeferredToolResults``.

    ``wait``: ``None`` looks once; a number of seconds (``math.inf``: no limit) waits until
    every call this store bound is decided, or the time is up. Calls still undecided are
    left out (check ``results.approvals`` against ``requests.approvals`` before resuming:
    Pydantic AI needs an answer for every call). Calls no binding of this store names (e.g.
    another toolset's) are left out and never waited for. A call whose request ended
    before anyone decided (expired, stale, ...) is answered too: its resume reports how
    it ended and commits nothing.
    """
    deadline = math.inf if wait is None else time.monotonic() + wait
    while True:
        approvals, metadata, waiting = await anyio.to_thread.run_sync(
            _answers, store, requests, ttl
        )
        if not waiting or wait is None or time.monotonic() >= deadline:
            return DeferredToolResults(approvals=approvals, metadata=metadata)
        await anyio.sleep(min(poll, max(0.0, deadline - time.monotonic())))


def _answers(
    store: ApprovalStore, requests: DeferredToolRequests, ttl: float
) -> tuple[dict[str, bool | ToolApproved | ToolDenied], dict[str, dict[str, Any]], int]:
    """One look at the store: the answers so far and how many bound calls still wait."""
    wanted: dict[tuple[str, str], str] = {}
    for call in requests.approvals:
        transaction = requests.metadata.get(call.tool_call_id, {}).get("transaction")
        if isinstance(transaction, str):
            wanted[(call.tool_call_id, transaction)] = call.tool_call_id
    found: dict[str, ApprovalBinding] = {}
    for binding in store.all():
        call_id = wanted.get((binding.tool_call_id, binding.transaction))
        if call_id is not None:
            found[call_id] = binding
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    metadata: dict[str, dict[str, Any]] = {}
    waiting = 0
    for call_id, binding in found.items():
        expired = now_ms() - binding.created_unix_ms > ttl * 1000
        if binding.end_state == "denied":
            approvals[call_id] = _denial(binding)
        elif binding.decision == "approve" or binding.end_state != "pending" or expired:
            approvals[call_id] = True
            principal = binding.decision_principal or binding.end_principal or _ENDED_BEFORE
            metadata[call_id] = {
                "principal": principal,
                "transaction": binding.transaction,
                "binding": binding_digest(binding),
                "decided_unix_ms": binding.decision_unix_ms,
            }
        else:
            waiting += 1
    return approvals, metadata, waiting


def _denial(binding: ApprovalBinding) -> ToolDenied:
    principal = binding.end_principal or binding.decision_principal
    if principal:
        return denial(principal, binding.end_message or binding.decision_reason)
    return ToolDenied("The change was denied; it will never be committed.")
