"""The deferred-approval stage: bind a call to its pending transaction, replay it, resume it
once a person approves (from any process), record denials and expiries for good."""

from __future__ import annotations

import contextlib
import time
from functools import partial
from typing import Any

import anyio
import vsh
from pydantic_ai import ApprovalRequired, RunContext
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.toolsets import ToolsetTool

from ._bindings import (
    APPROVER_DIFF_BYTES,
    ApprovalBinding,
    ApprovalStore,
    ApproverDetail,
    EndState,
    args_digest,
    binding_digest,
    conversation_digest,
    response_digest,
)
from ._driver import is_recovery, now_ms
from ._harvest import harvest_capture
from ._journal import CURRENT_CALL, AlreadyDone, CurrentCall, JournalUnavailable
from ._principal import InvalidPrincipal, check_principal, parse_denial
from ._render import Outcome, render_diff, span_attributes
from ._result import MAX_CHANGES, ChangedPath, ToolState, VshResult, bound_text, redact
from ._signing import VshApprovalError
from ._spans import open_span
from ._transaction import Transactions

__all__ = ("DeferredFlow", "RecordsFailed")


class RecordsFailed(Exception):
    """A binding could not be read or written (the store said why): nothing commits."""


_ENDED: dict[str, tuple[ToolState, str | None]] = {
    "committed": ("committed", None),
    "denied": (
        "rejected",
        "A person denied this change; it will never be committed. Do not resubmit it unchanged.",
    ),
    "rejected": ("rejected", "The change was rejected; it will never be committed."),
    "expired": (
        "stale",
        "The approval request expired, so nothing was committed; submit the change again if "
        "it is still wanted.",
    ),
    "stale": ("stale", "The workspace changed before approval; nothing was committed."),
    "failed": ("failed", "The approved commit failed; nothing was committed."),
}


