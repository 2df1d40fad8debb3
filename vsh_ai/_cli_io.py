"""What every ``vsh-ai`` command shares: the usage error and checked output paths.

An output path of ``-`` means standard output (and ``check -`` reads standard input).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ("STDIO", "UsageError", "check_folder", "check_output", "is_stdio", "write")

STDIO = "-"


def is_stdio(path: Path | str | None) -> bool:
    """``-``: standard output (or input)."""
    return path is not None and str(path) == STDIO


class UsageError(ValueError):
    """Bad command-line input found before anything runs (exit 2)."""


def check_output(path: Path | None, flag: str) -> None:
    """Refuse an output path that cannot be written, before a (possibly paid) run."""
    if path is None or is_stdio(path):
        return
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; name a file to write")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {parent} does not exist; create it first")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(parent, os.W_OK | os.X_OK)
    if not writable:
        raise UsageError(f"{flag} {path}: not writable; choose another path")


def check_folder(folder: Path, flag: str) -> None:
    """A folder that exists or can be created, and can be written."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(
            f"{flag}: cannot write recordings to {folder} ({existing} is not a writable "
            "folder); pass --recordings DIR"
        )


def write(path: Path, text: str, flag: str) -> None:
    """Write ``text`` to ``path`` (``-``: standard output)."""
    if is_stdio(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{flag} {path}: cannot write it ({error.strerror})") from None
