"""Exactly-once tool calls: a durable journal from a call key to its transaction and result.

A durable engine (DBOS, Temporal, ...) re-runs a tool call after a crash when the call's
result was not recorded. The VSH commit may already have happened, so running the program
again would commit it twice. The journal closes that window: before any native call that
may commit, :meth:`CommitJournal.prepare` records (call key, arguments) -> the transaction
and the result the agent will see if it commits, fsynced; after the outcome,
:meth:`CommitJournal.finish` records the final result. A replayed call (same key, same
arguments) gets the recorded result, or, when only ``prepare`` was recorded, VSH's durable
transaction state decides: committed means the recorded result; anything else means the
commit never happened and the call runs again (re-using the recorded judge decision when
the re-run produces the same transaction, so a paid judge is not asked twice).

Records are signed like approval bindings (the key lives outside every workspace), so a
forged record can neither claim a commit nor carry a decision into a transaction.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import os
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_ai import RunContext

from ._bindings import SignedRecords, VshApprovalError, write_atomically
from ._driver import now_ms
from ._result import VshResult

__all__ = (
    "CURRENT_CALL",
    "AlreadyDone",
    "CommitJournal",
    "CurrentCall",
    "JournalEntry",
    "JournalUnavailable",
    "Phase",
    "RecordedDecision",
)

Phase = Literal["judging", "prepared", "done"]
"""``judging``: previewed, the judge is deciding (nothing can commit yet); ``prepared``:
decided, about to commit; ``done``: the call's final result."""
RecordedDecision = Literal["approve", "review", "reject", "follow_policy"]


class JournalUnavailable(RuntimeError):
    """The journal could not be read or written (disk full, permissions, a file in the
    way): the call commits nothing, since exactly-once could not be guaranteed."""


class AlreadyDone(Exception):
    """The call already has a final result (recorded by another process): use it."""

    def __init__(self, entry: JournalEntry) -> None:
        super().__init__(entry.key)
        self.entry = entry


class JournalEntry(BaseModel):
    """One tool call: its transaction, the decision taken, and what the agent sees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
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
    mac: str = ""

    def signed_payload(self) -> bytes:
        return self.model_dump_json(exclude={"mac"}).encode()


class CommitJournal(SignedRecords):
    """Signed, atomic JSON records under ``directory``, one per (call key, arguments)."""

    def path_for(self, key: str, digest: str) -> Path:
        name = hashlib.sha256(key.encode()).hexdigest()
        return self.directory / f"{name}.{digest[:32]}.json"

    def _mac(self, entry: JournalEntry) -> str:
        return self.mac(entry.signed_payload())

    def _write(self, entry: JournalEntry, *, durable: bool) -> JournalEntry:
        entry = entry.model_copy(update={"mac": self._mac(entry)})
        target = self.path_for(entry.key, entry.args_digest)
        try:
            write_atomically(target, entry.model_dump_json(), durable=durable)
        except OSError as error:
            raise JournalUnavailable(
                f"cannot write the commit journal in {self.directory} ({error.strerror or error})"
            ) from None
        return entry

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
        with self._locked():
            recorded = self._recorded(key, digest)
            if recorded is not None and recorded.phase == "done":
                # Another process finished this call meanwhile (a stalled worker whose
                # call a durable engine gave to another): never commit it a second time.
                raise AlreadyDone(recorded)
            return self._write(entry, durable=True)

    def judging(
        self, *, key: str, tool_name: str, digest: str, transaction: str, attempt: int = 0
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
        with self._locked():
            recorded = self._recorded(key, digest)
            if recorded is not None and recorded.phase == "done":
                raise AlreadyDone(recorded)
            return self._write(entry, durable=False)

    def finish(self, *, key: str, tool_name: str, digest: str, result: VshResult) -> JournalEntry:
        """Record the call's final result; a replay returns it as is. Returns the
        recorded entry: a result another process recorded first is kept, not replaced.

        Not fsynced: losing it in a power cut only costs a look at VSH's durable state
        (a prepared record) or a re-run of work that committed nothing.
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
        with self._locked():
            recorded = self._recorded(key, digest)
            if recorded is not None and recorded.phase == "done":
                return recorded
            return self._write(entry, durable=False)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time across processes (read, decide, write)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle = open(self.directory / ".lock", "a")  # noqa: SIM115
        except OSError as error:
            raise JournalUnavailable(
                f"cannot lock the commit journal in {self.directory} ({error.strerror or error})"
            ) from None
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _recorded(self, key: str, digest: str) -> JournalEntry | None:
        try:
            return self.load(key, digest)
        except VshApprovalError as error:  # a forged record: stop, commit nothing
            raise JournalUnavailable(str(error)) from None

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
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return 0
        for entry in entries:
            if not entry.name.endswith(".json"):
                continue
            try:
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def load(self, key: str, digest: str) -> JournalEntry | None:
        """The record of this call, or None. A corrupt or forged record raises
        :class:`VshApprovalError` (nothing is committed or reported for it)."""
        path = self.path_for(key, digest)
        try:
            raw = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise JournalUnavailable(
                f"cannot read the commit journal in {self.directory} ({error.strerror or error})"
            ) from None
        try:
            entry = JournalEntry.model_validate_json(raw)
        except ValidationError as error:
            raise VshApprovalError(
                f"{path}: commit journal record is corrupt ({error.error_count()} errors); "
                "check VSH's state of the call's transaction by hand, then delete the record"
            ) from None
        if not hmac.compare_digest(self._mac(entry), entry.mac):
            raise VshApprovalError(
                f"{path}: commit journal record was modified outside vsh-ai (signature "
                "mismatch); nothing is committed or reported for it"
            )
        if entry.key != key or entry.args_digest != digest:
            raise VshApprovalError(f"{path}: journal record belongs to another tool call")
        return entry


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
