"""Exactly-once tool calls: a durable journal from a call key to its transaction and result.

A durable engine (DBOS, Temporal, ...) re-runs a tool call after a crash when the call's
result was not recorded. The VSH commit may already have happened, so running the program
again would commit it twice. The journal closes that window: before any native call that
may commit, :meth:`CommitJournal.prepare` records call key -> (arguments digest, the
transaction and the result the agent will see if it commits), fsynced; after the outcome,
:meth:`CommitJournal.finish` records the final result. A replayed call (same key, same
arguments) gets the recorded result, or, when only ``prepare`` was recorded, VSH's durable
transaction state decides: committed means the recorded result; anything else means the
commit never happened and the call runs again (re-using the recorded judge decision when
the re-run produces the same transaction, so a paid judge is not asked twice).

Records belong somewhere. They are keyed by the call key alone: a key used once never
commits again under other arguments (:class:`JournalConflict`). They are signed like
approval bindings (the key lives outside every workspace) and name their workspace, so a
forged record can neither claim a commit nor carry a decision into a transaction, and a
journal copied from another checkout is refused. Each record carries a sequence number and
is written twice (``<key digest>.json`` and its mirror ``.hw``): the newer valid copy wins,
so copying an older (``prepared``) record over a finished one does not make the call run
again.

Cost. The only fsyncs are the ``prepared`` record's (one data sync of the main copy, one
of the folder), and that record is what makes exactly-once hold: it is durable before VSH
starts the commit, and VSH's own state says whether the commit happened. The ``done``
record adds nothing a replay cannot already learn when the result is the one ``prepare``
promised (VSH says committed, the recorded result is returned), so that ``done`` record
is written in the background (:meth:`CommitJournal.finish` with ``later=True``): losing it
to a crash is the crash between commit and finish that recovery already covers, and every
read of the key in this process waits for it first. A write of any key refuses to replace
a ``prepared`` record of another transaction that VSH reports committed (the call is done,
whatever record came after it), so a stalled second worker can never commit the call
again while the ``done`` record is still on its way.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic_ai import RunContext

from ._background import in_background, wait_for, wait_for_folder
from ._driver import now_ms
from ._files import StateFileError, describe, read_state_file
from ._principal import quoted
from ._result import VshResult
from ._signing import SignedRecords, VshApprovalError

__all__ = (
    "CURRENT_CALL",
    "AlreadyDone",
    "CommitJournal",
    "CommittedResult",
    "CurrentCall",
    "JournalConflict",
    "JournalEntry",
    "JournalUnavailable",
    "Phase",
    "RecordedDecision",
)

Phase = Literal["judging", "prepared", "done"]
"""``judging``: previewed, the judge is deciding (nothing can commit yet); ``prepared``:
decided, about to commit; ``done``: the call's final result."""
RecordedDecision = Literal["approve", "review", "reject", "follow_policy"]

CommittedResult = Callable[["JournalEntry"], VshResult | None]
"""Given a ``prepared`` record, the call's result if VSH committed its transaction."""

_KEY_SHOWN = 120
_SETTLED = frozenset(("committed", "read"))
_WRITTEN_KEPT = 256
_TEMPORARY = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OUTSIDE_ASKS = 3
"""How many times a write asks VSH about a record outside the lock before asking under it."""
_RECORD_FIX = "check VSH's state of the call's transaction by hand, then delete the record"


class JournalUnavailable(RuntimeError):
    """The journal could not be read or written (disk full, permissions, a file in the
    way, a lock held too long): the call commits nothing, since exactly-once could not be
    guaranteed."""


class JournalConflict(VshApprovalError):
    """The call key was already used by a call with other arguments. A call key commits
    at most once, whatever arguments a replay brings: nothing runs."""

    def __init__(self, key: str, path: Path) -> None:
        shown = quoted(key[:_KEY_SHOWN]) + (" (shortened)" if len(key) > _KEY_SHOWN else "")
        super().__init__(
            f"tool call {shown} was already made with other arguments (journal record "
            f"{path}): a call key commits at most once, so nothing was run. A replay must "
            "bring the same arguments; a new call needs a new key (tool call id, or call_key=)"
        )
        self.key = key
        self.path = path


