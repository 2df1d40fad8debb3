"""What a VSH tool call returns to the model: one honest, bounded, structured result."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Any, Literal

import vsh
from pydantic import BaseModel, ConfigDict, Field

from ._evidence import Evidence, EvidenceGap
from ._verdict import Verdict

__all__ = (
    "ChangedPath",
    "OutputLimits",
    "ToolState",
    "VshResult",
    "bound_text",
    "build_result",
)

ToolState = Literal["committed", "read", "pending", "rejected", "denied", "stale"]


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
    (the workspace changed underneath; host unchanged, re-read and resubmit).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: ToolState
    transaction: str | None = None
    changes: tuple[ChangedPath, ...] = ()
    summary: str = ""
    diff: str | None = Field(
        None, description="Bounded unified diff when the contents were captured."
    )
    result: str | None = None
    stdout: str = ""
    stderr: str = ""
    output_withheld: bool = Field(
        False,
        description="The program's result and output are not shown because its transaction "
        "was not approved (what it read may be exactly what the reviewer refused).",
    )
    risk_flags: tuple[str, ...] = ()
    deny_reason: str | None = None
    verdict: Verdict | None = None
    feedback: str | None = None
    next_step: str = ""


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


_NEXT_STEPS: dict[ToolState, str] = {
    "committed": "Done: the changes are on the host; continue with the next step.",
    "read": "Nothing was changed; use the result.",
    "pending": (
        "NOT applied: the change waits for approval (transaction {tx}). If the feedback "
        "asks for a different change, submit a corrected one; otherwise tell the user it is "
        "pending. Never claim it is done, and do not resubmit the same change."
    ),
    "rejected": (
        "NOT applied: the reviewer rejected it. Do not resubmit it; follow the feedback "
        "with a different change, or report to the user."
    ),
    "denied": (
        "NOT applied: policy denied it ({reason}). Do not retry protected paths; choose "
        "another approach or ask the user."
    ),
    "stale": (
        "NOT applied: the workspace changed after your program ran. Re-read the files you "
        "depend on and submit the change again."
    ),
}


def next_step_for(
    state: ToolState, *, transaction: str | None = None, reason: str | None = None
) -> str:
    """The one line that tells the model what to do after a result in ``state``."""
    return _NEXT_STEPS[state].format(tx=transaction or "?", reason=reason or "protected")


def _summary(changes: Sequence[ChangedPath]) -> str:
    if not changes:
        return "no changes"
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.kind] = counts.get(change.kind, 0) + 1
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    shown = ", ".join(c.path for c in changes[:10])
    more = f", … {len(changes) - 10} more" if len(changes) > 10 else ""
    return f"{parts}: {shown}{more}"


def render_diff(evidence: Evidence, limit: int) -> str:
    """Unified diffs of every changed text path (binary/uncaptured paths get one line)."""
    chunks: list[str] = []
    for change in evidence.changes:
        try:
            if evidence.is_binary(change.path):
                chunks.append(f"Binary {change.kind}: {change.path}\n")
                continue
            text = evidence.unified_diff(change.path)
        except (EvidenceGap, UnicodeDecodeError):
            text = ""
        chunks.append(text or f"{change.kind}: {change.path} (contents not captured)\n")
    return bound_text("".join(chunks), limit)


def _result_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str | PurePath):
        return str(value)
    if isinstance(value, vsh.BashResult):
        return f"exit code {value.exit_code}"
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _jsonable(value: object) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def changes_of(pairs: Iterable[tuple[str, str]]) -> tuple[ChangedPath, ...]:
    return tuple(ChangedPath(path=path, kind=kind) for path, kind in pairs)


def build_result(
    state: ToolState,
    *,
    receipt: vsh.Receipt | None,
    limits: OutputLimits,
    changes: Sequence[ChangedPath] | None = None,
    evidence: Evidence | None = None,
    verdict: Verdict | None = None,
    feedback: str | None = None,
    deny_reason: str | None = None,
    stderr: str = "",
    transaction: str | None = None,
) -> VshResult:
    """Assemble a bounded :class:`VshResult` from a preview receipt and what the hook saw."""
    if changes is None:
        changes = changes_of(receipt.changes) if receipt is not None else ()
    if receipt is not None:
        transaction = transaction or receipt.transaction
        deny_reason = deny_reason or receipt.deny_reason
    diff = render_diff(evidence, limits.diff) if evidence is not None and changes else None
    # Only approved work releases its output: a pending, rejected or denied program's
    # result could carry exactly the contents the reviewer (or policy) refused.
    released = receipt is not None and state in ("committed", "read")
    withheld = receipt is not None and not released
    result_text = _result_text(receipt.result) if released and receipt is not None else None
    return VshResult(
        state=state,
        transaction=transaction,
        changes=tuple(changes),
        summary=_summary(changes),
        diff=diff,
        result=None if result_text is None else bound_text(result_text, limits.result),
        stdout=bound_text(receipt.stdout, limits.stdout) if released and receipt else "",
        stderr=bound_text(
            receipt.stderr if released and receipt else "" if withheld else stderr,
            limits.stderr,
            keep="tail",
        ),
        output_withheld=withheld
        and bool(receipt and (receipt.stdout or receipt.result is not None)),
        risk_flags=tuple(receipt.risk_flags) if receipt is not None else (),
        deny_reason=deny_reason,
        verdict=verdict,
        feedback=feedback,
        next_step=next_step_for(state, transaction=transaction, reason=deny_reason),
    )
