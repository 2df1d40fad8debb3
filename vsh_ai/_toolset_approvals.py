"""Durable binding from a deferred tool call to the exact VSH transaction it produced.

The binding lives beside VSH's own state (``<workspace>/.vsh-runtime/vsh-ai/approvals``),
one JSON file per tool call named by ``sha256(tool_call_id)``, written atomically. A
resumed call (possibly in a new process) trusts only this file, never a transaction id
sent back by the client.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ._results import ChangedPath
from ._toolset_runtime import now_ms

__all__ = ("ApprovalBinding", "ApprovalStore", "VshApprovalError", "args_digest")


class VshApprovalError(RuntimeError):
    """An approval could not be applied (no binding, changed arguments, missing principal)."""


def args_digest(tool_name: str, tool_args: dict[str, Any]) -> str:
    """A stable digest of a tool call's name and validated arguments."""
    canonical = json.dumps({"tool": tool_name, "args": tool_args}, sort_keys=True, default=repr)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ApprovalBinding(BaseModel):
    """tool call id → transaction, with what the approver was shown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    tool_call_id: str
    tool_name: str
    args_digest: str
    transaction: str
    changes: tuple[ChangedPath, ...] = ()
    risk_flags: tuple[str, ...] = ()
    created_unix_ms: int


class ApprovalStore:
    """Atomic JSON files under ``directory``; safe to share between processes."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, tool_call_id: str) -> Path:
        name = hashlib.sha256(tool_call_id.encode()).hexdigest()
        return self.directory / f"{name}.json"

    def save(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        digest: str,
        transaction: str,
        changes: tuple[ChangedPath, ...],
        risk_flags: tuple[str, ...],
    ) -> ApprovalBinding:
        binding = ApprovalBinding(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            args_digest=digest,
            transaction=transaction,
            changes=changes,
            risk_flags=risk_flags,
            created_unix_ms=now_ms(),
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.path_for(tool_call_id)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".binding-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(binding.model_dump_json())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return binding

    def load(self, tool_call_id: str) -> ApprovalBinding | None:
        """The binding for ``tool_call_id``; None when there is none. Corrupt files raise."""
        path = self.path_for(tool_call_id)
        try:
            raw = path.read_text()
        except FileNotFoundError:
            return None
        try:
            binding = ApprovalBinding.model_validate_json(raw)
        except ValidationError as error:
            raise VshApprovalError(
                f"{path}: approval binding is corrupt ({error.error_count()} errors); "
                "deny this tool call and let the agent submit the change again"
            ) from None
        if binding.tool_call_id != tool_call_id:
            raise VshApprovalError(f"{path}: binding belongs to another tool call")
        return binding
