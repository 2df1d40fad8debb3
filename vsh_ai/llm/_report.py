"""The judge model's structured output, and the checks that keep it honest."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._packet import Packet

__all__ = ("JudgeReport", "inconsistency", "report_feedback")

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


def report_feedback(report: JudgeReport) -> str:
    """Concise, actionable feedback for the agent: the reason, then concerns and gaps."""
    parts = [_clip(report.reason, 600)]
    if report.concerns:
        parts.append("Concerns: " + "; ".join(_clip(c, 200) for c in report.concerns))
    if report.missing_evidence:
        parts.append("Missing: " + "; ".join(_clip(m, 200) for m in report.missing_evidence))
    return _clip(" ".join(parts), _MAX_FEEDBACK)
