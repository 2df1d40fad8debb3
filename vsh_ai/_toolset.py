"""VshToolset and VshCapability: Pydantic AI tools that run agent programs through VSH."""

from __future__ import annotations

import builtins
import inspect
import math
import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack, get_args

import logfire
import vsh
from pydantic_ai import ApprovalRequired, ModelRetry, RunContext
from pydantic_ai.capabilities import Capability
from pydantic_ai.toolsets import FunctionToolset, ToolsetTool

from ._evidence import Evidence
from ._hooks import Judge, JudgeHook, as_hook
from ._results import (
    ChangedPath,
    OutputLimits,
    ToolState,
    VshResult,
    bound_text,
    build_result,
)
from ._simulate import DEFAULT_REVIEW_CONTENT_BYTES
from ._toolset_approvals import ApprovalBinding, ApprovalStore, VshApprovalError, args_digest
from ._toolset_runtime import HookHandler, WorkspaceDriver, now_ms
from ._toolset_text import instructions_for
from ._toolset_tools import FileTools
from ._verdict import Verdict

__all__ = ("ApprovalMode", "ToolName", "ToolsetOptions", "VshCapability", "VshToolset")

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
ALL_TOOLS: tuple[str, ...] = get_args(ToolName)
_ACTIONABLE = frozenset(("auto_approved", "pending_approval"))
_DUPLICATE = re.compile(
    r"(?:duplicate transaction:|pending artifact already exists for) ([0-9a-f]{16,})"
)
_PERMISSION = re.compile(r"^PermissionError: (.+)$", re.MULTILINE)
_NEEDS_APPROVAL = "needs approval: VSH policy requires a person to approve this change"


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    args: dict[str, Any]
    ctx: RunContext[Any]


_CURRENT_CALL: ContextVar[_Call | None] = ContextVar("vsh_ai_current_call", default=None)


async def _follow_policy(event: vsh.RequestEvent) -> vsh.HookDecision:
    return vsh.HookDecision.follow_policy()


