"""Native VSH calls for the toolset: off the loop, cancellation-safe, one at a time per workspace.

VSH 0.6.0 can fail with ``VshRecoveryError`` / internal snapshot errors when two threads
of one process preview and commit on the same workspace at once (observed with two
runtimes and with one). Every native preview, prepare, resolve and commit therefore
holds a per-workspace lock inside its worker thread; judges run outside the lock.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio
import vsh
from vsh._async import native_call
from vsh._native import _Cancellation

__all__ = (
    "BeforeResolve",
    "CommitContended",
    "HookHandler",
    "HostChanged",
    "HostCheck",
    "WorkspaceDriver",
    "is_recovery",
    "now_ms",
)

HookHandler = Callable[[vsh.RequestEvent], vsh.HookDecision | Awaitable[vsh.HookDecision]]
BeforeResolve = Callable[
    [vsh.RequestEvent | None, vsh.HookDecision], Awaitable[Callable[[], None] | None]
]
"""Given the final decision: prepare for the resolve; may return a sync step the resolve's
worker thread runs first (the commit journal's write: one thread hop for both)."""
HostCheck = Callable[[Sequence[str]], str | None]
"""Given the workspace-relative paths a transaction writes, why the host changed under
them since the program ran (an outside writer), or None."""


class HostChanged(Exception):
    """The host changed under an approved transaction just before its commit (not committed)."""


class CommitContended(Exception):
    """VSH refused a commit step (prepare, resolve, commit) of ``transaction`` because
    another process holds or finished that very transaction: the same program and intent
    on the same base, e.g. a durable engine's retry while the first attempt goes on. VSH
    lets exactly one of them commit; its durable state says what the call came to.
    ``preview`` is this process's preview receipt, when the step had one."""

    def __init__(self, transaction: str, preview: vsh.Receipt | None = None) -> None:
        super().__init__(transaction)
        self.transaction = transaction
        self.preview = preview


# States of a transaction that another process has taken past this one's commit step.
_TAKEN = frozenset(("reserved", "revalidating", "committing", "committed"))


def _contended(native: vsh.Runtime, transaction: str, error: BaseException) -> bool:
    """Whether VSH refused a commit step of ``transaction`` because another process holds
    or finished it (sync: a worker thread). ``VshStateError`` says so ("duplicate
    transaction", "state conflict: expected PendingApproval, got Revalidating"); another
    runtime error does when VSH's durable state shows the transaction taken ("changed
    from prepared state PendingApproval to Committing"). Stale and recovery errors never."""
    if not isinstance(error, vsh.VshRuntimeError) or isinstance(error, vsh.VshStaleError):
        return False
    if is_recovery(error) or "preview capacity" in str(error):
        return False
    if isinstance(error, vsh.VshStateError):
        return True
    try:
        return native.transaction_state(transaction) in _TAKEN
    except vsh.VshRuntimeError:
        return False


_T = TypeVar("_T")
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _workspace_lock(key: str) -> threading.Lock:
    """The process-wide lock for one workspace (keyed by its resolved path)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


_RECOVERY_MARKERS = ("recovery", "durable commit plan", "commit journal", "commit plan is")


def is_recovery(error: BaseException) -> bool:
    """Whether a VSH error says its crash recovery could not prove the host state.

    Besides ``VshRecoveryError``: VSH 0.6.0 cannot open a workspace whose commit was
    interrupted right after it created the transaction's folder (``open durable commit
    plan: No such file or directory``, seen after SIGKILL in benchmarks/durable_soak.py).
    """
    text = str(error).lower()
    return isinstance(error, vsh.VshRecoveryError) or any(m in text for m in _RECOVERY_MARKERS)


def now_ms() -> int:
    """Wall-clock milliseconds, the unit VSH timestamps use."""
    return time.time_ns() // 1_000_000


class WorkspaceDriver:
    """Preview, hook-resolve and commit transactions on one native runtime."""

    def __init__(self, native: vsh.Runtime, *, handler: HookHandler | None, lock_key: str) -> None:
        self.native = native
        self.handler = handler
        self._lock = _workspace_lock(lock_key)

    def _locked(self, call: Callable[[], _T]) -> Callable[[], _T]:
        def run() -> _T:
            with self._lock:
                return call()

        return run

    async def preview(self, request: vsh.RunRequest) -> vsh.Receipt:
        native, token = self.native, _Cancellation()
        return await native_call(
            self._locked(lambda: native._preview(request, token)),
            token,
            on_cancel=lambda receipt: native._cancel_receipt(receipt.transaction),
        )

    async def run(
        self,
        request: vsh.RunRequest,
        host_check: HostCheck | None = None,
        before_commit: Callable[[vsh.Receipt], None] | None = None,
        *,
        commit: bool = True,
    ) -> tuple[vsh.Receipt, vsh.Receipt | vsh.VshStaleError]:
        """Plain runtime: preview then, in the same worker, commit auto-approved changes.

        Returns the preview receipt and the outcome: the committed receipt, the preview
        itself when nothing is committed (denied, read-only, pending), or the stale error.
        Read-only and denied previews are discarded, never committed; so is auto-approved
        work whose target files ``host_check`` finds changed (raises :class:`HostChanged`).
        ``before_commit(preview)`` runs just before the commit (the commit journal's
        write); if it raises, the preview is discarded and nothing is committed. With
        ``commit=False`` nothing is ever committed (the preview is discarded).
        """
        native, token = self.native, _Cancellation()

        def work() -> tuple[vsh.Receipt, vsh.Receipt | vsh.VshStaleError]:
            with self._lock:
                preview = native._preview(request, token)
                if not commit or preview.state != "auto_approved" or preview.changed_paths == 0:
                    # A pending transaction stays durable after its preview is discarded;
                    # discarding frees VSH's per-process preview slot (64 at most).
                    native.discard_preview(preview.transaction)
                    return preview, preview
                changed = host_check([p for p, _ in preview.changes]) if host_check else None
                if changed is not None:
                    native.discard_preview(preview.transaction)
                    raise HostChanged(changed)
                if before_commit is not None:
                    try:
                        before_commit(preview)
                    except BaseException:
                        native.discard_preview(preview.transaction)
                        raise
                try:
                    return preview, native._commit(preview.transaction, now_ms(), token)
                except vsh.VshStaleError as error:
                    return preview, error
                except BaseException as error:
                    if not token.commit_entered:
                        with contextlib.suppress(vsh.VshRuntimeError):
                            native._cancel_receipt(preview.transaction)
                    if _contended(native, preview.transaction, error):
                        raise CommitContended(preview.transaction, preview) from error
                    raise

        # A pending transaction left by a cancelled call stays durable and pending (VSH
        # has no public cancel for it); resubmitting it reports the pending transaction.
        return await native_call(work, token)

    async def hooked_commit(
        self,
        transaction: str,
        host_check: HostCheck | None = None,
        before_resolve: BeforeResolve | None = None,
        before_prepare: Callable[[], None] | None = None,
    ) -> vsh.CommitResolution:
        """Prepare, ask the hook about the exact event, resolve; fail closed on any error.

        ``before_resolve(event, decision)`` runs with the final decision just before VSH
        resolves it (the commit journal's write); if it raises, nothing is committed.
        ``before_prepare()`` runs in the prepare's worker thread first; if it raises, the
        error propagates and nothing is prepared.

        A hook that raises (anything but cancellation) or returns something other than a
        ``vsh.HookDecision`` resolves as ``review``: the work stays pending, the run goes
        on. Before a decision that may commit, ``host_check`` compares the host with the
        event's before-state; a difference rejects the transaction and raises
        :class:`HostChanged` (an outside writer is at work: committing would race it).
        """
        native = self.native

        def prepare() -> vsh.CommitPreparation:
            if before_prepare is not None:
                before_prepare()  # outside the lock: other calls' VSH work goes on
            with self._lock:
                try:
                    return native.prepare_commit(transaction)
                except BaseException as error:
                    if _contended(native, transaction, error):
                        raise CommitContended(transaction) from error
                    raise

        preparation = await native_call(prepare, on_cancel=native.fail_hook)
        event = preparation.event
        if event is None or self.handler is None:
            decision = vsh.HookDecision.follow_policy()
        else:
            try:
                result = self.handler(event)
                if inspect.isawaitable(result):
                    result = await result
            except BaseException as error:
                # Cancellation (the caller's, or inside a group), KeyboardInterrupt and
                # SystemExit stop here: VSH fails the hook, the work stays pending. Anything
                # else the handler raises, GeneratorExit included, is a review.
                stopping = (KeyboardInterrupt, SystemExit, anyio.get_cancelled_exc_class())
                if isinstance(error, stopping) or (
                    isinstance(error, BaseExceptionGroup) and error.subgroup(stopping)
                ):
                    await native_call(lambda: native.fail_hook(preparation))
                    raise
                result = vsh.HookDecision.review(
                    f"The review hook failed ({type(error).__name__}); a person must review "
                    "this change."
                )
            if not isinstance(result, vsh.HookDecision):
                result = vsh.HookDecision.review(
                    f"The review hook returned {type(result).__name__}, not a decision; a "
                    "person must review this change."
                )
            decision = result
        changed: str | None = None
        if host_check is not None and event is not None and decision.verdict != "reject":
            try:
                changed = host_check([change.path for change in event.canonical_diff])
            except Exception as error:
                changed = f"the host check failed ({type(error).__name__})"
            if changed is not None:
                decision = vsh.HookDecision.reject(f"host changed before commit: {changed}")
        token, now = _Cancellation(), now_ms()
        try:
            step = await before_resolve(event, decision) if before_resolve is not None else None

            def resolve() -> vsh.CommitResolution:
                if step is not None:
                    step()  # outside the lock, as above
                with self._lock:
                    try:
                        return native._resolve_commit(preparation, decision, now, token)
                    except BaseException as error:
                        if _contended(native, transaction, error):
                            raise CommitContended(transaction) from error
                        raise

            resolution = await native_call(resolve, token)
        except BaseException as error:
            if not token.commit_entered:
                try:
                    await native_call(lambda: native.fail_hook(preparation))
                except vsh.VshRuntimeError:
                    # Another process holding the transaction may refuse this too: the
                    # contention is what the caller must hear about.
                    if not isinstance(error, CommitContended):
                        raise
            raise
        if resolution.receipt.state == "pending_approval":
            with contextlib.suppress(vsh.VshRuntimeError):  # frees a preview slot; stays durable
                native.discard_preview(transaction)
        if changed is not None:
            raise HostChanged(changed)
        return resolution

    async def reopen(self, transaction: str) -> tuple[vsh.RequestEvent | None, vsh.Receipt] | None:
        """The exact event and receipt of a durable pending transaction; it stays pending.

        Resolves with ``follow_policy`` (never an upgrade) without asking the hook again;
        None when the transaction is no longer pending; raises ``VshStaleError`` when
        the host changed underneath.
        """
        native, token, now = self.native, _Cancellation(), now_ms()

        def work() -> tuple[vsh.RequestEvent | None, vsh.Receipt] | None:
            with self._lock:
                if native.transaction_state(transaction) != "pending_approval":
                    return None
                preparation = native.prepare_commit(transaction)
                decision = vsh.HookDecision.follow_policy()
                try:
                    resolution = native._resolve_commit(preparation, decision, now, token)
                except BaseException:
                    if not token.commit_entered:
                        with contextlib.suppress(vsh.VshRuntimeError):
                            native.fail_hook(preparation)
                    raise
                if resolution.receipt.state == "pending_approval":
                    with contextlib.suppress(vsh.VshRuntimeError):  # frees a preview slot
                        native.discard_preview(transaction)
                return preparation.event, resolution.receipt

        return await native_call(work, token)

    async def approve_and_commit(
        self, transaction: str, principal: str, ttl_ms: int
    ) -> vsh.Receipt:
        """Approve (when still pending) and commit, both under the workspace lock.

        Concurrent resumes of one approval in this process run one after the other: the
        later ones find the transaction committed, and VSH refuses their commit with
        ``VshStateError`` (single use) rather than committing twice.
        """
        native, token = self.native, _Cancellation()

        def work() -> vsh.Receipt:
            with self._lock:
                if native.transaction_state(transaction) == "pending_approval":
                    now = now_ms()
                    native.approve(transaction, principal, now, now + ttl_ms)
                return native._commit(transaction, now_ms(), token)

        return await native_call(work, token)

    async def release(self, transaction: str, reason: str) -> None:
        """Resolve a still-pending transaction as ``rejected`` (terminal) without a hook."""
        native, token, now = self.native, _Cancellation(), now_ms()

        def work() -> None:
            with self._lock:
                if native.transaction_state(transaction) != "pending_approval":
                    return
                preparation = native.prepare_commit(transaction)
                try:
                    native._resolve_commit(preparation, vsh.HookDecision.reject(reason), now, token)
                except BaseException:
                    if not token.commit_entered:
                        with contextlib.suppress(vsh.VshRuntimeError):
                            native.fail_hook(preparation)
                    raise

        await native_call(work, token)

    async def state(self, transaction: str) -> str:
        return await anyio.to_thread.run_sync(self.native.transaction_state, transaction)

    def discard(self, transaction: str) -> None:
        self.native.discard_preview(transaction)
