"""The transaction path of one tool call: preview, review, journal, commit, outcome.

Each step returns an :class:`~vsh_ai.toolset._render.Outcome`; the renderer alone turns
it into what anyone sees. The outside world's failures (host churn, capacity, names the
filesystem refuses, recovery errors) become outcomes too, never crashes of ``agent.run``.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Literal

import anyio
import vsh
from pydantic_ai import ModelRetry

from .._evidence import Evidence
from .._verdict import Verdict
from ._config import ToolsetConfig
from ._driver import CommitContended, HostChanged, HostCheck, WorkspaceDriver, is_recovery
from ._hook import NEEDS_APPROVAL, ToolsetHook, decision_verdict, record_verdict
from ._journal import CURRENT_CALL, AlreadyDone, CurrentCall, JournalUnavailable
from ._quarantine import QUARANTINE_NOTE, Quarantine, error_kind
from ._records import CallRecords
from ._render import Outcome, guest_retry, render, span_attributes
from ._repeats import ALREADY_REFUSED, Repeats
from ._result import ToolState, VshResult, bound_text, safe_deny_reason
from ._spans import open_span

__all__ = ("Transactions",)

_ACTIONABLE = frozenset(("auto_approved", "pending_approval"))
_PERMISSION = re.compile(r"^PermissionError: (.+)$", re.MULTILINE)
# VSH errors that mean host files changed while the snapshot was taken (not a guest error):
# a node changed, vanished between listing and stat ("capture node metadata"), or the VFS
# snapshot failed. The outcome is stale: nothing committed, re-read and resubmit.
_HOST_CHURN = ("host node changed", "snapshot failure", "capture node metadata")
_CHURN_NOTE = (
    "Files in the workspace changed on the host while the program ran; nothing was "
    "committed. Re-read what you depend on and submit again."
)
_STALE_NOTE = (
    "The files this change depends on changed on the host before it could commit; nothing "
    "was committed. Re-read them and submit again."
)
_CAPACITY_WAIT_S = 30.0
_VIEWS_KEPT = 64


class _CapacityFull(Exception):
    """VSH's per-process preview capacity is in use; wait and try again."""


def _host_churn(text: str) -> bool:
    return any(marker in text for marker in _HOST_CHURN)


def decided_state(preview_state: str, verdict: str, *, read_only: bool) -> ToolState:
    """The tool state a hook decision leads to, if VSH resolves it without surprises."""
    if verdict == "reject":
        return "rejected"
    commits = verdict == "approve" or (
        verdict == "follow_policy" and preview_state == "auto_approved"
    )
    if not commits:
        return "pending"
    return "read" if read_only else "committed"


def language_name(language: vsh.Language) -> Literal["monty", "bash"]:
    return "bash" if language == vsh.Language.BASH else "monty"


