"""The review stage: the hook VSH calls for the toolset's transactions, and opening VSH.

Who reviews is decided once, when the runtime opens: a judge (through the fail-closed
:class:`~vsh_ai.JudgeHook`), a raw VSH hook handler, or, with ``approval="deferred"`` and
neither, a person: every mutation then waits, whatever VSH's profile would auto-approve.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from pathlib import Path
from typing import Literal

import vsh

from .._evidence import Evidence
from .._folder_notices import with_folder_notices
from .._hooks import Judge, JudgeHook, as_hook
from .._simulate import DEFAULT_REVIEW_CONTENT_BYTES
from .._verdict import Verdict
from ._config import ToolsetConfig
from ._driver import HookHandler
from ._journal import CURRENT_CALL, JournalEntry

__all__ = (
    "NEEDS_APPROVAL",
    "ToolsetHook",
    "decision_verdict",
    "evidence_of",
    "open_runtime",
    "record_verdict",
    "replayed_decision",
)

NEEDS_APPROVAL = "needs approval: a person must approve this change"
_EVIDENCE_KEPT = 4096
_EVIDENCE_PENDING_KEPT = 64  # only between a transaction's outcome and its binding

Reviewer = Literal["judge", "handler", "person"]


def evidence_of(event: vsh.RequestEvent | None, workspace: Path | None = None) -> Evidence | None:
    """Evidence of an event (with the notice files of the folders it deletes from, read
    from ``workspace``); an event it cannot snapshot only costs the approver's diff."""
    if event is None:
        return None
    try:
        return with_folder_notices(Evidence.from_event(event), workspace)
    except Exception:
        return None


class ToolsetHook:
    """The hook handler a toolset opens VSH with: one snapshot of each event serves the
    reviewer, the result and the approver; a replayed transaction gets its recorded
    decision (a paid judge is not asked twice)."""

    def __init__(
        self,
        reviewer: Reviewer,
        *,
        judge_hook: JudgeHook | None = None,
        handler: HookHandler | None = None,
        judge_reads: bool = False,
        workspace: Path | None = None,
    ) -> None:
        self.reviewer: Reviewer = reviewer
        self.workspace = workspace
        self.judge_hook = judge_hook
        self.handler = handler
        self.judge_reads = judge_reads
        self._seen: OrderedDict[str, Evidence | None] = OrderedDict()
        self._pending: OrderedDict[str, Evidence] = OrderedDict()

    async def __call__(self, event: vsh.RequestEvent) -> vsh.HookDecision:
        evidence = evidence_of(event, self.workspace)
        self._seen[event.transaction] = evidence
        while len(self._seen) > _EVIDENCE_KEPT:
            self._seen.popitem(last=False)
        call = CURRENT_CALL.get()
        entry = call.entry if call is not None else None
        if (
            entry is not None
            and entry.decision
            and entry.transaction == event.transaction
            and entry.hook_id == event.hook_id
        ):
            return replayed_decision(entry)  # the journal record is signed
        if not self.judge_reads and not event.canonical_diff:
            return vsh.HookDecision.follow_policy()  # reads are judged only when asked for
        if self.reviewer == "person":
            return vsh.HookDecision.review(NEEDS_APPROVAL)
        if self.judge_hook is not None:
            if evidence is None:
                return vsh.HookDecision.review(
                    "The change could not be read for review; a person must review it."
                )
            return await self.judge_hook(evidence)
        assert self.handler is not None
        decision = self.handler(event)  # the driver turns hook failures into review
        if inspect.isawaitable(decision):
            decision = await decision
        return decision

    def seen(self, transaction: str) -> Evidence | None:
        """The evidence of ``transaction``'s latest event (kept until :meth:`take`)."""
        return self._seen.get(transaction)

    def take(self, transaction: str, *, keep_pending: bool) -> Evidence | None:
        """Hand over the evidence of a transaction whose outcome is known."""
        evidence = self._seen.pop(transaction, None)
        if evidence is not None and keep_pending:
            self.keep_pending(transaction, evidence)
        return evidence

    def keep_pending(self, transaction: str, evidence: Evidence) -> None:
        """Keep a pending transaction's evidence until its binding records it."""
        self._pending[transaction] = evidence
        while len(self._pending) > _EVIDENCE_PENDING_KEPT:
            self._pending.popitem(last=False)

    def pending(self, transaction: str | None) -> Evidence | None:
        return self._pending.pop(transaction, None) if transaction else None

    def verdict_before(
        self, transaction: str, event: vsh.RequestEvent | None, decision: vsh.HookDecision
    ) -> Verdict | None:
        """The verdict a result carries for ``decision``, before VSH resolves it (the one
        :meth:`verdict_after` reads from the decision record afterwards)."""
        if self.judge_hook is not None:
            verdict = self.judge_hook.verdict_for(transaction)
            if verdict is not None and (
                verdict.decision == decision.verdict
                or (verdict.decision == "abstain" and decision.verdict == "follow_policy")
            ):
                return verdict
        if self.reviewer == "person":
            return None
        return decision_verdict(decision.verdict, decision.reason or "", event)

    def verdict_after(
        self, transaction: str, record: vsh.HookDecisionRecord | None
    ) -> Verdict | None:
        if self.judge_hook is not None:
            verdict = self.judge_hook.verdict_for(transaction)
            if verdict is not None:
                return verdict
        if record is None or self.reviewer == "person":
            return None
        return record_verdict(record)


