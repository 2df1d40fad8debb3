"""The ``no_secrets`` rule: new secrets in changed files or path names (one shared detector)."""

from __future__ import annotations

import hashlib
from typing import ClassVar, Literal

from pydantic import field_validator

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._memo import analysis_of
from ..analysis._secrets import (
    UNSCANNED,
    SecretFinding,
    find_secret,
    find_secrets,
    redact_text,
)
from ._base import Action, GlobFields, Rule, describe_paths
from ._glob import matching
from ._paths import validate_globs

__all__ = ("NoSecrets", "find_secret")


def _fingerprint(text: str, finding: SecretFinding) -> str:
    """What identifies a secret across versions: its text without whitespace, hashed."""
    value = "".join(text[finding.start : finding.end].split())
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _with_article(kind: str) -> str:
    if kind.endswith("credentials"):
        return kind
    vowel = kind[:1].lower() in "aeio" or kind.split()[0] in ("npm", "SSH", "RSA", "SAS")
    return f"{'an' if vowel else 'a'} {kind}"


def _before_text(evidence: Evidence, path: str, sources: dict[str, str]) -> str:
    """The text this path had before, following renames (``sources``: dest -> source)."""
    seen: set[str] = set()
    current: str | None = path
    parts: list[str] = []
    while current is not None and current not in seen and len(seen) < 16:
        seen.add(current)
        if evidence.change(current) is not None:
            data = evidence.before_bytes(current)
            if data is not None:
                parts.append(data.decode("utf-8", errors="replace"))
        current = sources.get(current)
    return "\n".join(parts)


class _Shown:
    """A path as reasons show it: redacted on first use, so unreported paths cost nothing."""

    __slots__ = ("_path", "_text")

    def __init__(self, path: str) -> None:
        self._path = path
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = redact_text(self._path)[0]
        return self._text


class NoSecrets(Rule):
    """Changed files and new path names must not add secrets (default action: reject).

    Each changed text file is scanned whole (multi-line and encoded secrets included) by
    :func:`vsh_ai.analysis.find_secrets`; a secret counts only if its value was not in the
    file before (renames followed; the old text is read only when the new one has
    findings). Binary files and files whose bytes were not captured cannot be scanned and
    get ``review`` (uncaptured old bytes only matter when the new text has findings); so
    does content beyond the scan limit. Reasons never repeat a secret (path names are
    redacted too).
    """

    type: Literal["no_secrets"] = "no_secrets"
    glob_fields: ClassVar[GlobFields] = (("globs", False),)
    globs: tuple[str, ...] = ("**",)
    action: Action = "reject"

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        memo = analysis_of(evidence)
        found: dict[str, list[str]] = {}
        kinds: set[str] = set()
        unscannable: dict[str, str] = {}
        sources: dict[str, str] | None = None  # rename destination -> source, built once
        for change in evidence.changes:
            if matching(self.globs, change.path) is None:
                continue
            shown = _Shown(change.path)  # redacted only when the path is reported
            if change.before is None and change.after is not None:
                name_kinds = {f.kind for f in find_secrets(change.path)} - {UNSCANNED}
                if name_kinds:
                    found.setdefault(shown.text, []).append("its name")
                    kinds.update(name_kinds)
            if change.kind == "metadata_change":
                continue
            try:
                after = evidence.after_bytes(change.path)
            except EvidenceGap:
                unscannable[shown.text] = "its bytes were not captured"
                continue
            if after is None:
                continue
            if memo.binary(after):
                unscannable[shown.text] = "it is binary"
                continue
            text = memo.text(after)
            findings = find_secrets(text)
            if any(finding.kind != UNSCANNED for finding in findings):
                # Only text with findings needs the before-text: is each finding new?
                if sources is None:
                    sources = {dst: src for src, dst in evidence.renames}
                try:
                    before = _before_text(evidence, change.path, sources)
                except EvidenceGap:
                    unscannable[shown.text] = "its bytes were not captured"
                    continue
                known = {_fingerprint(before, f) for f in find_secrets(before)} if before else set()
            else:
                known = set()
            for finding in findings:
                if finding.kind == UNSCANNED:
                    unscannable[shown.text] = "it is too large to scan in full"
                elif _fingerprint(text, finding) not in known:
                    line = memo.line_of(after, finding.start)  # bisect, not a recount
                    found.setdefault(shown.text, []).append(f"line {line}")
                    kinds.add(finding.kind)
        if found:
            hits = [f"{path} ({', '.join(dict.fromkeys(where))})" for path, where in found.items()]
            what = ", ".join(_with_article(kind) for kind in sorted(kinds))
            return self.verdict(
                self.action,
                f"{describe_paths(hits)} {'adds' if len(hits) == 1 else 'add'} what looks like "
                f"{what}; remove it and reference the secret indirectly (an environment "
                "variable or secret manager) instead of writing it into files or names.",
                paths=list(found),
            )
        if unscannable:
            why = "; ".join(f"{path}: {reason}" for path, reason in unscannable.items())
            return self.verdict(
                "review",
                f"{describe_paths(unscannable)} cannot be scanned for secrets ({why}); "
                "write text files only, or ask a human to review it.",
                paths=list(unscannable),
            )
        return None
