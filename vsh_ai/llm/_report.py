"""The judge model's structured output, and the checks that keep it honest."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._packet import Packet

__all__ = (
    "JudgeReport",
    "failure_details",
    "failure_summary",
    "inconsistency",
    "report_feedback",
)

_MAX_FEEDBACK = 1200

Ref = Annotated[str, Field(min_length=1, max_length=32)]
Note = Annotated[str, Field(min_length=1, max_length=300)]


class JudgeReport(BaseModel):
    """A decision on one exact transaction, citing the packet refs it rests on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision: Literal["approve", "review", "reject"] = Field(
        description=(
            "approve: every change is safe and authorized; review: a human must look "
            "(missing context, unresolved risk); reject: the change must not be applied."
        )
    )
    reason: str = Field(
        min_length=1,
        max_length=600,
        description="One or two sentences for the agent that did the work: what to change, "
        "or why it is fine.",
    )
    cited: list[Ref] = Field(
        max_length=256,
        description="Refs from the packet this decision rests on (e.g. C1, E3, R1). "
        "An approval cites every required ref.",
    )
    concerns: list[Note] = Field(
        default_factory=list,
        max_length=8,
        description="Concrete problems found, each naming its ref. Empty for an approval.",
    )
    missing_evidence: list[Note] = Field(
        default_factory=list,
        max_length=8,
        description="What you would need to see to decide. Empty for an approval.",
    )


def inconsistency(report: JudgeReport, packet: Packet) -> str | None:
    """Why ``report`` cannot stand as given (None when it is consistent with the packet)."""
    unknown = [ref for ref in report.cited if ref not in packet.refs]
    if unknown:
        return f"The judge cited {len(unknown)} ref(s) that were not in the evidence."
    if not report.reason.strip():
        return "The judge gave no reason."
    if report.decision != "approve":
        return None
    if report.concerns or report.missing_evidence:
        return "The judge approved while reporting concerns or missing evidence."
    missing = [ref for ref in packet.required if ref not in report.cited]
    if missing:
        return (
            f"The judge approved without citing every change ({', '.join(missing[:8])} "
            "not addressed)."
        )
    return None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_ENDS = (".", "!", "?", "…", '."', ".'", ".)", '?"', '!"')


def _ended(text: str) -> str:
    """``text`` ending like a sentence, so that another can follow it."""
    text = text.rstrip(" ;,:")
    return text if not text or text.endswith(_ENDS) else text + "."


def _items(label: str, items: list[str]) -> str:
    return label + "; ".join(_clip(item, 200).rstrip(" ;,.") for item in items)


def report_feedback(report: JudgeReport) -> str:
    """Concise, actionable feedback for the agent: the reason, then concerns and gaps,
    each its own sentence."""
    parts = [_clip(report.reason, 600)]
    if report.concerns:
        parts.append(_items("Concerns: ", report.concerns))
    if report.missing_evidence:
        parts.append(_items("Missing: ", report.missing_evidence))
    text = " ".join([*(_ended(part) for part in parts[:-1]), parts[-1]])
    return _clip(text, _MAX_FEEDBACK)


def failure_details(error: BaseException) -> dict[str, Any]:
    """What a failed model call was, never what it said (provider text may echo the
    packet): the exception's class, the HTTP status when there is one, and otherwise the
    transport error among its causes (an ``httpx`` class such as ``ConnectError`` when
    there is one, else the root cause's class)."""
    details: dict[str, Any] = {"error_class": type(error).__name__}
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        details["http_status"] = status
        return details
    cause, root = error.__cause__ or error.__context__, None
    for _ in range(8):
        if cause is None:
            break
        if type(cause).__module__.startswith("httpx"):
            root = cause
            break
        if not isinstance(cause, BaseExceptionGroup):
            root = cause
        cause = cause.__cause__ or cause.__context__
    if root is not None and type(root).__name__ != details["error_class"]:
        details["error_cause"] = type(root).__name__
    return details


def failure_summary(details: dict[str, Any]) -> str:
    """``ModelRateLimitError 429`` or ``ModelConnectionError (ConnectError)``."""
    text = str(details["error_class"])
    if "http_status" in details:
        return f"{text} {details['http_status']}"
    return f"{text} ({details['error_cause']})" if "error_cause" in details else text
