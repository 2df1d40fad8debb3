"""Quarantine: after a VSH recovery error the toolset stops committing on the workspace."""

from __future__ import annotations

from pathlib import Path

from ._result import bound_text, redact
from ._workspace import read_quarantine, write_quarantine

__all__ = ("QUARANTINE_NOTE", "Quarantine", "error_kind")

QUARANTINE_NOTE = (
    "NOT applied: this workspace is quarantined after a VSH recovery error. Stop and report "
    "the feedback to the user; do not retry."
)
QUARANTINE_FILE = "QUARANTINED.json"
_QUARANTINED: dict[str, str] = {}
"""Workspaces (lock keys) this process stopped committing on after a recovery error."""


def error_kind(error: BaseException) -> str:
    """The error's type and first line, secrets redacted (VSH messages hold paths)."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {redact(bound_text(first, 200))}"


class Quarantine:
    """Whether (and why) this workspace is quarantined, in this process and on disk."""

    def __init__(self, key: str, workspace: Path | None) -> None:
        self.key = key
        self.workspace = workspace
        self.file = workspace / ".vsh-runtime" / "vsh-ai" / QUARANTINE_FILE if workspace else None
        self.message: str | None = read_quarantine(self.file) if self.file else None
        if self.message is None:
            self.message = _QUARANTINED.get(key)

    @property
    def active(self) -> bool:
        return self.message is not None

    def worker_text(self) -> str:
        """What the worker model is told: the recovery steps without VSH's error text or
        transaction names (those can name paths a program chose; the host reads
        :attr:`message`)."""
        blobs = (
            f"{self.workspace}/.vsh-runtime/data/blobs" if self.workspace else "its .vsh-runtime"
        )
        lift = f"delete {self.file}" if self.file else "restart the process"
        return (
            "This workspace is quarantined: VSH reported a recovery error, so vsh-ai stopped "
            "committing here to protect host files. Host files may be inconsistent. To "
            "recover, a person stops every other writer, compares the affected files with "
            "version control or backups (the bytes VSH committed survive as content blobs "
            f"under {blobs}; the toolset's quarantine message lists what VSH left), then "
            f"{lift} and opens the workspace again. Report this to the user."
        )

    def enter(self, error: BaseException) -> None:
        """Stop committing on this workspace: VSH could not prove its host state."""
        where = str(self.workspace) if self.workspace else "this workspace"
        blobs = (
            f"{self.workspace}/.vsh-runtime/data/blobs" if self.workspace else "its .vsh-runtime"
        )
        lift = f"then delete {self.file}" if self.file else "then restart the process"
        message = (
            f"VSH reported a recovery error on {where} ({error_kind(error)}), so vsh-ai stopped "
            "committing there to protect host files. Host files may be inconsistent: VSH 0.6.0 "
            "can lose bytes when another process writes the same files during a commit. To "
            "recover: stop every other writer; compare the affected files with version control "
            f"or backups; the bytes VSH committed survive as content blobs under {blobs}, and "
            "a file VSH moved aside before installing its new version stays in the "
            "transaction's quarantine slot under .vsh-runtime/transactions "
            "(vsh.Runtime.recover() reports what startup recovery did); "
            f"{lift} and open the workspace again."
        )
        text = str(error)
        if "commit plan" in text or "commit journal" in text:
            message = (
                f"VSH could not recover {where} ({error_kind(error)}): a commit was "
                "interrupted (the process was killed) while VSH was writing or removing its "
                "own commit plan or journal, a state VSH 0.6.0 cannot recover from. vsh-ai "
                "stopped committing there. Left over: "
                f"{leftover_transactions(self.workspace)}. A folder whose stage/ and "
                "quarantine/ are empty never touched host files; otherwise host files hold "
                "the old or the new version of each file (stage/ has the new versions, "
                "quarantine/ the old ones): check them. To recover: move the folder out of "
                f".vsh-runtime/transactions, {lift} and open the workspace again."
            )
        self.message = message
        _QUARANTINED[self.key] = message
        if self.file is not None:
            write_quarantine(self.file, message)  # never blocks on a FIFO, never raises


def leftover_transactions(workspace: Path | None) -> str:
    """What VSH left in ``.vsh-runtime/transactions`` (names and sizes only: a diagnosis)."""
    if workspace is None:
        return "unknown (the toolset was given a runtime, not a workspace)"
    folder = workspace / ".vsh-runtime" / "transactions"
    described: list[str] = []
    try:
        for transaction in sorted(folder.iterdir())[:5]:
            parts = []
            for name in ("plan", "journal"):
                item = transaction / name
                parts.append(
                    f"{name} {item.stat().st_size} bytes" if item.exists() else f"no {name}"
                )
            for name in ("stage", "quarantine"):
                slot = transaction / name
                count = sum(1 for _ in slot.iterdir()) if slot.is_dir() else 0
                parts.append(f"{name}/ {count} file(s)")
            described.append(f"transactions/{transaction.name} ({', '.join(parts)})")
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    return "; ".join(described) or "no transaction folder"


def clear_process_quarantine() -> None:
    """Forget this process's quarantines (tests; a person lifting one restarts instead)."""
    _QUARANTINED.clear()
