"""What a VSH tool call returns to the model: the result type and its text helpers.

The values are produced in one place, :mod:`vsh_ai.toolset._render`; this module holds
only the types and the small text functions every view shares.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .._verdict import Verdict
from ..analysis._secrets import redact_text

__all__ = (
    "MAX_CHANGES",
    "RELEASED",
    "ChangedPath",
    "OutputLimits",
    "ToolState",
    "VshResult",
    "bound_text",
    "redact",
    "safe_deny_reason",
    "safe_name",
    "summary_of",
)

ToolState = Literal["committed", "read", "pending", "rejected", "denied", "stale", "failed"]
RELEASED: frozenset[str] = frozenset(("committed", "read"))
"""States whose program output and changes the worker may see: approved work."""
MAX_CHANGES = 200
"""At most this many entries in ``VshResult.changes``; ``changes_omitted`` counts the rest."""


class OutputLimits(BaseModel):
    """Byte budgets for what a result shows the model (each field is cut with a marker)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    result: int = Field(16_384, ge=64)
    stdout: int = Field(4_096, ge=64)
    stderr: int = Field(4_096, ge=64)
    diff: int = Field(8_192, ge=64)
    error: int = Field(4_096, ge=64)


class ChangedPath(BaseModel):
    """One path the transaction changes, workspace-relative (``create``, ``modify``, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    kind: str


class VshResult(BaseModel):
    """The outcome of one VSH transaction, as the agent sees it.

    ``state``: ``committed`` (host files changed), ``read`` (nothing to change),
    ``pending`` (waiting for approval; host unchanged), ``rejected`` (the reviewer
    refused; host unchanged), ``denied`` (policy refused; host unchanged), ``stale``
    (the workspace changed underneath; host unchanged, re-read and resubmit), ``failed``
    (VSH or the toolset could not complete it; host unchanged; ``feedback`` says whether
    a retry can work).

    Only ``committed`` and ``read`` results show what the program did (transaction,
    changes, diff, result, stdout, risk flags). Every other result shows the decision,
    its category and the reviewer's feedback only: the rest was computed by a program
    whose work was not approved, and may carry exactly the bytes that were refused.
    What a person approving the work needs is in :meth:`approver_view`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: ToolState
    transaction: str | None = None
    changes: tuple[ChangedPath, ...] = ()
    changes_omitted: int = Field(0, description="Changed paths not listed in `changes`.")
    summary: str = ""
    diff: str | None = Field(
        None, description="Bounded unified diff when the contents were captured."
    )
    result: str | None = None
    stdout: str = ""
    stderr: str = ""
    output_withheld: bool = Field(
        False,
        description="What the program did (changes, diff, result, output) is not shown "
        "because its work was not approved.",
    )
    risk_flags: tuple[str, ...] = ()
    deny_reason: str | None = None
    verdict: Verdict | None = None
    feedback: str | None = None
    next_step: str = ""

    # What a person approving this work (or the host application) is shown: the full
    # names, diff and diagnosis. Never part of what the worker model sees.
    _approver: dict[str, Any] | None = PrivateAttr(None)

    def __eq__(self, other: object) -> bool:
        """Results are equal when the agent sees the same thing (a replayed result, read
        back from the journal, equals the original; the approver's view is not compared)."""
        if not isinstance(other, VshResult):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    def __hash__(self) -> int:
        return hash(self.model_dump_json())

    def approver_view(self) -> dict[str, Any]:
        """The metadata an approver needs: transaction, full change names, diff, verdict."""
        if self._approver is not None:
            return dict(self._approver)
        return self.model_dump(
            mode="json",
            include={
                "transaction",
                "changes",
                "changes_omitted",
                "summary",
                "diff",
                "risk_flags",
                "verdict",
                "feedback",
            },
        )


def bound_text(text: str, limit: int, *, keep: Literal["head", "tail"] = "head") -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes plus an explicit ``…[truncated N bytes]``."""
    data = text.encode()
    if len(data) <= limit:
        return text
    if keep == "head":
        kept = data[:limit].decode(errors="ignore")
        return f"{kept}…[truncated {len(data) - len(kept.encode())} bytes]"
    kept = data[-limit:].decode(errors="ignore")
    return f"…[truncated {len(data) - len(kept.encode())} bytes]{kept}"


def summary_of(changes: Sequence[ChangedPath], omitted: int = 0) -> str:
    """``2 create, 1 modify: a, b, c`` for a short list of changes."""
    if not changes:
        return "no changes"
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.kind] = counts.get(change.kind, 0) + 1
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    shown = ", ".join(c.path for c in changes[:10])
    hidden = len(changes) - min(len(changes), 10) + omitted
    more = f", … {hidden} more" if hidden else ""
    total = f" (+{omitted} more changed paths not listed)" if omitted else ""
    return f"{parts}{total}: {shown}{more}"


# -- redaction ---------------------------------------------------------------------------

_SEPARATORS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def redact(text: str) -> str:
    """``text`` with every detected secret replaced by a ``[redacted …]`` marker."""
    if not text:
        return text
    return redact_text(text)[0]


def safe_name(path: str) -> str:
    """A path name fit for the worker: secrets redacted, control and line separators escaped."""
    return _SEPARATORS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", redact(path))


_VSH_DENY_CATEGORIES = frozenset(
    ("protected_access_attempt", "delete_ratio_limit", "permission_denied", "policy_denied")
)


def safe_deny_reason(reason: str | None) -> str | None:
    """Only VSH's category of a denial: the rest can be text a guest program chose."""
    if reason is None:
        return None
    head = reason.split(":", 1)[0].strip()
    return head if head in _VSH_DENY_CATEGORIES else "permission_denied"


def _named(verdict: Verdict | None, paths: Iterable[str]) -> set[str]:
    """The paths a verdict mentions (reason, citations or details)."""
    if verdict is None:
        return set()
    text = " ".join((verdict.reason, *verdict.cited, json.dumps(verdict.details, default=str)))
    return {path for path in paths if path and path in text}
