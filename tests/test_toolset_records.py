"""Records belong somewhere (issue 16 items 5, 7 and 8): the signing key, the journal and the
approval bindings, tested on real files.

The signing key is refused when anyone but its owner could sign with it; every state file
is opened without blocking or following links, and every failure is the store's own error
type, never an ``OSError`` that crashes ``agent.run``; records name their workspace and
conversation, a call key commits at most once, and an older copy of a record does not
bring back what it said.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from vsh_ai.toolset._bindings import ApprovalStore, conversation_digest, response_digest
from vsh_ai.toolset._files import locked
from vsh_ai.toolset._journal import (
    AlreadyDone,
    CommitJournal,
    JournalConflict,
    JournalEntry,
    JournalUnavailable,
)
from vsh_ai.toolset._result import VshResult
from vsh_ai.toolset._signing import SignedRecords, VshApprovalError, load_signing_key
from vsh_ai.toolset._workspace import (
    IDENTITY_FILE,
    read_quarantine,
    workspace_identity,
    write_quarantine,
)

ROOT = os.geteuid() == 0


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private signing key location for this test (its folder does not exist yet)."""
    path = tmp_path / "keys" / "approval.key"
    monkeypatch.setenv("VSH_AI_APPROVAL_KEY_FILE", str(path))
    return path


def finishes(action: Callable[[], Any], *, unblock: Callable[[], None], within: float = 5.0) -> Any:
    """``action()``'s value (or its exception), failing the test if it is still blocked
    after ``within`` seconds (``unblock`` then frees the stuck thread)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    if thread.is_alive():
        unblock()
        thread.join(5)
        pytest.fail(f"blocked for more than {within} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def fifo(path: Path) -> Callable[[], None]:
    """A FIFO at ``path``; returns how to unblock a reader stuck on it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)

    def unblock() -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.close(fd)

    return unblock


def result(state: str = "committed", transaction: str = "tx-1") -> VshResult:
    return VshResult(state=state, transaction=transaction)


def prepare(journal: CommitJournal, key: str = "k", digest: str = "d" * 64) -> Any:
    return journal.prepare(
        key=key,
        tool_name="vsh_write",
        digest=digest,
        transaction="tx-1",
        expected=result(),
        decision="approve",
    )


def finish(journal: CommitJournal, key: str = "k", digest: str = "d" * 64) -> Any:
    return journal.finish(key=key, tool_name="vsh_write", digest=digest, result=result())


def bind(store: ApprovalStore, call_id: str = "call_0", conversation: str = "") -> Any:
    return store.save(
        tool_call_id=call_id,
        tool_name="vsh_write",
        digest="a" * 64,
        transaction="tx-1",
        changes=(),
        risk_flags=(),
        conversation=conversation,
    )


# -- A. the signing key ---------------------------------------------------------------------


def test_a_new_key_is_private_random_and_stable(key_file: Path) -> None:
    key = load_signing_key()
    assert len(key) == 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert load_signing_key() == key
    assert [p.name for p in key_file.parent.iterdir()] == ["approval.key"]  # no temp left


def test_an_empty_key_is_refused(key_file: Path) -> None:
    """HMAC with an empty key verified anything anyone signed with it."""
    key_file.parent.mkdir(mode=0o700)
    key_file.touch(mode=0o600)
    with pytest.raises(VshApprovalError) as raised:
        load_signing_key()
    assert "is empty" in str(raised.value)
    assert "delete it to have a new key generated" in str(raised.value)
    key_file.write_bytes(b"short")
    with pytest.raises(VshApprovalError, match="holds only 5 bytes"):
        load_signing_key()


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602, 0o644])
def test_a_key_others_can_write_or_read_is_refused(key_file: Path, mode: int) -> None:
    load_signing_key()
    key_file.chmod(mode)
    with pytest.raises(VshApprovalError) as raised:
        load_signing_key()
    assert f"chmod 600 {key_file}" in str(raised.value)
    assert f"{mode:04o}" in str(raised.value)


@pytest.mark.skipif(not ROOT, reason="giving a file to another user needs root")
def test_a_key_or_folder_owned_by_someone_else_is_refused(key_file: Path) -> None:
    load_signing_key()
    os.chown(key_file, 12345, -1)
    with pytest.raises(VshApprovalError) as raised:
        load_signing_key()
    assert "owned by uid 12345" in str(raised.value)
    assert f"chown {os.geteuid()} {key_file}" in str(raised.value)
    os.chown(key_file, os.geteuid(), -1)
    os.chown(key_file.parent, 12345, -1)
    with pytest.raises(VshApprovalError, match=r"folder .* is owned by uid 12345"):
        load_signing_key()


