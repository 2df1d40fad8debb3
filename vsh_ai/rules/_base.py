"""Rules, allowances and ``RuleSet``: a deterministic judge that proves changes allowed.

A rule set approves only what it can prove: every net change must be *claimed* by an
:class:`Allowance` whose constraints hold. Every other rule is a *denial*: it returns
``review``/``reject`` (or None) and beats any allowance. A change no allowance claims
is *unproven*; ``on_unproven`` decides whether that is a ``review`` or an escalation
(``abstain`` with ``details["unproven"]``: the next judge in a pipeline decides, and a
final abstain carrying ``unproven`` must never become an approval).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._changes import NetChange
from ..analysis._changes import net_changes as _net_changes
from ..analysis._globs import GlobTable
from ..analysis._memo import analysis_of
from ..analysis._python_facts import python_budget
from ._glob import matching_with

__all__ = (
    "Action",
    "Allowance",
    "Claim",
    "NetChange",
    "OnUnproven",
    "Rule",
    "RuleSet",
    "describe_paths",
    "net_changes",
    "secret_reads",
)

Action = Literal["review", "reject"]
OnUnproven = Literal["review", "escalate"]
GlobFields = tuple[tuple[str, bool], ...]
"""``(field name, ignore_case)`` of each glob field a rule matches paths against."""

_SEVERITY = {"reject": 2, "review": 1}
_LISTED = 5
_CLAIM_ERRORS = (EvidenceGap, ValueError, UnicodeDecodeError, RecursionError)


def describe_paths(paths: Iterable[str]) -> str:
    """``a, b and 3 more`` for a short, readable list of paths in a sentence."""
    items = list(dict.fromkeys(paths))
    shown = ", ".join(items[:_LISTED])
    return shown if len(items) <= _LISTED else f"{shown} and {len(items) - _LISTED} more"


def net_changes(evidence: Evidence) -> tuple[NetChange, ...]:
    """The net change per path (:func:`vsh_ai.analysis._changes.net_changes`)."""
    return _net_changes(evidence)


def contains_secret(data: bytes) -> bool:
    """True when ``data`` holds detected secrets or key material."""
    from ..analysis._secrets import contains_secret as detect

    try:
        return detect(data)
    except Exception:  # a detector failure must never let a read pass: fail closed
        return True


@dataclass(frozen=True, slots=True)
class Claim:
    """What one allowance says about one net change.

    ``ok`` True: the allowance proves the change allowed (``reason`` says what was
    proven). ``ok`` False: the change is in the allowance's scope but a constraint fails
    (``reason`` says why, actionable for the agent).
    """

    ok: bool
    reason: str


class Rule(BaseModel):
    """Base class of evidence rules: a frozen pydantic model with an ``id`` and ``check``.

    Subclasses declare ``type: Literal["name"] = "name"`` (the tag judge files use)
    and implement :meth:`check`, returning None when the evidence passes, or a
    ``review``/``reject`` verdict whose reason tells the agent what to do instead.
    A rule that is not an :class:`Allowance` is a *denial*: it never approves.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default="", description="Rule id in verdicts; defaults to the rule type.")
    glob_fields: ClassVar[GlobFields] = ()
    """The glob fields this rule matches paths against (a rule set compiles them at once)."""

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


class Allowance(Rule):
    """Claims the changes it can prove allowed; never denies (``check`` returns None)."""

    def check(self, evidence: Evidence, /) -> Verdict | None:
        return None

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        """A claim on ``change``, or None when it is outside this allowance's scope."""
        raise NotImplementedError


