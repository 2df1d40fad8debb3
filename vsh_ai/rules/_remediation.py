"""``allow_secret_removal``: a hard-coded secret replaced by an environment lookup."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence, EvidenceGap
from ..analysis._config import detect_format
from ..analysis._memo import analysis_of
from ..analysis._remediation import config_reference_problem, secret_removal_problem
from ..analysis._remediation_lines import LOOKUP_SUFFIXES, line_lookup_problem
from ..analysis._secrets import UNSCANNED, find_secrets
from ._base import Allowance, Claim, GlobFields, NetChange
from ._constraints import globs_given
from ._glob import matching

__all__ = ("AllowSecretRemoval",)

_PYTHON = (".py", ".pyw")


def removed_secrets(evidence: Evidence, path: str) -> list[str] | None:
    """The secret texts on the lines the change at ``path`` removes (None: not known)."""
    try:
        removed = analysis_of(evidence).new_lines(path, removed=True)
    except (EvidenceGap, ValueError):
        return None
    if removed is None:
        return None
    text = "\n".join(line for _, line in removed)
    return [text[f.start : f.end] for f in find_secrets(text) if f.kind != UNSCANNED]


class AllowSecretRemoval(Allowance):
    """Claims a Python, config or other source modify under ``paths`` that only replaces
    hard-coded secrets.

    Other sources (JavaScript/TypeScript, Go, Ruby, Java/Kotlin, C#, PHP, Rust): line by
    line, each changed line only swaps a secret literal for an environment lookup of a
    secret-named variable (:func:`vsh_ai.analysis._remediation_lines.line_lookup_problem`).

    Config files (TOML, JSON, YAML, INI, .properties): every changed key held a detected
    secret and now holds a reference or placeholder (``${STRIPE_KEY}``, ``<set-me>``,
    ``""``) or is gone (:func:`vsh_ai.analysis._remediation.config_reference_problem`).

    Proven by :func:`vsh_ai.analysis._remediation.secret_removal_problem`: the new module
    equals the old one with each detected secret literal replaced by an environment lookup
    (``os.environ[...]``, ``os.getenv(name[, placeholder])``, an added helper that only
    reads the environment and raises naming the variable) or a placeholder, or its
    assignment removed; ``import os`` may be added. The read rule still decides where the
    secret the program read went (a copy in a comment or a reversed fallback is rejected
    there), and ``no_secrets`` still rejects new secrets.
    """

    type: Literal["allow_secret_removal"] = "allow_secret_removal"
    # Case-insensitive: the proof reads content, so APP/SETTINGS.PY is proven like settings.py.
    glob_fields: ClassVar[GlobFields] = (("paths", True),)
    paths: tuple[str, ...] = Field(description="Root-anchored globs of the Python files claimed.")
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(globs_given)

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        glob = matching(self.paths, change.path, ignore_case=True)
        config = detect_format(change.path) not in ("auto", "env")
        if glob is None or change.kind != "modify":
            return None
        lines = change.path.lower().endswith(LOOKUP_SUFFIXES)
        if not (change.path.lower().endswith(_PYTHON) or config or lines):
            return None
        path = change.path
        if change.before is None or change.after is None:
            return None
        if change.before.kind != "file" or change.after.kind != "file":
            return Claim(False, f"{path} is not a regular file on both sides")
        if change.before.mode != change.after.mode:
            return Claim(False, f"{path}: its mode changes too")
        if config:
            old, new = evidence.before_bytes(path), evidence.after_bytes(path)
            if old is None or new is None:
                return Claim(False, f"{path}: its bytes were not captured")
            issue = config_reference_problem(path, old, new)
            if issue is not None:
                return Claim(
                    False,
                    f"{path}: {issue}; replace each secret value with a reference such as "
                    "${NAME} and change nothing else",
                )
            return Claim(True, f"{path} only replaces secret values with references")
        try:
            before, after = evidence.before_text(path), evidence.after_text(path)
        except EvidenceGap:
            return Claim(False, f"{path}: its bytes were not captured")
        if before is None or after is None:
            return Claim(False, f"{path} is not text on both sides")
        if lines:
            issue = line_lookup_problem(before, after)
            if issue is not None:
                return Claim(
                    False,
                    f"{path}: {issue}; replace each hard-coded secret literal with an "
                    "environment lookup of a secret-named variable and change nothing else",
                )
            return Claim(True, f"{path} only replaces hard-coded secrets with environment lookups")
        problem = secret_removal_problem(before, after, removed_secrets(evidence, path))
        if problem is not None:
            return Claim(
                False,
                f"{path}: {problem}; replace each hard-coded secret with an environment "
                "lookup (os.environ[...] or os.getenv with no real default) and change "
                "nothing else",
            )
        return Claim(True, f"{path} only replaces hard-coded secrets with environment lookups")
