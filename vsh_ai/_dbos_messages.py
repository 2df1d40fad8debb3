"""What a vsh-ai DBOS workflow publishes and receives (part of :mod:`vsh_ai.dbos`).

The pending-approval event (:class:`PendingApprovals`, under :data:`PENDING_EVENT`) and
the approvers' messages (:class:`ApprovalMessage`, on :data:`APPROVAL_TOPIC`): plain
Pydantic models, shared by the workflow's wait (:mod:`vsh_ai._dbos_wait`) and the
approver's side (:mod:`vsh_ai._dbos`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from .toolset._principal import check_principal

__all__ = (
    "APPROVAL_TOPIC",
    "PENDING_EVENT",
    "ApprovalMessage",
    "CallDecision",
    "IgnoredReason",
    "Outcome",
    "PendingApprovals",
    "PendingCall",
)

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
