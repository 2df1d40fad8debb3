"""The signing key and the signed, mirrored records built on it.

The key (:func:`load_signing_key`, at :func:`approval_key_path`) lives outside any
workspace and signs approval bindings (:mod:`~vsh_ai.toolset._bindings`), journal records
(:mod:`~vsh_ai.toolset._journal`) and workspace identities
(:mod:`~vsh_ai.toolset._workspace`). :class:`SignedRecords` is their common folder of
records: each written atomically, signed with an HMAC, and written twice (``<name>.json``
and its mirror ``<name>.hw``); the newest valid copy wins, so copying an older version
over a record does not bring it back.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import ValidationError

from ._files import (
    create_exclusively,
    describe,
    file_kind,
    locked,
    read_state_file,
    write_atomically,
)

__all__ = (
    "SignedRecords",
    "VshApprovalError",
    "approval_key_path",
    "load_signing_key",
)

_KEY_ENV = "VSH_AI_APPROVAL_KEY_FILE"
_KEY_BYTES = 32
_MIN_KEY_BYTES = 16


class VshApprovalError(RuntimeError):
    """An approval could not be applied (no binding, changed arguments, missing principal,
    an unusable signing key or binding file)."""


# -- the signing key ------------------------------------------------------------------------


def approval_key_path() -> Path:
    """Where the binding signing key lives: ``$VSH_AI_APPROVAL_KEY_FILE``, else
    ``$XDG_STATE_HOME/vsh-ai/approval.key`` (``~/.local/state`` by default)."""
    explicit = os.environ.get(_KEY_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "vsh-ai" / "approval.key"


_ELSEWHERE = (
    f"or set {_KEY_ENV} to a key file path outside every workspace, in a folder only you can write"
)


def load_signing_key(*, workspace: Path | None = None) -> bytes:
    """The HMAC key that signs bindings, journal records and workspace identities (created
    on first use at :func:`approval_key_path`, 32 random bytes, mode 0600).

    Refused with :class:`VshApprovalError`, each saying how to fix it: a key inside
    ``workspace``; a key that is empty or shorter than 16 bytes, a symlink, not a regular
    file, not owned by the current user, or accessible by group or others; a folder
    owned by another user (root excepted) or writable by others (sticky folders
    excepted); a key location that cannot be created (read-only home, a file where the
    folder should be) or read.
    """
    path = approval_key_path()
    if workspace is not None:
        _refuse_inside(path, workspace)
    for _ in range(3):
        key = _read_key(path)
        if key is not None:
            return key
        _create_key(path)
    raise VshApprovalError(
        f"the approval signing key at {path} disappears as soon as it is created (another "
        f"process deletes it?); stop that process, {_ELSEWHERE}"
    )


def _refuse_inside(path: Path, workspace: Path) -> None:
    try:
        where = path.parent.resolve() / path.name
        root = workspace.resolve()
    except (OSError, RuntimeError) as error:
        raise VshApprovalError(
            f"cannot resolve the approval signing key path {path} ({error})"
        ) from None
    if where.is_relative_to(root):
        raise VshApprovalError(
            f"the approval signing key {path} is inside the workspace {root}, where it can be "
            "copied, committed or changed with the workspace; "
            f"set {_KEY_ENV} to a path outside the workspace"
        )


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if os.path.islink(path):
            raise VshApprovalError(
                f"the approval signing key {path} is a symbolic link: vsh-ai reads only the "
                f"key file itself (a link can be redirected); replace the link with the file "
                f"it points to, {_ELSEWHERE}"
            ) from None
        raise VshApprovalError(
            f"cannot read the approval signing key {path} ({describe(error, path)}); fix its "
            f"permissions, {_ELSEWHERE}"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise VshApprovalError(
                f"the approval signing key {path} is {file_kind(info.st_mode)}, not a regular "
                "file; remove it to have a new key generated"
            )
        me = os.geteuid()
        if info.st_uid != me:
            raise VshApprovalError(
                f"the approval signing key {path} is owned by uid {info.st_uid}, not by the "
                f"user running vsh-ai (uid {me}): whoever owns it can sign approvals. If the "
                f"key is yours, run chown {me} {path}; otherwise delete it to have a new key "
                "generated"
            )
        if info.st_mode & 0o077:
            raise VshApprovalError(
                f"the approval signing key {path} can be read or written by other users (mode "
                f"{stat.S_IMODE(info.st_mode):04o}), who could then sign approvals; run "
                f"chmod 600 {path}"
            )
        _check_key_folder(path)
        key = os.read(fd, 4096)
    except OSError as error:
        raise VshApprovalError(
            f"cannot read the approval signing key {path} ({describe(error, path)}); {_ELSEWHERE}"
        ) from None
    finally:
        os.close(fd)
    if len(key) < _MIN_KEY_BYTES:
        held = "is empty" if not key else f"holds only {len(key)} bytes"
        raise VshApprovalError(
            f"the approval signing key {path} {held} (at least {_MIN_KEY_BYTES} are needed: an "
            "HMAC with a short key proves nothing); delete it to have a new key generated "
            "(records signed with it are then refused)"
        )
    return key


def _check_key_folder(path: Path) -> None:
    folder = path.parent
    info = os.stat(folder)
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        raise VshApprovalError(
            f"the folder {folder} of the approval signing key is owned by uid {info.st_uid}, "
            f"not by you (uid {me}): its owner can replace the key. Move the key to a folder "
            f"you own: {_ELSEWHERE}"
        )
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise VshApprovalError(
            f"the folder {folder} of the approval signing key can be written by other users "
            f"(mode {stat.S_IMODE(info.st_mode):04o}), who could replace the key; run "
            f"chmod go-w {folder}"
        )


def _create_key(path: Path) -> None:
    try:
        create_exclusively(path, secrets.token_bytes(_KEY_BYTES))
    except OSError as error:
        raise VshApprovalError(
            f"cannot create the approval signing key at {path} ({describe(error, path)}): the "
            "location is not writable (a read-only home folder, or a file where a folder "
            f"should be); make it writable, {_ELSEWHERE}"
        ) from None


# -- signed records -------------------------------------------------------------------------


class _Signed(Protocol):
    @property
    def sequence(self) -> int: ...

    @property
    def mac(self) -> str: ...

    def signed_payload(self) -> bytes: ...


_R = TypeVar("_R", bound=_Signed)


class SignedRecords:
    """A folder of JSON records signed with the key from :func:`load_signing_key`.

    ``workspace_id`` (from :func:`~vsh_ai.toolset._workspace.workspace_identity`) is
    written into, and required of, every record (``""``: records name no workspace).
    ``workspace`` is only checked against: the signing key may not live inside it.
    Each record is written to ``<name>.json`` and to its mirror ``<name>.hw``; a read
    takes the valid copy with the higher ``sequence``.
    """

    lock_timeout_s: float = 10.0
    """How long to wait for another process's lock on the folder before giving up."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        workspace_id: str = "",
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.workspace_id = workspace_id
        self.workspace = Path(workspace) if workspace is not None else None
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_signing_key(workspace=self.workspace)
        return self._key

    def mac(self, payload: bytes) -> str:
        return hmac.new(self.key, payload, hashlib.sha256).hexdigest()

    @staticmethod
    def mirror(path: Path) -> Path:
        """The second copy of the record at ``path``."""
        return path.with_suffix(".hw")

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self.directory / ".lock", timeout=self.lock_timeout_s)

    def _write_record(self, path: Path, text: str, *, durable: bool) -> None:
        """Both copies, the main one first (a crash in between leaves it the newer one)."""
        write_atomically(path, text, durable=durable)
        write_atomically(self.mirror(path), text, durable=False)

    def _read_record(
        self, path: Path, parse: Callable[[bytes], _R], *, what: str, fix: str
    ) -> _R | None:
        """The newest valid copy of the record at ``path`` (None when neither exists).

        A copy that is corrupt or signed with another key raises :class:`VshApprovalError`;
        two different copies claiming one sequence number too. An empty copy counts as
        missing when the other one is valid. ``OSError`` (including
        :class:`~vsh_ai.toolset._files.StateFileError`) propagates.
        """
        found: list[_R] = []
        empty: list[Path] = []
        for copy in (path, self.mirror(path)):
            raw = read_state_file(copy)
            if raw is None:
                continue
            if not raw.strip():
                # What a power cut can leave of a write that was not fsynced (the mirror
                # never is): no worse than a missing copy when the other one is valid.
                empty.append(copy)
                continue
            try:
                record = parse(raw)
            except ValidationError as error:
                raise VshApprovalError(
                    f"{copy}: {what} is corrupt ({error.error_count()} errors); {fix}"
                ) from None
            if not hmac.compare_digest(self.mac(record.signed_payload()), record.mac):
                raise VshApprovalError(
                    f"{copy}: {what} was modified outside vsh-ai (signature mismatch); "
                    "nothing is committed or reported for it"
                )
            found.append(record)
        if not found:
            if empty:
                raise VshApprovalError(f"{empty[0]}: {what} is empty (cut short?); {fix}")
            return None
        newest = max(found, key=lambda r: r.sequence)
        if (
            len(found) == 2
            and found[0].sequence == found[1].sequence
            and found[0].mac != found[1].mac
        ):
            raise VshApprovalError(
                f"{path}: two different {what}s claim sequence {newest.sequence} (one was "
                "replaced outside vsh-ai); nothing is committed or reported for it"
            )
        return newest

    def _stems(self) -> list[Path]:
        """The main path of every record in the folder (from either copy), sorted."""
        try:
            names = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        stems = {
            self.directory / (name[: -len(suffix)] + ".json")
            for name in names
            for suffix in (".json", ".hw")
            if name.endswith(suffix) and not name.startswith(".")
        }
        return sorted(stems)
