"""Durable binding from a deferred tool call to the exact VSH transaction it produced.

Bindings live in ``state_directory`` (by default ``<workspace>/.vsh-runtime/vsh-ai/approvals``,
which VSH keeps out of guest reach), one JSON file per (conversation, tool call id, arguments
digest), written atomically and signed with an HMAC whose key lives outside any workspace
(see :func:`approval_key_path` and :func:`load_signing_key`). A resumed call (possibly in a
new process) trusts only a binding whose signature verifies, never a transaction id sent
back by the client.

A binding belongs somewhere: it names its workspace (the id from
:func:`~vsh_ai.toolset._workspace.workspace_identity`) and its conversation (the digest of the
model response that made the call, :func:`response_digest`), so a copied state directory
or a new conversation that reuses a call id (models say ``call_0`` every time) never
inherits another's denial or transaction.

A binding records its end state (``committed``, ``denied``, ``expired``, ``stale``,
``rejected``): once final it never changes, so a later approval of a denied or expired
call commits nothing, whatever TTL the resuming toolset has. Every record carries a
sequence number and is written twice (``<name>.json`` and its mirror ``<name>.hw``): the
newest valid copy wins, so copying an older (pending) version over a record does not
bring it back.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ToolCallPart,
)

from ._driver import now_ms
from ._files import (
    create_exclusively,
    describe,
    file_kind,
    locked,
    read_state_file,
    write_atomically,
)
from ._principal import InvalidPrincipal, check_principal
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
    "conversation_digest",
    "harvest_capture",
    "load_signing_key",
    "response_digest",
    "write_atomically",
)

EndState = Literal["pending", "committed", "denied", "expired", "stale", "rejected", "failed"]
_KEY_ENV = "VSH_AI_APPROVAL_KEY_FILE"
_KEY_BYTES = 32
_MIN_KEY_BYTES = 16


class VshApprovalError(RuntimeError):
    """An approval could not be applied (no binding, changed arguments, missing principal,
    an unusable signing key or binding file)."""


def args_digest(tool_name: str, tool_args: dict[str, Any]) -> str:
    """A stable digest of a tool call's name and validated arguments."""
    canonical = json.dumps({"tool": tool_name, "args": tool_args}, sort_keys=True, default=repr)
    return hashlib.sha256(canonical.encode()).hexdigest()


def response_digest(ctx: RunContext[Any]) -> str:
    """A digest of the model response that made the current tool call ("" outside a call).

    Taken over the response's timestamp, model name, provider response id and parts (as
    Pydantic AI serialises them): a resume of the same run carries the identical message
    (also after a JSON round trip of the history, or a durable engine's replay), while a
    new conversation that reuses the call id has another response. See
    :func:`conversation_digest`.
    """
    if ctx.tool_call_id is None:
        return ""
    return conversation_digest(ctx.messages, ctx.tool_call_id)