class DeferredFlow:
    """Pydantic AI's deferred approval, bound to exact VSH transactions."""

    def __init__(self, transactions: Transactions, store: ApprovalStore) -> None:
        self.tx = transactions
        self.store = store
        self.driver = transactions.driver
        self.ttl = transactions.config.approval_ttl

    async def defer(
        self, result: VshResult, call: CurrentCall | None, program: tuple[str, str, str]
    ) -> None:
        """Bind the tool call to the pending transaction durably, then ask for approval.

        Outside an agent run (a direct method call, no tool call id) the pending result
        is simply returned, as in feedback mode. A call is bound once: ``save`` keeps an
        existing binding of the same call (id and arguments).
        """
        if call is None or call.ctx.tool_call_id is None:
            return
        view = result.approver_view()
        transaction = view.get("transaction")
        if not isinstance(transaction, str):
            return
        evidence = self.tx.hook.pending(transaction) if self.tx.hook is not None else None
        code, intent, language = program
        harvest = harvest_capture(
            tool=call.name,
            program=code,
            intent=intent,
            language="bash" if language == "bash" else "monty",
            evidence=evidence,
            verdict=result.verdict,
        )
        metadata = {**view, "requested_unix_ms": now_ms()}
        binding = await self._save(
            tool_call_id=call.ctx.tool_call_id,
            tool_name=call.name,
            digest=args_digest(call.name, call.args),
            transaction=transaction,
            changes=tuple(ChangedPath(path=c["path"], kind=c["kind"]) for c in view["changes"])[
                :MAX_CHANGES
            ],
            changes_omitted=view["changes_omitted"],
            risk_flags=tuple(view["risk_flags"]),
            metadata=metadata,
            harvest=harvest,
            on_commit=self.tx.committed_views.pop(transaction, None),
            call_key=call.key or "",
            conversation=response_digest(call.ctx),
            review=ApproverDetail(  # the inbox's page: the whole diff, the intent as data
                intent=bound_text(redact(intent), 16_384),
                diff=render_diff(evidence, APPROVER_DIFF_BYTES) if evidence is not None else "",
            ),
        )
        raise ApprovalRequired(metadata=binding.metadata)

    async def _save(self, **fields: Any) -> ApprovalBinding:
        """``store.save`` off the event loop (it may wait for another process's lock)."""
        try:
            return await anyio.to_thread.run_sync(partial(self.store.save, **fields))
        except VshApprovalError as error:
            raise RecordsFailed(str(error)) from None

    async def _finish(self, *args: Any, **fields: Any) -> ApprovalBinding:
        """``store.finish`` off the event loop; an end state already recorded wins."""
        try:
            return await anyio.to_thread.run_sync(partial(self.store.finish, *args, **fields))
        except VshApprovalError as error:
            raise RecordsFailed(str(error)) from None

    async def replay(self, binding: ApprovalBinding) -> VshResult:
        """The same call (id and arguments) again, e.g. a durable engine re-running a turn:
        never run or bind it again; report the bound transaction's state."""
        binding = await self.settle(binding)
        if binding.end_state == "pending":
            raise ApprovalRequired(metadata=binding.metadata)
        return self.ended(binding)

    async def settle(self, binding: ApprovalBinding) -> ApprovalBinding:
        """Bring a pending binding's recorded end state in line with VSH and the TTL."""
        if binding.end_state != "pending":
            return binding
        state = await self.driver.state(binding.transaction)
        if state == "failed":
            return await self._finish(
                binding,
                "failed",
                "The approved commit did not complete (VSH rolled it back, e.g. because the "
                "process stopped during the commit); nothing was committed. Submit the change "
                "again if it is still wanted.",
            )
        if state in ("committed", "rejected", "stale", "expired", "denied"):
            end: EndState = state  # type: ignore[assignment]
            return await self._finish(binding, end)
        if now_ms() - binding.created_unix_ms > self.ttl * 1000:
            await self.release(binding.transaction, "approval request expired")
            return await self._finish(
                binding,
                "expired",
                f"The approval request expired (older than approval_ttl={self.ttl:g}s).",
            )
        return binding

    def ended(self, binding: ApprovalBinding) -> VshResult:
        state, note = _ENDED.get(binding.end_state, ("failed", "Unknown approval state."))
        return self.tx.render(
            Outcome(
                state,
                changes=binding.changes,
                changes_omitted=binding.changes_omitted,
                transaction=binding.transaction,
                feedback=binding.end_note or note,
            )
        )

    async def release(self, transaction: str, reason: str) -> None:
        """Move a pending transaction to VSH's terminal ``rejected`` where VSH allows."""
        with contextlib.suppress(vsh.VshRuntimeError):
            await self.driver.release(transaction, reason)

    async def record_denials(
        self, ctx: RunContext[Any], tools: dict[str, ToolsetTool[Any]]
    ) -> None:
        """Record ToolDenied answers durably: a denied call is never committed later."""
        calls: dict[str, ToolCallPart] = {}
        denied: dict[str, ToolReturnPart] = {}
        for message in ctx.messages:
            if isinstance(message, ModelResponse):
                for part in message.parts:
                    if isinstance(part, ToolCallPart):
                        calls[part.tool_call_id] = part
            elif isinstance(message, ModelRequest):
                for request_part in message.parts:
                    if (
                        isinstance(request_part, ToolReturnPart)
                        and request_part.outcome == "denied"
                    ):
                        denied[request_part.tool_call_id] = request_part
        for call_id, denied_part in denied.items():
            call_part = calls.get(call_id)
            tool = tools.get(call_part.tool_name) if call_part is not None else None
            if call_part is None or tool is None:
                continue
            try:
                validated = tool.args_validator.validate_python(call_part.args_as_dict())
                binding = self.store.load(
                    call_id,
                    args_digest(call_part.tool_name, validated),
                    conversation=conversation_digest(ctx.messages, call_id),
                )
            except (VshApprovalError, ValueError):
                continue
            if binding is None or binding.end_state != "pending":
                continue
            principal, note = _denial_of(denied_part)
            # VSH first: a rejected transaction can never commit, even if the binding
            # cannot be written now (a later look at it finds VSH's "rejected").
            await self.release(binding.transaction, "denied by the approver")
            with contextlib.suppress(RecordsFailed):
                await self._finish(binding, "denied", principal=principal, message=note)

    async def resume(self, binding: ApprovalBinding, name: str, ctx: RunContext[Any]) -> VshResult:
        call_id = binding.tool_call_id
        metadata = ctx.tool_call_metadata
        principal = metadata.get("principal") if isinstance(metadata, dict) else None
        if principal is None:
            raise VshApprovalError(
                f"approving tool call {call_id!r} needs a principal: pass "
                f"DeferredToolResults(metadata={{{call_id!r}: {{'principal': 'name'}}}})"
            )
        try:
            principal = check_principal(principal, where=f"the principal approving {call_id!r}")
        except InvalidPrincipal as error:
            raise VshApprovalError(str(error)) from None
        with open_span("vsh-ai approve", tool=name) as span:
            other = _names_another(binding, metadata)
            if other is not None:
                result = self.tx.stale(
                    f"This approval was given for {other}, not for the change this call holds "
                    f"now (transaction {binding.transaction}), so nothing was committed. Read "
                    "the files again and submit the change again if it is still wanted.",
                    changes=binding.changes,
                    changes_omitted=binding.changes_omitted,
                    transaction=binding.transaction,
                )
                span.set_attributes(span_attributes(result))
                return result
            binding = await self.settle(binding)
            if binding.end_state != "pending":
                result = self.ended(binding)
            else:
                result = await self.approve_and_commit(binding, principal)
            span.set_attributes(span_attributes(result))
        return result

    def committed_view(self, binding: ApprovalBinding) -> VshResult:
        """What an approved, committed resume of ``binding`` returns (replays included)."""
        if binding.on_commit is not None and binding.on_commit.state == "committed":
            return binding.on_commit
        return self.tx.render(
            Outcome(
                "committed",
                changes=binding.changes,
                changes_omitted=binding.changes_omitted,
                transaction=binding.transaction,
            )
        )

    async def approve_and_commit(self, binding: ApprovalBinding, principal: str) -> VshResult:
        transaction = binding.transaction
        if self.tx.quarantine.active:
            return self.tx.quarantined()
        expected = self.committed_view(binding)
        prepare = partial(self.tx.records.prepare, CURRENT_CALL.get(), transaction, expected)
        try:
            expected = await anyio.to_thread.run_sync(prepare)
        except JournalUnavailable as error:  # the approval stays pending: nothing is lost
            return self.tx.failed(f"{error}; nothing was committed.", retry=False)
        except AlreadyDone as done:  # another process finished this resume
            return done.entry.result or self.tx.failed("no recorded result", retry=False)
        try:
            final = await self.driver.approve_and_commit(
                transaction, principal, int(self.ttl * 1000)
            )
        except vsh.VshStaleError as error:
            note = (
                "The files this change depends on changed before it could commit, so nothing "
                "was committed. VSH revalidates every path the transaction depends on, "
                "including the folder that holds a new file: another change committed in the "
                "same folder (e.g. approving many new files in one folder at once) makes this "
                "one stale. Approve such changes one at a time, or have the agent make them in "
                "one program."
            )
            ended = await self._finish(binding, "stale", note, principal)
            return self._with_detail(self.ended(ended), str(error))
        except vsh.VshRecoveryError as error:
            self.tx.quarantine.enter(error)
            return self.tx.quarantined()
        except vsh.VshStateError as error:
            if "policy changed" in str(error):
                note = (
                    "This approval was requested under a different VSH policy profile than the "
                    "one this toolset runs with; nothing was committed. Submit the change again."
                )
                await self.release(transaction, "policy changed")
                return self.ended(await self._finish(binding, "stale", note))
            state = await self.final_state(transaction)
            if state == "committed":  # another resume (thread or process) committed it
                return self.ended(await self._finish(binding, "committed", "", principal))
            return self.tx.stale(
                "Another approval of this call is being applied; nothing more was committed by "
                "this one. Check the result of the other approval.",
                detail=f"VSH state {state}",
            )
        except vsh.VshRuntimeError as error:
            if is_recovery(error):
                self.tx.quarantine.enter(error)
                return self.tx.quarantined()
            failed = self.tx.outside_failure(error)
            await self._finish(binding, "failed", failed.feedback or "")
            return failed
        if final.state != "committed":
            return self.tx.failed(f"approved commit ended in state {final.state!r}", retry=False)
        await self._finish(binding, "committed", "", principal)
        return expected

    def _with_detail(self, result: VshResult, detail: str) -> VshResult:
        view = result.approver_view()
        view["detail"] = bound_text(detail, self.tx.limits.error)
        result._approver = view
        return result

    async def final_state(self, transaction: str, wait: float = 5.0) -> str:
        """VSH's state of ``transaction`` once no other process is mid-commit (bounded wait)."""
        deadline = time.monotonic() + wait
        state = await self.driver.state(transaction)
        while (
            state in ("approved", "pending_approval", "revalidating")
            and time.monotonic() < deadline
        ):
            await anyio.sleep(0.05)
            state = await self.driver.state(transaction)
        return state


def _names_another(binding: ApprovalBinding, metadata: object) -> str | None:
    """What an approval's metadata names when that is not ``binding`` (its
    ``transaction`` or, from ``VshToolset.decisions``, its ``binding`` digest), else None.

    Approval binds to the transaction the person saw: a call id reused by a later run
    (other content, another transaction) must not inherit an earlier approval. Metadata
    naming neither (a hand-written ``{'principal': ...}``) approves the call as bound.
    """
    if not isinstance(metadata, dict):
        return None
    transaction = metadata.get("transaction")
    if transaction is not None and transaction != binding.transaction:
        return f"transaction {str(transaction)[:80]!r}"
    digest = metadata.get("binding")
    if digest is not None and digest != binding_digest(binding):
        return f"another binding of call {binding.tool_call_id!r} ({str(digest)[:40]!r})"
    return None


def _denial_of(part: ToolReturnPart) -> tuple[str, str]:
    """Who denied and their note, when the app used :func:`~vsh_ai.toolset.denial`; else
    no principal and the message as the note (bounded)."""
    content = part.content if isinstance(part.content, str) else ""
    parsed = parse_denial(content)
    if parsed is not None:
        return parsed
    return "", content[:2000]
