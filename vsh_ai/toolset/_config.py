"""The toolset's options, checked once: which tools, how approval works, what is judged."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import vsh

from ._result import OutputLimits

__all__ = ("ALL_TOOLS", "ApprovalMode", "JudgeScope", "ToolName", "ToolsetConfig")

ToolName = Literal[
    "vsh_run",
    "vsh_read",
    "vsh_write",
    "vsh_patch",
    "vsh_list",
    "vsh_glob",
    "vsh_search",
    "vsh_mkdir",
    "vsh_remove",
    "vsh_move",
    "vsh_copy",
]
ApprovalMode = Literal["feedback", "deferred"]
"""``feedback``: pending work comes back to the agent with the reviewer's feedback;
``deferred``: it raises Pydantic AI's ``ApprovalRequired`` and waits for a person."""
JudgeScope = Literal["mutations", "all", "policy_pending"]
"""Which work a configured judge or hook sees: ``mutations`` (default: every change, even
what VSH policy would auto-approve; reads follow policy unjudged), ``all`` (reads too), or
``policy_pending`` (only what VSH policy sends to review: policy auto-approves small
edits without asking the judge)."""
ALL_TOOLS: tuple[str, ...] = get_args(ToolName)
_JUDGE_SCOPES: tuple[str, ...] = get_args(JudgeScope)


@dataclass(frozen=True, slots=True)
class ToolsetConfig:
    """What every stage of a tool call needs to know about the toolset's options."""

    tools: tuple[str, ...]
    approval: ApprovalMode
    approval_ttl: float
    judge_scope: JudgeScope
    limits: OutputLimits
    budget: vsh.ExecutionBudget | None
    bash: bool
    reviewed: bool
    """A judge, a hook or a person reviews this toolset's work: guest error text is then a
    function of the program only (it could carry bytes a reviewer has not cleared)."""

    @property
    def deferred(self) -> bool:
        return self.approval == "deferred"

    @classmethod
    def build(
        cls,
        *,
        tools: Sequence[str] | None,
        approval: str,
        approval_ttl: float,
        judge_scope: str,
        limits: OutputLimits | None,
        budget: vsh.ExecutionBudget | None,
        bash: bool | vsh.BashConfig,
        reviewed: bool,
    ) -> ToolsetConfig:
        """Check every option, saying what to pass instead."""
        if approval not in ("feedback", "deferred"):
            raise ValueError(f"approval must be 'feedback' or 'deferred', got {approval!r}")
        if isinstance(approval_ttl, bool) or not (
            isinstance(approval_ttl, int | float)
            and math.isfinite(approval_ttl)
            and approval_ttl > 0
        ):
            raise ValueError(
                f"approval_ttl must be a positive number of seconds, got {approval_ttl!r}"
            )
        if judge_scope not in _JUDGE_SCOPES:
            raise ValueError(
                f"judge_scope must be one of {list(_JUDGE_SCOPES)}, got {judge_scope!r}"
            )
        selected = tuple(ALL_TOOLS if tools is None else tools)
        unknown = sorted(set(selected) - set(ALL_TOOLS))
        if unknown:
            raise ValueError(f"unknown tools {unknown}; choose from {list(ALL_TOOLS)}")
        return cls(
            tools=selected,
            approval=approval,  # type: ignore[arg-type]
            approval_ttl=float(approval_ttl),
            judge_scope=judge_scope,  # type: ignore[arg-type]
            limits=limits or OutputLimits(),
            budget=budget,
            bash=bash is not False,
            reviewed=reviewed,
        )
