"""Code changes beyond what the intent claims: the intent can only make rules stricter.

:class:`IntentScope` reads the (untrusted) intent for an *exclusive* claim: only
documentation (README, docs, docstrings, comments), only formatting, or only type
hints, with no other work named (fix a bug, refactor, rename, test, behaviour, ...).
Under such a claim every changed Python file must stay within it: docs and formatting
leave the AST without docstrings unchanged; type hints leave it unchanged once
annotations are stripped (annotations that are not proven harmless stay unproven: a
review, never a reject, since the claim holds).
A Python file renamed, created or deleted, or code that changed otherwise, is
decided (``action``) with a reason naming the claim and the file. An intent that
claims nothing, or claims more, changes nothing here: the intent never approves.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence, is_binary
from .._verdict import Verdict
from ..analysis._python_annotations import annotation_only
from ..analysis._python_names import is_python_source
from ._base import Action, GlobFields, Rule, net_changes
from ._glob import check_globs, matching
from ._proofs import PROOF_MAX_BYTES
from ._python_memo import memo_dump, memo_proof

__all__ = ("IntentScope", "claimed_scope")

_CLAIMS: dict[str, re.Pattern[str]] = {
    "documentation": re.compile(r"\b(readme|docs|documentation|docstrings?|comments?|changelog)\b"),
    "formatting": re.compile(
        r"\b(reformat\w*|formatting|whitespace|indentation|trailing (?:spaces|whitespace)|"
        r"line endings|black|ruff format|autopep8|yapf)\b"
    ),
    "type hints": re.compile(r"\b(type[- ]hints?|type annotations?|annotations?|typing)\b"),
}
# Phrases that are the claim itself ("fix a README typo", "add type hints").
_CLAIM_PHRASES = re.compile(
    r"\b(?:fix|correct|tidy|polish|reword|improve|update|add|clarify|expand|write|apply|run)\w*"
    r"(?:\s+(?!and\b|or\b|then\b)[^\s,;]+){0,3}?\s+"
    r"(?:typos?|spelling|grammar|wording|type[- ]hints?|annotations?|docstrings?|comments?|"
    r"docs|documentation|readme(?:\.md)?|changelog|formatting|whitespace)\b"
)
# "No behaviour change" restates the claim; it names no other work.
_UNCHANGED = re.compile(
    r"\b(?:no|without(?: any)?)\s+(?:functional\s+|code\s+)?(?:behaviou?r(?:al)?|logic)"
    r"(?:\s+changes?)?\b|\bwithout\s+changing\s+(?:the\s+)?(?:behaviou?r|logic)\b"
)
# Any of these names other work: the claim is not exclusive, the rule stays silent.
_OTHER_WORK = re.compile(
    r"\b(fix\w*|bugs?|refactor\w*|renam\w*|implement\w*|features?|behaviou?r\w*|logic|"
    r"support\w*|handl\w*|tests?|testing|perf\w*|optimi[sz]\w*|versions?|bump\w*|upgrad\w*|"
    r"remov\w*|delet\w*|mov\w*|split\w*|extract\w*|simplif\w*|rewrit\w*|chang\w*|updat\w*|"
    r"add\w*|make|makes|allow\w*|accept\w*|return\w*|rais\w*|replac\w*|convert\w*|switch\w*|"
    r"validat\w*|introduc\w*|creat\w*|drop\w*|migrat\w*|port\w*|clean\w*|"
    r"dependenc\w*|config\w*|cleanup|and also|as well as)\b"
)


def claimed_scope(intent: str | None) -> frozenset[str]:
    """The exclusive claims of an intent (empty: it claims nothing, or more than that)."""
    if not intent:
        return frozenset()
    text = intent.lower()
    claims = frozenset(name for name, pattern in _CLAIMS.items() if pattern.search(text))
    if not claims:
        return claims
    rest = _CLAIM_PHRASES.sub(" ", _UNCHANGED.sub(" ", text))
    return frozenset() if _OTHER_WORK.search(rest) else claims


class IntentScope(Rule):
    """Python changes beyond an exclusive docs, formatting or type-hints claim.

    The intent is untrusted: it can only make this rule fire, never approve anything.
    """

    type: Literal["intent_scope"] = "intent_scope"
    glob_fields: ClassVar[GlobFields] = (("globs", False),)
    globs: tuple[str, ...] = Field(
        default=("**/*.py", "**/*.pyi", "**/*.pyw"),
        description="Root-anchored globs of the Python files held to the claim.",
    )
    action: Action = Field(default="review", description="Decision when a file exceeds it.")

    _check_globs = field_validator("globs")(lambda globs: check_globs(globs))

    def _beyond(self, evidence: Evidence, path: str, claims: frozenset[str]) -> str | None:
        before, after = evidence.before_bytes(path), evidence.after_bytes(path)
        if before is None or after is None or is_binary(before) or is_binary(after):
            return "its content is not text on both sides"
        old, new = memo_dump(evidence, before), memo_dump(evidence, after)
        if old is not None and old == new:
            return None  # comments, docstrings, layout: within every claim
        if "type hints" in claims:
            if max(len(before), len(after)) > PROOF_MAX_BYTES:
                return None  # too large to prove either way in bounded time: unproven
            proof = memo_proof(
                evidence, "annotations", lambda: annotation_only(before, after), before, after
            )
            if proof.ok or not proof.beyond:
                return None  # only annotations changed, maybe unproven harmless: unproven
            return f"not only annotations changed ({proof.reason})"
        return "its code changed, not only comments, docstrings or layout"

    def check(self, evidence: Evidence, /) -> Verdict | None:
        claims = claimed_scope(evidence.intent)
        if not claims:
            return None
        found: list[str] = []
        for change in net_changes(evidence):
            path = change.path
            if matching(self.globs, path) is None and not is_python_source(path):
                continue
            if change.kind == "rename" and change.after is None:
                continue  # the source end; the destination names both
            if change.kind in ("rename", "create", "delete"):
                what = {"rename": "renamed", "create": "created", "delete": "deleted"}
                where = f"{change.partner} -> {path}" if change.partner else path
                found.append(f"{where} was {what[change.kind]}")
            elif change.kind == "modify":
                why = self._beyond(evidence, path, claims)
                if why is not None:
                    found.append(f"{path}: {why}")
        if not found:
            return None
        claim = " and ".join(sorted(claims))
        return self.verdict(
            self.action,
            f"The intent claims only {claim} edits, but Python code changed beyond that: "
            + "; ".join(found[:8])
            + ". Do only what the intent says, or describe the whole change.",
            facts=found[:50],
        )