def test_a_key_folder_others_can_write_is_refused_unless_sticky(key_file: Path) -> None:
    key = load_signing_key()
    key_file.parent.chmod(0o777)
    with pytest.raises(VshApprovalError) as raised:
        load_signing_key()
    assert f"chmod go-w {key_file.parent}" in str(raised.value)
    key_file.parent.chmod(0o1777)  # like /tmp: others cannot replace a file they do not own
    assert load_signing_key() == key


def test_a_symlinked_key_is_refused(key_file: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.key"
    real.write_bytes(os.urandom(32))
    real.chmod(0o600)
    key_file.parent.mkdir(mode=0o700)
    key_file.symlink_to(real)
    with pytest.raises(VshApprovalError, match="is a symbolic link"):
        load_signing_key()


def test_a_key_that_is_not_a_file_is_refused_without_blocking(key_file: Path) -> None:
    unblock = fifo(key_file)
    with pytest.raises(VshApprovalError) as raised:
        finishes(load_signing_key, unblock=unblock)
    assert "named pipe" in str(raised.value)
    assert "remove it to have a new key generated" in str(raised.value)
    key_file.unlink()
    key_file.mkdir()
    with pytest.raises(VshApprovalError, match="is a directory, not a regular file"):
        load_signing_key()


def test_a_key_inside_the_workspace_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    inside = workspace / ".vsh-runtime" / "vsh-ai" / "approval.key"
    monkeypatch.setenv("VSH_AI_APPROVAL_KEY_FILE", str(inside))

    def through_a_store() -> bytes:
        return SignedRecords(tmp_path / "state", workspace=workspace).key

    for check in (partial(load_signing_key, workspace=workspace), through_a_store):
        with pytest.raises(VshApprovalError) as raised:
            check()
        assert "set VSH_AI_APPROVAL_KEY_FILE to a path outside the workspace" in str(raised.value)
    assert not inside.exists()  # refused before anything was created


def test_a_key_location_with_a_file_in_the_way_is_an_approval_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Used to raise FileExistsError out of agent.run."""
    blocker = tmp_path / "state-home"
    blocker.write_text("a file where the folder should be")
    monkeypatch.delenv("VSH_AI_APPROVAL_KEY_FILE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    with pytest.raises(VshApprovalError) as raised:
        load_signing_key()
    assert "VSH_AI_APPROVAL_KEY_FILE" in str(raised.value)
    with pytest.raises(VshApprovalError):
        bind(ApprovalStore(tmp_path / "approvals"))
    with pytest.raises(JournalUnavailable, match="approval signing key"):
        prepare(CommitJournal(tmp_path / "journal"))


def _unshare_works() -> bool:
    if not ROOT or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def test_a_read_only_home_is_an_approval_error(tmp_path: Path) -> None:
    """A real read-only home folder: a read-only tmpfs mounted over it (root), or a folder
    without write permission (other users)."""
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "from vsh_ai.toolset._signing import load_signing_key\n"
        "try:\n"
        "    load_signing_key()\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VSH_AI_APPROVAL_KEY_FILE",)}
    env.pop("XDG_STATE_HOME", None)
    env["HOME"] = str(home)
    if _unshare_works():
        command = [
            "unshare",
            "-m",
            "sh",
            "-c",
            f'mount -t tmpfs -o ro tmpfs "{home}" && exec "$0" -c "$1"',
            sys.executable,
            code,
        ]
    elif not ROOT:
        home.chmod(0o500)
        command = [sys.executable, "-c", code]
    else:
        pytest.skip("root ignores mode bits and cannot mount a read-only folder here")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("VshApprovalError cannot create the approval signing key")
    assert "VSH_AI_APPROVAL_KEY_FILE" in done.stdout
    assert "Read-only file system" in done.stdout or "Permission denied" in done.stdout


# -- B. state files: never block, never crash -----------------------------------------------


def test_a_fifo_in_the_journal_does_not_block(tmp_path: Path, key_file: Path) -> None:
    """A FIFO where a record belongs blocked the event loop forever."""
    journal = CommitJournal(tmp_path / "journal")
    unblock = fifo(journal.path_for("k"))
    with pytest.raises(JournalUnavailable) as raised:
        finishes(lambda: journal.load("k", "d" * 64), unblock=unblock)
    assert "named pipe (FIFO)" in str(raised.value)
    with pytest.raises(JournalUnavailable):
        finishes(lambda: prepare(journal), unblock=unblock)


def test_a_fifo_among_the_bindings_does_not_block(tmp_path: Path, key_file: Path) -> None:
    store = ApprovalStore(tmp_path / "approvals")
    unblock = fifo(store.path_for("call_0", "a" * 64))
    with pytest.raises(VshApprovalError, match="named pipe"):
        finishes(lambda: store.load("call_0", "a" * 64), unblock=unblock)
    with pytest.raises(VshApprovalError, match="named pipe"):
        finishes(lambda: bind(store), unblock=unblock)


def test_a_directory_at_a_record_path_is_refused(tmp_path: Path, key_file: Path) -> None:
    store = ApprovalStore(tmp_path / "approvals")
    store.path_for("call_0", "a" * 64).mkdir(parents=True)
    with pytest.raises(VshApprovalError, match="is a directory, not a regular file"):
        store.load("call_0", "a" * 64)
    journal = CommitJournal(tmp_path / "journal")
    journal.path_for("k").mkdir(parents=True)
    with pytest.raises(JournalUnavailable, match="is a directory, not a regular file"):
        journal.load("k", "d" * 64)


def test_a_symlinked_record_is_refused(tmp_path: Path, key_file: Path) -> None:
    journal = CommitJournal(tmp_path / "journal")
    prepare(journal)
    real = journal.path_for("k")
    moved = tmp_path / "elsewhere.json"
    real.rename(moved)
    real.symlink_to(moved)
    with pytest.raises(JournalUnavailable, match="symbolic link"):
        journal.load("k", "d" * 64)


@pytest.mark.parametrize("kind", ["journal", "store"])
def test_a_directory_at_the_lock_path_is_refused(tmp_path: Path, key_file: Path, kind: str) -> None:
    """Used to crash with IsADirectoryError."""
    (tmp_path / "records" / ".lock").mkdir(parents=True)
    if kind == "journal":
        with pytest.raises(JournalUnavailable, match=r"\.lock is a directory"):
            prepare(CommitJournal(tmp_path / "records"))
    else:
        with pytest.raises(VshApprovalError, match=r"\.lock is a directory"):
            bind(ApprovalStore(tmp_path / "records"))


@pytest.mark.parametrize("kind", ["journal", "store"])
def test_a_held_lock_is_waited_for_with_a_bound(
    tmp_path: Path, key_file: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another holder of the lock used to block the caller (and the event loop) forever."""
    folder = tmp_path / "records"
    folder.mkdir()
    monkeypatch.setattr(SignedRecords, "lock_timeout_s", 0.3)
    holder = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: conflicts like another process

    def release() -> None:
        fcntl.flock(holder, fcntl.LOCK_UN)

    try:
        action: Callable[[], Any]
        if kind == "journal":
            error: type[Exception] = JournalUnavailable
            action = lambda: prepare(CommitJournal(folder))  # noqa: E731
        else:
            error = VshApprovalError
            action = lambda: bind(ApprovalStore(folder))  # noqa: E731
        started = time.monotonic()
        with pytest.raises(error) as raised:
            finishes(action, unblock=release)
        assert time.monotonic() - started < 3
        held = f"another process or thread holds the lock at {folder / '.lock'}"
        assert held in str(raised.value)
    finally:
        release()
        os.close(holder)
    assert action() is not None  # free again: works


def test_the_lock_waits_for_a_short_holder(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    held = threading.Event()

    def hold() -> None:
        with locked(lock, timeout=1):
            held.set()
            time.sleep(0.2)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    started = time.monotonic()
    with locked(lock, timeout=5):
        assert time.monotonic() - started >= 0.1
    thread.join()


def lock_is_free(folder: Path) -> bool:
    """Whether another open file could take the journal's lock right now."""
    try:
        with locked(folder / ".lock", timeout=0):
            return True
    except OSError:
        return False


def test_vsh_is_asked_about_an_earlier_commit_outside_the_journal_lock(
    tmp_path: Path, key_file: Path
) -> None:
    """VSH was asked under the lock: a VSH call stuck behind a peer's commit held every
    journal writer of the workspace, which all failed with "another process holds the lock"."""
    folder = tmp_path / "journal"
    prepare(CommitJournal(folder, workspace_id="ws"))  # an earlier attempt: tx-1 prepared
    free: list[bool] = []

    def committed(entry: JournalEntry) -> VshResult | None:
        free.append(lock_is_free(folder))
        return None  # tx-1 never committed

    entry = CommitJournal(folder, workspace_id="ws").prepare(
        key="k", tool_name="vsh_write", digest="d" * 64, transaction="tx-2",
        expected=result(transaction="tx-2"), committed=committed,
    )  # fmt: skip
    assert free == [True]
    assert (entry.transaction, entry.sequence) == ("tx-2", 2)


def test_vsh_answers_only_for_the_record_it_was_asked_about(tmp_path: Path, key_file: Path) -> None:
    """While VSH is asked about tx-1 another process prepares and commits tx-3: the write
    must not replace that record on the strength of the answer about tx-1."""
    folder = tmp_path / "journal"
    other = CommitJournal(folder, workspace_id="ws")
    prepare(other)
    asked: list[str | None] = []

    def committed(entry: JournalEntry) -> VshResult | None:
        asked.append(entry.transaction)
        if entry.transaction == "tx-1":  # not committed; meanwhile tx-3 is prepared
            other.prepare(
                key="k", tool_name="vsh_write", digest="d" * 64, transaction="tx-3",
                expected=result(transaction="tx-3"),
            )  # fmt: skip
            return None
        return result(transaction=entry.transaction or "")  # tx-3 committed

    with pytest.raises(AlreadyDone) as raised:
        CommitJournal(folder, workspace_id="ws").prepare(
            key="k", tool_name="vsh_write", digest="d" * 64, transaction="tx-2",
            expected=result(transaction="tx-2"), committed=committed,
        )  # fmt: skip
    assert asked == ["tx-1", "tx-3"]
    done = raised.value.entry
    assert (done.phase, done.transaction, done.result) == (
        "done",
        "tx-3",
        result(transaction="tx-3"),
    )


def test_a_record_replaced_at_every_ask_is_asked_about_under_the_lock(
    tmp_path: Path, key_file: Path
) -> None:
    """Writers that replace the record each time it is asked about cannot keep a write
    waiting forever: after a few asks outside the lock, VSH is asked under it."""
    folder = tmp_path / "journal"
    other = CommitJournal(folder, workspace_id="ws")
    prepare(other)
    free: list[bool] = []

    def committed(entry: JournalEntry) -> VshResult | None:
        free.append(lock_is_free(folder))
        if free[-1]:
            other.prepare(
                key="k", tool_name="vsh_write", digest="d" * 64,
                transaction=f"tx-other-{len(free)}", expected=result(),
            )  # fmt: skip
        return None

    entry = CommitJournal(folder, workspace_id="ws").prepare(
        key="k", tool_name="vsh_write", digest="d" * 64, transaction="tx-2",
        expected=result(transaction="tx-2"), committed=committed,
    )  # fmt: skip
    assert free == [True, True, True, False]
    assert entry.transaction == "tx-2"
    assert CommitJournal(folder, workspace_id="ws").load("k", "d" * 64) == entry


def test_a_file_where_the_store_folder_should_be_is_an_approval_error(
    tmp_path: Path, key_file: Path
) -> None:
    """Used to raise FileExistsError (mkdir of the lock's folder) out of the resume."""
    folder = tmp_path / "approvals"
    folder.write_text("in the way")
    store = ApprovalStore(folder)
    with pytest.raises(VshApprovalError, match="cannot write the approval bindings"):
        bind(store)
    with pytest.raises(VshApprovalError, match="cannot read the approval bindings"):
        store.load("call_0", "a" * 64)
    assert list(store.audit()) == []


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink"])
def test_a_strange_quarantine_marker_still_quarantines_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    marker = tmp_path / "vsh-ai" / "QUARANTINED.json"
    marker.parent.mkdir()
    unblock: Callable[[], None] = lambda: None  # noqa: E731
    if kind == "fifo":
        unblock = fifo(marker)
    elif kind == "directory":
        marker.mkdir()
    else:
        marker.symlink_to(tmp_path / "nowhere")
    message = finishes(lambda: read_quarantine(marker), unblock=unblock)
    assert message is not None
    assert message.startswith("This workspace is quarantined")
    assert str(marker) in message


def test_writing_the_quarantine_marker_over_a_fifo_does_not_block(tmp_path: Path) -> None:
    marker = tmp_path / "QUARANTINED.json"
    unblock = fifo(marker)
    assert finishes(lambda: write_quarantine(marker, "stop"), unblock=unblock) is True
    assert read_quarantine(marker) == "stop"
    folder = tmp_path / "dir-marker"
    folder.mkdir()
    assert write_quarantine(folder, "stop") is False  # refused, no exception


# -- C. records belong somewhere ------------------------------------------------------------


def test_a_call_key_commits_at_most_once_whatever_the_arguments(
    tmp_path: Path, key_file: Path
) -> None:
    journal = CommitJournal(tmp_path / "journal", workspace_id="ws-1")
    prepare(journal, digest="1" * 64)
    finish(journal, digest="1" * 64)
    with pytest.raises(JournalConflict) as raised:
        journal.load("k", "2" * 64)  # one character of the arguments differs
    assert "'k'" not in str(raised.value)
    assert '"k"' in str(raised.value)
    assert "already made with other arguments" in str(raised.value)
    assert isinstance(raised.value, VshApprovalError)
    with pytest.raises(JournalUnavailable, match="already made with other arguments"):
        prepare(journal, digest="2" * 64)
    entry = journal.load("k", "1" * 64)
    assert entry is not None
    assert entry.phase == "done"


def test_a_conflict_message_bounds_the_key(tmp_path: Path, key_file: Path) -> None:
    journal = CommitJournal(tmp_path / "journal")
    key = json.dumps(["run", 1, "x" * 10_000 + "\x1b[31m"])
    prepare(journal, key=key, digest="1" * 64)
    with pytest.raises(JournalConflict) as raised:
        journal.load(key, "2" * 64)
    assert len(str(raised.value)) < 1_000
    assert "(shortened)" in str(raised.value)
    assert "\x1b" not in str(raised.value)


def test_an_older_journal_record_copied_over_a_finished_one_changes_nothing(
    tmp_path: Path, key_file: Path
) -> None:
    """A restore (or an attacker) putting the validly signed ``prepared`` record back made
    the finished call look unfinished, so a replay ran it again."""
    journal = CommitJournal(tmp_path / "journal")
    prepare(journal)
    path = journal.path_for("k")
    older = path.read_bytes()
    finish(journal)
    path.write_bytes(older)
    entry = journal.load("k", "d" * 64)
    assert entry is not None
    assert (entry.phase, entry.sequence) == ("done", 2)
    with pytest.raises(AlreadyDone):
        prepare(journal)
    # Either copy may be the older one.
    journal.mirror(path).write_bytes(older)
    finish(journal)  # rewrites both copies from the newest
    path.write_bytes(older)
    assert journal.load("k", "d" * 64).phase == "done"  # type: ignore[union-attr]


def test_an_empty_copy_counts_as_missing_only_beside_a_valid_one(
    tmp_path: Path, key_file: Path
) -> None:
    """A power cut can leave the (never fsynced) mirror empty: the main copy answers. An
    empty record with nothing beside it is refused, never read as "no record"."""
    journal = CommitJournal(tmp_path / "journal")
    prepare(journal)
    path = journal.path_for("k")
    journal.mirror(path).write_bytes(b"")
    assert journal.load("k", "d" * 64).phase == "prepared"  # type: ignore[union-attr]
    path.write_bytes(b"")
    with pytest.raises(VshApprovalError, match="is empty"):
        journal.load("k", "d" * 64)
    journal.mirror(path).unlink()
    with pytest.raises(VshApprovalError, match="is empty"):
        journal.load("k", "d" * 64)


def test_two_different_copies_with_one_sequence_are_refused(tmp_path: Path, key_file: Path) -> None:
    first = CommitJournal(tmp_path / "a")
    second = CommitJournal(tmp_path / "b")
    prepare(first)
    second.prepare(
        key="k", tool_name="vsh_write", digest="d" * 64, transaction="tx-2", expected=result()
    )
    (tmp_path / "a" / second.path_for("k").name).write_bytes(second.path_for("k").read_bytes())
    with pytest.raises(VshApprovalError, match="claim sequence 1"):
        first.load("k", "d" * 64)


def test_another_workspaces_journal_record_is_refused(tmp_path: Path, key_file: Path) -> None:
    prepare(CommitJournal(tmp_path / "journal", workspace_id="ws-1"))
    other = CommitJournal(tmp_path / "journal", workspace_id="ws-2")
    with pytest.raises(VshApprovalError, match="belongs to another workspace"):
        other.load("k", "d" * 64)
    with pytest.raises(JournalUnavailable, match="belongs to another workspace"):
        prepare(other)
    assert CommitJournal(tmp_path / "journal", workspace_id="ws-1").load("k", "d" * 64)


def test_a_record_of_the_older_format_is_not_ignored(tmp_path: Path, key_file: Path) -> None:
    """A record written by vsh-ai before call-key-only records: refused, not run again."""
    journal = CommitJournal(tmp_path / "journal")
    journal.directory.mkdir()
    journal._legacy_path("k", "d" * 64).write_text("{}")
    with pytest.raises(JournalUnavailable, match="older vsh-ai"):
        journal.load("k", "d" * 64)


def test_prune_removes_both_copies(tmp_path: Path, key_file: Path) -> None:
    journal = CommitJournal(tmp_path / "journal")
    prepare(journal, key="old")
    prepare(journal, key="new")
    old = journal.path_for("old")
    week_ago = time.time() - 7 * 86400
    os.utime(old, (week_ago, week_ago))
    assert journal.prune(86400) == 1
    assert not old.exists()
    assert not journal.mirror(old).exists()
    assert journal.load("new", "d" * 64) is not None


def test_a_new_conversation_reusing_a_call_id_has_its_own_binding(
    tmp_path: Path, key_file: Path
) -> None:
    store = ApprovalStore(tmp_path / "approvals", workspace_id="ws-1")
    denied = store.finish(bind(store, conversation="conv-1"), "denied", principal="alice")
    assert store.load("call_0", "a" * 64, conversation="conv-2") is None
    assert not store.bound("call_0", conversation="conv-2")
    assert store.bound("call_0", conversation="conv-1")
    fresh = bind(store, conversation="conv-2")
    assert fresh.end_state == "pending"
    assert store.load("call_0", "a" * 64, conversation="conv-1") == denied


def test_a_binding_names_its_workspace(tmp_path: Path, key_file: Path) -> None:
    bind(ApprovalStore(tmp_path / "approvals", workspace_id="ws-1"))
    other = ApprovalStore(tmp_path / "approvals", workspace_id="ws-2")
    with pytest.raises(VshApprovalError, match="belongs to another workspace"):
        other.load("call_0", "a" * 64)
    [(_, binding, problem)] = list(other.audit())
    assert (binding, problem) == (None, "belongs to another workspace")
    assert list(ApprovalStore(tmp_path / "approvals").all())  # "" reads every workspace


def test_an_older_binding_copied_over_a_denial_does_not_revive_it(
    tmp_path: Path, key_file: Path
) -> None:
    """Copying the ``pending`` version back over a denied binding made it approvable."""
    store = ApprovalStore(tmp_path / "approvals")
    pending = bind(store)
    path = store.path_for("call_0", "a" * 64)
    older = path.read_bytes()
    store.finish(pending, "denied", principal="alice", message="no")
    path.write_bytes(older)
    binding = store.load("call_0", "a" * 64)
    assert binding is not None
    assert (binding.end_state, binding.end_principal) == ("denied", "alice")
    [audited] = list(store.all())
    assert audited.end_state == "denied"


def test_principals_are_checked_when_recorded(tmp_path: Path, key_file: Path) -> None:
    store = ApprovalStore(tmp_path / "approvals")
    pending = bind(store)
    for bad in ("ali\x1bce", "a\u202eb", " ", "x" * 201):
        with pytest.raises(VshApprovalError):
            store.finish(pending, "denied", principal=bad)
    assert store.load("call_0", "a" * 64).end_state == "pending"  # type: ignore[union-attr]
    denied = store.finish(pending, "denied", principal="Zoë Ops", message="not today")
    assert (denied.end_principal, denied.end_message) == ("Zoë Ops", "not today")


def test_workspace_identity_is_stable_and_follows_a_move(tmp_path: Path, key_file: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    state = tmp_path / "state"
    first = workspace_identity(state, workspace)
    assert len(first) == 32
    assert workspace_identity(state, workspace) == first
    assert workspace_identity(state, None) == first  # an existing runtime: the stored id
    moved = tmp_path / "moved"
    workspace.rename(moved)  # same folder (device, inode): the same workspace
    assert workspace_identity(state, moved) == first
    assert not list(state.glob("*.json"))  # the binding store never mistakes it for a binding


def test_a_state_directory_copied_into_another_checkout_is_refused(
    tmp_path: Path, key_file: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".vsh-runtime" / "vsh-ai" / "approvals").mkdir(parents=True)
    state = workspace / ".vsh-runtime" / "vsh-ai" / "approvals"
    workspace_identity(state, workspace)
    copy = tmp_path / "checkout-2"
    shutil.copytree(workspace, copy)
    copied_state = copy / ".vsh-runtime" / "vsh-ai" / "approvals"
    with pytest.raises(VshApprovalError) as raised:
        workspace_identity(copied_state, copy)
    message = str(raised.value)
    assert f"belongs to workspace {workspace.resolve()}" in message
    assert "use a fresh state_directory" in message.lower()
    assert f"delete {copied_state / IDENTITY_FILE}" in message
    # The same path with another folder (re-created there) is another workspace too.
    workspace.rename(tmp_path / "old")  # kept: a deleted folder's inode number may be reused
    shutil.copytree(copy, workspace)
    with pytest.raises(VshApprovalError, match="another folder now at the same path"):
        workspace_identity(state, workspace)


def test_an_identity_made_for_a_runtime_binds_to_the_first_workspace(
    tmp_path: Path, key_file: Path
) -> None:
    state = tmp_path / "state"
    made = workspace_identity(state, None)
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    assert workspace_identity(state, one) == made
    with pytest.raises(VshApprovalError, match="belongs to workspace"):
        workspace_identity(state, two)


def test_a_forged_or_strange_identity_is_refused(tmp_path: Path, key_file: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    state = tmp_path / "state"
    workspace_identity(state, workspace)
    path = state / IDENTITY_FILE
    data = json.loads(path.read_text())
    data["workspace"] = str(tmp_path / "elsewhere")
    path.write_text(json.dumps(data))
    with pytest.raises(VshApprovalError, match="signature mismatch"):
        workspace_identity(state, workspace)
    path.unlink()
    unblock = fifo(path)
    with pytest.raises(VshApprovalError, match="named pipe"):
        finishes(lambda: workspace_identity(state, workspace), unblock=unblock)


# -- the conversation a binding belongs to --------------------------------------------------


def _asking_agent(seen: list[str]) -> Agent[None, Any]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(isinstance(m, ModelResponse) for m in messages) == 0:
            return ModelResponse(parts=[ToolCallPart("change", {"x": 1}, tool_call_id="call_0")])
        return ModelResponse(parts=[TextPart("done")])

    tools: FunctionToolset[None] = FunctionToolset()

    @tools.tool
    def change(ctx: RunContext[None], x: int) -> str:
        seen.append(response_digest(ctx))
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        return "changed"

    return Agent(FunctionModel(respond), toolsets=[tools], output_type=[str, DeferredToolRequests])


async def test_response_digest_is_kept_by_a_resume_and_differs_in_a_new_conversation() -> None:
    seen: list[str] = []
    agent = _asking_agent(seen)
    first = await agent.run("change it")
    assert isinstance(first.output, DeferredToolRequests)
    history = ModelMessagesTypeAdapter.validate_json(first.all_messages_json())  # a new process
    resumed = await agent.run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(approvals={"call_0": True}),
    )
    assert resumed.output == "done"
    again = await agent.run("change it")  # a new conversation: same call id, same arguments
    assert isinstance(again.output, DeferredToolRequests)
    asked, on_resume, new_conversation = seen
    assert len(asked) == 64
    assert on_resume == asked
    assert new_conversation != asked
    # Outside a tool call (recording a denial), from the history and the call id.
    assert conversation_digest(history, "call_0") == asked
    assert conversation_digest(again.all_messages(), "call_0") == new_conversation
    assert conversation_digest(history, "call_9") == ""


def test_response_digest_outside_a_tool_call_is_empty() -> None:
    class Ctx:
        tool_call_id = None
        messages: tuple[Any, ...] = ()

    assert response_digest(Ctx()) == ""  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_stuck_threads() -> Iterator[None]:
    yield
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and thread.daemon and thread.is_alive():
            thread.join(1)


pytestmark = pytest.mark.anyio
