"""What a VSH tool call returns to the model: one honest, bounded, structured result."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import PurePath
from typing import Any, Literal

import vsh
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._secrets import redact_text

__all__ = (
    "MAX_CHANGES",
    "NAMES_FROM_ARGUMENTS",
    "ChangedPath",
    "OutputLimits",
    "ToolState",
    "VshResult",
    "bound_text",
    "build_result",
    "redact",
    "safe_deny_reason",
    "safe_name",
)

ToolState = Literal["committed", "read", "pending", "rejected", "denied", "stale", "failed"]
MAX_CHANGES = 200
"""At most this many entries in ``VshResult.changes``; ``changes_omitted`` counts the rest."""
WITHHELD_NAME = "[name withheld]"
NAMES_FROM_ARGUMENTS: ContextVar[bool] = ContextVar("vsh_ai_names_from_arguments", default=False)
"""True while a file helper (vsh_write, vsh_move, ...) runs: its paths are the model's own
arguments, so their names cannot carry bytes the program read."""
_RELEASED: frozenset[str] = frozenset(("committed", "read"))


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
        description="The program's result and output are not shown because its transaction "
        "was not approved (what it read may be exactly what the reviewer refused).",
    )
    risk_flags: tuple[str, ...] = ()
    deny_reason: str | None = None
    verdict: Verdict | None = None
    feedback: str | None = None
    next_step: str = ""

    # What a person approving this work is shown (full names, diff with secrets redacted);
    # never part of what the worker model sees.
    _approver_changes: tuple[ChangedPath, ...] | None = PrivateAttr(None)
    _approver_diff: str | None = PrivateAttr(None)

    def approver_view(self) -> dict[str, Any]:
        """The metadata an approver needs: this result with full change names and diff."""
        data = self.model_dump(
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
        if self._approver_changes is not None:
            data["changes"] = [c.model_dump() for c in self._approver_changes]
            data["summary"] = _summary(self._approver_changes, self.changes_omitted)
        if self._approver_diff is not None:
            data["diff"] = self._approver_diff
        return data


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
    "failed": (
        "NOT applied: VSH could not complete this transaction ({reason}). Read the feedback; "
        "retry only if it says a retry can work, otherwise report it to the user."
    ),
}


def next_step_for(
    state: ToolState, *, transaction: str | None = None, reason: str | None = None
) -> str:
    """The one line that tells the model what to do after a result in ``state``."""
    default = "see feedback" if state == "failed" else "protected"
    return _NEXT_STEPS[state].format(tx=transaction or "?", reason=reason or default)


def _summary(changes: Sequence[ChangedPath], omitted: int = 0) -> str:
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


def render_diff(
    evidence: Evidence,
    limit: int,
    *,
    hidden: frozenset[str] = frozenset(),
    unnamed: frozenset[str] = frozenset(),
) -> str:
    """Unified diffs of every changed text path (binary/uncaptured paths get one line).

    Paths in ``hidden`` get a one-line note instead of their contents; paths in
    ``unnamed`` get neither their name nor their contents.
    """
    chunks: list[str] = []
    for change in evidence.changes:
        if change.path in unnamed:
            chunks.append(f"{change.kind}: {WITHHELD_NAME} (contents withheld)\n")
            continue
        name = safe_name(change.path)
        if change.path in hidden:
            chunks.append(f"{change.kind}: {name} (contents withheld)\n")
            continue
        try:
            if evidence.is_binary(change.path):
                chunks.append(f"Binary {change.kind}: {name}\n")
                continue
            text = evidence.unified_diff(change.path)
        except (EvidenceGap, UnicodeDecodeError):
            text = ""
        chunks.append(redact(text) or f"{change.kind}: {name} (contents not captured)\n")
    return bound_text("".join(chunks), limit)


def _sources(evidence: Evidence) -> dict[str, frozenset[str]] | None:
    try:
        from ..analysis._provenance import content_sources
    except ImportError:
        return None
    try:
        return content_sources(evidence)
    except Exception:
        return None


def _named(verdict: Verdict | None, paths: Iterable[str]) -> set[str]:
    """The paths a verdict mentions (reason, citations or details)."""
    if verdict is None:
        return set()
    text = " ".join((verdict.reason, *verdict.cited, json.dumps(verdict.details, default=str)))
    return {path for path in paths if path and path in text}


def withheld_paths(evidence: Evidence, verdict: Verdict | None) -> frozenset[str]:
    """Changed paths whose contents a refused result must not show the worker.

    A path is withheld when its bytes may derive from another path's bytes (a copy, a
    rename, or any content read of another path before the write; H6's provenance when
    available, else: any read of another path taints every write), when it is deleted
    (the diff would be the deleted bytes), or when the verdict names it (the judge may be
    protecting exactly that file).
    """
    changed = [c.path for c in evidence.changes]
    hidden = set(_named(verdict, changed))
    sources = _sources(evidence)
    renamed = {p for pair in evidence.renames for p in pair}
    reads = set(evidence.read_paths)
    for change in evidence.changes:
        path = change.path
        if change.kind == "delete" or change.after is None or path in renamed:
            hidden.add(path)
        elif sources is not None:
            if sources.get(path, frozenset()) - {path}:
                hidden.add(path)
        elif reads - {path}:
            hidden.add(path)
    return frozenset(hidden)


def _names_may_carry_reads(evidence: Evidence | None, changes: Sequence[ChangedPath]) -> bool:
    """Whether created names could be built from bytes the program read elsewhere."""
    if NAMES_FROM_ARGUMENTS.get():
        return False
    if evidence is None:
        return any(c.kind in ("create", "rename") for c in changes)
    written = {c.path for c in evidence.changes}
    return bool(set(evidence.read_paths) - written) or bool(evidence.renames)


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


def _worker_changes(
    changes: Sequence[ChangedPath], *, refused: bool, names_tainted: bool
) -> tuple[ChangedPath, ...]:
    shown: list[ChangedPath] = []
    for change in changes:
        if refused and names_tainted and change.kind in ("create", "rename"):
            shown.append(ChangedPath(path=WITHHELD_NAME, kind=change.kind))
        else:
            shown.append(ChangedPath(path=safe_name(change.path), kind=change.kind))
    return tuple(shown)


def _worker_verdict(verdict: Verdict | None) -> Verdict | None:
    if verdict is None:
        return None
    details = json.loads(redact(json.dumps(verdict.details)))
    return verdict.model_copy(update={"reason": redact(verdict.reason), "details": details})


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
    changes_omitted: int = 0,
) -> VshResult:
    """Assemble a bounded :class:`VshResult` from a preview receipt and what the hook saw.

    Work that is not committed (or read) is refused work: the worker sees its decision,
    feedback and a diff only of contents that cannot carry protected bytes; created
    names are withheld when the program read other files; secrets are redacted from
    names, diff, feedback and verdict; ``deny_reason`` keeps VSH's category only. The
    full names and diff stay available to an approver (:meth:`VshResult.approver_view`).
    """
    if changes is None:
        changes = changes_of(receipt.changes) if receipt is not None else ()
    if receipt is not None:
        transaction = transaction or receipt.transaction
        deny_reason = deny_reason or receipt.deny_reason
    changes_omitted += max(0, len(changes) - MAX_CHANGES)
    changes = tuple(changes[:MAX_CHANGES])
    released = state in _RELEASED
    refused = not released
    hidden = withheld_paths(evidence, verdict) if evidence is not None and refused else frozenset()
    names_tainted = refused and _names_may_carry_reads(evidence, changes)
    unnamed = (
        frozenset(c.path for c in evidence.changes if c.kind in ("create", "rename"))
        if evidence is not None and names_tainted
        else frozenset()
    )
    diff = (
        render_diff(evidence, limits.diff, hidden=hidden, unnamed=unnamed)
        if evidence is not None and changes
        else None
    )
    shown = _worker_changes(changes, refused=refused, names_tainted=names_tainted)
    # Only approved work releases its output: a pending, rejected or denied program's
    # result could carry exactly the contents the reviewer (or policy) refused.
    released_output = receipt is not None and released
    withheld = receipt is not None and not released
    result_text = _result_text(receipt.result) if released_output and receipt is not None else None
    if refused:
        deny_reason = safe_deny_reason(deny_reason)
        feedback = redact(feedback) if feedback else feedback
    result = VshResult(
        state=state,
        transaction=transaction,
        changes=shown,
        changes_omitted=changes_omitted,
        summary=_summary(shown, changes_omitted),
        diff=diff,
        result=None if result_text is None else bound_text(result_text, limits.result),
        stdout=bound_text(receipt.stdout, limits.stdout) if released_output and receipt else "",
        stderr=bound_text(
            receipt.stderr if released_output and receipt else "" if withheld else stderr,
            limits.stderr,
            keep="tail",
        ),
        output_withheld=withheld
        and bool(receipt and (receipt.stdout or receipt.result is not None)),
        risk_flags=tuple(receipt.risk_flags) if receipt is not None else (),
        deny_reason=deny_reason,
        verdict=_worker_verdict(verdict) if refused else verdict,
        feedback=feedback,
        next_step=next_step_for(state, transaction=transaction, reason=deny_reason),
    )
    if refused:
        result._approver_changes = tuple(
            ChangedPath(path=safe_name(c.path), kind=c.kind) for c in changes
        )
        if evidence is not None and changes:
            result._approver_diff = render_diff(evidence, limits.diff)
    return result
