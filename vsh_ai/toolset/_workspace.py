"""Workspace and state-directory checks for VshToolset, the workspace identity its records
name, the ``.vsh-runtime/.gitignore`` that keeps VSH's state out of git, and the
quarantine marker file."""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
from pathlib import Path

import vsh
from pydantic import BaseModel, ConfigDict, ValidationError

from ._driver import now_ms
from ._files import create_exclusively, describe, read_state_file, write_atomically
from ._signing import SignedRecords, VshApprovalError

__all__ = (
    "IDENTITY_FILE",
    "check_state_directory",
    "check_workspace",
    "ensure_runtime_gitignore",
    "probe_state_directory",
    "read_quarantine",
    "workspace_identity",
    "write_quarantine",
)

IDENTITY_FILE = "workspace.identity"
"""In the state directory: which workspace its records belong to (not ``*.json``: the
binding store reads those)."""


def check_workspace(workspace: Path) -> None:
    """A missing workspace is the caller's mistake: say which path and what to do, rather
    than VSH's ``canonicalize workspace capability`` error."""
    if workspace.is_dir():
        return
    where = f"{workspace}" + (f" ({workspace.absolute()})" if not workspace.is_absolute() else "")
    if workspace.exists():
        raise NotADirectoryError(
            f"VshToolset workspace {where} is not a folder; pass the folder the agent may change"
        )
    raise FileNotFoundError(
        f"VshToolset workspace {where} does not exist; create the folder first "
        "(Path(...).mkdir(parents=True)) or pass an existing folder the agent may change"
    )


def check_state_directory(workspace: Path, state_directory: Path) -> None:
    """Approval bindings must live where agent programs cannot write (VSH guards its own
    ``.vsh-runtime``): a forged binding would choose what an approval commits."""
    root, state = workspace.resolve(), state_directory.resolve()
    if state.is_relative_to(root) and not state.is_relative_to(root / ".vsh-runtime"):
        raise ValueError(
            f"state_directory {state_directory} is inside the workspace, where agent programs "
            "can write; put it outside the workspace or under its .vsh-runtime directory"
        )


def read_quarantine(path: Path) -> str | None:
    """The quarantine message at ``path``; None when there is no marker. Anything there
    that is not a readable marker file (a FIFO, a folder, a symlink, junk) still means
    quarantined: never blocks, never raises."""
    try:
        raw = read_state_file(path, limit=1 << 20)
    except OSError as error:
        return f"This workspace is quarantined ({describe(error, path)})."
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return f"This workspace is quarantined ({path} exists but is unreadable)."
    message = data.get("message") if isinstance(data, dict) else None
    return str(message) if message else f"This workspace is quarantined ({path})."


def write_quarantine(path: Path, message: str) -> bool:
    """Write the quarantine marker at ``path`` (atomically: a FIFO or symlink there is
    replaced, never opened); returns whether it was written. Never raises ``OSError``:
    the quarantine holds in this process either way."""
    try:
        write_atomically(path, json.dumps({"message": message}), durable=True)
    except OSError:
        return False
    return True


def ensure_runtime_gitignore(workspace: Path) -> None:
    """Write ``<workspace>/.vsh-runtime/.gitignore`` holding ``*`` when there is none.

    ``.vsh-runtime`` holds the bytes of every previewed write, rejected ones included; in
    a git worktree ``git add -A`` would stage them. An existing file (or anything else at
    that name) is left alone, a symlinked ``.vsh-runtime`` is not written through, and an
    ``OSError`` (read-only workspace, ...) is ignored: this is a courtesy, not a guarantee.
    """
    folder = workspace / ".vsh-runtime"
    with contextlib.suppress(OSError):
        folder.mkdir(exist_ok=True)
        if folder.is_symlink() or not folder.is_dir():
            return
        target = folder / ".gitignore"
        fd = os.open(
            target,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o644,
        )
        try:
            os.write(fd, b"# vsh-ai: VSH's runtime state (blobs of every previewed write)\n*\n")
        finally:
            os.close(fd)


# -- workspace identity -----------------------------------------------------------------