class AlreadyDone(Exception):
    """The call already has a final result (recorded by another process): use it."""

    def __init__(self, entry: JournalEntry) -> None:
        super().__init__(entry.key)
        self.entry = entry


class JournalEntry(BaseModel):
    """One tool call: its transaction, the decision taken, and what the agent sees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 2
    key: str
    tool_name: str
    args_digest: str
    phase: Phase
    transaction: str | None = None
    decision: RecordedDecision | None = None
    decision_reason: str = ""
    hook_id: str = ""
    """The hook (judge definition digest) that decided: a changed judge decides anew."""
    attempt: int = 0
    """How many times the call was re-run after a commit a crash interrupted (VSH rolls
    such a commit back and will not reuse its transaction)."""
    expected: VshResult | None = None
    result: VshResult | None = None
    created_unix_ms: int
    workspace_id: str = ""
    """The workspace this record belongs to (its state directory's identity)."""
    sequence: int = 0
    """Raised by every write of this key: the newer of the two copies wins."""
    mac: str = ""

    def signed_payload(self) -> bytes:
        return self.model_dump_json(exclude={"mac"}).encode()


class CommitJournal(SignedRecords):
    """Signed, atomic JSON records under ``directory``, one per call key.

    ``load`` raises :class:`VshApprovalError` for a forged, corrupt or foreign record,
    :class:`JournalConflict` for a key recorded with other arguments and
    :class:`JournalUnavailable` when the journal cannot be read. ``prepare``, ``judging``,
    ``finish`` and ``prune`` raise only :class:`JournalUnavailable` (and ``prepare`` /
    ``judging`` :class:`AlreadyDone`).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        workspace_id: str = "",
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(directory, workspace_id=workspace_id, workspace=workspace)
        # What this process last wrote for a key (both copies' bytes, and the entry): a
        # record whose two copies still hold exactly those bytes need not be parsed and
        # verified again (the next write of a call under the lock: judging, prepared, done).
        self._written: OrderedDict[str, tuple[bytes, JournalEntry]] = OrderedDict()

    def path_for(self, key: str) -> Path:
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def _legacy_path(self, key: str, digest: str) -> Path:
        """Where vsh-ai before call-key-only records kept this call."""
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.{digest[:32]}.json"

    def _mac(self, entry: JournalEntry) -> str:
        return self.mac(entry.signed_payload())

    @contextlib.contextmanager
    def _unavailable(self, doing: str, *, signatures: bool = True) -> Iterator[None]:
        """``OSError`` becomes :class:`JournalUnavailable` (naming the problem); so does a
        signature problem when ``signatures`` (else it stays :class:`VshApprovalError`,
        and the caller says "modified outside vsh-ai")."""
        try:
            yield
        except OSError as error:
            raise JournalUnavailable(
                f"cannot {doing} the commit journal in {self.directory} "
                f"({describe(error, self.directory)})"
            ) from None
        except VshApprovalError as error:  # forged, foreign, conflicting, no key: stop
            if not signatures:
                raise
            raise JournalUnavailable(str(error)) from None

    def _record(
        self,
        entry: JournalEntry,
        *,
        durable: bool,
        done_wins: bool,
        committed: CommittedResult | None = None,
    ) -> JournalEntry:
        """Write ``entry`` as the key's newest record (under the lock), unless the call is
        already done (``done_wins``: return that record; else raise :class:`AlreadyDone`).

        ``committed(record)``: the result of a ``prepared`` record whose transaction VSH
        reports committed, else None; such a record of another transaction counts as done.
        VSH is asked outside the lock (a VSH call blocked behind a peer's commit would
        otherwise hold every journal writer of the workspace), then the record is read
        again under it: the answer counts only for the very record it was asked about.
        """
        if committed is None:
            with self._unavailable("write"), self._locked():
                return self._write_newest(entry, self._current(entry), None, done_wins, durable)
        answers: dict[tuple[str, int, str], VshResult | None] = {}
        while True:
            with self._unavailable("write"), self._locked():
                recorded = self._current(entry)
                ask = _another_prepared(recorded, entry)
                if ask is None:
                    return self._write_newest(entry, recorded, None, done_wins, durable)
                seen = (ask.transaction or "", ask.sequence, ask.mac)
                if seen not in answers and len(answers) >= _OUTSIDE_ASKS:
                    # Other writers replaced the record every time it was asked about:
                    # ask under the lock, so the answer and the write see one record.
                    answers[seen] = committed(ask)
                if seen in answers:
                    return self._write_newest(entry, recorded, answers[seen], done_wins, durable)
            with self._unavailable("write"):
                answers[seen] = committed(ask)  # outside the lock

    def _current(self, entry: JournalEntry) -> JournalEntry | None:
        """Under the lock: the key's newest record (None when there is none)."""
        recorded = self._last_written(entry.key, entry.args_digest)
        if recorded is None:
            recorded = self._load(entry.key, entry.args_digest)
        return recorded

    def _write_newest(
        self,
        entry: JournalEntry,
        recorded: JournalEntry | None,
        result: VshResult | None,
        done_wins: bool,
        durable: bool,
    ) -> JournalEntry:
        """Under the lock: write ``entry`` over ``recorded`` (whose prepared transaction
        VSH reported committed with ``result``, when not None), unless the call is done."""
        if recorded is not None and result is not None:  # that commit happened: done
            recorded = recorded.model_copy(update={"phase": "done", "result": result})
        if recorded is not None and recorded.phase == "done":
            if done_wins:
                return recorded
            # Another process finished this call meanwhile (a stalled worker whose
            # call a durable engine gave to another): never commit it a second time.
            raise AlreadyDone(recorded)
        entry = entry.model_copy(
            update={
                "workspace_id": self.workspace_id,
                "sequence": (recorded.sequence if recorded is not None else 0) + 1,
            }
        )
        # One serialization: ``mac`` is the model's last field, so the signed record
        # is the signed payload with it appended.
        payload = entry.signed_payload()
        mac = self.mac(payload)
        data = b'%s,"mac":"%s"}' % (payload[:-1], mac.encode())
        entry = entry.model_copy(update={"mac": mac})
        self._written.pop(entry.key, None)  # unknown until both copies are written
        self._write_both(self.path_for(entry.key), data, durable=durable)
        self._written[entry.key] = (data, entry)
        while len(self._written) > _WRITTEN_KEPT:
            self._written.popitem(last=False)
        return entry

    def _last_written(self, key: str, digest: str) -> JournalEntry | None:
        """The record this process last wrote for ``key``, if both copies still hold exactly
        its bytes (read, compared, not parsed); else None (then :meth:`load` decides)."""
        known = self._written.get(key)
        if known is None:
            return None
        data, entry = known
        path = self.path_for(key)
        if read_state_file(path) != data or read_state_file(self.mirror(path)) != data:
            return None  # another process (or a hand) wrote it since: read it properly
        if not hmac.compare_digest(entry.args_digest, digest):
            raise JournalConflict(key, path)
        return entry

    def _write_both(self, path: Path, data: bytes, *, durable: bool) -> None:
        """Both copies, the main one first (a crash in between leaves it the newer one);
        ``durable``: the main copy's bytes and both names reach the disk before this returns
        (one data sync of the main copy, one sync of the folder).

        Cheaper than a ``mkstemp`` per copy: every writer holds the folder's lock, so each
        copy's temporary file has a fixed name (``.<name>.tmp``, skipped by readers and
        pruning), reused if a crashed writer left it.
        """
        _replace(path, data, sync=durable)
        _replace(self.mirror(path), data, sync=False)
        if durable:
            folder = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)

    def prepare(
        self,
        *,
        key: str,
        tool_name: str,
        digest: str,
        transaction: str,
        expected: VshResult,
        decision: RecordedDecision | None = None,
        decision_reason: str = "",
        hook_id: str = "",
        attempt: int = 0,
        committed: CommittedResult | None = None,
    ) -> JournalEntry:
        """Record, durably, what is about to be committed and what the agent will see."""
        entry = JournalEntry(
            key=key,
            tool_name=tool_name,
            args_digest=digest,
            phase="prepared",
            transaction=transaction,
            decision=decision,
            decision_reason=decision_reason,
            hook_id=hook_id,
            attempt=attempt,
            expected=expected,
            created_unix_ms=now_ms(),
        )
        wait_for(self.path_for(key))
        return self._record(entry, durable=True, done_wins=False, committed=committed)

    def judging(
        self,
        *,
        key: str,
        tool_name: str,
        digest: str,
        transaction: str,
        attempt: int = 0,
        committed: CommittedResult | None = None,
    ) -> JournalEntry:
        """Record that ``transaction`` went to the judge (VSH holds it durably meanwhile).

        After a crash while the judge decides, VSH keeps the transaction pending; this
        record tells a replay that no decision was ever recorded, so the judge is asked
        again instead of the call reporting "already waiting for approval". Not fsynced:
        losing it only leaves the work pending (nothing commits).
        """
        entry = JournalEntry(
            key=key,
            tool_name=tool_name,
            args_digest=digest,
            phase="judging",
            transaction=transaction,
            attempt=attempt,
            created_unix_ms=now_ms(),
        )
        wait_for(self.path_for(key))
        return self._record(entry, durable=False, done_wins=False, committed=committed)

    def promised(self, key: str, result: VshResult) -> bool:
        """Whether ``result`` is exactly what this process's ``prepared`` record of ``key``
        promised for a commit (so that record already answers a replay with it)."""
        known = self._written.get(key)
        if known is None:
            return False
        entry = known[1]
        return entry.phase == "prepared" and entry.expected is result and result.state in _SETTLED

    def finish(
        self,
        *,
        key: str,
        tool_name: str,
        digest: str,
        result: VshResult,
        later: bool = False,
        committed: CommittedResult | None = None,
    ) -> JournalEntry:
        """Record the call's final result; a replay returns it as is. Returns the
        recorded entry: a result another process recorded first is kept, not replaced.

        Not fsynced: losing it in a power cut only costs a look at VSH's durable state
        (a prepared record) or a re-run of work that committed nothing. ``later`` (when
        :meth:`promised`): hand the write to a background thread and return at once; the
        next read or write of the key in this process waits for it.
        """
        entry = JournalEntry(
            key=key,
            tool_name=tool_name,
            args_digest=digest,
            phase="done",
            transaction=result.transaction,
            result=result,
            created_unix_ms=now_ms(),
        )
        path = self.path_for(key)
        if later and self.promised(key, result):

            def write() -> None:
                with contextlib.suppress(JournalUnavailable):  # the prepared record answers
                    self._record(entry, durable=False, done_wins=True)

            if in_background(path, write):
                return entry
        wait_for(path)
        return self._record(entry, durable=False, done_wins=True, committed=committed)

    def prune(self, older_than_s: float) -> int:
        """Delete records older than ``older_than_s`` seconds; returns how many.

        Only safe beyond the longest time a run can still be replayed (a workflow that
        waits days for an approval replays its earlier calls when it recovers): a pruned
        call that is replayed runs again.
        """
        if not (older_than_s >= 0):
            raise ValueError(f"older_than_s must be >= 0 seconds, got {older_than_s}")
        cutoff = time.time() - older_than_s
        removed = 0
        wait_for_folder(self.directory)
        with self._unavailable("prune"):
            try:
                entries = {entry.name: entry for entry in os.scandir(self.directory)}
            except FileNotFoundError:
                return 0
            for name, entry in entries.items():
                if name.startswith(".") or not name.endswith((".json", ".hw")):
                    continue
                main = name.removesuffix(".hw") + ".json" if name.endswith(".hw") else name
                if name != main and main in entries:
                    continue  # a mirror goes with its main record
                try:
                    if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                        continue
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue
                if name == main:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.mirror(Path(entry.path)))
                removed += 1
        return removed

    def load(self, key: str, digest: str) -> JournalEntry | None:
        """The record of this call key, or None (once this process's own pending write of
        it has landed).

        Raises :class:`JournalConflict` when the key was recorded with other arguments (another
        digest), :class:`VshApprovalError` for a corrupt, forged or foreign (another
        workspace's) record, :class:`JournalUnavailable` when the journal cannot be read
        (a FIFO or folder in the way, permissions) or holds a record of an older vsh-ai
        for this call. Of the record's two copies the newer is used.
        """
        wait_for(self.path_for(key))
        return self._load(key, digest)

    def _load(self, key: str, digest: str) -> JournalEntry | None:
        path = self.path_for(key)
        with self._unavailable("read", signatures=False):
            entry = self._read_record(
                path,
                JournalEntry.model_validate_json,
                what="commit journal record",
                fix=_RECORD_FIX,
            )
            if entry is None:
                legacy = self._legacy_path(key, digest)
                if os.path.lexists(legacy):
                    raise JournalUnavailable(
                        f"{legacy}: commit journal record written by an older vsh-ai (before "
                        "records named their workspace); nothing was run for this call. "
                        f"{_RECORD_FIX[0].upper()}{_RECORD_FIX[1:]} (or prune the journal)"
                    )
                return None
        if entry.key != key:
            raise VshApprovalError(f"{path}: journal record belongs to another tool call")
        if self.workspace_id and entry.workspace_id != self.workspace_id:
            named = entry.workspace_id or "none"
            raise VshApprovalError(
                f"{path}: commit journal record belongs to another workspace (it names "
                f"workspace id {named}, this workspace is {self.workspace_id}): the state "
                "directory was copied or shared; nothing is committed or reported for it"
            )
        if not hmac.compare_digest(entry.args_digest, digest):
            raise JournalConflict(key, path)
        return entry