class VshToolset(FileTools, FunctionToolset[Any]):
    """Tools that run an agent's programs as atomic VSH transactions.

    Every call previews the program on a virtual snapshot, lets VSH policy (and the
    judge or hook, if any) decide, and commits only approved work. Results are
    :class:`VshResult` values; guest errors come back to the model as retries.

    ``workspace_or_runtime`` is a workspace path (the toolset opens the runtime: a
    ``HookedRuntime`` when a judge or hook is given, or in ``deferred`` mode so the
    approver sees a diff; a plain ``Runtime`` otherwise) or an existing
    ``vsh.Runtime`` / ``vsh.HookedRuntime``. ``approval="deferred"`` raises
    ``ApprovalRequired`` for pending work; a resumed, approved call commits exactly
    the transaction bound to that tool call (bindings are stored durably in
    ``state_directory``, by default ``<workspace>/.vsh-runtime/vsh-ai/approvals``).
    An approval arriving more than ``approval_ttl`` seconds after the request commits
    nothing and reports ``stale``.
    """

    def __init__(
        self,
        workspace_or_runtime: str | os.PathLike[str] | vsh.Runtime | vsh.HookedRuntime,
        *,
        policy: str = "balanced",
        judge: Judge | None = None,
        hook_handler: HookHandler | None = None,
        hook_scope: vsh.HookScope = vsh.HookScope.REVIEW_REQUIRED,
        hook_id: str | None = None,
        review_content_bytes: int | None = None,
        budget: vsh.ExecutionBudget | None = None,
        bash: bool | vsh.BashConfig = False,
        tools: Sequence[str] | None = None,
        approval: ApprovalMode = "feedback",
        approval_ttl: float = 600.0,
        state_directory: str | os.PathLike[str] | None = None,
        limits: OutputLimits | None = None,
        max_retries: int | None = None,
        id: str = "vsh",
        include_instructions: bool = True,
    ) -> None:
        if judge is not None and hook_handler is not None:
            raise ValueError("pass either judge= or hook_handler=, not both")
        if approval not in ("feedback", "deferred"):
            raise ValueError(f"approval must be 'feedback' or 'deferred', got {approval!r}")
        if not (math.isfinite(approval_ttl) and approval_ttl > 0):
            raise ValueError(
                f"approval_ttl must be a positive number of seconds, got {approval_ttl}"
            )
        selected = tuple(ALL_TOOLS if tools is None else tools)
        unknown = sorted(set(selected) - set(ALL_TOOLS))
        if unknown:
            raise ValueError(f"unknown tools {unknown}; choose from {list(ALL_TOOLS)}")
        self.approval: ApprovalMode = approval
        self.approval_ttl = approval_ttl
        self.budget = budget
        self.limits = limits or OutputLimits()
        self.bash_enabled = bash is not False
        self.judge_hook: JudgeHook | None = None
        self._hook_all = hook_scope == vsh.HookScope.ALL_REQUESTS
        handler: HookHandler | None = None
        self._inner_handler: HookHandler | None = None
        self._evidence_seen: OrderedDict[str, Evidence | None] = OrderedDict()
        self.runtime: vsh.Runtime | vsh.HookedRuntime
        if isinstance(workspace_or_runtime, vsh.Runtime | vsh.HookedRuntime):
            if judge is not None or hook_handler is not None or review_content_bytes:
                raise ValueError(
                    "judge=, hook_handler= and review_content_bytes= apply only when the toolset "
                    "opens the runtime: pass a workspace path instead of a runtime"
                )
            if approval == "deferred" and state_directory is None:
                raise ValueError(
                    "deferred approval with an existing runtime needs state_directory= "
                    "(where tool-call → transaction bindings are stored)"
                )
            self.runtime = workspace_or_runtime
            if isinstance(workspace_or_runtime, vsh.HookedRuntime):
                handler = getattr(workspace_or_runtime, "_hook_handler", None)
            else:
                self._hook_all = False
            lock_key = f"runtime:{builtins.id(workspace_or_runtime)}"
        else:
            workspace = Path(workspace_or_runtime)
            state_directory = state_directory or workspace / ".vsh-runtime" / "vsh-ai" / "approvals"
            _check_state_directory(workspace, Path(state_directory))
            self.runtime = self._open(
                workspace,
                policy=policy,
                judge=judge,
                hook_handler=hook_handler,
                hook_scope=hook_scope,
                hook_id=hook_id,
                review_content_bytes=review_content_bytes,
                bash=bash,
            )
            handler = self._on_event if self._inner_handler is not None else None
            lock_key = str(workspace.resolve())
        self.native: vsh.Runtime = (
            self.runtime.native if isinstance(self.runtime, vsh.HookedRuntime) else self.runtime
        )
        self.driver = WorkspaceDriver(self.native, handler=handler, lock_key=lock_key)
        self.store = ApprovalStore(state_directory) if state_directory is not None else None
        self.tool_names = selected
        self.instructions_text = instructions_for(
            selected, bash=self.bash_enabled, deferred=approval == "deferred"
        )
        super().__init__(
            id=id,
            max_retries=max_retries,
            sequential=True,
            instructions=self.instructions_text if include_instructions else None,
        )
        self._register(selected)

    # -- runtime ------------------------------------------------------------------------

    def _open(
        self,
        workspace: Path,
        *,
        policy: str,
        judge: Judge | None,
        hook_handler: HookHandler | None,
        hook_scope: vsh.HookScope,
        hook_id: str | None,
        review_content_bytes: int | None,
        bash: bool | vsh.BashConfig,
    ) -> vsh.Runtime | vsh.HookedRuntime:
        bash_config = vsh.BashConfig() if bash is True else (bash or None)
        if judge is not None:
            self.judge_hook = as_hook(judge)
            self._inner_handler = self.judge_hook
            hook_id = hook_id or self.judge_hook.hook_id
        elif hook_handler is not None:
            self._inner_handler = hook_handler
            hook_id = hook_id or "vsh-ai:hook"
        elif self.approval == "deferred":
            # Capture-only hook: follow_policy never upgrades pending work, but the
            # approver gets the exact diff from the event.
            self._inner_handler = _follow_policy
            hook_id = hook_id or "vsh-ai:capture"
        if self._inner_handler is None:
            if review_content_bytes:
                raise ValueError("review_content_bytes needs a judge or hook_handler")
            return vsh.Runtime.open(workspace, policy=policy, bash=bash_config)
        return vsh.HookedRuntime.open(
            workspace,
            hook_handler=self._on_event,
            hook_scope=hook_scope,
            hook_id=hook_id or "vsh-ai:hook",
            review_content_bytes=DEFAULT_REVIEW_CONTENT_BYTES
            if review_content_bytes is None
            else review_content_bytes,
            policy=policy,
            bash=bash_config,
        )

    async def _on_event(self, event: vsh.RequestEvent) -> vsh.HookDecision:
        # One snapshot serves both the judge and the result's diff.
        evidence = _evidence_of(event)
        self._evidence_seen[event.transaction] = evidence
        while len(self._evidence_seen) > 64:
            self._evidence_seen.popitem(last=False)
        if self.judge_hook is not None and evidence is not None:
            return await self.judge_hook(evidence)
        assert self._inner_handler is not None
        decision = self._inner_handler(event)  # an unreadable event fails closed in the hook
        if inspect.isawaitable(decision):
            decision = await decision
        return decision

    def _evidence(self, transaction: str) -> Evidence | None:
        return self._evidence_seen.pop(transaction, None)

    # -- tool calls ---------------------------------------------------------------------

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if ctx.tool_call_approved and ctx.tool_call_id is not None and self.store is not None:
            # Only an approval of a call this workspace deferred commits anything; any
            # other "approved" call (e.g. under an approval_required() wrapper) runs fresh.
            binding = self.store.load(ctx.tool_call_id)
            if binding is not None:
                return await self._resume(binding, name, tool_args, ctx)
        token = _CURRENT_CALL.set(_Call(name, tool_args, ctx))
        try:
            return await super().call_tool(name, tool_args, ctx, tool)
        finally:
            _CURRENT_CALL.reset(token)

    async def run_program(
        self,
        code: str,
        intent: str,
        language: vsh.Language = vsh.Language.MONTY,
        *,
        tool: str = "vsh_run",
    ) -> VshResult:
        """Run one program as one transaction and return (or defer) its result."""
        call = _CURRENT_CALL.get()
        request = vsh.RunRequest(
            code,
            language=language,
            intent=intent,
            mode=vsh.RunMode.AUTO,
            detail=vsh.ReceiptDetail.FULL,
            budget=self.budget,
        )
        retry: ModelRetry | None = None
        with _span("vsh-ai transaction", tool=tool, language=_language_name(language)) as span:
            try:
                result = await self._transact(request)
                span.set_attributes(_span_attributes(result))
            except ModelRetry as error:  # re-raised outside: guest text stays out of spans
                span.set_attribute("state", "guest_error")
                retry = error
        if retry is not None:
            raise retry
        if result.state == "pending" and self.approval == "deferred":
            await self._defer(result, call)
        return result

    async def _transact(self, request: vsh.RunRequest) -> VshResult:
        hooked = isinstance(self.runtime, vsh.HookedRuntime)
        try:
            if hooked:
                receipt = await self.driver.preview(request)
                outcome: vsh.Receipt | vsh.VshStaleError = receipt
            else:
                receipt, outcome = await self.driver.run(request)
        except vsh.VshExecutionError as error:
            return self._guest_error(error)
        except vsh.VshStateError as error:
            return await self._duplicate(error)
        transaction = receipt.transaction
        read_only = receipt.changed_paths == 0
        if receipt.state == "denied":
            if hooked:
                self.driver.discard(transaction)
            return build_result("denied", receipt=receipt, limits=self.limits)
        if receipt.state not in _ACTIONABLE:
            raise vsh.VshRuntimeError(f"unexpected VSH preview state {receipt.state!r}")
        record: vsh.HookDecisionRecord | None = None
        if hooked:
            if read_only and not self._hook_all:
                self.driver.discard(transaction)
                return build_result("read", receipt=receipt, limits=self.limits)
            try:
                resolution = await self.driver.hooked_commit(transaction)
                outcome, record = resolution.receipt, resolution.hook
            except vsh.VshStaleError as error:
                outcome = error
        if isinstance(outcome, vsh.VshStaleError):
            return build_result(
                "stale",
                receipt=receipt,
                limits=self.limits,
                feedback=bound_text(str(outcome), self.limits.error),
                evidence=self._evidence(transaction),
            )
        if outcome is receipt and receipt.state == "auto_approved":  # plain runtime, read-only
            return build_result("read", receipt=receipt, limits=self.limits)
        return self._outcome(receipt, outcome, record, read_only=read_only)

    def _outcome(
        self,
        preview: vsh.Receipt,
        final: vsh.Receipt,
        record: vsh.HookDecisionRecord | None,
        *,
        read_only: bool,
    ) -> VshResult:
        transaction = preview.transaction
        verdict = self._verdict(transaction, record)
        evidence = self._evidence(transaction)
        feedback = verdict.reason if verdict and verdict.decision in ("review", "reject") else None
        state: ToolState
        if final.state == "committed":
            state = "read" if read_only else "committed"
        elif final.state == "pending_approval":
            state = "pending"
            feedback = feedback or _NEEDS_APPROVAL
        elif final.state == "rejected":
            state = "rejected"
        elif final.state == "stale":
            state = "stale"
        else:
            raise vsh.VshRuntimeError(f"unexpected VSH transaction state {final.state!r}")
        return build_result(
            state,
            receipt=preview,
            limits=self.limits,
            evidence=evidence,
            verdict=verdict,
            feedback=feedback,
        )

    def _verdict(self, transaction: str, record: vsh.HookDecisionRecord | None) -> Verdict | None:
        if self.judge_hook is not None:
            verdict = self.judge_hook.verdict_for(transaction)
            if verdict is not None:
                return verdict
        if record is None or self._inner_handler is _follow_policy:
            return None
        decision = (
            record.verdict if record.verdict in ("approve", "review", "reject") else "abstain"
        )
        return Verdict(decision=decision, reason=record.reason, judge=record.hook_id)

    def _guest_error(self, error: vsh.VshExecutionError) -> VshResult:
        text = str(error)
        if text.startswith("internal "):
            raise error  # e.g. "internal VFS failure": VSH itself failed, not the program
        diagnostics = getattr(error, "diagnostics", None)
        if diagnostics is not None:
            stderr = diagnostics.stderr.decode(errors="replace")
            text = f"{text}\n{stderr}" if stderr else text
        denied = _PERMISSION.search(text)
        if denied is not None or (diagnostics is not None and diagnostics.denied_accesses):
            reason = denied.group(1) if denied else "bash accessed a protected path"
            return build_result(
                "denied",
                receipt=None,
                limits=self.limits,
                deny_reason=f"permission_denied: {reason}",
                stderr=text,
            )
        raise ModelRetry(
            "The program failed inside VSH and nothing was changed:\n"
            f"{bound_text(text, self.limits.error, keep='tail')}\n"
            "Fix the program and call the tool again."
        )

    async def _duplicate(self, error: vsh.VshStateError) -> VshResult:
        match = _DUPLICATE.search(str(error))
        if match is None:
            raise error
        transaction = match.group(1)
        state = await self.driver.state(transaction)
        if state == "pending_approval":
            # Re-read its exact changes and diff: an approver (deferred mode) must see
            # what approving this transaction would commit, never "no changes".
            try:
                reopened = await self.driver.reopen(transaction)
            except vsh.VshStaleError as error:
                return build_result(
                    "stale",
                    receipt=None,
                    limits=self.limits,
                    transaction=transaction,
                    feedback=bound_text(str(error), self.limits.error),
                )
            if reopened is not None and reopened[1].state == "pending_approval":
                event, receipt = reopened
                return build_result(
                    "pending",
                    receipt=receipt,
                    limits=self.limits,
                    evidence=_evidence_of(event),
                    feedback="An identical request (same program and intent) is already "
                    "waiting for approval as this transaction.",
                )
            state = await self.driver.state(transaction)
        raise ModelRetry(
            f"This exact program and intent was already submitted on the current workspace "
            f"as transaction {transaction} (state: {state}). Do not repeat it; change the "
            "program if you need a different outcome."
        )

    # -- deferred approval --------------------------------------------------------------

    async def _defer(self, result: VshResult, call: _Call | None) -> None:
        """Bind the tool call to the pending transaction durably, then ask for approval.

        Outside an agent run (a direct method call, no tool call id) the pending result
        is simply returned, as in feedback mode.
        """
        if call is None or call.ctx.tool_call_id is None or self.store is None:
            return
        assert result.transaction is not None
        call_id = call.ctx.tool_call_id
        earlier = self.store.load(call_id)
        if earlier is not None and earlier.transaction != result.transaction:
            # Rebinding would make an approval given for the earlier diff commit this one.
            state = await self.driver.state(earlier.transaction)
            if state in ("pending_approval", "approved"):
                raise VshApprovalError(
                    f"tool call id {call_id!r} is already bound to transaction "
                    f"{earlier.transaction} ({state}), whose diff an approver may be "
                    "looking at; tool call ids must be unique per workspace (use a model "
                    "that issues unique tool call ids)."
                )
        self.store.save(
            tool_call_id=call_id,
            tool_name=call.name,
            digest=args_digest(call.name, call.args),
            transaction=result.transaction,
            changes=result.changes,
            risk_flags=result.risk_flags,
        )
        raise ApprovalRequired(
            metadata=result.model_dump(
                mode="json",
                include={
                    "transaction",
                    "changes",
                    "summary",
                    "diff",
                    "risk_flags",
                    "verdict",
                    "feedback",
                },
            )
        )

    async def _resume(
        self, binding: ApprovalBinding, name: str, tool_args: dict[str, Any], ctx: RunContext[Any]
    ) -> VshResult:
        call_id = binding.tool_call_id
        if binding.tool_name != name or binding.args_digest != args_digest(name, tool_args):
            raise VshApprovalError(
                f"tool call {call_id!r}: override_args is refused: approval binds to VSH "
                f"transaction {binding.transaction}, not to arguments. Approve it unchanged, or "
                "deny it and ask the agent for a new change."
            )
        metadata = ctx.tool_call_metadata
        principal = metadata.get("principal") if isinstance(metadata, dict) else None
        if not isinstance(principal, str) or not principal.strip():
            raise VshApprovalError(
                f"approving tool call {call_id!r} needs a principal: pass "
                f"DeferredToolResults(metadata={{{call_id!r}: {{'principal': 'name'}}}})"
            )
        transaction = binding.transaction
        with _span("vsh-ai approve", tool=name, transaction=transaction) as span:
            expired = now_ms() - binding.created_unix_ms > self.approval_ttl * 1000
            result = await self._approve_and_commit(
                transaction, principal, binding.changes, expired=expired
            )
            span.set_attributes(_span_attributes(result))
        return result

    async def _approve_and_commit(
        self,
        transaction: str,
        principal: str,
        changes: tuple[ChangedPath, ...],
        *,
        expired: bool = False,
    ) -> VshResult:
        def settled(state: ToolState, feedback: str | None = None) -> VshResult:
            return build_result(
                state,
                receipt=None,
                limits=self.limits,
                changes=changes,
                transaction=transaction,
                feedback=feedback,
            )

        state = await self.driver.state(transaction)
        if state == "committed":
            return settled("committed")
        if state in ("rejected", "stale", "expired", "denied"):
            # An expired approval window is handled like stale work: submit it again.
            return settled(
                "rejected" if state == "rejected" else "denied" if state == "denied" else "stale"
            )
        if expired:
            # Older than approval_ttl: the approver may have judged a diff long gone.
            return settled(
                "stale",
                f"The approval request expired (older than approval_ttl="
                f"{self.approval_ttl:g}s), so nothing was committed; submit the change again.",
            )
        try:
            final = await self.driver.approve_and_commit(
                transaction, principal, int(self.approval_ttl * 1000)
            )
        except vsh.VshStateError:
            if await self.driver.state(transaction) != "committed":
                raise
            # A concurrent resume of this same approval committed it first.
            return settled("committed")
        except vsh.VshStaleError as error:
            return settled("stale", bound_text(str(error), self.limits.error))
        if final.state != "committed":
            raise vsh.VshRuntimeError(f"approved commit ended in state {final.state!r}")
        return build_result("committed", receipt=final, limits=self.limits, changes=changes)

    # -- the tools ----------------------------------------------------------------------

    def _register(self, selected: Sequence[str]) -> None:
        for name in selected:
            self.add_function(getattr(self, name), takes_ctx=False, name=name)
        run = self.tools.get("vsh_run")
        if run is not None:
            languages = ["monty", "bash"] if self.bash_enabled else ["monty"]
            run.function_schema.json_schema["properties"]["language"]["enum"] = languages


