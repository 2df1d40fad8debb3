"""VshToolset and VshCapability: Pydantic AI tools that run agent programs through VSH."""

from __future__ import annotations

import builtins
import inspect
import json
import math
import os
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack, get_args

import anyio
import vsh
from pydantic_ai import ApprovalRequired, ModelRetry, RunContext
from pydantic_ai.capabilities import Capability
from pydantic_ai.toolsets import FunctionToolset, ToolsetTool

from .._evidence import Evidence
from .._hooks import Judge, JudgeHook, as_hook
from .._simulate import DEFAULT_REVIEW_CONTENT_BYTES
from .._verdict import Verdict
from ._bindings import (
    ApprovalStore,
    VshApprovalError,
    args_digest,
)
from ._call_key import CallKey, default_call_key
from ._deferred import DeferredApprovals
from ._driver import HookHandler, HostChanged, WorkspaceDriver, is_recovery
from ._guest import guest_text
from ._instructions import instructions_for
from ._journal import (
    CURRENT_CALL,
    AlreadyDone,
    CommitJournal,
    CurrentCall,
    JournalEntry,
    JournalUnavailable,
    RecordedDecision,
)
from ._result import (
    NAMES_FROM_ARGUMENTS,
    ChangedPath,
    OutputLimits,
    ToolState,
    VshResult,
    bound_text,
    build_result,
    redact,
    safe_deny_reason,
)
from ._spans import open_span, span_attributes
from ._tools import FileTools
from ._workspace import (
    check_state_directory,
    check_workspace,
    probe_state_directory,
    read_quarantine,
)

__all__ = (
    "ApprovalMode",
    "JudgeScope",
    "ToolName",
    "ToolsetOptions",
    "VshCapability",
    "VshToolset",
)

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
JudgeScope = Literal["mutations", "all", "policy_pending"]
"""Which work a configured judge or hook sees: ``mutations`` (default: every change, even
what VSH policy would auto-approve; reads follow policy unjudged), ``all`` (reads too), or
``policy_pending`` (only what VSH policy sends to review: policy auto-approves small
edits without asking the judge)."""
_JUDGE_SCOPES: tuple[str, ...] = get_args(JudgeScope)
ALL_TOOLS: tuple[str, ...] = get_args(ToolName)
_ACTIONABLE = frozenset(("auto_approved", "pending_approval"))
_DUPLICATE = re.compile(
    r"(?:duplicate transaction:|pending artifact already exists for) ([0-9a-f]{16,})"
)
_PERMISSION = re.compile(r"^PermissionError: (.+)$", re.MULTILINE)
_NEEDS_APPROVAL = "needs approval: VSH policy requires a person to approve this change"
_QUARANTINE_FILE = "QUARANTINED.json"
# VSH errors that mean host files changed while the snapshot was taken (not a guest error):
# a node changed, vanished between listing and stat ("capture node metadata"), or the VFS
# snapshot failed. The outcome is stale: nothing committed, re-read and resubmit.
_HOST_CHURN = ("host node changed", "snapshot failure", "capture node metadata")


def _host_churn(text: str) -> bool:
    return any(marker in text for marker in _HOST_CHURN)


_CAPACITY_WAIT_S = 30.0


class _CapacityFull(Exception):
    """VSH's per-process preview capacity is in use; wait and try again."""


_EVIDENCE_KEPT = 4096
_EVIDENCE_PENDING_KEPT = 64  # only between a transaction's outcome and its binding


async def _follow_policy(event: vsh.RequestEvent) -> vsh.HookDecision:
    return vsh.HookDecision.follow_policy()


