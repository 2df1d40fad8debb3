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

import base64
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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ._driver import now_ms
from ._result import ChangedPath, VshResult

if TYPE_CHECKING:
    from .._evidence import Evidence
    from .._verdict import Verdict

__all__ = (
    "ApprovalBinding",
    "ApprovalStore",
    "EndState",
    "HarvestCapture",
    "SignedRecords",
    "VshApprovalError",
    "approval_key_path",
    "args_digest",
    "harvest_capture",
    "load_signing_key",
    "write_atomically",
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


def load_signing_key() -> bytes:
    """The HMAC key that signs bindings and journal records (created on first use)."""
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


def write_atomically(target: Path, text: str, *, durable: bool) -> None:
    """Replace ``target`` with ``text`` all at once (a reader sees the old or the new file).

    ``durable`` fsyncs the file and its folder, so the record survives a power cut, not
    only a crash of this process.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".record-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


class HarvestCapture(BaseModel):
    """What ``vsh-ai harvest`` needs to turn a resolved approval into a suite case.

    ``files`` maps each path the transaction read or changed to its base64 before-bytes
    (bounded, secret-free); when the record cannot be harvested, ``skip_reason`` says why
    and no bytes are kept.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    language: Literal["monty", "bash"] = "monty"
    program: str = ""
    intent: str = ""
    files: dict[str, str] = {}
    modes: dict[str, int] = {}
    skip_reason: str = ""


# Fields added after version 2 records existed: left out of the signed payload while at
# their default, so records written before them still verify.
_OPTIONAL_SIGNED = (
    "harvest",
    "end_principal",
    "end_message",
    "end_unix_ms",
    "on_commit",
    "call_key",
)


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
    harvest: HarvestCapture | None = None
    end_principal: str = ""
    end_message: str = ""
    end_unix_ms: int = 0
    on_commit: VshResult | None = None
    """What the agent sees when this transaction commits (recorded at defer time, so a
    resume and its replay after a crash return the same result)."""
    call_key: str = ""
    """The journal key of the call that asked (its run, step and id): a replay of that
    very call asks again, as it did the first time, whatever happened since."""
    mac: str = ""

    def signed_payload(self) -> bytes:
        defaults = {
            name
            for name in _OPTIONAL_SIGNED
            if getattr(self, name) == ApprovalBinding.model_fields[name].default
        }
        return self.model_dump_json(exclude={"mac", *defaults}).encode()


class SignedRecords:
    """A folder of JSON records signed with the key from :func:`load_signing_key`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_signing_key()
        return self._key

    def mac(self, payload: bytes) -> str:
        return hmac.new(self.key, payload, hashlib.sha256).hexdigest()


class ApprovalStore(SignedRecords):
    """Signed, atomic JSON files under ``directory``; safe to share between processes."""

    def _sign(self, binding: ApprovalBinding) -> ApprovalBinding:
        return binding.model_copy(update={"mac": self.mac(binding.signed_payload())})

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
        write_atomically(target, binding.model_dump_json(), durable=True)
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
        harvest: HarvestCapture | None = None,
        on_commit: VshResult | None = None,
        call_key: str = "",
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
                harvest=harvest,
                on_commit=on_commit,
                call_key=call_key,
            )
            return self._write(binding)

    def finish(
        self,
        binding: ApprovalBinding,
        state: EndState,
        note: str = "",
        principal: str = "",
        *,
        message: str = "",
    ) -> ApprovalBinding:
        """Record the end state (and who approved, or the approver's denial message, when
        known) durably; an end state already recorded wins."""
        with self._locked():
            current = self.load(binding.tool_call_id, binding.args_digest) or binding
            if current.end_state != "pending":
                return current
            update: dict[str, Any] = {
                "end_state": state,
                "end_note": note,
                "end_principal": principal,
                "end_message": message,
                "end_unix_ms": now_ms(),
            }
            return self._write(current.model_copy(update=update))

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
        expected = self.mac(binding.signed_payload())
        if not hmac.compare_digest(expected, binding.mac):
            raise VshApprovalError(
                f"{path}: approval binding was modified outside vsh-ai (signature mismatch); "
                "nothing is committed for it"
            )
        if binding.tool_call_id != tool_call_id or binding.args_digest != digest:
            raise VshApprovalError(f"{path}: binding belongs to another tool call")
        return binding

    def audit(self) -> Iterator[tuple[Path, ApprovalBinding | None, str]]:
        """Every binding file: ``(path, binding, "")`` when it verifies, else
        ``(path, None, reason)`` (unreadable, corrupt or modified outside vsh-ai)."""
        for path in sorted(self.directory.glob("*.json")):
            try:
                binding = ApprovalBinding.model_validate_json(path.read_text())
            except OSError as error:
                yield path, None, f"unreadable ({error.strerror})"
                continue
            except ValidationError:
                yield path, None, "corrupt record"
                continue
            expected = self.mac(binding.signed_payload())
            if hmac.compare_digest(expected, binding.mac):
                yield path, binding, ""
            else:
                yield path, None, "signature mismatch (modified outside vsh-ai)"

    def all(self) -> Iterator[ApprovalBinding]:
        """Every readable, correctly signed binding (others are skipped)."""
        for path in sorted(self.directory.glob("*.json")):
            try:
                binding = ApprovalBinding.model_validate_json(path.read_text())
            except (OSError, ValidationError):
                continue
            expected = self.mac(binding.signed_payload())
            if hmac.compare_digest(expected, binding.mac):
                yield binding


HARVEST_FILE_BYTES = 64 * 1024
HARVEST_TOTAL_BYTES = 256 * 1024


def harvest_capture(
    *,
    tool: str,
    program: str,
    intent: str,
    language: Literal["monty", "bash"],
    evidence: Evidence | None,
    verdict: Verdict | None = None,
) -> HarvestCapture:
    """The before-state and program of a deferred call, or why it cannot become a case.

    Fails closed: missing or incomplete evidence, denied (protected) accesses, paths a
    judge named, files over the bounds and anything holding a detected secret all give a
    capture with ``skip_reason`` and no bytes.
    """
    from ..analysis._secrets import find_secrets, redact_text
    from ._result import _named

    def skipped(reason: str) -> HarvestCapture:
        return HarvestCapture(tool=tool, language=language, skip_reason=reason)

    if evidence is None:
        return skipped("no evidence was captured for this transaction")
    if evidence.counters.denied_accesses:
        return skipped("the program touched protected paths (VSH denied an access)")
    if find_secrets(program):
        return skipped("the program holds a detected secret")
    intent = redact_text(intent)[0]  # untrusted text: keep what it says, not a secret in it
    changed = {c.path: c for c in evidence.changes}
    paths = list(dict.fromkeys([*evidence.read_paths, *changed]))
    if _named(verdict, paths):
        return skipped("the judge named a path this program touched (possibly protected)")
    observed: dict[str, str | None] = {}
    for effect in evidence.effects:
        if effect.operation == "content_read":
            for path in effect.paths:
                observed.setdefault(path, effect.observed_content)
    files: dict[str, str] = {}
    modes: dict[str, int] = {}
    total = 0
    for path in paths:
        change = changed.get(path)
        if change is not None:
            node = change.before
            if node is None or node.kind in ("directory", "dir"):
                continue  # created by the program, or a folder its files recreate
            if node.kind != "file":
                return skipped(f"{path}: before-state is a {node.kind}, not a regular file")
            data = evidence.blob_bytes(node.blob)
            modes[path] = node.mode & 0o777
        else:
            data = evidence.blob_bytes(observed.get(path))
        if data is None:
            return skipped(f"{path}: before bytes were not captured")
        if len(data) > HARVEST_FILE_BYTES:
            return skipped(f"too large to harvest: {path} has {len(data)} bytes")
        total += len(data)
        if total > HARVEST_TOTAL_BYTES:
            return skipped(f"too large to harvest: before-state over {HARVEST_TOTAL_BYTES} bytes")
        if find_secrets(data.decode("utf-8", errors="replace")):
            return skipped(f"{path}: before-state holds a detected secret")
        files[path] = base64.b64encode(data).decode()
    return HarvestCapture(
        tool=tool, language=language, program=program, intent=intent, files=files, modes=modes
    )