class _NoSpan:
    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        return None


def _span(name: str, **attributes: Any) -> Any:
    """A Logfire span; nothing at all when Logfire is unconfigured (it would drop the span).

    Skipping it saves its cost on every transaction; if Logfire's internals change, the
    ``getattr`` default keeps spans on.
    """
    if not getattr(logfire.DEFAULT_LOGFIRE_INSTANCE.config, "_initialized", True):
        return _NoSpan()
    return logfire.span(name, **attributes)


def _span_attributes(result: VshResult) -> dict[str, Any]:
    """Ids, state and counts only: never contents, intent or guest output."""
    attributes: dict[str, Any] = {
        "transaction": result.transaction or "",
        "state": result.state,
        "changed_paths": len(result.changes),
    }
    if result.verdict is not None:
        attributes["verdict"] = result.verdict.decision
        attributes["decided_by"] = result.verdict.judge
    if result.deny_reason:
        attributes["deny_reason"] = result.deny_reason
    return attributes


class ToolsetOptions(TypedDict, total=False):
    """Keyword options shared by :class:`VshToolset` and :class:`VshCapability`."""

    policy: str
    judge: Judge | None
    hook_handler: HookHandler | None
    hook_scope: vsh.HookScope
    hook_id: str | None
    review_content_bytes: int | None
    budget: vsh.ExecutionBudget | None
    bash: bool | vsh.BashConfig
    tools: Sequence[str] | None
    approval: ApprovalMode
    approval_ttl: float
    state_directory: str | os.PathLike[str] | None
    limits: OutputLimits | None
    max_retries: int | None