def decision_verdict(kind: str, reason: str, event: vsh.RequestEvent | None) -> Verdict | None:
    """The verdict of a raw hook's decision (no judge object to ask)."""
    if event is None:
        return None
    decision = kind if kind in ("approve", "review", "reject") else "abstain"
    return Verdict(decision=decision, reason=reason, judge=event.hook_id)


def record_verdict(record: vsh.HookDecisionRecord) -> Verdict:
    """The verdict VSH recorded for a hook decision."""
    kind = record.verdict
    decision = kind if kind in ("approve", "review", "reject") else "abstain"
    return Verdict(decision=decision, reason=record.reason, judge=record.hook_id)


def replayed_decision(entry: JournalEntry) -> vsh.HookDecision:
    """The hook decision a journal record carries, for a re-run of the same transaction."""
    reason = entry.decision_reason or "recorded decision"
    if entry.decision == "approve":
        return vsh.HookDecision.approve(reason)
    if entry.decision == "reject":
        return vsh.HookDecision.reject(reason)
    if entry.decision == "review":
        return vsh.HookDecision.review(reason)
    return vsh.HookDecision.follow_policy()


def open_runtime(
    workspace: Path,
    config: ToolsetConfig,
    *,
    policy: str,
    judge: Judge | JudgeHook | None,
    hook_handler: HookHandler | None,
    review_content_bytes: int | None,
    hook_id: str | None,
    bash: bool | vsh.BashConfig,
) -> tuple[vsh.Runtime | vsh.HookedRuntime, ToolsetHook | None]:
    """Open VSH on ``workspace`` with the reviewer the options name (or none)."""
    bash_config = vsh.BashConfig() if bash is True else (bash or None)
    hook: ToolsetHook | None = None
    judge_reads = config.judge_scope == "all"
    if judge is not None:
        judge_hook = judge if isinstance(judge, JudgeHook) else as_hook(judge)
        hook = ToolsetHook(
            "judge", judge_hook=judge_hook, judge_reads=judge_reads, workspace=workspace
        )
        hook_id = hook_id or judge_hook.hook_id
    elif hook_handler is not None:
        hook = ToolsetHook(
            "handler", handler=hook_handler, judge_reads=judge_reads, workspace=workspace
        )
        hook_id = hook_id or "vsh-ai:hook"
    elif config.deferred:
        # A person reviews: every mutation waits for them, whatever the judge scope.
        hook = ToolsetHook("person")
        hook_id = hook_id or "vsh-ai:person"
    if hook is None:
        if review_content_bytes:
            raise ValueError("review_content_bytes needs a judge or hook_handler")
        return vsh.Runtime.open(workspace, policy=policy, bash=bash_config), None
    scope = vsh.HookScope.ALL_REQUESTS
    if config.judge_scope == "policy_pending" and hook.reviewer != "person":
        scope = vsh.HookScope.REVIEW_REQUIRED
    runtime = vsh.HookedRuntime.open(
        workspace,
        hook_handler=hook,
        hook_scope=scope,
        hook_id=hook_id or "vsh-ai:hook",
        review_content_bytes=DEFAULT_REVIEW_CONTENT_BYTES
        if review_content_bytes is None
        else review_content_bytes,
        policy=policy,
        bash=bash_config,
    )
    return runtime, hook