def _replace(target: Path, data: bytes, *, sync: bool) -> None:
    """Replace ``target`` with ``data`` at once through ``.<name>.tmp`` (private, 0600; a
    symlink or other non-regular file in the temporary's place is refused, never
    followed); ``sync``: the bytes are on disk before the rename."""
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        fd = os.open(temporary, _TEMPORARY, 0o600)
    except FileNotFoundError:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(temporary, _TEMPORARY, 0o600)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise StateFileError(
                temporary,
                f"{temporary} is not a regular file: vsh-ai writes its temporary files "
                "itself; remove it",
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateFileError(temporary, f"{temporary} is not a regular file; remove it")
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fdatasync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    os.close(fd)
    try:
        os.replace(temporary, target)
    except IsADirectoryError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise StateFileError(
            target,
            f"{target} is a directory, not a regular file: vsh-ai writes its state "
            "files itself; remove it",
        ) from None


@dataclass(frozen=True, slots=True)
class CurrentCall:
    """The tool call being handled (a context variable: the hook and the native worker
    find the call they serve)."""

    name: str
    args: dict[str, Any]
    ctx: RunContext[Any]
    key: str | None = None
    digest: str = ""
    entry: JournalEntry | None = None
    """The journal record an earlier attempt of this call left (a replay), if any."""
    attempt: int = 0
    """Above 0: a re-run after a commit a crash interrupted (and VSH rolled back)."""


CURRENT_CALL: ContextVar[CurrentCall | None] = ContextVar("vsh_ai_current_call", default=None)


def _another_prepared(recorded: JournalEntry | None, entry: JournalEntry) -> JournalEntry | None:
    """``recorded`` when it is a ``prepared`` record of another transaction than
    ``entry``'s (a commit that may already have happened: VSH must be asked), else None."""
    if (
        recorded is None
        or recorded.phase != "prepared"
        or recorded.transaction is None
        or recorded.transaction == entry.transaction
    ):
        return None
    return recorded
