"""The rule protocol and ``RuleSet``: a deterministic judge made of evidence rules."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict

__all__ = ("Action", "OnPass", "Rule", "RuleSet", "describe_paths")

Action = Literal["review", "reject"]
OnPass = Literal["approve", "follow_policy", "escalate"]

_SEVERITY = {"reject": 2, "review": 1}
_LISTED = 5


def describe_paths(paths: Iterable[str]) -> str:
    """``a, b and 3 more`` for a short, readable list of paths in a sentence."""
    items = list(dict.fromkeys(paths))
    shown = ", ".join(items[:_LISTED])
    return shown if len(items) <= _LISTED else f"{shown} and {len(items) - _LISTED} more"


class Rule(BaseModel):
    """Base class of evidence rules: a frozen pydantic model with an ``id`` and ``check``.

    Subclasses declare ``type: Literal["name"] = "name"`` (the tag judge files use)
    and implement :meth:`check`, returning None when the evidence passes, or a
    ``review``/``reject`` verdict whose reason tells the agent what to do instead.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default="", description="Rule id in verdicts; defaults to the rule type.")

    @model_validator(mode="before")
    @classmethod
    def _default_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("id"):
            tag = cls.model_fields["type"].default if "type" in cls.model_fields else cls.__name__
            data = {**data, "id": tag}
        return data

    def check(self, evidence: Evidence, /) -> Verdict | None:
        raise NotImplementedError

    def verdict(self, decision: Action, reason: str, **details: Any) -> Verdict:
        """A failing verdict authored by this rule."""
        return Verdict(decision=decision, reason=reason, judge=self.id, details=details)


class RuleSet:
    """A :class:`~vsh_ai.Judge` that checks evidence against rules, deterministically.

    Completeness is checked first and always: incomplete evidence is never approved.
    Every rule runs; any ``reject`` wins, else any ``review``; the verdict's reason
    joins the failures of that severity. When every rule passes, ``on_pass`` decides:
    ``approve``; ``follow_policy`` (abstain: VSH's policy decides); or ``escalate``
    (abstain: the next judge in a pipeline decides).
    """

    def __init__(
        self,
        rules: Sequence[Rule] = (),
        *,
        on_pass: OnPass = "approve",
        id: str = "rules",
    ) -> None:
        from ._completeness import Completeness

        if on_pass not in ("approve", "follow_policy", "escalate"):
            raise ValueError(f"on_pass must be approve, follow_policy or escalate, not {on_pass!r}")
        rules = tuple(rules)
        for rule in rules:
            if not isinstance(rule, Rule):
                raise TypeError(f"{rule!r} is not a vsh_ai.rules.Rule")
        if not any(isinstance(rule, Completeness) for rule in rules):
            rules = (Completeness(), *rules)
        ids = [rule.id for rule in rules]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"rule ids must be unique; give these distinct ids: {duplicates}")
        self.rules = rules
        self.on_pass: OnPass = on_pass
        self.id = id

    @property
    def definition(self) -> dict[str, Any]:
        """The canonical, JSON-compatible definition the digest is computed from."""
        return {
            "id": self.id,
            "on_pass": self.on_pass,
            "rules": [
                {
                    "class": f"{type(r).__module__}.{type(r).__qualname__}",
                    **r.model_dump(mode="json"),
                }
                for r in self.rules
            ],
        }

    @property
    def digest(self) -> str:
        """sha256 of the definition: any changed rule gives a new digest (and hook id)."""
        canonical = json.dumps(self.definition, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def evaluate(self, evidence: Evidence) -> Verdict:
        """Run every rule synchronously and combine the outcome (see class docs)."""
        failures: list[Verdict] = []
        for rule in self.rules:
            try:
                verdict = rule.check(evidence)
            except EvidenceGap as gap:
                verdict = rule.verdict(
                    "review", f"Rule {rule.id} could not check this change: {gap}."
                )
            if verdict is not None:
                if verdict.decision not in _SEVERITY:
                    raise TypeError(f"rule {rule.id!r} returned {verdict.decision!r}")
                failures.append(verdict)
        if not evidence.complete and not failures:  # belt and braces: never approve
            failures.append(Verdict.review("Evidence is incomplete.", judge="completeness"))
        if failures:
            return self._combine(failures, incomplete=not evidence.complete)
        names = ", ".join(rule.id for rule in self.rules)
        if self.on_pass == "approve":
            return Verdict.approve(f"All {len(self.rules)} rules passed ({names}).", judge=self.id)
        if self.on_pass == "follow_policy":
            reason = f"All {len(self.rules)} rules passed; VSH policy decides."
        else:
            reason = f"All {len(self.rules)} rules passed; escalating to the next judge."
        return Verdict.abstain(reason, judge=self.id, details={"on_pass": self.on_pass})

    def _combine(self, failures: list[Verdict], *, incomplete: bool) -> Verdict:
        worst = max(_SEVERITY[v.decision] for v in failures)
        deciding = [v for v in failures if _SEVERITY[v.decision] == worst]
        return Verdict(
            decision=deciding[0].decision,
            reason=" ".join(v.reason for v in deciding),
            judge=f"{self.id}/{deciding[0].judge}",
            failure="incomplete_evidence" if incomplete and worst == 1 else None,
            details={
                "failures": [
                    {"rule": v.judge, "decision": v.decision, "reason": v.reason} for v in failures
                ]
            },
        )

    async def review(self, evidence: Evidence, /) -> Verdict:
        return self.evaluate(evidence)

    def __repr__(self) -> str:
        return f"RuleSet(id={self.id!r}, on_pass={self.on_pass!r}, rules={len(self.rules)})"
