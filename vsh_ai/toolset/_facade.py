"""VshToolset and VshCapability: a thin Pydantic AI facade over the transaction's path."""

from __future__ import annotations

import builtins
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict, Unpack

import vsh
from pydantic_ai import ApprovalRequired, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.capabilities import Capability
from pydantic_ai.toolsets import FunctionToolset, ToolsetTool

from .._hooks import Judge, JudgeHook
from ._bindings import ApprovalStore, args_digest, response_digest
from ._call_key import CallKey, UnstableCallKey, default_call_key
from ._config import ALL_TOOLS, ApprovalMode, JudgeScope, ToolName, ToolsetConfig
from ._decisions import recorded_decisions
from ._deferred import DeferredFlow, RecordsFailed
from ._driver import HookHandler, WorkspaceDriver, is_recovery
from ._hook import ToolsetHook, open_runtime
from ._instructions import instructions_for
from ._journal import CURRENT_CALL, CommitJournal, CurrentCall, JournalEntry, JournalUnavailable
from ._quarantine import Quarantine
from ._records import CallRecords
from ._render import span_attributes
from ._result import OutputLimits, VshResult
from ._signing import VshApprovalError
from ._spans import open_span
from ._tools import FileTools, add_file_tools
from ._transaction import Transactions
from ._workspace import (
    check_state_directory,
    check_workspace,
    ensure_runtime_gitignore,
    probe_state_directory,
    workspace_identity,
)

__all__ = (
    "ApprovalMode",
    "JudgeScope",
    "ToolName",
    "ToolsetOptions",
    "VshCapability",
    "VshToolset",
)