class RuleSet:
    """A :class:`~vsh_ai.Judge` that approves only changes its allowances prove allowed.

    1. Completeness runs first and always: incomplete evidence is never approved.
    2. Every denial runs; any ``reject`` wins, else any ``review``.
    3. Reads count: a program that read secret-bearing bytes is a ``review`` unless the
       analysis proves the secret stayed in its own file and reached no other path, name
       or output (a ``reject`` when written bytes provably copy it); a
       ``protected_reads`` denial makes protected paths a ``reject`` whatever happened.
    4. Each net change must be claimed ok by at least one allowance, else it is unproven.
    5. Everything proven (or nothing changed) -> ``approve``; ``details["claims"]`` says
       which allowance proved each change.
    6. Something unproven -> ``on_unproven``: ``review`` naming each unproven change, or
       ``escalate`` (``abstain`` with ``details["unproven"]``: the next judge decides).
    """

    def __init__(
        self,
        rules: Sequence[Rule] = (),
        *,
        on_unproven: OnUnproven = "review",
        id: str = "rules",
    ) -> None:
        from ._completeness import Completeness

        if on_unproven not in ("review", "escalate"):
            raise ValueError(f"on_unproven must be review or escalate, not {on_unproven!r}")
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
        self.on_unproven: OnUnproven = on_unproven
        self.id = id
        # Every rule's glob sets in one matcher, compiled now (once per judge, at load).
        self._globs = GlobTable(
            (getattr(rule, field), ignore_case)
            for rule in rules
            for field, ignore_case in type(rule).glob_fields
        )

    @property
    def allowances(self) -> tuple[Allowance, ...]:
        return tuple(r for r in self.rules if isinstance(r, Allowance))

    @property
    def denials(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if not isinstance(r, Allowance))

    @property
    def definition(self) -> dict[str, Any]:
        """The canonical, JSON-compatible definition the digest is computed from."""
        return {
            "id": self.id,
            "on_unproven": self.on_unproven,
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

    # -- evaluation -------------------------------------------------------------------

    def evaluate(self, evidence: Evidence) -> Verdict:
        """Run every rule synchronously and combine the outcome (see class docs)."""
        # each path matched once against every glob set; Python parsing bounded per decision
        with matching_with(self._globs), python_budget():
            return self._evaluate(evidence)

    def _evaluate(self, evidence: Evidence) -> Verdict:
        failures: list[Verdict] = []
        for rule in self.denials:
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
        # A denial's reject is terminal already: the read rule (whose finding depends on
        # whether the bytes read look like a secret) then adds nothing the worker sees.
        read = None if any(v.decision == "reject" for v in failures) else _read_verdict(evidence)
        if read is not None:
            failures.append(read)
        if failures:
            return self._combine(failures, incomplete=not evidence.complete)
        verdict = self._prove(evidence)
        if verdict.decision in ("approve", "abstain") and _read_secrets(evidence):
            # Contained work may still return a scalar computed from the secret: the
            # toolset's renderer withholds its result and output from the worker.
            details = {**verdict.details, "withhold_output": True}
            verdict = verdict.model_copy(update={"details": details})
        return verdict

    def _prove(self, evidence: Evidence) -> Verdict:
        claims: list[dict[str, Any]] = []
        unproven: list[dict[str, Any]] = []
        try:
            changes = net_changes(evidence)
        except EvidenceGap as gap:
            return Verdict.review(
                f"The net changes could not be computed ({gap}); a human must review them.",
                judge=f"{self.id}/net_changes",
            )
        allowances = self.allowances
        for change in changes:
            proven: dict[str, Any] | None = None
            refusals: list[str] = []
            for allowance in allowances:
                try:
                    claim = allowance.claim(evidence, change)
                except _CLAIM_ERRORS as error:
                    claim = Claim(False, f"{allowance.id} could not check it: {error}")
                if claim is None:
                    continue
                if claim.ok:
                    proven = {
                        "path": change.path,
                        "kind": change.kind,
                        "allowance": allowance.id,
                        "reason": claim.reason,
                    }
                    break
                refusals.append(f"{allowance.id}: {claim.reason}")
            if proven is not None:
                claims.append(proven)
                continue
            reason = "; ".join(refusals) or f"no allowance covers {change.kind} of {change.path}"
            unproven.append({"path": change.path, "kind": change.kind, "reason": reason})
        if not unproven:
            if not claims:
                reason = "Nothing changed and no rule objected."
            else:
                # Name the first few; a reason listing every path of a large change would
                # exceed VSH's feedback limit (details["claims"] keeps them all).
                listed = "; ".join(
                    f"{c['path']} ({c['kind']}) by {c['allowance']}" for c in claims[:_LISTED]
                )
                rest = len(claims) - _LISTED
                reason = (
                    "Every change is proven allowed: "
                    + listed
                    + (f"; and {rest} more ({len(claims)} changes in all)" if rest > 0 else "")
                    + "."
                )
            return Verdict.approve(reason, judge=self.id, details={"claims": claims})
        listed = " ".join(
            f"{u['kind'].capitalize()} of {u['path']} is not proven allowed ({u['reason']})."
            for u in unproven[:_LISTED]
        )
        more = f" And {len(unproven) - _LISTED} more." if len(unproven) > _LISTED else ""
        details = {"claims": claims, "unproven": unproven}
        if self.on_unproven == "escalate":
            return Verdict.abstain(
                f"{listed}{more} Escalating the unproven changes to the next judge.",
                judge=f"{self.id}/unproven",
                details=details,
            )
        return Verdict.review(
            f"{listed}{more} Change only what this work is allowed to change, within the "
            "stated constraints, or ask a human to review it.",
            judge=f"{self.id}/unproven",
            details=details,
        )

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
                    {
                        "rule": v.judge,
                        "decision": v.decision,
                        "reason": v.reason,
                        **({"paths": v.details["paths"]} if "paths" in v.details else {}),
                    }
                    for v in failures
                ]
            },
        )

    async def review(self, evidence: Evidence, /) -> Verdict:
        return self.evaluate(evidence)

    def __repr__(self) -> str:
        return f"RuleSet(id={self.id!r}, on_unproven={self.on_unproven!r}, rules={len(self.rules)})"


