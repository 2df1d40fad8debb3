"""Verdict: what one judge decided about one transaction, and why."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ("Decision", "FailureCategory", "Usage", "Verdict", "json_safe")

Decision = Literal["approve", "review", "reject", "abstain"]

FailureCategory = Literal[
    "exception",
    "timeout",
    "cancelled",
    "wrong_type",
    "capacity",
    "incomplete_evidence",
    "provider_error",
    "invalid_output",
    "inconsistent_verdict",
    "over_budget",
    "unshared_content",
    "binary_content",
]


def json_safe(value: object, *, depth: int = 0) -> Any:
    """``value`` as plain JSON data: anything else becomes its type name in angle brackets.

    Verdict details travel into tool results, approval metadata and eval reports; one
    unserialisable value must not turn a decided (possibly committed) call into a crash.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > 32:
        return "<nested too deeply>"
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [json_safe(v, depth=depth + 1) for v in items]
    try:
        dumped = value.model_dump(mode="json")  # type: ignore[attr-defined]
    except Exception:
        return f"<{type(value).__name__}>"
    try:
        json.dumps(dumped)
    except (TypeError, ValueError):
        return f"<{type(value).__name__}>"
    return dumped


class Usage(BaseModel):
    """Model usage for one decision (LLM judges); zero for deterministic judges."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Verdict(BaseModel):
    """``approve | review | reject | abstain`` with actionable feedback and its author.

    ``reason`` is written for the agent whose work is judged: say what to change.
    ``failure`` is set when the verdict is a fail-closed outcome rather than a judgement.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Decision
    reason: str
    judge: str = Field(description="Id of the judge or rule that decided.")
    failure: FailureCategory | None = None
    cited: tuple[str, ...] = ()
    usage: Usage | None = None
    latency_s: float | None = None
    model: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("details", mode="after")
    @classmethod
    def _json_details(cls, details: dict[str, Any]) -> dict[str, Any]:
        safe: dict[str, Any] = json_safe(details)
        return safe

    @classmethod
    def approve(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="approve", reason=reason, judge=judge, **extra)

    @classmethod
    def review(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="review", reason=reason, judge=judge, **extra)

    @classmethod
    def reject(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="reject", reason=reason, judge=judge, **extra)

    @classmethod
    def abstain(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="abstain", reason=reason, judge=judge, **extra)

    @classmethod
    def failed(cls, category: FailureCategory, reason: str, *, judge: str) -> Verdict:
        """A fail-closed outcome: always ``review``, never approval."""
        return cls(decision="review", reason=reason, judge=judge, failure=category)

    @property
    def is_final(self) -> bool:
        """``abstain`` lets the next judge decide; anything else is an opinion."""
        return self.decision != "abstain"