class VshToolset(FunctionToolset[Any]):
    """Tools that run an agent's programs as atomic VSH transactions.

    Every call previews the program on a virtual snapshot, lets VSH policy and the
    reviewer decide, and commits only approved work. Results are :class:`VshResult`
    values; a program that fails comes back to the model as a retry.

    Args:
        workspace_or_runtime: The folder the agent may change (the toolset opens VSH
            there), or an existing ``vsh.Runtime`` / ``vsh.HookedRuntime`` used as given.
        policy: VSH's policy profile, one of ``"balanced"`` (default: reads and small
            creates/edits auto-approve; deletes, renames, mkdir and mode changes wait for
            review), ``"strict"`` (every mutation waits; lower size thresholds) or
            ``"paranoid"`` (every mutation waits; lowest thresholds: 25 paths, 1 MiB).
            Protected paths such as ``.env`` are denied under all three. Case-sensitive:
            any other value raises ``ValueError`` when the runtime opens.
        judge: A :class:`~vsh_ai.Judge` (rule set, LLM judge, pipeline) that decides each
            transaction through a fail-closed hook (``as_hook(judge, timeout=...)`` to set
            its limits); or ``hook_handler``, a raw VSH handler.
        judge_scope: What the judge sees: ``"mutations"`` (default: every change, even what
            policy would auto-approve), ``"all"`` (reads too), ``"policy_pending"`` (only
            what policy sends to review).
        approval: ``"feedback"`` (pending work returns the reviewer's feedback) or
            ``"deferred"`` (pending work raises ``ApprovalRequired``; without a judge every
            mutation waits for a person). ``approval_ttl`` bounds the wait in seconds.
        review_content_bytes: How many bytes of file contents VSH captures with each
            reviewed transaction (before/after and what it read), for the judge and the
            approver's diff. Default 1 MiB when a judge, hook or deferred approval is set;
            needs one of them (raises ``ValueError`` otherwise, or with an existing
            runtime). Work whose contents do not fit is incomplete evidence, which rule
            sets send to review rather than approve.
        budget: A ``vsh.ExecutionBudget``, VSH's hard caps for each program, e.g.
            ``vsh.ExecutionBudget(max_duration_ms=5_000, max_os_calls=50_000)``. Unset
            fields keep VSH's defaults (1 s, 256 MiB memory, 10,000 OS calls, 64 MiB read
            and written, 1 MiB output and result). A program over a cap fails with the
            limit named and comes back to the model as a retry; the host is unchanged.
        bash: Allow ``language="bash"`` programs (or a ``vsh.BashConfig``).
        tools: Which tools the model gets (default all of :data:`ToolName`).
        state_directory: Where signed approval bindings and the commit journal live
            (default ``<workspace>/.vsh-runtime/vsh-ai/approvals``; never guest-writable).
        limits: :class:`OutputLimits`, UTF-8 byte caps on what one result shows the
            model: ``result`` (16 KiB), ``stdout`` and ``stderr`` (4 KiB each), ``diff``
            (8 KiB) and ``error`` (4 KiB), each at least 64; longer text is cut with an
            explicit ``…[truncated N bytes]`` marker. They bound the model's context, not
            what the program may do (that is ``budget``).
        max_retries: How many times in one agent run the model may retry a tool after a
            failed program (guest error, budget overrun, invalid arguments) before Pydantic
            AI raises ``UnexpectedModelBehavior``. ``None`` (default) inherits the agent's
            tool retry budget (``Agent(retries=...)``, default 1).
        call_key: How a call is named across replays (default :func:`default_call_key`);
            ``journal=False`` turns the exactly-once journal off.
        hook_id: The hook id VSH records with each decision (default: from the judge
            definition's digest, so a changed rule is a new id; ``"vsh-ai:hook"`` for a
            ``hook_handler``).
        id: The toolset's Pydantic AI id (default ``"vsh"``); unique within one agent.
        include_instructions: Add the toolset's instructions (tools, languages, what a
            refusal means) to the agent's instructions (default True).

    What the worker model sees of work that is not committed is the decision, its
    category and the reviewer's feedback only (see :mod:`vsh_ai.toolset._render`); the
    approver's view (:meth:`VshResult.approver_view`) has the transaction and the diff.
    After a VSH recovery error the toolset stops committing on the workspace until a
    person removes the quarantine file named in :attr:`quarantine`. A toolset opened on a
    workspace path pickles as its configuration and reopens VSH where it is unpickled.
    """

    def __init__(
        self,
        workspace_or_runtime: str | os.PathLike[str] | vsh.Runtime | vsh.HookedRuntime,
        *,
        policy: str = "balanced",
        judge: Judge | JudgeHook | None = None,
        hook_handler: HookHandler | None = None,
        judge_scope: JudgeScope = "mutations",
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
        call_key: CallKey | None = None,
        journal: bool = True,
    ) -> None:
        self._options: dict[str, Any] = {
            name: value for name, value in locals().items() if name not in ("self", "__class__")
        }
        if judge is not None and hook_handler is not None:
            raise ValueError("pass either judge= or hook_handler=, not both")
        existing = isinstance(workspace_or_runtime, vsh.Runtime | vsh.HookedRuntime)
        reviewed = (
            isinstance(workspace_or_runtime, vsh.HookedRuntime)
            if existing
            else judge is not None or hook_handler is not None or approval == "deferred"
        )
        self.config = ToolsetConfig.build(
            tools=tools,
            approval=approval,
            approval_ttl=approval_ttl,
            judge_scope=judge_scope,
            limits=limits,
            budget=budget,
            bash=bash,
            reviewed=reviewed,
        )
        self.workspace: Path | None = None
        self.hook: ToolsetHook | None = None
        runtime: vsh.Runtime | vsh.HookedRuntime | None = None
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
            runtime = workspace_or_runtime
            lock_key = f"runtime:{builtins.id(runtime)}"
            if state_directory is not None:
                probe_state_directory(_native(runtime), Path(state_directory))
            self.quarantine_state = Quarantine(lock_key, None)
        else:
            workspace = Path(workspace_or_runtime)
            check_workspace(workspace)
            # Absolute from here on: a process that changes its working folder later (a
            # DBOS workflow resumed in another thread, a test) keeps the same workspace.
            workspace = self.workspace = workspace.resolve()
            state_directory = Path(
                state_directory or workspace / ".vsh-runtime" / "vsh-ai" / "approvals"
            ).absolute()
            check_state_directory(workspace, Path(state_directory))
            lock_key = str(self.workspace)
            self.quarantine_state = Quarantine(lock_key, self.workspace)
            try:
                runtime, self.hook = open_runtime(
                    workspace,
                    self.config,
                    policy=policy,
                    judge=judge,
                    hook_handler=hook_handler,
                    review_content_bytes=review_content_bytes,
                    hook_id=hook_id,
                    bash=bash,
                )
            except vsh.VshRuntimeError as error:
                if not is_recovery(error):
                    raise
                self.quarantine_state.enter(error)
        self.lock_key = lock_key
        self.records_error: str | None = None
        """Why this toolset's state files cannot be used (every call then returns it)."""
        workspace_id = ""
        if state_directory is not None:
            try:  # records name their workspace: a copied state directory is refused
                workspace_id = workspace_identity(Path(state_directory), self.workspace)
            except VshApprovalError as error:
                self.records_error = str(error)
        if self.workspace is not None:
            ensure_runtime_gitignore(self.workspace)  # VSH keeps refused bytes there
        self.store = (
            ApprovalStore(state_directory, workspace_id=workspace_id, workspace=self.workspace)
            if state_directory is not None
            else None
        )
        self.journal = (
            CommitJournal(
                Path(state_directory) / "journal",
                workspace_id=workspace_id,
                workspace=self.workspace,
            )
            if state_directory is not None and journal
            else None
        )
        self.call_key: CallKey = call_key or default_call_key
        self.transactions: Transactions | None = None
        self.deferred: DeferredFlow | None = None
        self.records = CallRecords(
            self.journal, None, deferred=self.config.deferred, limits=self.config.limits
        )
        if runtime is not None:
            self.runtime = runtime
            self.native = _native(runtime)
            handler = (
                self.hook
                if self.hook is not None
                else getattr(runtime, "_hook_handler", None)
                if isinstance(runtime, vsh.HookedRuntime)
                else None
            )
            self.driver = WorkspaceDriver(self.native, handler=handler, lock_key=lock_key)
            self.records.driver = self.driver
            self.transactions = Transactions(
                self.config,
                runtime=runtime,
                driver=self.driver,
                hook=self.hook,
                records=self.records,
                quarantine=self.quarantine_state,
                workspace=self.workspace,
            )
            if self.store is not None:
                self.deferred = DeferredFlow(self.transactions, self.store)
        self.files = FileTools(self.run_program, bash_enabled=self.config.bash)
        self.instructions_text = instructions_for(
            self.config.tools,
            bash=self.config.bash,
            deferred=self.config.deferred,
            reviewed=self.config.reviewed,
        )
        super().__init__(
            id=id,
            max_retries=max_retries,
            sequential=True,
            instructions=self.instructions_text if include_instructions else None,
        )
        add_file_tools(self, self.files, self.config.tools)
        run = self.tools.get("vsh_run")
        if run is not None:
            languages = ["monty", "bash"] if self.config.bash else ["monty"]
            run.function_schema.json_schema["properties"]["language"]["enum"] = languages

    # -- the host's view ----------------------------------------------------------------

    @property
    def quarantine(self) -> str | None:
        """Why this workspace is quarantined (with the recovery steps), or None."""
        return self.quarantine_state.message

    @property
    def approval(self) -> ApprovalMode:
        return self.config.approval

    @property
    def approval_ttl(self) -> float:
        return self.config.approval_ttl

    @property
    def judge_scope(self) -> JudgeScope:
        return self.config.judge_scope

    @property
    def tool_names(self) -> tuple[str, ...]:
        return self.config.tools

    @property
    def judge_hook(self) -> JudgeHook | None:
        return self.hook.judge_hook if self.hook is not None else None

    def __getattr__(self, name: str) -> Any:
        if name in ALL_TOOLS:  # toolset.vsh_write(...) runs the tool directly
            return getattr(self.files, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def prune_journal(self, older_than_s: float) -> int:
        """Delete commit-journal records older than ``older_than_s`` seconds (returns the
        count). Keep them longer than any run can still be replayed: a durable workflow
        that waits days for an approval replays its earlier calls when it recovers, and a
        pruned call runs again."""
        return self.journal.prune(older_than_s) if self.journal is not None else 0

    async def decisions(
        self, requests: DeferredToolRequests, *, wait: float | None = None
    ) -> DeferredToolResults:
        """The decisions a person recorded in ``vsh-ai inbox`` for ``requests``, ready for
        ``agent.run(..., deferred_tool_results=...)``.

        ``wait`` seconds (``math.inf``: no limit) waits until every call this toolset
        bound is decided; ``None`` looks once. Undecided calls are left out. See
        :func:`~vsh_ai.toolset._decisions.recorded_decisions`.
        """
        if self.store is None:
            raise VshApprovalError(
                "decisions() needs the signed binding store: use approval='deferred' on a "
                "workspace path, or pass state_directory="
            )
        return await recorded_decisions(
            self.store, requests, ttl=self.config.approval_ttl, wait=wait
        )

    async def run_program(
        self,
        code: str,
        intent: str,
        language: vsh.Language = vsh.Language.MONTY,
        *,
        tool: str = "vsh_run",
    ) -> VshResult:
        """Run one program as one transaction and return (or defer) its result."""
        if self.transactions is None:
            return _quarantined_without_runtime(self)
        defer = self.deferred.defer if self.deferred is not None and self.config.deferred else None
        return await self.transactions.run_program(code, intent, language, tool=tool, defer=defer)

    # -- tool calls ---------------------------------------------------------------------

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        if self.deferred is not None:
            await self.deferred.record_denials(ctx, tools)
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if self.records_error is not None:
            return self._failed(f"{self.records_error}; nothing was run or committed.")
        digest = args_digest(name, tool_args)
        try:
            key = self.call_key(ctx) if self.journal is not None else None
        except UnstableCallKey as error:  # a replay could commit twice: run nothing
            return self._failed(f"{error} Nothing was run or committed.")
        entry: JournalEntry | None = None
        if key is not None and self.journal is not None:
            try:
                entry = self.journal.load(key, digest)
            except VshApprovalError as error:
                return self._failed(str(error))
            except JournalUnavailable as error:
                return self._failed(f"{error}; nothing was run or committed.")
        if self.quarantine_state.active or self.transactions is None:
            # A finished call's recorded result is still true (a replay stays the same);
            # nothing else runs on a quarantined workspace.
            if entry is not None and entry.phase == "done" and entry.result is not None:
                return entry.result
            return _quarantined_without_runtime(self)
        result, attempt = await self.records.settle(entry) if entry is not None else (None, 0)
        call = CurrentCall(name, tool_args, ctx, key, digest, entry, attempt)
        if result is not None:  # a replay answered from the journal: say so in traces
            with open_span("vsh-ai replay", tool=name) as span:
                span.set_attributes(span_attributes(result))
        else:
            token = CURRENT_CALL.set(call)
            try:
                result = await self._call(call, tool)
            except RecordsFailed as error:  # a binding that cannot be read or written
                result = self._failed(f"{error}; nothing was committed.")
            finally:
                CURRENT_CALL.reset(token)
        finished = entry is not None and entry.phase == "done"
        if isinstance(result, VshResult) and not finished and not self.quarantine_state.active:
            result = await self.records.done(call, result)
        return result

    async def _call(self, call: CurrentCall, tool: ToolsetTool[Any]) -> Any:
        call_id, ctx = call.ctx.tool_call_id, call.ctx
        if call_id is not None and self.store is not None and self.deferred is not None:
            conversation = response_digest(ctx)
            try:
                binding = self.store.load(call_id, call.digest, conversation=conversation)
            except VshApprovalError as error:
                return self._failed(str(error))
            if ctx.tool_call_approved:
                if binding is not None:
                    return await self.deferred.resume(binding, call.name, ctx)
                if self.store.bound(call_id, conversation=conversation):
                    raise VshApprovalError(
                        f"tool call {call_id!r}: override_args is refused: approval binds to the "
                        "VSH transaction produced by the original arguments, not to new "
                        "arguments. Approve it unchanged, or deny it and ask the agent for a "
                        "new change."
                    )
                # Any other "approved" call (e.g. under an approval_required() wrapper) runs
                # fresh: only a call this workspace deferred commits a bound transaction.
            elif binding is not None:
                if call.key and binding.call_key == call.key:
                    # A durable engine replaying the very call that asked: it asks again,
                    # as it did the first time (the engine's recorded steps depend on it).
                    raise ApprovalRequired(metadata=binding.metadata)
                return await self.deferred.replay(binding)
        return await super().call_tool(call.name, call.args, ctx, tool)

    def _failed(self, feedback: str) -> VshResult:
        if self.transactions is not None:
            return self.transactions.failed(feedback, retry=False)
        from ._render import Outcome, render

        return render(Outcome("failed", feedback=feedback), self.config.limits)

    # -- pickling: as configuration ------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as (workspace path, options); unpickling reopens the runtime there.

        Durable engines pickle what crosses a step or workflow boundary; a native VSH
        runtime cannot cross, its configuration can. Options that do not pickle (an LLM
        judge's model client, a custom ``BashConfig``) raise ``TypeError`` here: build
        the toolset in each process instead (e.g. at module level).
        """
        if self.workspace is None:
            raise TypeError(
                "a VshToolset built on an existing vsh runtime cannot be pickled: build it from "
                "a workspace path (it then pickles as its configuration) or in each process"
            )
        options = {
            name: value for name, value in self._options.items() if name != "workspace_or_runtime"
        }
        if isinstance(options.get("bash"), vsh.BashConfig):
            raise TypeError(
                "a VshToolset with a custom vsh.BashConfig cannot be pickled (VSH's config "
                "object does not pickle): build the toolset in each process"
            )
        budget = options.pop("budget", None)
        limits = _budget_fields(budget) if budget is not None else None
        return (_reopen, (type(self), str(self.workspace), options, limits))


def _quarantined_without_runtime(toolset: VshToolset) -> VshResult:
    if toolset.transactions is not None:
        return toolset.transactions.quarantined()
    from ._quarantine import QUARANTINE_NOTE
    from ._render import Outcome, render

    outcome = Outcome(
        "failed",
        feedback=toolset.quarantine_state.worker_text(),
        detail=toolset.quarantine_state.message,
        next_step=QUARANTINE_NOTE,
    )
    return render(outcome, toolset.config.limits)


def _native(runtime: vsh.Runtime | vsh.HookedRuntime) -> vsh.Runtime:
    return runtime.native if isinstance(runtime, vsh.HookedRuntime) else runtime


class ToolsetOptions(TypedDict, total=False):
    """Keyword options shared by :class:`VshToolset` and :class:`VshCapability`."""

    policy: str
    judge: Judge | JudgeHook | None
    hook_handler: HookHandler | None
    judge_scope: JudgeScope
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
    call_key: CallKey | None
    journal: bool


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
        self.runtime = getattr(toolset, "runtime", None)


def _budget_fields(budget: vsh.ExecutionBudget) -> dict[str, int]:
    names = [name for name in dir(budget) if name.startswith("max_")]
    return {name: getattr(budget, name) for name in names}


def _reopen(
    cls: type[VshToolset],
    workspace: str,
    options: dict[str, Any],
    budget: dict[str, int] | None,
) -> VshToolset:
    """Unpickle a :class:`VshToolset`: open its workspace again with the same options."""
    if budget is not None:
        options = {**options, "budget": vsh.ExecutionBudget(**budget)}
    return cls(workspace, **options)