def conversation_digest(messages: Sequence[ModelMessage], tool_call_id: str) -> str:
    """:func:`response_digest` for a history and a call id (e.g. a denied call found in
    ``ctx.messages`` outside any tool call): the digest of the last
    :class:`~pydantic_ai.messages.ModelResponse` holding a ``ToolCallPart`` with that id,
    "" when there is none."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse) and any(
            isinstance(part, ToolCallPart) and part.tool_call_id == tool_call_id
            for part in message.parts
        ):
            [dumped] = ModelMessagesTypeAdapter.dump_python([message], mode="json")
            picked = {
                name: dumped.get(name)
                for name in ("timestamp", "model_name", "provider_response_id", "parts")
            }
            canonical = json.dumps(picked, sort_keys=True, separators=(",", ":"), default=repr)
            return hashlib.sha256(canonical.encode()).hexdigest()
    return ""


# -- the signing key ------------------------------------------------------------------------


def approval_key_path() -> Path:
    """Where the binding signing key lives: ``$VSH_AI_APPROVAL_KEY_FILE``, else
    ``$XDG_STATE_HOME/vsh-ai/approval.key`` (``~/.local/state`` by default)."""
    explicit = os.environ.get(_KEY_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "vsh-ai" / "approval.key"


_ELSEWHERE = (
    f"or set {_KEY_ENV} to a key file path outside every workspace, in a folder only you can write"
)


def load_signing_key(*, workspace: Path | None = None) -> bytes:
    """The HMAC key that signs bindings, journal records and workspace identities (created
    on first use at :func:`approval_key_path`, 32 random bytes, mode 0600).

    Refused with :class:`VshApprovalError`, each saying how to fix it: a key inside
    ``workspace``; a key that is empty or shorter than 16 bytes, a symlink, not a regular
    file, not owned by the current user, or accessible by group or others; a folder
    owned by another user (root excepted) or writable by others (sticky folders
    excepted); a key location that cannot be created (read-only home, a file where the
    folder should be) or read.
    """
    path = approval_key_path()
    if workspace is not None:
        _refuse_inside(path, workspace)
    for _ in range(3):
        key = _read_key(path)
        if key is not None:
            return key
        _create_key(path)
    raise VshApprovalError(
        f"the approval signing key at {path} disappears as soon as it is created (another "
        f"process deletes it?); stop that process, {_ELSEWHERE}"
    )


def _refuse_inside(path: Path, workspace: Path) -> None:
    try:
        where = path.parent.resolve() / path.name
        root = workspace.resolve()
    except (OSError, RuntimeError) as error:
        raise VshApprovalError(
            f"cannot resolve the approval signing key path {path} ({error})"
        ) from None
    if where.is_relative_to(root):
        raise VshApprovalError(
            f"the approval signing key {path} is inside the workspace {root}, where it can be "
            "copied, committed or changed with the workspace; "
            f"set {_KEY_ENV} to a path outside the workspace"
        )


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if os.path.islink(path):
            raise VshApprovalError(
                f"the approval signing key {path} is a symbolic link: vsh-ai reads only the "
                f"key file itself (a link can be redirected); replace the link with the file "
                f"it points to, {_ELSEWHERE}"
            ) from None
        raise VshApprovalError(
            f"cannot read the approval signing key {path} ({describe(error, path)}); fix its "
            f"permissions, {_ELSEWHERE}"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise VshApprovalError(
                f"the approval signing key {path} is {file_kind(info.st_mode)}, not a regular "
                "file; remove it to have a new key generated"
            )
        me = os.geteuid()
        if info.st_uid != me:
            raise VshApprovalError(
                f"the approval signing key {path} is owned by uid {info.st_uid}, not by the "
                f"user running vsh-ai (uid {me}): whoever owns it can sign approvals. If the "
                f"key is yours, run chown {me} {path}; otherwise delete it to have a new key "
                "generated"
            )
        if info.st_mode & 0o077:
            raise VshApprovalError(
                f"the approval signing key {path} can be read or written by other users (mode "
                f"{stat.S_IMODE(info.st_mode):04o}), who could then sign approvals; run "
                f"chmod 600 {path}"
            )
        _check_key_folder(path)
        key = os.read(fd, 4096)
    except OSError as error:
        raise VshApprovalError(
            f"cannot read the approval signing key {path} ({describe(error, path)}); {_ELSEWHERE}"
        ) from None
    finally:
        os.close(fd)
    if len(key) < _MIN_KEY_BYTES:
        held = "is empty" if not key else f"holds only {len(key)} bytes"
        raise VshApprovalError(
            f"the approval signing key {path} {held} (at least {_MIN_KEY_BYTES} are needed: an "
            "HMAC with a short key proves nothing); delete it to have a new key generated "
            "(records signed with it are then refused)"
        )
    return key


def _check_key_folder(path: Path) -> None:
    folder = path.parent
    info = os.stat(folder)
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        raise VshApprovalError(
            f"the folder {folder} of the approval signing key is owned by uid {info.st_uid}, "
            f"not by you (uid {me}): its owner can replace the key. Move the key to a folder "
            f"you own: {_ELSEWHERE}"
        )
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise VshApprovalError(
            f"the folder {folder} of the approval signing key can be written by other users "
            f"(mode {stat.S_IMODE(info.st_mode):04o}), who could replace the key; run "
            f"chmod go-w {folder}"
        )


def _create_key(path: Path) -> None:
    try:
        create_exclusively(path, secrets.token_bytes(_KEY_BYTES))
    except OSError as error:
        raise VshApprovalError(
            f"cannot create the approval signing key at {path} ({describe(error, path)}): the "
            "location is not writable (a read-only home folder, or a file where a folder "
            f"should be); make it writable, {_ELSEWHERE}"
        ) from None


# -- signed records -------------------------------------------------------------------------


class _Signed(Protocol):
    @property
    def sequence(self) -> int: ...

    @property
    def mac(self) -> str: ...

    def signed_payload(self) -> bytes: ...


_R = TypeVar("_R", bound=_Signed)


class SignedRecords:
    """A folder of JSON records signed with the key from :func:`load_signing_key`.

    ``workspace_id`` (from :func:`~vsh_ai.toolset._workspace.workspace_identity`) is
    written into, and required of, every record (``""``: records name no workspace).
    ``workspace`` is only checked against: the signing key may not live inside it.
    Each record is written to ``<name>.json`` and to its mirror ``<name>.hw``; a read
    takes the valid copy with the higher ``sequence``.
    """

    lock_timeout_s: float = 10.0
    """How long to wait for another process's lock on the folder before giving up."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        workspace_id: str = "",
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.workspace_id = workspace_id
        self.workspace = Path(workspace) if workspace is not None else None
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_signing_key(workspace=self.workspace)
        return self._key

    def mac(self, payload: bytes) -> str:
        return hmac.new(self.key, payload, hashlib.sha256).hexdigest()

    @staticmethod
    def mirror(path: Path) -> Path:
        """The second copy of the record at ``path``."""
        return path.with_suffix(".hw")

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self.directory / ".lock", timeout=self.lock_timeout_s)

    def _write_record(self, path: Path, text: str, *, durable: bool) -> None:
        """Both copies, the main one first (a crash in between leaves it the newer one)."""
        write_atomically(path, text, durable=durable)
        write_atomically(self.mirror(path), text, durable=False)

    def _read_record(
        self, path: Path, parse: Callable[[bytes], _R], *, what: str, fix: str
    ) -> _R | None:
        """The newest valid copy of the record at ``path`` (None when neither exists).

        A copy that is corrupt or signed with another key raises :class:`VshApprovalError`;
        two different copies claiming one sequence number too. An empty copy counts as
        missing when the other one is valid. ``OSError`` (including
        :class:`~vsh_ai.toolset._files.StateFileError`) propagates.
        """
        found: list[_R] = []
        empty: list[Path] = []
        for copy in (path, self.mirror(path)):
            raw = read_state_file(copy)
            if raw is None:
                continue
            if not raw.strip():
                # What a power cut can leave of a write that was not fsynced (the mirror
                # never is): no worse than a missing copy when the other one is valid.
                empty.append(copy)
                continue
            try:
                record = parse(raw)
            except ValidationError as error:
                raise VshApprovalError(
                    f"{copy}: {what} is corrupt ({error.error_count()} errors); {fix}"
                ) from None
            if not hmac.compare_digest(self.mac(record.signed_payload()), record.mac):
                raise VshApprovalError(
                    f"{copy}: {what} was modified outside vsh-ai (signature mismatch); "
                    "nothing is committed or reported for it"
                )
            found.append(record)
        if not found:
            if empty:
                raise VshApprovalError(f"{empty[0]}: {what} is empty (cut short?); {fix}")
            return None
        newest = max(found, key=lambda r: r.sequence)
        if (
            len(found) == 2
            and found[0].sequence == found[1].sequence
            and found[0].mac != found[1].mac
        ):
            raise VshApprovalError(
                f"{path}: two different {what}s claim sequence {newest.sequence} (one was "
                "replaced outside vsh-ai); nothing is committed or reported for it"
            )
        return newest

    def _stems(self) -> list[Path]:
        """The main path of every record in the folder (from either copy), sorted."""
        try:
            names = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        stems = {
            self.directory / (name[: -len(suffix)] + ".json")
            for name in names
            for suffix in (".json", ".hw")
            if name.endswith(suffix) and not name.startswith(".")
        }
        return sorted(stems)


