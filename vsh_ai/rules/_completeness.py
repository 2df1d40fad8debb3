"""Evidence completeness: structural, content, and every written version resolvable."""

from __future__ import annotations

from typing import Literal

from .._evidence import Evidence
from .._verdict import Verdict
from ._base import Rule

__all__ = ("Completeness",)


class Completeness(Rule):
    """Review any change whose evidence is incomplete; a rule set always runs this first.

    Incomplete means: VSH reported structurally incomplete or truncated evidence,
    some changed or read bytes were not captured, or a written version (including an
    intermediate write that a later write overwrote) cannot be resolved to bytes.
    """

    type: Literal["completeness"] = "completeness"

    def check(self, evidence: Evidence, /) -> Verdict | None:
        if evidence.complete:
            return None
        advice = []
        if not evidence.all_writes_resolvable:
            advice.append("write each file once, with its final content")
        if not evidence.content_complete:
            advice.append("keep changes small enough for their bytes to be captured")
        if not evidence.evidence_complete or evidence.evidence_truncated:
            advice.append("split the work into smaller programs")
        gaps = "; ".join(evidence.gaps())
        return self.verdict(
            "review",
            f"The evidence is incomplete ({gaps}), so a human must review it; to avoid this, "
            + " and ".join(advice)
            + ".",
        )