class _Identity(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    id: str
    workspace: str = ""
    device: int = 0
    inode: int = 0
    created_unix_ms: int
    mac: str = ""

    def signed_payload(self) -> bytes:
        return self.model_dump_json(exclude={"mac"}).encode()


def workspace_identity(state_directory: Path, workspace: Path | None) -> str:
    """The stable random id of the workspace whose records ``state_directory`` holds.

    Created on first use (``<state_directory>/workspace.identity``, signed with the
    approval key) with the workspace's resolved path and its root folder's (device,
    inode). Later calls verify it: the same folder (device and inode; a ``mv`` keeps
    them), or the same path on a remounted device, passes; a state directory copied into
    or reused by another checkout raises :class:`VshApprovalError` saying what to do.
    ``workspace=None`` (a toolset built on an existing runtime) uses only the stored id,
    and a later call with a workspace binds an id created that way.

    Every failure (unreadable, forged or unwritable identity, unusable signing key)
    raises :class:`VshApprovalError`.
    """
    state_directory = Path(state_directory)
    path = state_directory / IDENTITY_FILE
    records = SignedRecords(state_directory, workspace=workspace)
    here = _where(workspace) if workspace is not None else None
    try:
        identity = _read_identity(records, path)
        if identity is None:
            root, device, inode = here or ("", 0, 0)
            fresh = _Identity(
                id=secrets.token_hex(16),
                workspace=root,
                device=device,
                inode=inode,
                created_unix_ms=now_ms(),
            )
            signed = fresh.model_copy(update={"mac": records.mac(fresh.signed_payload())})
            create_exclusively(path, signed.model_dump_json().encode())  # first writer wins
            identity = _read_identity(records, path)
            if identity is None:
                raise VshApprovalError(
                    f"the workspace identity {path} disappeared as soon as it was written; "
                    "stop whatever deletes files in the state directory"
                )
        elif here is not None and not identity.workspace:
            root, device, inode = here  # created for a runtime: bind it to this workspace
            bound = identity.model_copy(
                update={"workspace": root, "device": device, "inode": inode}
            )
            bound = bound.model_copy(update={"mac": records.mac(bound.signed_payload())})
            write_atomically(path, bound.model_dump_json(), durable=True)
            identity = bound
    except OSError as error:
        raise VshApprovalError(
            f"cannot read or write the workspace identity {path} ({describe(error, path)}); "
            "fix the state directory's permissions or pass another state_directory"
        ) from None
    if here is not None:
        _check_identity(identity, here, path)
    return identity.id


def _where(workspace: Path) -> tuple[str, int, int]:
    try:
        root = workspace.resolve()
        info = os.stat(root)
    except OSError as error:
        raise VshApprovalError(
            f"cannot identify the workspace {workspace} ({describe(error, workspace)})"
        ) from None
    return str(root), info.st_dev, info.st_ino


def _read_identity(records: SignedRecords, path: Path) -> _Identity | None:
    raw = read_state_file(path, limit=1 << 16)
    if raw is None:
        return None
    fix = (
        f"delete {path} to give this state directory a new identity (its records are then refused)"
    )
    try:
        identity = _Identity.model_validate_json(raw)
    except ValidationError:
        raise VshApprovalError(f"the workspace identity {path} is corrupt; {fix}") from None
    if not hmac.compare_digest(records.mac(identity.signed_payload()), identity.mac):
        raise VshApprovalError(
            f"the workspace identity {path} was modified outside vsh-ai or signed with another "
            f"approval key (signature mismatch); {fix}"
        )
    return identity


def _check_identity(identity: _Identity, here: tuple[str, int, int], path: Path) -> None:
    if not identity.workspace:
        return
    root, device, inode = here
    if (identity.device, identity.inode) == (device, inode):
        return  # the same folder (moved, or seen through another path)
    if identity.workspace == root and identity.device != device:
        return  # the same path on a remounted file system
    elsewhere = (
        "another folder now at the same path"
        if identity.workspace == root
        else f"the workspace {root}"
    )
    raise VshApprovalError(
        f"this state directory ({path.parent}) belongs to workspace {identity.workspace}; it is "
        f"now used for {elsewhere}, so its approval bindings and journal records would answer "
        "for calls made elsewhere. Use a fresh state_directory for this workspace (a copied "
        "checkout: delete its .vsh-runtime/vsh-ai), or delete "
        f"{path} if the workspace was moved on purpose (records made at the old place are "
        "then refused; new calls run)"
    )


def probe_state_directory(native: vsh.Runtime, state_directory: Path) -> None:
    """Refuse a binding directory a guest program of ``native`` can reach.

    An existing runtime does not reveal its workspace, so ask it: drop a marker with a
    random name in ``state_directory`` and preview a program that tries every place the
    marker could appear under /workspace. Only VSH's own guarded state (reads there are
    denied) or a directory outside the workspace passes.
    """
    state = state_directory.resolve()
    state.mkdir(parents=True, exist_ok=True)
    marker = state / f".vsh-ai-probe-{secrets.token_hex(8)}"
    marker.write_text("probe")
    try:
        candidates = [
            "/workspace/" + str(marker.relative_to(ancestor))
            for ancestor in (state, *state.parents)
        ]
        code = (
            "found = []\n"
            f"for p in {candidates!r}:\n"
            "    try:\n"
            "        vsh_read(p)\n"
            "        found.append(p)\n"
            "    except Exception:\n"
            "        pass\n"
            "found\n"
        )
        request = vsh.RunRequest(code, intent="vsh-ai: check the approval state directory")
        try:
            receipt = native.preview(request)
        except vsh.VshExecutionError:
            return  # reads of VSH's own state are refused outright
        try:
            reachable = receipt.state != "denied" and bool(receipt.result)
        finally:
            native.discard_preview(receipt.transaction)
        if reachable:
            raise ValueError(
                f"state_directory {state_directory} is inside the runtime's workspace, where "
                "agent programs can write; put it outside the workspace or under its "
                ".vsh-runtime directory"
            )
    finally:
        marker.unlink(missing_ok=True)