# Fields added after version 2 records existed: left out of the signed payload while at
# their default, so records written before them still verify.
_OPTIONAL_SIGNED = (
    "harvest",
    "end_principal",
    "end_message",
    "end_unix_ms",
    "on_commit",
    "call_key",
    "workspace_id",
    "conversation",
    "sequence",
)


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


class ApprovalBinding(BaseModel):
    """(conversation, tool call id, arguments) → transaction, with what the approver was
    shown, in which workspace."""

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
    """Who approved or denied (checked with :func:`~vsh_ai.toolset._principal.check_principal`)."""
    end_message: str = ""
    end_unix_ms: int = 0
    on_commit: VshResult | None = None
    """What the agent sees when this transaction commits (recorded at defer time, so a
    resume and its replay after a crash return the same result)."""
    call_key: str = ""
    """The journal key of the call that asked (its run, step and id): a replay of that
    very call asks again, as it did the first time, whatever happened since."""
    workspace_id: str = ""
    """The workspace this binding belongs to (its state directory's identity)."""
    conversation: str = ""
    """The digest of the model response that made the call (:func:`response_digest`)."""
    sequence: int = 0
    """Raised by every write: the newer of the two copies wins."""
    mac: str = ""

    def signed_payload(self) -> bytes:
        defaults = {
            name
            for name in _OPTIONAL_SIGNED
            if getattr(self, name) == ApprovalBinding.model_fields[name].default
        }
        return self.model_dump_json(exclude={"mac", *defaults}).encode()


