"""Notice files of the folders a change deletes from, read from the host for the judge.

VSH's evidence holds only the paths a program touched, so a ``cache/README.md`` saying
"this is the only copy" is invisible to a judge when the program deletes ``cache/*`` and
leaves the README alone. Where the hook knows the workspace (the toolset, evals,
:func:`~vsh_ai._simulate.simulate`), the evidence also carries the notice files (README,
NOTICE, KEEP, DO-NOT-DELETE...) of every folder a deleted path sits in and of each folder
above it, as the host holds them while the transaction is pending (the host is the base
the transaction was previewed on). Read-only and bounded: regular files only (never a
symlink), at most :data:`MAX_NOTICES` files of :data:`NOTICE_BYTES` each, from at most
:data:`MAX_FOLDERS` folders. They can only add a review (``deletion_notices``); a notice
an outside writer removes in between is simply not seen, as before.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._evidence import Evidence

__all__ = (
    "MAX_FOLDERS",
    "MAX_NOTICES",
    "NOTICE_BYTES",
    "NOTICE_NAME",
    "read_folder_notices",
    "with_folder_notices",
)

NOTICE_NAME = re.compile(
    r"(?i)^(?:readme|read[-_ ]?me|notice|notes?|important|keep|warning|do[-_ ]?not[-_ ]?delete"
    r"|dont[-_ ]?delete)(?:[-_. ].*)?$"
)
"""File names that speak for their folder."""

NOTICE_BYTES = 64 * 1024
MAX_NOTICES = 32
MAX_FOLDERS = 256


def _folders(deleted: list[str]) -> list[str]:
    """Every folder a deleted path sits in, and each folder above it (``""``: the root)."""
    seen: dict[str, None] = {}
    for path in deleted:
        parts = path.split("/")[:-1]
        for depth in range(len(parts), -1, -1):
            seen.setdefault("/".join(parts[:depth]), None)
            if len(seen) >= MAX_FOLDERS:
                return list(seen)
    return list(seen)


def read_folder_notices(root: Path, deleted: list[str]) -> dict[str, str]:
    """``{workspace path: text}`` of the notice files of ``deleted``'s folders on the host."""
    notices: dict[str, str] = {}
    for folder in _folders(deleted):
        base = root / folder if folder else root
        try:
            entries = sorted(os.scandir(base), key=lambda entry: entry.name)
        except OSError:
            continue  # gone, not a folder, or unreadable: nothing to read
        for entry in entries:
            if NOTICE_NAME.match(entry.name) is None or entry.name.startswith(".vsh-runtime"):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    continue  # a symlink could point anywhere; folders are not notices
                with open(entry.path, "rb") as handle:
                    data = handle.read(NOTICE_BYTES)
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue  # binary
            name = f"{folder}/{entry.name}" if folder else entry.name
            notices[name] = data.decode("utf-8", errors="ignore")
            if len(notices) >= MAX_NOTICES:
                return notices
    return notices


def with_folder_notices(evidence: Evidence, root: Path | None) -> Evidence:
    """``evidence`` with the host's notice files of the folders it deletes from."""
    if root is None:
        return evidence
    deleted = [c.path for c in evidence.changes if c.kind == "delete"]
    if not deleted:
        return evidence
    notices = read_folder_notices(root, deleted)
    if not notices:
        return evidence
    return evidence.model_copy(update={"folder_notices": notices})