def _read_verdict(evidence: Evidence) -> Verdict | None:
    """The read rule: secret-bearing content a program read must stay in its own file.

    A program that read secrets or key material is held to what
    :func:`vsh_ai.analysis._secret_flow.secret_flow` proves: the secret's bytes went back
    into the file they came from only (unchanged, removed or replaced) and reached no other
    path, name, output or the intent. Then its changes go to the allowances like any
    other. Else ``reject`` when written bytes provably hold the secret, ``review`` when
    they may. A failure of the analysis is a ``review`` (fail closed).
    """
    from ..analysis._secret_flow import secret_flow
    from ..analysis._secrets import redact_text

    try:
        flow = secret_flow(evidence)
    except Exception as error:  # fail closed: an analysis failure never lets a read pass
        return Verdict.review(
            f"The program's reads could not be traced ({type(error).__name__}); a human must "
            "review it.",
            judge="reads",
        )
    if flow.contained:
        return None
    copies = [leak for leak in flow.leaks if leak.kind == "copy"]
    shown = copies or list(flow.leaks)
    paths = list(dict.fromkeys([*flow.reads, *(leak.path for leak in shown if leak.path)]))
    what = "; ".join(leak.reason for leak in shown[:_LISTED])
    read = describe_paths(flow.reads)
    if copies:
        reason = (
            f"The program read secrets in {read} and {what}. Never copy a secret value, in "
            "any spelling, into a file, a comment, a name or an output; remove it or replace "
            "it with an environment lookup."
        )
    else:
        reason = (
            f"The program read secrets in {read} and cannot be shown to keep them there: "
            f"{what}. Change only the file holding the secret, print nothing, and return "
            "nothing, or ask a human to review it."
        )
    return Verdict(
        decision="reject" if copies else "review",
        reason=redact_text(reason)[0],
        judge="reads",
        details={"paths": paths},
    )


def _read_secrets(evidence: Evidence) -> bool:
    from ..analysis._secret_flow import secret_flow

    try:
        return bool(secret_flow(evidence).reads)
    except Exception:  # fail closed: an untraceable read withholds the output
        return True


def secret_reads(evidence: Evidence) -> list[str]:
    """Paths whose content reads returned bytes holding secrets or key material.

    Computed once per evidence (its analysis memo); each blob is scanned by the shared
    detector, which remembers findings by content digest.
    """
    return list(analysis_of(evidence).remember(("secret_reads",), lambda: _secret_reads(evidence)))


def _secret_reads(evidence: Evidence) -> tuple[str, ...]:
    hits: dict[str, None] = {}
    verdicts: dict[str, bool] = {}  # blob id -> holds a secret (within this evidence)
    for effect in evidence.effects:
        blob = effect.observed_content
        if effect.operation != "content_read" or not blob:
            continue
        found = verdicts.get(blob)
        if found is None:
            data = evidence.blob_bytes(blob)  # uncaptured: the completeness rule's finding
            found = verdicts[blob] = data is not None and bool(data) and contains_secret(data)
        if found:
            hits.update(dict.fromkeys(effect.paths))
    return tuple(hits)
