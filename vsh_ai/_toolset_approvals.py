"""Durable binding from a deferred tool call to the exact VSH transaction it produced.

Bindings live in ``state_directory`` (by default ``<workspace>/.vsh-runtime/vsh-ai/approvals``,
which VSH keeps out of guest reach), one JSON file per (tool call id, arguments digest),
written atomically and signed with an HMAC whose key lives outside any workspace (see
:func:`approval_key_path`). A resumed call (possibly in a new process) trusts only a
binding whose signature verifies, never a transaction id sent back by the client.

A binding records its end state (``committed``, ``denied``, ``expired``, ``stale``,
``rejected``): once final it never changes, so a later approval of a denied or expired
call commits nothing, whatever TTL the resuming toolset has.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ._results import ChangedPath
from ._toolset_runtime import now_ms

__all__ = (
    "ApprovalBinding",
    "ApprovalStore",
    "EndState",
    "VshApprovalError",
    "approval_key_path",
    "args_digest",
)

EndState = Literal["pending", "committed", "denied", "expired", "stale", "rejected", "failed"]
_KEY_ENV = "VSH_AI_APPROVAL_KEY_FILE"


class VshApprovalError(RuntimeError):
    """An approval could not be applied (no binding, changed arguments, missing principal)."""


def args_digest(tool_name: str, tool_args: dict[str, Any]) -> str:
    """A stable digest of a tool call's name and validated arguments."""
    canonical = json.dumps({"tool": tool_name, "args": tool_args}, sort_keys=True, default=repr)
    return hashlib.sha256(canonical.encode()).hexdigest()


def approval_key_path() -> Path:
    """Where the binding signing key lives: ``$VSH_AI_APPROVAL_KEY_FILE``, else
    ``$XDG_STATE_HOME/vsh-ai/approval.key`` (``~/.local/state`` by default)."""
    explicit = os.environ.get(_KEY_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "vsh-ai" / "approval.key"


def _load_key() -> bytes:
    path = approval_key_path()
    with contextlib.suppress(FileNotFoundError):
        return path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_bytes(32)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # first writer wins; everyone then reads the same key
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path.read_bytes()


class ApprovalBinding(BaseModel):
    """tool call id (+ arguments) → transaction, with what the approver was shown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 2
    tool_call_id: str
    tool_name: str
    args_digest: str
    transaction: str
    changes: tuple[ChangedPath, ...] = ()
    changes_omitted: int = 0
    risk_flags: tuple[str, ...] = ()
    created_unix_ms: int
    metadata: dict[str, Any] = {}
    end_state: EndState = "pending"
    end_note: str = ""
    mac: str = ""

    def signed_payload(self) -> bytes:
        return self.model_dump_json(exclude={"mac"}).encode()


class ApprovalStore:
    """Signed, atomic JSON files under ``directory``; safe to share between processes."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = _load_key()
        return self._key

    def _sign(self, binding: ApprovalBinding) -> ApprovalBinding:
        mac = hmac.new(self.key, binding.signed_payload(), hashlib.sha256).hexdigest()
        return binding.model_copy(update={"mac": mac})

    @staticmethod
    def _prefix(tool_call_id: str) -> str:
        return hashlib.sha256(tool_call_id.encode()).hexdigest()

    def path_for(self, tool_call_id: str, digest: str) -> Path:
        return self.directory / f"{self._prefix(tool_call_id)}.{digest[:32]}.json"

    def bound(self, tool_call_id: str) -> bool:
        """Whether any call with this id has a binding (whatever its arguments)."""
        return any(self.directory.glob(f"{self._prefix(tool_call_id)}.*.json"))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write(self, binding: ApprovalBinding) -> ApprovalBinding:
        binding = self._sign(binding)
        target = self.path_for(binding.tool_call_id, binding.args_digest)
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

    def save(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        digest: str,
        transaction: str,
        changes: tuple[ChangedPath, ...],
        risk_flags: tuple[str, ...],
        changes_omitted: int = 0,
        metadata: dict[str, Any] | None = None,
    ) -> ApprovalBinding:
        """Bind a call once: an existing binding for the same call is returned unchanged."""
        with self._locked():
            existing = self.load(tool_call_id, digest)
            if existing is not None:
                return existing
            binding = ApprovalBinding(
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                args_digest=digest,
                transaction=transaction,
                changes=changes,
                changes_omitted=changes_omitted,
                risk_flags=risk_flags,
                created_unix_ms=now_ms(),
                metadata=metadata or {},
            )
            return self._write(binding)

    def finish(self, binding: ApprovalBinding, state: EndState, note: str = "") -> ApprovalBinding:
        """Record the end state durably; an end state already recorded wins."""
        with self._locked():
            current = self.load(binding.tool_call_id, binding.args_digest) or binding
            if current.end_state != "pending":
                return current
            return self._write(current.model_copy(update={"end_state": state, "end_note": note}))

    def load(self, tool_call_id: str, digest: str) -> ApprovalBinding | None:
        """The binding of this exact call; None when there is none.

        A corrupt, unsigned or re-signed file (rewritten by anything but this store)
        raises :class:`VshApprovalError`.
        """
        path = self.path_for(tool_call_id, digest)
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
        expected = hmac.new(self.key, binding.signed_payload(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, binding.mac):
            raise VshApprovalError(
                f"{path}: approval binding was modified outside vsh-ai (signature mismatch); "
                "nothing is committed for it"
            )
        if binding.tool_call_id != tool_call_id or binding.args_digest != digest:
            raise VshApprovalError(f"{path}: binding belongs to another tool call")
        return binding

    def all(self) -> Iterator[ApprovalBinding]:
        """Every readable, correctly signed binding (others are skipped)."""
        for path in sorted(self.directory.glob("*.json")):
            try:
                binding = ApprovalBinding.model_validate_json(path.read_text())
            except (OSError, ValidationError):
                continue
            expected = hmac.new(self.key, binding.signed_payload(), hashlib.sha256).hexdigest()
            if hmac.compare_digest(expected, binding.mac):
                yield binding
