"""Durable binding from a deferred tool call to the exact VSH transaction it produced.

Bindings live in ``state_directory`` (by default ``<workspace>/.vsh-runtime/vsh-ai/approvals``,
which VSH keeps out of guest reach), one JSON file per (conversation, tool call id, arguments
digest), written atomically and signed with an HMAC whose key lives outside any workspace
(a :class:`~vsh_ai.toolset._signing.SignedRecords` folder: see
:func:`~vsh_ai.toolset._signing.load_signing_key`). A resumed call (possibly in a new
process) trusts only a binding whose signature verifies, never a transaction id sent back
by the client.

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

import contextlib
import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ToolCallPart,
)

from ._driver import now_ms
from ._files import describe
from ._harvest import HarvestCapture
from ._principal import InvalidPrincipal, check_principal
from ._result import ChangedPath, VshResult
from ._signing import SignedRecords, VshApprovalError

__all__ = (
    "APPROVER_DIFF_BYTES",
    "ApprovalBinding",
    "ApprovalStore",
    "ApproverDetail",
    "DecisionRefused",
    "EndState",
    "InboxDecision",
    "args_digest",
    "binding_digest",
    "conversation_digest",
    "response_digest",
    "shown_digest",
)

EndState = Literal["pending", "committed", "denied", "expired", "stale", "rejected", "failed"]
InboxDecision = Literal["approve", "deny"]

APPROVER_DIFF_BYTES = 4 * 1024 * 1024
"""How much of the diff a binding keeps for the approver's page (the worker's and the
request metadata's diff stay bounded by :class:`~vsh_ai.toolset.OutputLimits`)."""


class ApproverDetail(BaseModel):
    """What the approver's page shows beyond the request metadata: the intent (untrusted
    text, secrets redacted) and the whole diff (rendered by the one renderer, secrets
    redacted, cut at :data:`APPROVER_DIFF_BYTES`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: str = ""
    diff: str = ""


class DecisionRefused(VshApprovalError):
    """A person's decision that was not recorded: the binding changed since it was shown,
    ended, or was already decided (the message says which)."""


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

    A durable engine's run context may not carry the messages (Temporal's activities
    serialise only some fields and raise on the rest): then "" too, and the binding is
    keyed by the call id and arguments, as before conversations were.
    """
    if ctx.tool_call_id is None:
        return ""
    try:
        messages = ctx.messages
    except UserError:  # e.g. TemporalRunContext inside an activity
        return ""
    return conversation_digest(messages, ctx.tool_call_id)


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
    "review",
    "decision",
    "decision_principal",
    "decision_reason",
    "decision_unix_ms",
)


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
    review: ApproverDetail | None = None
    """The intent and whole diff for the approver's page (``vsh-ai inbox``)."""
    decision: InboxDecision | None = None
    """A person's decision recorded by :meth:`ApprovalStore.decide` (the inbox); the
    application turns it into its resume with ``VshToolset.decisions``."""
    decision_principal: str = ""
    decision_reason: str = ""
    decision_unix_ms: int = 0
    mac: str = ""

    def signed_payload(self) -> bytes:
        defaults = {
            name
            for name in _OPTIONAL_SIGNED
            if getattr(self, name) == ApprovalBinding.model_fields[name].default
        }
        return self.model_dump_json(exclude={"mac", *defaults}).encode()


def binding_digest(binding: ApprovalBinding) -> str:
    """Which binding a decision is for (workspace, call id, arguments, conversation and
    transaction): stable across writes, unlike :func:`shown_digest`. A resume whose
    approval names another binding is refused (``DeferredFlow.resume``)."""
    named = "\0".join(
        (
            binding.workspace_id,
            binding.tool_call_id,
            binding.args_digest,
            binding.conversation,
            binding.transaction,
        )
    )
    return hashlib.sha256(named.encode()).hexdigest()[:32]


def shown_digest(binding: ApprovalBinding) -> str:
    """A digest of the binding exactly as a page showed it: every write changes it, so a
    decision sent with an old digest is refused (:meth:`ApprovalStore.decide`)."""
    return hashlib.sha256(f"{binding.mac}:{binding.sequence}".encode()).hexdigest()[:32]


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
        review: ApproverDetail | None = None,
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
                review=review,
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

    def decide(
        self,
        binding: ApprovalBinding,
        decision: InboxDecision,
        principal: str,
        reason: str = "",
        *,
        transaction: str,
        digest: str,
    ) -> ApprovalBinding:
        """Record a person's decision on ``binding`` as it was shown to them.

        ``transaction`` and ``digest`` (:func:`shown_digest`) are what the page showed:
        when the binding now holds anything else (another write, another transaction), or
        has ended or been decided, nothing is recorded and :class:`DecisionRefused` says
        why. An approval is recorded for the application's resume (which commits exactly
        this transaction); a denial also ends the binding as ``denied`` at once, so no
        resume can commit it.
        """
        try:
            check_principal(principal)
        except InvalidPrincipal as error:
            raise DecisionRefused(str(error)) from None
        with self._guard("write"), self._locked():
            current = self.load(
                binding.tool_call_id, binding.args_digest, conversation=binding.conversation
            )
            if current is None:
                raise DecisionRefused("the approval request no longer exists; nothing recorded")
            if current.transaction != transaction or shown_digest(current) != digest:
                raise DecisionRefused(
                    "the approval request changed since this page was shown; nothing was "
                    "recorded: reload the page and decide on what it shows now"
                )
            if current.end_state != "pending":
                raise DecisionRefused(
                    f"the approval request has already ended ({current.end_state}); nothing "
                    "was recorded"
                )
            if current.decision is not None:
                raise DecisionRefused(
                    f"the approval request was already decided ({current.decision}) by "
                    f"{current.decision_principal}; nothing was recorded"
                )
            update: dict[str, Any] = {
                "decision": decision,
                "decision_principal": principal,
                "decision_reason": reason[:2000],
                "decision_unix_ms": now_ms(),
                "sequence": current.sequence + 1,
            }
            if decision == "deny":
                update |= {
                    "end_state": "denied",
                    "end_principal": principal,
                    "end_message": reason[:2000],
                    "end_unix_ms": update["decision_unix_ms"],
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

    def audit(
        self, paths: Sequence[Path] | None = None
    ) -> Iterator[tuple[Path, ApprovalBinding | None, str]]:
        """Every binding file (or those at ``paths``, in this folder): ``(path, binding,
        "")`` when it verifies, else ``(path, None, reason)`` (unreadable, corrupt,
        modified outside vsh-ai, or of another workspace)."""
        if paths is None:
            with self._guard("read"):
                stems = self._stems()
        else:
            stems = [self.directory / Path(path).name for path in paths]
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
