"""Deferred approval for VshToolset: bind a call to its pending transaction, replay it,
resume it once approved (from any process), record denials and expiries for good.

A mixin: :class:`~vsh_ai.toolset._facade.VshToolset` supplies the runtime driver, the stores and
the result helpers declared below.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from functools import partial
from typing import Any, Literal

import anyio
import vsh
from pydantic_ai import ApprovalRequired, RunContext
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.toolsets import ToolsetTool

from .._evidence import Evidence
from ._bindings import (
    ApprovalBinding,
    ApprovalStore,
    EndState,
    VshApprovalError,
    args_digest,
    harvest_capture,
)
from ._driver import WorkspaceDriver, is_recovery, now_ms
from ._journal import CURRENT_CALL, AlreadyDone, CurrentCall, JournalUnavailable
from ._result import (
    MAX_CHANGES,
    ChangedPath,
    OutputLimits,
    ToolState,
    VshResult,
    bound_text,
    build_result,
)
from ._spans import open_span, span_attributes

__all__ = ("DeferredApprovals",)


class DeferredApprovals:
    """The deferred-approval half of :class:`~vsh_ai.toolset._facade.VshToolset`."""

    approval_ttl: float
    limits: OutputLimits
    store: ApprovalStore | None
    driver: WorkspaceDriver
    quarantine: str | None
    _committed_views: OrderedDict[str, VshResult]

    def _quarantined(self) -> VshResult:
        raise NotImplementedError

    def _quarantine_now(self, error: BaseException) -> None:
        raise NotImplementedError

    def _stale(self, feedback: str, transaction: str | None = None) -> VshResult:
        raise NotImplementedError

    def _failed(self, feedback: str, *, retry: bool, transaction: str | None = None) -> VshResult:
        raise NotImplementedError

    def _outside_failure(self, error: vsh.VshRuntimeError) -> VshResult:
        raise NotImplementedError

    def _journal_prepare(
        self,
        call: CurrentCall | None,
        transaction: str,
        expected: VshResult,
        decision: vsh.HookDecision | None = None,
        hook_id: str = "",
    ) -> VshResult:
        raise NotImplementedError

    async def _defer(
        self,
        result: VshResult,
        call: CurrentCall | None,
        program: tuple[str, str, Literal["monty", "bash"]] | None = None,
        evidence: Evidence | None = None,
    ) -> None:
        """Bind the tool call to the pending transaction durably, then ask for approval.

        Outside an agent run (a direct method call, no tool call id) the pending result
        is simply returned, as in feedback mode. A call is bound once: ``save`` keeps an
        existing binding of the same call (id and arguments).
        """
        if call is None or call.ctx.tool_call_id is None or self.store is None:
            return
        assert result.transaction is not None
        harvest = None
        if program is not None:
            code, intent, language = program
            harvest = harvest_capture(
                tool=call.name,
                program=code,
                intent=intent,
                language=language,
                evidence=evidence,
                verdict=result.verdict,
            )
        metadata = result.approver_view()
        metadata["requested_unix_ms"] = now_ms()
        binding = self.store.save(
            tool_call_id=call.ctx.tool_call_id,
            tool_name=call.name,
            digest=args_digest(call.name, call.args),
            transaction=result.transaction,
            changes=tuple(ChangedPath(path=c["path"], kind=c["kind"]) for c in metadata["changes"])[
                :MAX_CHANGES
            ],
            changes_omitted=result.changes_omitted,
            risk_flags=result.risk_flags,
            metadata=metadata,
            harvest=harvest,
            on_commit=self._committed_views.pop(result.transaction, None),
            call_key=call.key or "",
        )
        raise ApprovalRequired(metadata=binding.metadata)

    async def _replay(self, binding: ApprovalBinding) -> VshResult:
        """The same call (id and arguments) again, e.g. a durable engine re-running a turn:
        never run or bind it again; report the bound transaction's state."""
        binding = await self._settle(binding)
        if binding.end_state == "pending":
            raise ApprovalRequired(metadata=binding.metadata)
        return self._ended(binding)

    async def _settle(self, binding: ApprovalBinding) -> ApprovalBinding:
        """Bring a pending binding's recorded end state in line with VSH and the TTL."""
        if binding.end_state != "pending" or self.store is None:
            return binding
        state = await self.driver.state(binding.transaction)
        ended: dict[str, EndState] = {
            "committed": "committed",
            "rejected": "rejected",
            "stale": "stale",
            "expired": "expired",
            "denied": "denied",
            "failed": "failed",
        }
        if state == "failed":
            return self.store.finish(
                binding,
                "failed",
                "The approved commit did not complete (VSH rolled it back, e.g. because the "
                "process stopped during the commit); nothing was committed. Submit the change "
                "again if it is still wanted.",
            )
        if state in ended:
            return self.store.finish(binding, ended[state])
        if now_ms() - binding.created_unix_ms > self.approval_ttl * 1000:
            await self._release(binding.transaction, "approval request expired")
            return self.store.finish(
                binding,
                "expired",
                f"The approval request expired (older than approval_ttl={self.approval_ttl:g}s).",
            )
        return binding

    def _ended(self, binding: ApprovalBinding) -> VshResult:
        state: ToolState
        notes: dict[str, tuple[ToolState, str | None]] = {
            "committed": ("committed", None),
            "denied": (
                "rejected",
                "A person denied this change; it will never be committed. Do not resubmit it "
                "unchanged.",
            ),
            "rejected": ("rejected", "The change was rejected; it will never be committed."),
            "expired": (
                "stale",
                "The approval request expired, so nothing was committed; submit the change "
                "again if it is still wanted.",
            ),
            "stale": ("stale", "The workspace changed before approval; nothing was committed."),
            "failed": ("failed", "The approved commit failed; nothing was committed."),
        }
        state, note = notes.get(binding.end_state, ("failed", "Unknown approval state."))
        result = build_result(
            state,
            receipt=None,
            limits=self.limits,
            changes=binding.changes,
            changes_omitted=binding.changes_omitted,
            transaction=binding.transaction,
            feedback=binding.end_note or note,
        )
        return result

    async def _release(self, transaction: str, reason: str) -> None:
        """Move a pending transaction to VSH's terminal ``rejected`` where VSH allows."""
        with contextlib.suppress(vsh.VshRuntimeError):
            await self.driver.release(transaction, reason)

    async def _record_denials(
        self, ctx: RunContext[Any], tools: dict[str, ToolsetTool[Any]]
    ) -> None:
        """Record ToolDenied answers durably: a denied call is never committed later."""
        assert self.store is not None
        calls: dict[str, ToolCallPart] = {}
        denied: list[str] = []
        denied_parts: dict[str, ToolReturnPart] = {}
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
                        denied.append(request_part.tool_call_id)
                        denied_parts[request_part.tool_call_id] = request_part
        for call_id in denied:
            call = calls.get(call_id)
            tool = tools.get(call.tool_name) if call is not None else None
            if call is None or tool is None:
                continue
            try:
                validated = tool.args_validator.validate_python(call.args_as_dict())
                binding = self.store.load(call_id, args_digest(call.tool_name, validated))
            except (VshApprovalError, ValueError):
                continue
            if binding is None or binding.end_state != "pending":
                continue
            self.store.finish(binding, "denied", message=_denial_message(denied_parts.get(call_id)))
            await self._release(binding.transaction, "denied by the approver")

    async def _resume(self, binding: ApprovalBinding, name: str, ctx: RunContext[Any]) -> VshResult:
        call_id = binding.tool_call_id
        metadata = ctx.tool_call_metadata
        principal = metadata.get("principal") if isinstance(metadata, dict) else None
        if not isinstance(principal, str) or not principal.strip():
            raise VshApprovalError(
                f"approving tool call {call_id!r} needs a principal: pass "
                f"DeferredToolResults(metadata={{{call_id!r}: {{'principal': 'name'}}}})"
            )
        transaction = binding.transaction
        with open_span("vsh-ai approve", tool=name, transaction=transaction) as span:
            binding = await self._settle(binding)
            if binding.end_state != "pending":
                result = self._ended(binding)
            else:
                result = await self._approve_and_commit(binding, principal)
            span.set_attributes(span_attributes(result))
        return result

    def _committed_view(self, binding: ApprovalBinding) -> VshResult:
        """What an approved, committed resume of ``binding`` returns (replays included)."""
        if binding.on_commit is not None and binding.on_commit.state == "committed":
            return binding.on_commit
        return build_result(
            "committed",
            receipt=None,
            limits=self.limits,
            changes=binding.changes,
            changes_omitted=binding.changes_omitted,
            transaction=binding.transaction,
        )

    async def _approve_and_commit(self, binding: ApprovalBinding, principal: str) -> VshResult:
        assert self.store is not None
        transaction = binding.transaction
        if self.quarantine is not None:
            return self._quarantined()
        expected = self._committed_view(binding)
        prepare = partial(self._journal_prepare, CURRENT_CALL.get(), transaction, expected)
        try:
            expected = await anyio.to_thread.run_sync(prepare)
        except JournalUnavailable as error:  # the approval stays pending: nothing is lost
            return self._failed(f"{error}; nothing was committed.", retry=False)
        except AlreadyDone as done:  # another process finished this resume
            return done.entry.result or self._failed("no recorded result", retry=False)
        try:
            final = await self.driver.approve_and_commit(
                transaction, principal, int(self.approval_ttl * 1000)
            )
        except vsh.VshStaleError as error:
            note = (
                f"{bound_text(str(error), self.limits.error)}. VSH revalidates every path the "
                "transaction depends on, including the folder that holds a new file: another "
                "change committed in the same folder (e.g. approving many new files in one "
                "folder at once) makes this one stale. Approve such changes one at a time, or "
                "have the agent make them in one program."
            )
            return self._ended(self.store.finish(binding, "stale", note, principal))
        except vsh.VshRecoveryError as error:
            self._quarantine_now(error)
            return self._quarantined()
        except vsh.VshStateError as error:
            if "policy changed" in str(error):
                note = (
                    "This approval was requested under a different VSH policy profile than the "
                    "one this toolset runs with; nothing was committed. Submit the change again."
                )
                await self._release(transaction, "policy changed")
                return self._ended(self.store.finish(binding, "stale", note))
            state = await self._final_state(transaction)
            if state == "committed":  # another resume (thread or process) committed it
                return self._ended(self.store.finish(binding, "committed", "", principal))
            return self._stale(
                f"Another approval of this call is being applied (VSH state {state}); nothing "
                "more was committed by this one. Check the result of the other approval.",
                transaction,
            )
        except vsh.VshRuntimeError as error:
            if is_recovery(error):
                self._quarantine_now(error)
                return self._quarantined()
            failed = self._outside_failure(error)
            self.store.finish(binding, "failed", failed.feedback or "")
            return failed
        if final.state != "committed":
            return self._failed(
                f"approved commit ended in state {final.state!r}",
                retry=False,
                transaction=transaction,
            )
        self.store.finish(binding, "committed", "", principal)
        return expected

    async def _final_state(self, transaction: str, wait: float = 5.0) -> str:
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


def _denial_message(part: ToolReturnPart | None) -> str:
    """The approver's denial message as recorded for harvest ("" when none was given)."""
    if part is None or not isinstance(part.content, str):
        return ""
    return part.content[:2000]
