"""Produce real VSH evidence for a program without ever committing it."""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Literal

import vsh
from vsh._async import native_call

from ._evidence import Evidence
from ._folder_notices import with_folder_notices

__all__ = ("DEFAULT_REVIEW_CONTENT_BYTES", "Simulation", "preview_evidence", "simulate")

DEFAULT_REVIEW_CONTENT_BYTES = 1 << 20
_HOOK_ID = "vsh-ai.simulate"


@dataclass(frozen=True, slots=True)
class Simulation:
    """What VSH made of a program: the policy state and, unless denied, its evidence."""

    state: str
    transaction: str
    evidence: Evidence | None
    deny_reason: str | None
    risk_flags: tuple[str, ...]


async def simulate(
    workspace: str | PathLike[str],
    code: str,
    *,
    intent: str | None = None,
    language: Literal["monty", "bash"] = "monty",
    policy: str = "balanced",
    review_content_bytes: int = DEFAULT_REVIEW_CONTENT_BYTES,
    data_directory: str | PathLike[str] | None = None,
    budget: vsh.ExecutionBudget | None = None,
) -> Simulation:
    """Preview ``code`` on ``workspace`` and take the exact hook event; never commit.

    The runtime uses ``HookScope.ALL_REQUESTS`` so auto-approved and read-only work
    yields evidence too. The prepared transaction is failed (left pending) rather than
    resolved, so host files cannot change. Guest errors raise ``vsh.VshExecutionError``.
    """
    runtime = await native_call(
        lambda: vsh.Runtime.open(
            workspace,
            data_directory=data_directory,
            policy=policy,
            bash=vsh.BashConfig() if language == "bash" else None,
            hook_id=_HOOK_ID,
            hook_scope=vsh.HookScope.ALL_REQUESTS,
            review_content_bytes=review_content_bytes,
        )
    )
    request = vsh.RunRequest(
        code,
        language=vsh.Language.BASH if language == "bash" else vsh.Language.MONTY,
        intent=intent,
        mode=vsh.RunMode.PREVIEW,
        budget=budget,
    )
    return await preview_evidence(runtime, request, Path(workspace))


async def preview_evidence(
    runtime: vsh.Runtime, request: vsh.RunRequest, workspace: Path | None = None
) -> Simulation:
    """Preview ``request`` on an open ``ALL_REQUESTS`` runtime and take its hook event
    (with the notice files of the folders it deletes from, read from ``workspace``).

    The prepared transaction is failed (left pending), never resolved: no host change.
    """
    receipt = await native_call(lambda: runtime.preview(request))
    evidence: Evidence | None = None
    if receipt.state in ("auto_approved", "pending_approval"):
        preparation = await native_call(lambda: runtime.prepare_commit(receipt.transaction))
        try:
            if preparation.event is not None:
                evidence = with_folder_notices(Evidence.from_event(preparation.event), workspace)
        finally:
            await native_call(lambda: runtime.fail_hook(preparation))
    return Simulation(
        state=receipt.state,
        transaction=receipt.transaction,
        evidence=evidence,
        deny_reason=receipt.deny_reason,
        risk_flags=tuple(receipt.risk_flags),
    )
