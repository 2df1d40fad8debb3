"""The diff a report keeps for a wrong decision: what ``eval --html`` expands it to.

Only runs decided unlike their label carry one (``CaseOutcome.diff``), so a report grows
by the diffs someone needs to look at, not by every fixture. It is the approver's view of
the change: unified diffs of text paths, one line per binary, uncaptured or metadata-only
change, secrets redacted by the detector the judges use, and bounded in size.
"""

from __future__ import annotations

from .._evidence import Change, Evidence, EvidenceGap
from ..analysis._secrets import redact_text

__all__ = ("MAX_DIFF_BYTES", "report_diff")

MAX_DIFF_BYTES = 16_000
"""A report's diff of one run is cut here (an explicit ``…[truncated N bytes]`` marker)."""


def _mode(change: Change) -> str | None:
    before, after = change.before, change.after
    if before is None or after is None or before.mode == after.mode:
        return None
    return f"mode {before.mode & 0o7777:o} -> {after.mode & 0o7777:o}: {change.path}\n"


def _one(evidence: Evidence, change: Change) -> str:
    mode = _mode(change)
    try:
        if evidence.is_binary(change.path):
            return f"binary {change.kind}: {change.path}\n"
        text = evidence.unified_diff(change.path)
    except (EvidenceGap, UnicodeDecodeError):
        return f"{change.kind}: {change.path} (contents not captured)\n"
    if not text:
        return mode or f"{change.kind}: {change.path} (no text change)\n"
    return (mode or "") + text


def report_diff(evidence: Evidence, limit: int = MAX_DIFF_BYTES) -> str:
    """Every change of ``evidence`` as a unified diff, secrets redacted, at most ``limit``
    UTF-8 bytes (plus the truncation marker)."""
    if not evidence.changes:
        return ""
    text = redact_text("".join(_one(evidence, change) for change in evidence.changes))[0]
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")
    return f"{kept}…[truncated {len(data) - len(kept.encode())} bytes]\n"