_BINDING_FIX = "deny this tool call and let the agent submit the change again"


class ApprovalStore(SignedRecords):
    """Signed, atomic JSON files under ``directory``; safe to share between processes.

    Every failure (an unusable signing key, an unreadable, forged, rolled-back or foreign
    binding, a FIFO or directory where a file belongs, a lock held too long, a full disk)
    raises :class:`VshApprovalError` saying what happened and what to do.
    """

    def _sign(self, binding: ApprovalBinding) -> ApprovalBinding:
        return binding.model_copy(update={"mac": self.mac(binding.signed_payload())})

    @staticmethod
    def _prefix(tool_call_id: str, conversation: str = "") -> str:
        named = json.dumps([conversation, tool_call_id]) if conversation else tool_call_id
        return hashlib.sha256(named.encode()).hexdigest()

    def path_for(self, tool_call_id: str, digest: str, *, conversation: str = "") -> Path:
        return self.directory / f"{self._prefix(tool_call_id, conversation)}.{digest[:32]}.json"

    @contextlib.contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except OSError as error:
            raise VshApprovalError(
                f"cannot {doing} the approval bindings in {self.directory} "
                f"({describe(error, self.directory)}); nothing was committed"
            ) from None

    def bound(self, tool_call_id: str, *, conversation: str = "") -> bool:
        """Whether any call with this id (in this conversation) has a binding, whatever
        its arguments."""
        prefix = self._prefix(tool_call_id, conversation)
        with self._guard("read"):
            return any(path.name.startswith(prefix + ".") for path in self._stems())

    def _write(self, binding: ApprovalBinding) -> ApprovalBinding:
        binding = self._sign(binding)
        target = self.path_for(
            binding.tool_call_id, binding.args_digest, conversation=binding.conversation
        )
        self._write_record(target, binding.model_dump_json(), durable=True)
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
        conversation: str = "",
    ) -> ApprovalBinding:
        """Bind a call once: an existing binding for the same call (conversation, id and
        arguments) is returned unchanged."""
        with self._guard("write"), self._locked():
            existing = self.load(tool_call_id, digest, conversation=conversation)
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
                workspace_id=self.workspace_id,
                conversation=conversation,
                sequence=1,
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
        """Record the end state (and who approved or denied, or the approver's denial
        message, when known) durably; an end state already recorded wins.

        ``principal`` ("" when nobody decided: stale, expired, failed) must pass
        :func:`~vsh_ai.toolset._principal.check_principal`, else :class:`VshApprovalError`.
        """
        if principal:
            try:
                check_principal(principal)
            except InvalidPrincipal as error:
                raise VshApprovalError(str(error)) from None
        with self._guard("write"), self._locked():
            current = (
                self.load(
                    binding.tool_call_id, binding.args_digest, conversation=binding.conversation
                )
                or binding
            )
            if current.end_state != "pending":
                return current
            update: dict[str, Any] = {
                "end_state": state,
                "end_note": note,
                "end_principal": principal,
                "end_message": message,
                "end_unix_ms": now_ms(),
                "sequence": current.sequence + 1,
            }
            return self._write(current.model_copy(update=update))

    def load(
        self, tool_call_id: str, digest: str, *, conversation: str = ""
    ) -> ApprovalBinding | None:
        """The binding of this exact call; None when there is none.

        A corrupt, unsigned or re-signed file (rewritten by anything but this store), a
        binding of another call or workspace, or an unreadable one raises
        :class:`VshApprovalError`. Of the two copies the newer is used.
        """
        path = self.path_for(tool_call_id, digest, conversation=conversation)
        with self._guard("read"):
            binding = self._read_record(
                path, ApprovalBinding.model_validate_json, what="approval binding", fix=_BINDING_FIX
            )
        if binding is None:
            return None
        if (
            binding.tool_call_id != tool_call_id
            or binding.args_digest != digest
            or binding.conversation != conversation
        ):
            raise VshApprovalError(f"{path}: binding belongs to another tool call")
        self._check_workspace(path, binding)
        return binding

    def _check_workspace(self, path: Path, binding: ApprovalBinding) -> None:
        if not self.workspace_id or binding.workspace_id == self.workspace_id:
            return
        named = (
            f"workspace id {binding.workspace_id}"
            if binding.workspace_id
            else "no workspace (written by an older vsh-ai)"
        )
        raise VshApprovalError(
            f"{path}: approval binding belongs to another workspace (it names {named}, this "
            f"workspace is {self.workspace_id}): the state directory was copied or shared; "
            f"nothing is committed for it; {_BINDING_FIX}"
        )

    def audit(self) -> Iterator[tuple[Path, ApprovalBinding | None, str]]:
        """Every binding file: ``(path, binding, "")`` when it verifies, else
        ``(path, None, reason)`` (unreadable, corrupt, modified outside vsh-ai, or of
        another workspace)."""
        with self._guard("read"):
            stems = self._stems()
        for path in stems:
            try:
                binding = self._read_record(
                    path, ApprovalBinding.model_validate_json, what="binding", fix=_BINDING_FIX
                )
            except OSError as error:
                yield path, None, f"unreadable ({describe(error, path)})"
                continue
            except VshApprovalError as error:
                reason = str(error)
                yield (
                    path,
                    None,
                    "corrupt record"
                    if "is corrupt" in reason
                    else "signature mismatch (modified outside vsh-ai)",
                )
                continue
            if binding is None:
                continue  # deleted meanwhile
            try:
                self._check_workspace(path, binding)
            except VshApprovalError:
                yield path, None, "belongs to another workspace"
                continue
            yield path, binding, ""

    def all(self) -> Iterator[ApprovalBinding]:
        """Every readable, correctly signed binding of this workspace (others are skipped)."""
        for _path, binding, _problem in self.audit():
            if binding is not None:
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
