"""The one renderer: what the worker, the spans and the approver see of a transaction.

Every view of a tool call is produced here from its :class:`Outcome`, and nowhere else.
Work that is not released (anything but ``committed`` and ``read``) is rendered from the
decision, its category, reviewer-authored feedback (names the program did not spell out
masked) and fixed toolset text only: nothing the program computed (names, counts,
order, sizes, modes, output, error text, transaction ids, which derive from the
workspace's bytes) can reach the worker model or a span. Two workspaces that differ only
in bytes the program was not allowed to see therefore give identical views, by
construction (``tests/test_toolset_noninterference.py`` checks it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import vsh

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._secret_flow import secret_flow
from ._result import (
    MAX_CHANGES,
    RELEASED,
    ChangedPath,
    OutputLimits,
    ToolState,
    VshResult,
    bound_text,
    redact,
    safe_deny_reason,
    safe_name,
    summary_of,
)

__all__ = (
    "WITHHELD_NAME",
    "WITHHELD_OUTPUT",
    "Outcome",
    "approver_view",
    "guest_retry",
    "mask_names",
    "next_step_for",
    "render",
    "render_diff",
    "span_attributes",
    "withholds_output",
)

WITHHELD_OUTPUT = "output withheld: the program read secret-bearing content"
"""What the worker sees of an approved program's result, stdout and stderr when it read
secret-bearing content: a scalar it returns (``int.from_bytes(secret[:8])``) is as small
as any other, so the read rule cannot tell it from a count; the approver still sees it."""

WITHHELD_NAME = "[name withheld]"
WITHHELD_NAMES = "[names withheld]"
"""What one masked name, or a list of them (their order and count), becomes."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one tool call's transaction: everything its views come from.

    ``feedback`` is text the toolset or the reviewer wrote (never program output);
    ``detail`` is a diagnosis for the host (it may quote VSH's error text, which can hold
    program-chosen names) and appears only in :func:`approver_view`.
    """

    state: ToolState
    receipt: vsh.Receipt | None = None
    evidence: Evidence | None = None
    verdict: Verdict | None = None
    feedback: str | None = None
    deny_reason: str | None = None
    transaction: str | None = None
    changes: tuple[ChangedPath, ...] | None = None
    changes_omitted: int = 0
    program: str = ""
    detail: str | None = None
    next_step: str | None = None

    @property
    def released(self) -> bool:
        return self.state in RELEASED

    def all_changes(self) -> tuple[ChangedPath, ...]:
        if self.changes is not None:
            return self.changes
        if self.receipt is not None:
            return tuple(ChangedPath(path=p, kind=k) for p, k in self.receipt.changes)
        return ()

    def transaction_id(self) -> str | None:
        return self.transaction or (self.receipt.transaction if self.receipt else None)


_NEXT_STEPS: dict[ToolState, str] = {
    "committed": "Done: the changes are on the host; continue with the next step.",
    "read": "Nothing was changed; use the result.",
    "pending": (
        "NOT applied: the change waits for approval. If the feedback asks for a different "
        "change, submit a corrected one; otherwise tell the user it is pending. Never claim "
        "it is done, and do not resubmit the same change."
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
        "NOT applied: VSH could not complete this transaction. Read the feedback; retry "
        "only if it says a retry can work, otherwise report it to the user."
    ),
}


def next_step_for(state: ToolState, *, reason: str | None = None) -> str:
    """The one line that tells the model what to do after a result in ``state``."""
    return _NEXT_STEPS[state].format(reason=reason or "protected")


@dataclass(frozen=True, slots=True)
class _Listing:
    """The changes and diff of an outcome, rendered once for both views."""

    shown: tuple[ChangedPath, ...]
    omitted: int
    diff: str | None

    @classmethod
    def of(cls, outcome: Outcome, limits: OutputLimits) -> _Listing:
        changes, evidence = outcome.all_changes(), outcome.evidence
        return cls(
            tuple(ChangedPath(path=safe_name(c.path), kind=c.kind) for c in changes[:MAX_CHANGES]),
            outcome.changes_omitted + max(0, len(changes) - MAX_CHANGES),
            render_diff(evidence, limits.diff) if evidence is not None and changes else None,
        )


def render(outcome: Outcome, limits: OutputLimits) -> VshResult:
    """The worker's :class:`VshResult` of ``outcome`` (the approver's view attached)."""
    listing = _Listing.of(outcome, limits)
    result = _released(outcome, limits, listing) if outcome.released else _refused(outcome)
    result._approver = approver_view(outcome, limits, listing)
    return result


def _released(outcome: Outcome, limits: OutputLimits, listing: _Listing) -> VshResult:
    receipt = outcome.receipt
    shown, omitted, diff = listing.shown, listing.omitted, listing.diff
    result_text = _result_text(receipt.result) if receipt is not None else None
    verdict = outcome.verdict
    if withholds_output(outcome):
        return VshResult(
            state=outcome.state,
            transaction=outcome.transaction_id(),
            changes=shown,
            changes_omitted=omitted,
            summary=summary_of(shown, omitted),
            diff=diff,
            result=WITHHELD_OUTPUT,
            risk_flags=tuple(receipt.risk_flags) if receipt is not None else (),
            verdict=verdict,
            feedback=outcome.feedback,
            next_step=outcome.next_step or next_step_for(outcome.state),
        )
    return VshResult(
        state=outcome.state,
        transaction=outcome.transaction_id(),
        changes=shown,
        changes_omitted=omitted,
        summary=summary_of(shown, omitted),
        diff=diff,
        result=None if result_text is None else bound_text(result_text, limits.result),
        stdout=bound_text(receipt.stdout, limits.stdout) if receipt is not None else "",
        stderr=bound_text(receipt.stderr, limits.stderr, keep="tail") if receipt else "",
        risk_flags=tuple(receipt.risk_flags) if receipt is not None else (),
        verdict=verdict,
        feedback=outcome.feedback,
        next_step=outcome.next_step or next_step_for(outcome.state),
    )


def withholds_output(outcome: Outcome) -> bool:
    """Whether released work's result, stdout and stderr stay with the approver.

    So when its verdict says so (``details["withhold_output"]``, the read rule's mark) or,
    whatever stage decided, when the evidence shows a content read of secret-bearing
    bytes: evidence exists only where a reviewer judges, and there the worker sees
    nothing a program computed from a secret. A failed trace withholds (fail closed).
    """
    verdict = outcome.verdict
    if verdict is not None and verdict.details.get("withhold_output") is True:
        return True
    if outcome.evidence is None:
        return False
    try:
        return bool(secret_flow(outcome.evidence).reads)
    except Exception:  # fail closed: an untraceable read withholds the output
        return True


def _refused(outcome: Outcome) -> VshResult:
    """Decision, category, reviewer feedback: nothing the program computed."""
    names = _program_names(outcome)
    verdict = _worker_verdict(outcome.verdict, names, outcome.program)
    feedback = outcome.feedback
    if feedback is None and verdict is not None and verdict.decision in ("review", "reject"):
        feedback = verdict.reason
    elif feedback is not None:
        feedback = _clean(mask_names(redact(feedback), names, outcome.program))
    deny = outcome.deny_reason or (outcome.receipt.deny_reason if outcome.receipt else None)
    category = safe_deny_reason(deny) if outcome.state == "denied" or deny else None
    return VshResult(
        state=outcome.state,
        output_withheld=True,
        deny_reason=category,
        verdict=verdict,
        feedback=feedback,
        next_step=outcome.next_step or next_step_for(outcome.state, reason=category),
    )


def _program_names(outcome: Outcome) -> frozenset[str]:
    """Every path name the transaction touched (changed, read, listed, moved)."""
    names: set[str] = set()
    evidence = outcome.evidence
    if evidence is not None:
        names.update(c.path for c in evidence.changes)
        for effect in evidence.effects:
            names.update(effect.paths)
    names.update(c.path for c in outcome.all_changes())
    return frozenset(n for n in names if n)


_NAME_LIST = re.compile(
    r"['\"]?\[name withheld\]['\"]?(?:(?:, | and |, and )['\"]?\[name withheld\]['\"]?)*"
    r"(?: and \d+ more)?"
)
_COUNTED_MORE = re.compile(r"\b([Aa]nd )\d+ more\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def mask_names(text: str, names: Iterable[str], program: str = "") -> str:
    """``text`` with every path in ``names`` replaced by :data:`WITHHELD_NAME`, and lists
    of such names (their order and count) collapsed into one marker.

    Which paths a refused program touched, in what order and how many, is computed by the
    program, so none of it reaches the worker; the approver sees the names. ``program`` is
    accepted for symmetry with the renderer's other inputs and not consulted: a name the
    program spells out literally can still be one of several it chose between.
    """
    for name in sorted(set(names), key=len, reverse=True):
        pattern = re.compile(r"(?<![\w.\-/])(?:/workspace/)?" + re.escape(name) + r"(?![\w\-/])")
        text = pattern.sub(WITHHELD_NAME, text)
    text = _NAME_LIST.sub(WITHHELD_NAMES, text)
    text = _COUNTED_MORE.sub(lambda m: m.group(1) + "more", text)
    # One sentence per refused change would count them: say each distinct thing once.
    sentences = _SENTENCE.split(text)
    return " ".join(dict.fromkeys(s for s in sentences if s))


_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _clean(text: str) -> str:
    """Escape control, line-separator and bidi characters (newlines and tabs stay)."""
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def _worker_verdict(verdict: Verdict | None, names: frozenset[str], program: str) -> Verdict | None:
    """The reviewer's decision, author, category and reason (names masked, secrets
    redacted); citations, details, usage and timing are computed from the program's work
    and stay with the approver."""
    if verdict is None:
        return None
    return Verdict(
        decision=verdict.decision,
        reason=_clean(mask_names(redact(verdict.reason), names, program)),
        judge=verdict.judge,
        failure=verdict.failure,
    )


def approver_view(outcome: Outcome, limits: OutputLimits, listing: _Listing) -> dict[str, Any]:
    """What a person deciding on this work sees: full names, diff (secrets redacted),
    risk flags, the full verdict and the host diagnosis (``listing``: the outcome's
    changes and diff, as :func:`render` made them for both views)."""
    listed, omitted = listing.shown, listing.omitted
    receipt = outcome.receipt
    verdict = outcome.verdict
    view: dict[str, Any] = {
        "state": outcome.state,
        "transaction": outcome.transaction_id(),
        "changes": [c.model_dump() for c in listed],
        "changes_omitted": omitted,
        "summary": summary_of(listed, omitted),
        "diff": listing.diff,
        "risk_flags": list(receipt.risk_flags) if receipt is not None else [],
        "verdict": json.loads(redact(verdict.model_dump_json())) if verdict else None,
        "feedback": redact(outcome.feedback) if outcome.feedback else None,
    }
    if outcome.released and receipt is not None and withholds_output(outcome):
        result_text = _result_text(receipt.result)
        view["withheld_output"] = {
            "result": None
            if result_text is None
            else bound_text(redact(result_text), limits.result),
            "stdout": bound_text(redact(receipt.stdout), limits.stdout),
            "stderr": bound_text(redact(receipt.stderr), limits.stderr, keep="tail"),
        }
    deny = outcome.deny_reason or (receipt.deny_reason if receipt else None)
    if deny:
        view["deny_reason"] = safe_deny_reason(deny)
    if outcome.detail:
        view["detail"] = bound_text(redact(outcome.detail), limits.error)
    return view


def render_diff(evidence: Evidence, limit: int) -> str:
    """Unified diffs of every changed text path (binary/uncaptured paths get one line),
    secrets redacted, names escaped."""
    chunks: list[str] = []
    for change in evidence.changes:
        name = safe_name(change.path)
        try:
            if evidence.is_binary(change.path):
                chunks.append(f"Binary {change.kind}: {name}\n")
                continue
            text = evidence.unified_diff(change.path)
        except (EvidenceGap, UnicodeDecodeError):
            text = ""
        chunks.append(redact(text) or f"{change.kind}: {name} (contents not captured)\n")
    return bound_text("".join(chunks), limit)


def span_attributes(result: VshResult) -> dict[str, Any]:
    """Span attributes of a rendered result: a function of what the worker sees.

    Ids and counts only for released work; for everything else the state, the decision,
    who decided and the category (never contents, intent, guest output or names)."""
    attributes: dict[str, Any] = {"state": result.state}
    if result.state in RELEASED:
        attributes["transaction"] = result.transaction or ""
        attributes["changed_paths"] = len(result.changes) + result.changes_omitted
    if result.verdict is not None:
        attributes["verdict"] = result.verdict.decision
        attributes["decided_by"] = result.verdict.judge
        if result.verdict.failure:
            attributes["failure"] = result.verdict.failure
    if result.deny_reason:
        attributes["deny_reason"] = result.deny_reason
    return attributes


# -- guest errors ------------------------------------------------------------------------

_PARSE_FRAME = re.compile(r'^  File "<vsh>", line \d+$')
_GUEST_WITHHELD = (
    "The program stopped with an error inside VSH (an exception, a refused access or an "
    "exhausted budget). Its error type, message and line are withheld: this workspace has "
    "a reviewer, and what a program raises can carry bytes it read that nobody cleared. "
    "Syntax errors are shown in full. To find a bug, catch exceptions in the program and "
    "return a description of the problem as its last expression."
)


def guest_retry(
    text: str, stderr: str, *, reviewed: bool, helper: bool, limits: OutputLimits
) -> str:
    """The retry prompt for a program that failed inside VSH (nothing was changed).

    Without a reviewer the worker may see everything its programs can read: the whole
    error (secrets redacted). With one, only what is a function of the program text: a
    parse error (VSH reports it before anything runs: no ``in <module>`` frame), else a
    fixed message. A file helper's program is the toolset's own one-line call on the
    model's arguments (``helper``): VSH's error about it (a missing path, text not found)
    names only those arguments, so it is shown.
    """
    if not reviewed or helper:
        shown = redact(text) + (f"\n{redact(stderr)}" if stderr else "")
    elif _is_parse_error(text):
        shown = redact(text)
    else:
        shown = _GUEST_WITHHELD
    return (
        "The program failed inside VSH and nothing was changed:\n"
        f"{bound_text(shown, limits.error, keep='tail')}\n"
        "Fix the program and call the tool again."
    )


def _is_parse_error(text: str) -> bool:
    """VSH's parse-error shape: a traceback whose only frame has no function (the program
    never ran), then ``SyntaxError``. The first lines are VSH's, not the program's."""
    lines = text.splitlines()
    return (
        len(lines) >= 4
        and lines[0].endswith(": Traceback (most recent call last):")
        and _PARSE_FRAME.match(lines[1]) is not None
        and any(line.startswith("SyntaxError:") for line in lines[2:])
    )


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