class Transactions:
    """Runs programs as transactions on one workspace (the toolset's core)."""

    def __init__(
        self,
        config: ToolsetConfig,
        *,
        runtime: vsh.Runtime | vsh.HookedRuntime,
        driver: WorkspaceDriver,
        hook: ToolsetHook | None,
        records: CallRecords,
        quarantine: Quarantine,
        workspace: Path | None,
    ) -> None:
        self.config = config
        self.limits = config.limits
        self.hooked = isinstance(runtime, vsh.HookedRuntime)
        self.driver = driver
        self.hook = hook
        self.records = records
        self.quarantine = quarantine
        self.workspace = workspace
        self.judge_reads = config.judge_scope == "all"
        self.repeats = Repeats(self)
        self.committed_views: OrderedDict[str, VshResult] = OrderedDict()
        """What an approved resume of a pending transaction returns (deferred mode)."""

    # -- outcomes that are not a transaction -------------------------------------------

    def render(self, outcome: Outcome) -> VshResult:
        return render(outcome, self.limits)

    def quarantined(self) -> VshResult:
        return self.render(
            Outcome(
                "failed",
                feedback=self.quarantine.worker_text(),
                detail=self.quarantine.message,
                next_step=QUARANTINE_NOTE,
            )
        )

    def stale(self, feedback: str = _STALE_NOTE, **outcome: object) -> VshResult:
        return self.render(Outcome("stale", feedback=feedback, **outcome))  # type: ignore[arg-type]

    def failed(self, feedback: str, *, retry: bool, detail: str | None = None) -> VshResult:
        """A failure the toolset describes (fixed text; VSH's own words go to ``detail``)."""
        advice = (
            " You may retry (changing what the feedback names)."
            if retry
            else " Do not retry; report it to the user."
        )
        return self.render(
            Outcome(
                "failed",
                feedback=bound_text(feedback, self.limits.error) + advice,
                detail=detail,
            )
        )

    def outside_failure(self, error: vsh.VshRuntimeError) -> VshResult:
        """VSH failed for a reason outside the program: churn, the OS, capacity."""
        text = str(error)
        if _host_churn(text):
            return self.stale(_CHURN_NOTE)
        if "in state Rejected" in text:  # the identical program was refused before
            return self.render(Outcome("rejected", feedback=ALREADY_REFUSED))
        if "File name too long" in text or "os error 36" in text:
            return self.failed(
                "The host filesystem refused a file name as too long (most allow 255 bytes "
                "per name); nothing was committed.",
                retry=True,
                detail=text,
            )
        if "capacity" in text:
            return self.failed(
                "VSH has too many unfinished previews in this process; nothing was committed.",
                retry=True,
            )
        return self.failed(
            f"VSH could not complete the transaction ({type(error).__name__}); nothing was "
            "committed.",
            retry=True,
            detail=f"{error_kind(error)}: {text}",
        )

    # -- one program, one transaction ----------------------------------------------------

    async def run_program(
        self,
        code: str,
        intent: str,
        language: vsh.Language = vsh.Language.MONTY,
        *,
        tool: str = "vsh_run",
        defer: Callable[[VshResult, CurrentCall | None, tuple[str, str, str]], object]
        | None = None,
    ) -> VshResult:
        """Run one program as one transaction and return (or defer) its result."""
        if self.quarantine.active:
            return self.quarantined()
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
            budget=self.config.budget,
        )
        retry: ModelRetry | None = None
        with open_span("vsh-ai transaction", tool=tool, language=language_name(language)) as span:
            try:
                result = await self._transact(request, helper=tool != "vsh_run")
                span.set_attributes(span_attributes(result))
            except ModelRetry as error:  # re-raised outside: guest text stays out of spans
                span.set_attribute("state", "guest_error")
                retry = error
        if retry is not None:
            raise retry
        if result.state == "pending" and defer is not None:
            await defer(result, call, (code, intent, language_name(language)))  # type: ignore[misc]
        return result

    async def _transact(self, request: vsh.RunRequest, *, helper: bool) -> VshResult:
        """One transaction; VSH holds at most 64 unfinished previews per process, so a call
        that finds them all in use waits for one, up to ``_CAPACITY_WAIT_S``."""
        deadline = time.monotonic() + _CAPACITY_WAIT_S
        while True:
            try:
                return await self._transact_guarded(request, helper=helper)
            except _CapacityFull:
                if time.monotonic() > deadline:
                    return self.failed(
                        "VSH has too many unfinished transactions in this process; nothing "
                        "was committed.",
                        retry=True,
                    )
                await anyio.sleep(0.05)

    async def _transact_guarded(self, request: vsh.RunRequest, *, helper: bool) -> VshResult:
        try:
            return await self._transact_once(request, helper=helper)
        except vsh.VshRecoveryError as error:
            self.quarantine.enter(error)
            return self.quarantined()
        except HostChanged:
            return self.stale()
        except JournalUnavailable as error:
            return self.failed(f"{error}; nothing was committed.", retry=False)
        except AlreadyDone as done:  # finished by another process: its result, no commit
            return done.entry.result or self.failed("no recorded result", retry=False)
        except vsh.VshStaleError:
            return self.stale()
        except (vsh.VshStateError, vsh.VshExecutionError):
            raise
        except vsh.VshRuntimeError as error:
            if is_recovery(error):
                self.quarantine.enter(error)
                return self.quarantined()
            return self.outside_failure(error)

    def host_check(self, since_ns: int) -> HostCheck | None:
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

    async def _transact_once(self, request: vsh.RunRequest, *, helper: bool) -> VshResult:
        check = self.host_check(time.time_ns())
        call = CURRENT_CALL.get()
        expected: list[VshResult] = []
        # Deferred mode on a plain runtime: policy's auto-approvals cannot wait for a person.
        hold = self.config.deferred and not self.hooked

        def before_commit(preview: vsh.Receipt) -> None:
            committed = self.render(Outcome("committed", receipt=preview, program=request.code))
            expected.append(self.records.prepare(call, preview.transaction, committed))

        try:
            if self.hooked:
                receipt = await self.driver.preview(request)
                outcome: vsh.Receipt | vsh.VshStaleError = receipt
            else:
                receipt, outcome = await self.driver.run(
                    request, host_check=check, before_commit=before_commit, commit=not hold
                )
        except vsh.VshExecutionError as error:
            return self.guest_error(error, helper=helper)
        except CommitContended as contended:
            if contended.preview is None:  # never: this path commits its own preview
                raise
            return await self.repeats.contended(
                contended.preview, expected, code=request.code, read_only=False
            )
        except vsh.VshStateError as error:
            if "preview capacity" in str(error):
                raise _CapacityFull from None
            return await self.repeats.duplicate(error, request.code)
        transaction = receipt.transaction
        read_only = receipt.changed_paths == 0
        base = Outcome("denied", receipt=receipt, program=request.code)
        if receipt.state == "denied":
            if self.hooked:
                self.driver.discard(transaction)
            return self.render(base)
        if receipt.state not in _ACTIONABLE:
            return self.failed(f"unexpected VSH preview state {receipt.state!r}", retry=True)
        if self.hooked:
            if read_only and not self.judge_reads:
                self.driver.discard(transaction)
                return self.render(Outcome("read", receipt=receipt, program=request.code))
            mark = self.records.judging(call, transaction)

            def judging() -> None:  # in the prepare's worker thread: one hop for both
                if mark is None:
                    return
                try:
                    mark()
                except BaseException:
                    self.driver.discard(transaction)
                    raise

            return await self.judge(
                receipt, call, check, code=request.code, read_only=read_only, before=judging
            )
        if isinstance(outcome, vsh.VshStaleError):
            return self.stale(receipt=receipt, program=request.code)
        if outcome is receipt and receipt.state == "auto_approved":
            if not read_only:  # held: deferred mode cannot hold it on a plain runtime
                return self.failed(
                    "approval='deferred' on an existing plain vsh.Runtime cannot hold this "
                    "change for a person (its policy auto-approves it), so nothing was "
                    "committed. Open the toolset on a workspace path instead.",
                    retry=False,
                )
            return self.render(Outcome("read", receipt=receipt, program=request.code))
        if (
            expected
            and self.hook is None
            and outcome.state == "committed"
            and expected[-1].state == ("read" if read_only else "committed")
        ):
            return expected[-1]  # what settled() would render again (no hook: no verdict)
        return self.settled(
            receipt,
            outcome,
            None,
            code=request.code,
            read_only=read_only,
            promised=expected[-1] if expected else None,
        )

    async def judge(
        self,
        receipt: vsh.Receipt,
        call: CurrentCall | None,
        check: HostCheck | None,
        *,
        code: str,
        read_only: bool,
        before: Callable[[], None] | None = None,
    ) -> VshResult:
        """Ask the hook about a previewed (or reopened) transaction, journal the decision,
        and let VSH resolve it (commit, pending or rejected). ``before()`` runs in the
        worker thread that prepares the commit, before it (the journal's judging record)."""
        transaction = receipt.transaction
        expected: list[VshResult] = []
        hook = self.hook

        async def before_resolve(
            event: vsh.RequestEvent | None, decision: vsh.HookDecision
        ) -> Callable[[], None]:
            state = decided_state(receipt.state, decision.verdict, read_only=read_only)
            verdict = (
                hook.verdict_before(transaction, event, decision)
                if hook
                else decision_verdict(decision.verdict, decision.reason or "", event)
            )
            evidence = hook.seen(transaction) if hook else None
            decided = self.render(self._settled_outcome(receipt, state, verdict, evidence, code))
            prepare = partial(
                self.records.prepare,
                call,
                transaction,
                decided,
                decision,
                event.hook_id if event is not None else "",
            )

            def record() -> None:  # in the resolve's worker thread, just before it
                expected.append(prepare())

            return record

        try:
            resolution = await self.driver.hooked_commit(
                transaction, host_check=check, before_resolve=before_resolve, before_prepare=before
            )
        except (vsh.VshStaleError, HostChanged):
            self.take_evidence(transaction, pending=False)
            return self.stale(receipt=receipt, program=code)
        except CommitContended:  # prepare or resolve: another process holds it
            return await self.repeats.contended(receipt, expected, code=code, read_only=read_only)
        return self.settled(
            receipt,
            resolution.receipt,
            resolution.hook,
            code=code,
            read_only=read_only,
            promised=expected[-1] if expected else None,
        )

    def take_evidence(self, transaction: str, *, pending: bool) -> Evidence | None:
        if self.hook is None:
            return None
        return self.hook.take(transaction, keep_pending=pending and self.config.deferred)

    def _settled_outcome(
        self,
        preview: vsh.Receipt,
        state: ToolState,
        verdict: Verdict | None,
        evidence: Evidence | None,
        code: str,
    ) -> Outcome:
        """The outcome of ``preview`` ending in ``state`` (pure: also used before commit)."""
        feedback = verdict.reason if verdict and verdict.decision in ("review", "reject") else None
        if state == "pending":
            feedback = feedback or NEEDS_APPROVAL
        return Outcome(
            state,
            receipt=preview,
            evidence=evidence,
            verdict=verdict,
            feedback=feedback,
            program=code,
        )

    def settled(
        self,
        preview: vsh.Receipt,
        final: vsh.Receipt,
        record: vsh.HookDecisionRecord | None,
        *,
        code: str,
        read_only: bool,
        promised: VshResult | None = None,
    ) -> VshResult:
        """The result of a transaction VSH has resolved: ``promised`` (what the journal
        recorded before the resolve, and a replay returns) when VSH settled it in that
        state, else rendered from the final receipt."""
        transaction = preview.transaction
        state: ToolState
        if final.state == "committed":
            state = "read" if read_only else "committed"
        elif final.state == "pending_approval":
            state = "pending"
        elif final.state == "rejected":
            state = "rejected"
        elif final.state == "stale":
            state = "stale"
        else:
            self.take_evidence(transaction, pending=False)
            return self.failed(f"unexpected VSH transaction state {final.state!r}", retry=True)
        evidence = self.take_evidence(transaction, pending=state == "pending")
        if state == "pending" and self.config.deferred:  # what a later approved resume returns
            self.remember_committed_view(
                transaction, self.render(Outcome("committed", receipt=preview, evidence=evidence))
            )
        if promised is not None and promised.state == state:
            return promised
        verdict = (
            self.hook.verdict_after(transaction, record)
            if self.hook
            else record_verdict(record)
            if record is not None
            else None
        )
        return self.render(self._settled_outcome(preview, state, verdict, evidence, code))

    def remember_committed_view(self, transaction: str, view: VshResult) -> None:
        self.committed_views[transaction] = view
        while len(self.committed_views) > _VIEWS_KEPT:
            self.committed_views.popitem(last=False)

    # -- failures of the program itself ---------------------------------------------------

    def guest_error(self, error: vsh.VshExecutionError, *, helper: bool) -> VshResult:
        """A failed program: a retry the model can act on, without bytes it must not see.

        Host churn is ``stale``; a ``PermissionError`` is a denial with VSH's category
        only; anything else is a retry whose text is rendered by
        :func:`~vsh_ai.toolset._render.guest_retry`.
        """
        text = str(error)
        if _host_churn(text):
            return self.stale(_CHURN_NOTE)
        if text.startswith("internal "):
            return self.failed(
                "VSH failed internally while running the program; nothing was committed.",
                retry=True,
                detail=text,
            )
        diagnostics = getattr(error, "diagnostics", None)
        stderr = diagnostics.stderr.decode(errors="replace") if diagnostics is not None else ""
        denied = _PERMISSION.search(text)
        if denied is not None or (diagnostics is not None and diagnostics.denied_accesses):
            reason = denied.group(1) if denied else "bash accessed a protected path"
            category = safe_deny_reason(reason)
            return self.render(
                Outcome(
                    "denied",
                    deny_reason=category,
                    feedback=f"The program was refused access (VSH category: {category}); "
                    "the program's own message is not shown.",
                )
            )
        raise ModelRetry(
            guest_retry(
                text, stderr, reviewed=self.config.reviewed, helper=helper, limits=self.limits
            )
        )
