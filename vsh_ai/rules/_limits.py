"""Size limits: touched paths, changed bytes, deletions and delete ratio."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ._base import Action, Rule

__all__ = ("Limits",)


class Limits(Rule):
    """Upper bounds on how much one transaction may change (unset bounds are not checked)."""

    type: Literal["limits"] = "limits"
    max_touched_paths: int | None = Field(default=None, ge=0)
    max_changed_bytes: int | None = Field(default=None, ge=0)
    max_deletions: int | None = Field(default=None, ge=0)
    max_delete_ratio: float | None = Field(
        default=None, ge=0, le=1, description="Deleted share of the workspace's files, 0..1."
    )
    action: Action = "review"

    @model_validator(mode="after")
    def _some_limit(self) -> Limits:
        if all(
            v is None
            for v in (
                self.max_touched_paths,
                self.max_changed_bytes,
                self.max_deletions,
                self.max_delete_ratio,
            )
        ):
            raise ValueError(
                "set at least one of max_touched_paths, max_changed_bytes, "
                "max_deletions, max_delete_ratio"
            )
        return self

    def check(self, evidence: Evidence, /) -> Verdict | None:
        counters = evidence.counters
        over: list[str] = []
        if self.max_touched_paths is not None and counters.touched_paths > self.max_touched_paths:
            over.append(f"{counters.touched_paths} touched paths (limit {self.max_touched_paths})")
        if self.max_changed_bytes is not None and counters.changed_bytes > self.max_changed_bytes:
            # Not the figure itself: it counts the bytes of overwritten and deleted files,
            # which the program may never have been allowed to read (the reason reaches it).
            over.append(f"more changed bytes than the limit of {self.max_changed_bytes}")
        if self.max_deletions is not None and counters.deleted_paths > self.max_deletions:
            over.append(f"{counters.deleted_paths} deletions (limit {self.max_deletions})")
        ratio = counters.delete_ratio_bps / 10_000
        if self.max_delete_ratio is not None and ratio > self.max_delete_ratio:
            # Not the ratio: its denominator counts every file, protected ones included.
            over.append(f"a larger share of the workspace deleted than {self.max_delete_ratio:.0%}")
        if not over:
            return None
        return self.verdict(
            self.action,
            f"This change is too large: {', '.join(over)}; split it into smaller changes "
            "that each stay within the limits.",
        )