class VshToolset(FileTools, DeferredApprovals, FunctionToolset[Any]):
    """Tools that run an agent's programs as atomic VSH transactions.

    Every call previews the program on a virtual snapshot, lets VSH policy (and the
    judge or hook, if any) decide, and commits only approved work. Results are
    :class:`VshResult` values; guest errors come back to the model as retries.

    ``workspace_or_runtime`` is a workspace path (the toolset opens the runtime: a
    ``HookedRuntime`` when a judge or hook is given, or in ``deferred`` mode so the
    approver sees a diff; a plain ``Runtime`` otherwise) or an existing
    ``vsh.Runtime`` / ``vsh.HookedRuntime`` (which keeps the hook scope it was opened
    with). A configured judge or hook sees every mutation by default
    (``judge_scope="mutations"``): VSH policy can no longer auto-approve an edit the
    judge never saw; ``"all"`` sends reads too, ``"policy_pending"`` restores VSH's
    review-only scope (small edits auto-approve unjudged).

    ``approval="deferred"`` raises ``ApprovalRequired`` for pending work; a resumed,
    approved call commits exactly the transaction bound to that tool call (signed
    bindings stored in ``state_directory``, by default
    ``<workspace>/.vsh-runtime/vsh-ai/approvals``; never anywhere a guest can write).
    Denials and expiries are final; an approval arriving more than ``approval_ttl``
    seconds after the request commits nothing and reports ``stale``.

    Tool calls are exactly-once under replay (a durable engine re-running a turn after a
    crash): a commit journal in ``<state_directory>/journal`` records each call, keyed by
    ``call_key(ctx)`` (default: run id, run step and tool call id), with its transaction and the
    result the agent sees, durably before anything can commit. A replayed call returns
    the recorded result; it never runs the program again after its commit, nor asks the
    judge again about the same transaction. ``journal=False`` turns this off.

    After any VSH recovery error the toolset stops committing on the workspace (every
    call returns a ``failed`` result saying how to recover) until a person removes the
    quarantine file named in that result.

    A toolset opened on a workspace path pickles as its configuration and reopens the
    runtime where it is unpickled (its judge, hook and budget must pickle too).
    """

    def __init__(
        self,
        workspace_or_runtime: str | os.PathLike[str] | vsh.Runtime | vsh.HookedRuntime,
        *,
        policy: str = "balanced",
        judge: Judge | None = None,
        hook_handler: HookHandler | None = None,
        judge_scope: JudgeScope = "mutations",
        hook_scope: vsh.HookScope | None = None,
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
        self._config: dict[str, Any] = {
            name: value for name, value in locals().items() if name not in ("self", "__class__")
        }
        if judge is not None and hook_handler is not None:
            raise ValueError("pass either judge= or hook_handler=, not both")
        if approval not in ("feedback", "deferred"):
            raise ValueError(f"approval must be 'feedback' or 'deferred', got {approval!r}")
        if not (math.isfinite(approval_ttl) and approval_ttl > 0):
            raise ValueError(
                f"approval_ttl must be a positive number of seconds, got {approval_ttl}"
            )
        if hook_scope is not None:  # the older spelling of judge_scope
            judge_scope = "all" if hook_scope == vsh.HookScope.ALL_REQUESTS else "policy_pending"
        if judge_scope not in _JUDGE_SCOPES:
            raise ValueError(
                f"judge_scope must be one of {list(_JUDGE_SCOPES)}, got {judge_scope!r}"
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
        self.judge_scope: JudgeScope = judge_scope
        self.judge_hook: JudgeHook | None = None
        self._hook_all = judge_scope == "all"
        handler: HookHandler | None = None
        self._inner_handler: HookHandler | None = None
        self._evidence_seen: OrderedDict[str, Evidence | None] = OrderedDict()
        # Evidence of pending deferred work, kept until its binding records the before-state.
        self._evidence_pending: OrderedDict[str, Evidence] = OrderedDict()
        self.workspace: Path | None = None
        self.quarantine: str | None = None
        self._quarantine_file: Path | None = None
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
            native = (
                workspace_or_runtime.native
                if isinstance(workspace_or_runtime, vsh.HookedRuntime)
                else workspace_or_runtime
            )
            if state_directory is not None:
                probe_state_directory(native, Path(state_directory))
        else:
            workspace = Path(workspace_or_runtime)
            check_workspace(workspace)
            self.workspace = workspace.resolve()
            state_directory = state_directory or workspace / ".vsh-runtime" / "vsh-ai" / "approvals"
            check_state_directory(workspace, Path(state_directory))
            lock_key = str(self.workspace)
            self._quarantine_file = self.workspace / ".vsh-runtime" / "vsh-ai" / _QUARANTINE_FILE
            self.quarantine = read_quarantine(self._quarantine_file)
            try:
                self.runtime = self._open(
                    workspace,
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
                self._quarantine_now(error)
            handler = self._on_event if self._inner_handler is not None else None
        self.lock_key = lock_key
        if self.quarantine is None:
            self.quarantine = _QUARANTINED.get(lock_key)
        if hasattr(self, "runtime"):
            self.native: vsh.Runtime = (
                self.runtime.native if isinstance(self.runtime, vsh.HookedRuntime) else self.runtime
            )
            self.driver = WorkspaceDriver(self.native, handler=handler, lock_key=lock_key)
        self.store = ApprovalStore(state_directory) if state_directory is not None else None
        self.journal = (
            CommitJournal(Path(state_directory) / "journal")
            if state_directory is not None and journal
            else None
        )
        self.call_key: CallKey = call_key or default_call_key
        self._committed_views: OrderedDict[str, VshResult] = OrderedDict()
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

    def prune_journal(self, older_than_s: float) -> int:
        """Delete commit-journal records older than ``older_than_s`` seconds (returns the
        count). Keep them longer than any run can still be replayed: a durable workflow
        that waits days for an approval replays its earlier calls when it recovers, and a
        pruned call runs again."""
        return self.journal.prune(older_than_s) if self.journal is not None else 0

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
            name: value
            for name, value in self._config.items()
            if name not in ("workspace_or_runtime", "hook_scope")
        }
        options["judge_scope"] = self.judge_scope
        if isinstance(options.get("bash"), vsh.BashConfig):
            raise TypeError(
                "a VshToolset with a custom vsh.BashConfig cannot be pickled (VSH's config "
                "object does not pickle): build the toolset in each process"
            )
        budget = options.pop("budget", None)
        limits = _budget_fields(budget) if budget is not None else None
        return (_reopen, (type(self), str(self.workspace), options, limits))

    # -- runtime ------------------------------------------------------------------------

    def _open(
        self,
        workspace: Path,
        *,
        policy: str,
        judge: Judge | None,
        hook_handler: HookHandler | None,
        hook_id: str | None,
        review_content_bytes: int | None,
        bash: bool | vsh.BashConfig,
    ) -> vsh.Runtime | vsh.HookedRuntime:
        bash_config = vsh.BashConfig() if bash is True else (bash or None)
        scope = vsh.HookScope.ALL_REQUESTS
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
            scope = vsh.HookScope.REVIEW_REQUIRED
        if self.judge_scope == "policy_pending":
            scope = vsh.HookScope.REVIEW_REQUIRED
        if self._inner_handler is None:
            if review_content_bytes:
                raise ValueError("review_content_bytes needs a judge or hook_handler")
            return vsh.Runtime.open(workspace, policy=policy, bash=bash_config)
        return vsh.HookedRuntime.open(
            workspace,
            hook_handler=self._on_event,
            hook_scope=scope,
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
        while len(self._evidence_seen) > _EVIDENCE_KEPT:
            self._evidence_seen.popitem(last=False)
        call = CURRENT_CALL.get()
        entry = call.entry if call is not None else None
        if (
            entry is not None
            and entry.decision
            and entry.transaction == event.transaction
            and entry.hook_id == event.hook_id
        ):
            # A replay of this exact transaction: the judge already decided it (and a paid
            # judge is not asked twice); the journal record is signed.
            return _replayed_decision(entry)
        if not self._hook_all and not event.canonical_diff:
            return vsh.HookDecision.follow_policy()  # reads are judged only when asked for
        if self.judge_hook is not None:
            if evidence is None:
                return vsh.HookDecision.review(
                    "The change could not be read for review; a person must review it."
                )
            return await self.judge_hook(evidence)
        assert self._inner_handler is not None
        decision = self._inner_handler(event)  # the driver turns hook failures into review
        if inspect.isawaitable(decision):
            decision = await decision
        return decision

    def _evidence(self, transaction: str) -> Evidence | None:
        evidence = self._evidence_seen.pop(transaction, None)
        if evidence is not None and self.approval == "deferred":
            self._evidence_pending[transaction] = evidence
            while len(self._evidence_pending) > _EVIDENCE_PENDING_KEPT:
                self._evidence_pending.popitem(last=False)
        return evidence

    # -- quarantine after recovery errors ------------------------------------------------

    def _quarantine_now(self, error: BaseException) -> None:
        """Stop committing on this workspace: VSH could not prove its host state."""
        where = str(self.workspace) if self.workspace else "this workspace"
        blobs = (
            f"{self.workspace}/.vsh-runtime/data/blobs" if self.workspace else "its .vsh-runtime"
        )
        lift = (
            f"then delete {self._quarantine_file}"
            if self._quarantine_file
            else "then restart the process"
        )
        message = (
            f"VSH reported a recovery error on {where} ({_error_kind(error)}), so vsh-ai stopped "
            "committing there to protect host files. Host files may be inconsistent: VSH 0.6.0 "
            "can lose bytes when another process writes the same files during a commit. To "
            "recover: stop every other writer; compare the affected files with version control "
            f"or backups; the bytes VSH committed survive as content blobs under {blobs}, and "
            "a file VSH moved aside before installing its new version stays in the "
            "transaction's quarantine slot under .vsh-runtime/transactions "
            "(vsh.Runtime.recover() reports what startup recovery did); "
            f"{lift} and open the workspace again."
        )
        text = str(error)
        if "commit plan" in text or "commit journal" in text:
            message = (
                f"VSH could not recover {where} ({_error_kind(error)}): a commit was "
                "interrupted (the process was killed) while VSH was writing or removing its "
                "own commit plan or journal, a state VSH 0.6.0 cannot recover from. vsh-ai "
                "stopped committing there. Left over: "
                f"{_leftover_transactions(self.workspace)}. A folder whose stage/ and "
                "quarantine/ are empty never touched host files; otherwise host files hold "
                "the old or the new version of each file (stage/ has the new versions, "
                "quarantine/ the old ones): check them. To recover: move the folder out of "
                f".vsh-runtime/transactions, {lift} and open the workspace again."
            )
        self.quarantine = message
        key = getattr(self, "lock_key", None) or str(self.workspace)
        _QUARANTINED[key] = message
        if self._quarantine_file is not None:
            try:
                self._quarantine_file.parent.mkdir(parents=True, exist_ok=True)
                self._quarantine_file.write_text(json.dumps({"message": message}))
            except OSError:
                pass

    def _quarantined(self) -> VshResult:
        message = self.quarantine or "this workspace is quarantined"
        return build_result(
            "failed",
            receipt=None,
            limits=self.limits,
            feedback=message,
            deny_reason=None,
        ).model_copy(
            update={
                "next_step": "NOT applied: this workspace is quarantined after a VSH recovery "
                "error. Stop and report the feedback to the user; do not retry."
            }
        )

    def _host_check(self, since_ns: int) -> Any:
        """A check that the files a transaction writes were not touched after ``since_ns``."""
        root = self.workspace
        if root is None:
            return None

        def check(paths: Sequence[str]) -> str | None:
            for path in paths:
                try:
                    info = (root / path).lstat()
                except OSError:  # absent, or a name the host refuses: VSH decides
                    continue
                if max(info.st_mtime_ns, info.st_ctime_ns) >= since_ns:
                    return "a file this transaction writes was changed on the host meanwhile"
            return None

        return check

    # -- tool calls ---------------------------------------------------------------------

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        if self.store is not None:
            await self._record_denials(ctx, tools)
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        digest = args_digest(name, tool_args)
        key = self.call_key(ctx) if self.journal is not None else None
        entry: JournalEntry | None = None
        if key is not None and self.journal is not None:
            try:
                entry = self.journal.load(key, digest)
            except VshApprovalError as error:
                return self._failed(str(error), retry=False)
            except JournalUnavailable as error:
                return self._failed(f"{error}; nothing was run or committed.", retry=False)
        if self.quarantine is not None:
            # A finished call's recorded result is still true (a replay stays the same);
            # nothing else runs on a quarantined workspace.
            if entry is not None and entry.phase == "done" and entry.result is not None:
                return entry.result
            return self._quarantined()
        result, attempt = await self._settle_entry(entry) if entry is not None else (None, 0)
        call = CurrentCall(name, tool_args, ctx, key, digest, entry, attempt)
        if result is not None:  # a replay answered from the journal: say so in traces
            with open_span("vsh-ai replay", tool=name) as span:
                span.set_attributes(span_attributes(result))
        else:
            token = CURRENT_CALL.set(call)
            try:
                result = await self._call(call, tool)
            finally:
                CURRENT_CALL.reset(token)
        if isinstance(result, VshResult) and (entry is None or entry.phase != "done"):
            result = await self._journal_done(call, result)
        return result

    async def _call(self, call: CurrentCall, tool: ToolsetTool[Any]) -> Any:
        call_id, ctx = call.ctx.tool_call_id, call.ctx
        if call_id is not None and self.store is not None:
            try:
                binding = self.store.load(call_id, call.digest)
            except VshApprovalError as error:
                return self._failed(str(error), retry=False)
            if ctx.tool_call_approved:
                if binding is not None:
                    return await self._resume(binding, call.name, ctx)
                if self.store.bound(call_id):
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
                return await self._replay(binding)
        return await super().call_tool(call.name, call.args, ctx, tool)

    # -- the commit journal (exactly-once under replay) ----------------------------------

    async def _settle_entry(self, entry: JournalEntry) -> tuple[VshResult | None, int]:
        """The result of a call the journal has seen before, or None to run it (again),
        with the attempt number the run must use.

        A finished call returns its recorded result. A call recorded only as prepared
        asks VSH's durable state: committed means the recorded result (never a second
        run); rejected, or pending in feedback mode, likewise. Anything else means the
        commit never happened, so the call runs again; when VSH recovery rolled back an
        interrupted commit (state ``failed``), the re-run is a new attempt, since VSH
        never reuses a failed transaction.
        """
        if entry.phase == "done":
            return entry.result, 0
        if self.approval == "deferred" and (
            entry.phase == "judging" or (entry.expected and entry.expected.state == "pending")
        ):
            return None, entry.attempt  # the call asked for approval: its binding answers
        expected = entry.expected
        if entry.transaction is None or expected is None:
            return None, entry.attempt
        try:
            state = await self.driver.state(entry.transaction)
        except vsh.VshRuntimeError:  # unknown here: an auto preview dies with its process
            return None, entry.attempt
        if state == "committed":
            if expected.state in ("committed", "read"):
                return expected, 0
            committed = build_result(
                "committed",
                receipt=None,
                limits=self.limits,
                transaction=entry.transaction,
                feedback="This change was committed by a later approval.",
            )
            return committed, 0
        if (state == "rejected" and expected.state == "rejected") or (
            state == "pending_approval"
            and expected.state == "pending"
            and self.approval == "feedback"
        ):
            return expected, 0
        if state == "failed":
            return None, entry.attempt + 1
        return None, entry.attempt

    async def _journal_done(self, call: CurrentCall, result: VshResult) -> VshResult:
        """Record the call's result; returns the recorded one (a result another process
        recorded first wins, so every attempt of one call reports the same thing)."""
        if call.key is None or self.journal is None or self.quarantine is not None:
            return result
        finish = partial(
            self.journal.finish,
            key=call.key,
            tool_name=call.name,
            digest=call.digest,
            result=result,
        )
        # Not recording the outcome costs only a look at VSH's state on a replay (the
        # prepared record stays): the result the agent gets stays true.
        try:
            recorded = await anyio.to_thread.run_sync(finish)
        except JournalUnavailable:
            return result
        return recorded.result or result

    def _journal_prepare(
        self,
        call: CurrentCall | None,
        transaction: str,
        expected: VshResult,
        decision: vsh.HookDecision | None = None,
        hook_id: str = "",
    ) -> VshResult:
        """Record a call's transaction and result before anything can commit (sync: may run
        in VSH's worker thread). A replay of the same transaction keeps the result the
        first attempt recorded, so the agent sees the same thing either way."""
        if call is None or call.key is None or self.journal is None:
            return expected
        entry = call.entry
        recorded = decision.verdict if decision is not None else None
        if (
            entry is not None
            and entry.transaction == transaction
            and entry.expected is not None
            and entry.expected.state == expected.state
            and entry.decision == recorded
            and entry.hook_id == hook_id
        ):
            expected = entry.expected
        self.journal.prepare(
            key=call.key,
            tool_name=call.name,
            digest=call.digest,
            transaction=transaction,
            expected=expected,
            decision=_recorded(recorded),
            decision_reason=(decision.reason or "") if decision is not None else "",
            hook_id=hook_id,
            attempt=call.attempt,
        )
        return expected

    async def run_program(
        self,
        code: str,
        intent: str,
        language: vsh.Language = vsh.Language.MONTY,
        *,
        tool: str = "vsh_run",
    ) -> VshResult:
        """Run one program as one transaction and return (or defer) its result."""
        if self.quarantine is not None:
            return self._quarantined()
        call = CURRENT_CALL.get()
        if call is not None and call.attempt:
            # The same program and intent would name the rolled-back transaction again.
            intent = (
                f"{intent} [re-run {call.attempt} by vsh-ai: an earlier attempt's commit was "
                "interrupted by a crash and rolled back]"
            )
        request = vsh.RunRequest(
            code,
            language=language,
            intent=intent,
            mode=vsh.RunMode.AUTO,
            detail=vsh.ReceiptDetail.FULL,
            budget=self.budget,
        )
        retry: ModelRetry | None = None
        names = NAMES_FROM_ARGUMENTS.set(tool != "vsh_run")
        with open_span("vsh-ai transaction", tool=tool, language=_language_name(language)) as span:
            try:
                result = await self._transact(request)
                span.set_attributes(span_attributes(result))
            except ModelRetry as error:  # re-raised outside: guest text stays out of spans
                span.set_attribute("state", "guest_error")
                retry = error
            finally:
                NAMES_FROM_ARGUMENTS.reset(names)
        if retry is not None:
            raise retry
        evidence = (
            self._evidence_pending.pop(result.transaction, None) if result.transaction else None
        )
        if result.state == "pending" and self.approval == "deferred":
            await self._defer(
                result, call, program=(code, intent, _language_name(language)), evidence=evidence
            )
        return result

    async def _transact(self, request: vsh.RunRequest) -> VshResult:
        """One transaction; the outside world's failures become results, never crashes.

        VSH holds at most 64 unfinished previews per process; a call that finds them all
        in use (many judged calls in flight) waits for one, up to ``_CAPACITY_WAIT_S``.
        """
        deadline = time.monotonic() + _CAPACITY_WAIT_S
        while True:
            try:
                return await self._transact_guarded(request)
            except _CapacityFull:
                if time.monotonic() > deadline:
                    return self._failed(
                        "VSH has too many unfinished transactions in this process; nothing "
                        "was committed.",
                        retry=True,
                    )
                await anyio.sleep(0.05)

    async def _transact_guarded(self, request: vsh.RunRequest) -> VshResult:
        try:
            return await self._transact_once(request)
        except vsh.VshRecoveryError as error:
            self._quarantine_now(error)
            return self._quarantined()
        except HostChanged as error:
            return self._stale(f"Nothing was committed: {error}. Re-read and submit again.")
        except JournalUnavailable as error:
            return self._failed(f"{error}; nothing was committed.", retry=False)
        except AlreadyDone as done:  # finished by another process: its result, no commit
            return done.entry.result or self._failed("no recorded result", retry=False)
        except vsh.VshStaleError as error:
            return self._stale(bound_text(str(error), self.limits.error))
        except (vsh.VshStateError, vsh.VshExecutionError):
            raise
        except vsh.VshRuntimeError as error:
            if is_recovery(error):
                self._quarantine_now(error)
                return self._quarantined()
            return self._outside_failure(error)

    def _stale(self, feedback: str, transaction: str | None = None) -> VshResult:
        return build_result(
            "stale", receipt=None, limits=self.limits, feedback=feedback, transaction=transaction
        )

    def _failed(self, feedback: str, *, retry: bool, transaction: str | None = None) -> VshResult:
        advice = (
            " You may retry (changing what the feedback names)."
            if retry
            else " Do not retry; report it to the user."
        )
        return build_result(
            "failed",
            receipt=None,
            limits=self.limits,
            feedback=bound_text(feedback, self.limits.error) + advice,
            transaction=transaction,
        )

    def _outside_failure(self, error: vsh.VshRuntimeError) -> VshResult:
        """VSH failed for a reason outside the program: churn, the OS, capacity."""
        text = str(error)
        if _host_churn(text):
            return self._stale(
                "Files in the workspace changed on the host while the program ran; nothing "
                "was committed. Re-read what you depend on and submit again."
            )
        if "File name too long" in text or "os error 36" in text:
            return self._failed(
                "The host filesystem refused a file name as too long (most allow 255 bytes "
                "per name); nothing was committed.",
                retry=True,
            )
        if "capacity" in text:
            return self._failed(
                "VSH has too many unfinished previews in this process; nothing was committed.",
                retry=True,
            )
        return self._failed(
            f"VSH could not complete the transaction ({_error_kind(error)}): "
            f"{redact(text)}; nothing was committed.",
            retry=True,
        )

    async def _transact_once(self, request: vsh.RunRequest) -> VshResult:
        hooked = isinstance(self.runtime, vsh.HookedRuntime)
        since_ns = time.time_ns()
        check = self._host_check(since_ns)
        call = CURRENT_CALL.get()
        expected: list[VshResult] = []

        def before_commit(preview: vsh.Receipt) -> None:
            committed = self._result_for(preview, "committed", None, None)
            expected.append(self._journal_prepare(call, preview.transaction, committed))

        try:
            if hooked:
                receipt = await self.driver.preview(request)
                outcome: vsh.Receipt | vsh.VshStaleError = receipt
            else:
                receipt, outcome = await self.driver.run(
                    request, host_check=check, before_commit=before_commit
                )
        except vsh.VshExecutionError as error:
            return self._guest_error(error, request.code)
        except vsh.VshStateError as error:
            if "preview capacity" in str(error):
                raise _CapacityFull from None
            return await self._duplicate(error)
        transaction = receipt.transaction
        read_only = receipt.changed_paths == 0
        if receipt.state == "denied":
            if hooked:
                self.driver.discard(transaction)
            return build_result("denied", receipt=receipt, limits=self.limits)
        if receipt.state not in _ACTIONABLE:
            return self._failed(f"unexpected VSH preview state {receipt.state!r}", retry=True)
        if hooked:
            if read_only and not self._hook_all:
                self.driver.discard(transaction)
                return build_result("read", receipt=receipt, limits=self.limits)
            try:
                await self._journal_judging(call, transaction)
            except BaseException:
                self.driver.discard(transaction)
                raise
            return await self._judge(receipt, call, check, read_only=read_only)
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
        result = self._outcome(receipt, outcome, None, read_only=read_only)
        if expected and expected[-1].state == result.state:
            return expected[-1]  # what the journal promised (and a replay returns)
        return result

    async def _judge(
        self,
        receipt: vsh.Receipt,
        call: CurrentCall | None,
        check: Any,
        *,
        read_only: bool,
    ) -> VshResult:
        """Ask the hook about a previewed (or reopened) transaction, journal the decision,
        and let VSH resolve it (commit, pending or rejected)."""
        transaction = receipt.transaction
        expected: list[VshResult] = []

        async def before_resolve(
            event: vsh.RequestEvent | None, decision: vsh.HookDecision
        ) -> None:
            state = _decided_state(receipt.state, decision.verdict, read_only=read_only)
            verdict = self._verdict_of(transaction, event, decision)
            decided = self._result_for(
                receipt, state, verdict, self._evidence_seen.get(transaction)
            )
            prepare = partial(
                self._journal_prepare,
                call,
                transaction,
                decided,
                decision,
                event.hook_id if event is not None else "",
            )
            expected.append(await anyio.to_thread.run_sync(prepare))

        try:
            resolution = await self.driver.hooked_commit(
                transaction, host_check=check, before_resolve=before_resolve
            )
        except vsh.VshStaleError as error:
            return build_result(
                "stale",
                receipt=receipt,
                limits=self.limits,
                feedback=bound_text(str(error), self.limits.error),
                evidence=self._evidence(transaction),
            )
        except HostChanged as error:
            return build_result(
                "stale",
                receipt=receipt,
                limits=self.limits,
                feedback=f"Nothing was committed: {error}. Re-read and submit again.",
                evidence=self._evidence(transaction),
            )
        result = self._outcome(receipt, resolution.receipt, resolution.hook, read_only=read_only)
        if expected and expected[-1].state == result.state:
            return expected[-1]  # what the journal promised (and a replay returns)
        return result

    async def _journal_judging(self, call: CurrentCall | None, transaction: str) -> None:
        if call is None or call.key is None or self.journal is None:
            return
        mark = partial(
            self.journal.judging,
            key=call.key,
            tool_name=call.name,
            digest=call.digest,
            transaction=transaction,
            attempt=call.attempt,
        )
        await anyio.to_thread.run_sync(mark)

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
        state: ToolState
        if final.state == "committed":
            state = "read" if read_only else "committed"
        elif final.state == "pending_approval":
            state = "pending"
            if self.approval == "deferred":  # what a later approved resume returns
                self._committed_views[transaction] = self._result_for(
                    preview, "committed", None, evidence
                )
                while len(self._committed_views) > _EVIDENCE_PENDING_KEPT:
                    self._committed_views.popitem(last=False)
        elif final.state == "rejected":
            state = "rejected"
        elif final.state == "stale":
            state = "stale"
        else:
            return self._failed(
                f"unexpected VSH transaction state {final.state!r}",
                retry=True,
                transaction=transaction,
            )
        return self._result_for(preview, state, verdict, evidence)

    def _result_for(
        self,
        preview: vsh.Receipt,
        state: ToolState,
        verdict: Verdict | None,
        evidence: Evidence | None,
    ) -> VshResult:
        """The result of ``preview`` ending in ``state`` (pure: also used before commit)."""
        feedback = verdict.reason if verdict and verdict.decision in ("review", "reject") else None
        if state == "pending":
            feedback = feedback or _NEEDS_APPROVAL
        return build_result(
            state,
            receipt=preview,
            limits=self.limits,
            evidence=evidence,
            verdict=verdict,
            feedback=feedback,
        )

    def _verdict_of(
        self, transaction: str, event: vsh.RequestEvent | None, decision: vsh.HookDecision
    ) -> Verdict | None:
        """The verdict a result will carry for ``decision``, known before VSH resolves it
        (the same one :meth:`_verdict` reads from the decision record afterwards)."""
        if self.judge_hook is not None:
            verdict = self.judge_hook.verdict_for(transaction)
            if verdict is not None and (
                verdict.decision == decision.verdict
                or (verdict.decision == "abstain" and decision.verdict == "follow_policy")
            ):
                return verdict
        if event is None or self._inner_handler is _follow_policy:
            return None
        kind = (
            decision.verdict if decision.verdict in ("approve", "review", "reject") else "abstain"
        )
        return Verdict(decision=kind, reason=decision.reason or "", judge=event.hook_id)

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

    def _guest_error(self, error: vsh.VshExecutionError, code: str) -> VshResult:
        """A failed program: a retry the model can act on, without bytes it must not see.

        VSH's error carries only text (no receipt, no effects), and that text is whatever
        the program put into its exception: possibly bytes it read. So: host churn is
        ``stale``; a ``PermissionError`` is a denial with VSH's category only; with a judge
        or hook configured the message of any error whose text may come from data is
        withheld (type, line and the program's own source line remain); detected secrets
        are always redacted.
        """
        text = str(error)
        if _host_churn(text):
            return self._stale(
                "Files in the workspace changed on the host while the program ran; nothing "
                "was committed. Re-read what you depend on and submit again."
            )
        if text.startswith("internal "):
            return self._outside_failure(error)
        diagnostics = getattr(error, "diagnostics", None)
        stderr = ""
        if diagnostics is not None:
            stderr = diagnostics.stderr.decode(errors="replace")
        denied = _PERMISSION.search(text)
        if denied is not None or (diagnostics is not None and diagnostics.denied_accesses):
            reason = denied.group(1) if denied else "bash accessed a protected path"
            category = safe_deny_reason(reason)
            return build_result(
                "denied",
                receipt=None,
                limits=self.limits,
                deny_reason=category,
                feedback="The program was refused access (VSH category: "
                f"{category}); the program's own message is not shown.",
            )
        judged = self._inner_handler is not None and self._inner_handler is not _follow_policy
        shown = guest_text(text, stderr, code, withhold=judged)
        raise ModelRetry(
            "The program failed inside VSH and nothing was changed:\n"
            f"{bound_text(shown, self.limits.error, keep='tail')}\n"
            "Fix the program and call the tool again."
        )

    async def _duplicate(self, error: vsh.VshStateError) -> VshResult:
        match = _DUPLICATE.search(str(error))
        if match is None:
            return self._failed(f"VSH refused the transaction ({_error_kind(error)})", retry=True)
        transaction = match.group(1)
        state = await self.driver.state(transaction)
        call = CURRENT_CALL.get()
        entry = call.entry if call is not None else None
        if (
            state == "pending_approval"
            and entry is not None
            and entry.phase == "judging"
            and entry.transaction == transaction
        ):
            # This call's earlier attempt stopped while the judge was deciding: VSH kept the
            # transaction pending, no decision was ever recorded. Ask the judge now.
            try:
                reopened = await self.driver.reopen(transaction)
            except vsh.VshStaleError as stale:
                return self._stale(bound_text(str(stale), self.limits.error), transaction)
            if reopened is not None and reopened[1].state == "pending_approval":
                receipt = reopened[1]
                check = self._host_check(time.time_ns())
                return await self._judge(receipt, call, check, read_only=receipt.changed_paths == 0)
            state = await self.driver.state(transaction)
        if state == "pending_approval":
            # Re-read its exact changes and diff: an approver (deferred mode) must see
            # what approving this transaction would commit, never "no changes".
            try:
                reopened = await self.driver.reopen(transaction)
            except vsh.VshStaleError as stale:
                return self._stale(bound_text(str(stale), self.limits.error), transaction)
            if reopened is not None and reopened[1].state == "pending_approval":
                event, receipt = reopened
                evidence = _evidence_of(event)
                if self.approval == "deferred":  # what binding it records, as a fresh run
                    self._committed_views[transaction] = self._result_for(
                        receipt, "committed", None, evidence
                    )
                    if evidence is not None:
                        self._evidence_pending[transaction] = evidence
                return build_result(
                    "pending",
                    receipt=receipt,
                    limits=self.limits,
                    evidence=evidence,
                    feedback="An identical request (same program and intent) is already "
                    "waiting for approval as this transaction.",
                )
            state = await self.driver.state(transaction)
        if state == "rejected":
            return build_result(
                "rejected",
                receipt=None,
                limits=self.limits,
                transaction=transaction,
                feedback="This identical change (same program and intent, same files) was "
                "already refused (rejected by the reviewer or denied by a person). Do not "
                "resubmit it; follow the earlier feedback or ask the user.",
            )
        raise ModelRetry(
            f"This exact program and intent was already submitted on the current workspace "
            f"as transaction {transaction} (state: {state}). Do not repeat it; change the "
            "program if you need a different outcome."
        )

    # -- the tools ----------------------------------------------------------------------

    def _register(self, selected: Sequence[str]) -> None:
        for name in selected:
            self.add_function(getattr(self, name), takes_ctx=False, name=name)
        run = self.tools.get("vsh_run")
        if run is not None:
            languages = ["monty", "bash"] if self.bash_enabled else ["monty"]
            run.function_schema.json_schema["properties"]["language"]["enum"] = languages


class ToolsetOptions(TypedDict, total=False):
    """Keyword options shared by :class:`VshToolset` and :class:`VshCapability`."""

    policy: str
    judge: Judge | None
    hook_handler: HookHandler | None
    judge_scope: JudgeScope
    hook_scope: vsh.HookScope | None
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


def _evidence_of(event: vsh.RequestEvent | None) -> Evidence | None:
    """Evidence for a result's diff; an event it cannot snapshot only costs the diff."""
    if event is None:
        return None
    try:
        return Evidence.from_event(event)
    except Exception:
        return None


def _leftover_transactions(workspace: Path | None) -> str:
    """What VSH left in ``.vsh-runtime/transactions`` (names and sizes only: a diagnosis)."""
    if workspace is None:
        return "unknown (the toolset was given a runtime, not a workspace)"
    folder = workspace / ".vsh-runtime" / "transactions"
    described: list[str] = []
    try:
        for transaction in sorted(folder.iterdir())[:5]:
            parts = []
            for name in ("plan", "journal"):
                item = transaction / name
                parts.append(
                    f"{name} {item.stat().st_size} bytes" if item.exists() else f"no {name}"
                )
            for name in ("stage", "quarantine"):
                slot = transaction / name
                count = sum(1 for _ in slot.iterdir()) if slot.is_dir() else 0
                parts.append(f"{name}/ {count} file(s)")
            described.append(f"transactions/{transaction.name} ({', '.join(parts)})")
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    return "; ".join(described) or "no transaction folder"


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


def _recorded(verdict: str | None) -> RecordedDecision | None:
    if verdict in ("approve", "review", "reject", "follow_policy"):
        return verdict  # type: ignore[return-value]
    return None


def _replayed_decision(entry: JournalEntry) -> vsh.HookDecision:
    """The hook decision a journal record carries, for a re-run of the same transaction."""
    reason = entry.decision_reason or "recorded decision"
    if entry.decision == "approve":
        return vsh.HookDecision.approve(reason)
    if entry.decision == "reject":
        return vsh.HookDecision.reject(reason)
    if entry.decision == "review":
        return vsh.HookDecision.review(reason)
    return vsh.HookDecision.follow_policy()


def _decided_state(preview_state: str, verdict: str, *, read_only: bool) -> ToolState:
    """The tool state a hook decision leads to, if VSH resolves it without surprises."""
    if verdict == "reject":
        return "rejected"
    commits = verdict == "approve" or (
        verdict == "follow_policy" and preview_state == "auto_approved"
    )
    if not commits:
        return "pending"
    return "read" if read_only else "committed"


def _language_name(language: vsh.Language) -> Literal["monty", "bash"]:
    return "bash" if language == vsh.Language.BASH else "monty"


_QUARANTINED: dict[str, str] = {}
"""Workspaces (lock keys) this process stopped committing on after a recovery error."""


def _error_kind(error: BaseException) -> str:
    """The error's type and first line, secrets redacted (VSH messages hold paths)."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {redact(bound_text(first, 200))}"


def changes_of_receipt(receipt: vsh.Receipt) -> tuple[ChangedPath, ...]:
    """What VSH reports it committed (never a stored copy)."""
    return tuple(ChangedPath(path=path, kind=kind) for path, kind in receipt.changes)
