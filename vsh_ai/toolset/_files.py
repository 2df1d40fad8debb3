"""Safe I/O for vsh-ai's own state files: the signing key, journal and binding records,
their locks, the workspace identity and the quarantine marker.

A state file is opened without following a final symlink and without blocking
(``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC``), then ``fstat``-ed: only a regular file is read.
A FIFO left where a record belongs would otherwise block the event loop forever, a
directory would crash the caller, a symlink could point a store anywhere. Locks are
waited for with a bound. Every refusal is a :class:`StateFileError` (an ``OSError``) whose
message names the path and the fix; each store turns ``OSError`` into its own error type
with :func:`describe`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = (
    "MAX_STATE_BYTES",
    "StateFileError",
    "create_exclusively",
    "describe",
    "file_kind",
    "locked",
    "read_state_file",
    "write_atomically",
)

MAX_STATE_BYTES = 16 * 1024 * 1024
"""No state file vsh-ai writes comes near this; a bigger one is not ours."""

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_LOCK = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class StateFileError(OSError):
    """A state file that is not a regular file, is a symlink, is too large, or whose
    lock another process (or thread) holds too long. ``str()`` is the whole message, fix
    included."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return self.message


def describe(error: OSError, path: Path | None = None) -> str:
    """One line for ``error``: the :class:`StateFileError` message, or ``<path>: <reason>``."""
    if isinstance(error, StateFileError):
        return error.message
    where = error.filename if error.filename is not None else path
    reason = error.strerror or str(error) or type(error).__name__
    return f"{where}: {reason}" if where is not None else reason


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (for messages)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _not_regular(path: Path, mode: int) -> StateFileError:
    return StateFileError(
        path,
        f"{path} is {file_kind(mode)}, not a regular file: vsh-ai writes its state files "
        "itself; remove it",
    )


def _open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open`` that never follows a symlink, never blocks, and returns only a regular
    file's descriptor (anything else raises :class:`StateFileError`; a missing file its
    ``FileNotFoundError``)."""
    try:
        fd = os.open(path, flags, mode)
    except IsADirectoryError:
        raise _not_regular(path, stat.S_IFDIR) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _symlink(path) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _symlink(path: Path) -> StateFileError:
    return StateFileError(
        path,
        f"{path} is a symbolic link: vsh-ai never follows links for its state files; "
        "remove the link",
    )


def read_state_file(path: Path, *, limit: int = MAX_STATE_BYTES) -> bytes | None:
    """The bytes of the regular file at ``path``; None when nothing is there.

    Never blocks and never follows a final symlink: a FIFO, device, socket, directory or
    symlink at ``path``, or a file over ``limit`` bytes, raises :class:`StateFileError`;
    any other failure raises the ``OSError`` it is.
    """
    try:
        fd = _open_regular(path, _READ)
    except FileNotFoundError:
        return None
    try:
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > limit:
                raise StateFileError(
                    path, f"{path} holds over {limit} bytes: it is not a vsh-ai state file"
                )
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(path: Path, *, timeout: float) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the regular file ``path`` (created if missing),
    waiting at most ``timeout`` seconds for another process to release it.

    A directory, FIFO or symlink at ``path`` and a lock held past ``timeout`` raise
    :class:`StateFileError`; other failures (a read-only folder, ...) their ``OSError``.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = _open_regular(path, _LOCK, 0o600)
    try:
        deadline = time.monotonic() + timeout
        pause = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StateFileError(
                        path,
                        f"another process or thread holds the lock at {path} (waited "
                        f"{timeout:g} s): let it finish, or stop it if it hangs, then try again",
                    ) from None
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(folder: Path, data: bytes, *, durable: bool) -> str:
    """A new private (0600) file in ``folder`` holding ``data``; returns its path."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".record-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_atomically(target: Path, data: str | bytes, *, durable: bool) -> None:
    """Replace ``target`` with ``data`` all at once (a reader sees the old or the new file;
    a symlink at ``target`` is replaced, never followed). The file is private (0600).

    ``durable`` fsyncs the file and its folder, so the record survives a power cut, not
    only a crash of this process. A directory at ``target`` raises :class:`StateFileError`.
    """
    payload = data.encode() if isinstance(data, str) else data
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = _temporary(target.parent, payload, durable=durable)
    try:
        os.replace(tmp, target)
    except IsADirectoryError:
        Path(tmp).unlink(missing_ok=True)
        raise _not_regular(target, stat.S_IFDIR) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_folder(target.parent)


def create_exclusively(target: Path, data: bytes) -> bool:
    """Create ``target`` holding ``data`` (fsynced, 0600) unless something is already
    there; returns whether this call created it (the first writer wins, everyone then
    reads the same bytes)."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = _temporary(target.parent, data, durable=True)
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    finally:
        Path(tmp).unlink(missing_ok=True)
    _fsync_folder(target.parent)
    return True