class VshCapability(Capability[Any]):
    """The VSH tools plus their instructions as one Pydantic AI capability.

    Takes the same arguments as :class:`VshToolset`; ``.toolset`` and ``.runtime``
    give access to the underlying toolset and VSH runtime.
    """

    def __init__(
        self,
        workspace_or_runtime: str | os.PathLike[str] | vsh.Runtime | vsh.HookedRuntime,
        *,
        id: str = "vsh",
        **options: Unpack[ToolsetOptions],
    ) -> None:
        toolset = VshToolset(workspace_or_runtime, id=id, include_instructions=False, **options)
        super().__init__(
            id=id,
            description="Workspace file tools that simulate changes in VSH before commit.",
            instructions=toolset.instructions_text,
            toolsets=[toolset],
        )
        self.toolset = toolset
        self.runtime = toolset.runtime


def _check_state_directory(workspace: Path, state_directory: Path) -> None:
    """Approval bindings must live where agent programs cannot write (VSH guards its own
    ``.vsh-runtime``): a forged binding would choose what an approval commits."""
    root, state = workspace.resolve(), state_directory.resolve()
    if state.is_relative_to(root) and not state.is_relative_to(root / ".vsh-runtime"):
        raise ValueError(
            f"state_directory {state_directory} is inside the workspace, where agent programs "
            "can write; put it outside the workspace or under its .vsh-runtime directory"
        )


def _evidence_of(event: vsh.RequestEvent | None) -> Evidence | None:
    """Evidence for a result's diff; an event it cannot snapshot only costs the diff."""
    if event is None:
        return None
    try:
        return Evidence.from_event(event)
    except Exception:
        return None


def _language_name(language: vsh.Language) -> str:
    return "bash" if language == vsh.Language.BASH else "monty"
