"""Path rules: where changes may happen, where they must not, and protected reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ._base import Action, Rule, describe_paths
from ._glob import check_globs, matching

__all__ = (
    "AllowedChanges",
    "DeniedChanges",
    "NoRefusedAccess",
    "ProtectedReads",
    "validate_globs",
)

Globs = tuple[str, ...]


def validate_globs(globs: Globs) -> Globs:
    """At least one glob, each compiled: a bad one fails at load time, not at review time."""
    if not globs:
        raise ValueError("give at least one glob")
    return check_globs(globs)


class AllowedChanges(Rule):
    """Only paths matching ``globs`` may change; anything else gets ``action`` (review)."""

    type: Literal["allowed_changes"] = "allowed_changes"
    globs: Globs = Field(description="Globs of the paths this work may change.")
    action: Action = "review"

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        outside = [p for p in evidence.changed_paths if matching(self.globs, p) is None]
        if not outside:
            return None
        return self.verdict(
            self.action,
            f"{describe_paths(outside)} {'is' if len(outside) == 1 else 'are'} outside the paths "
            f"this work may change ({', '.join(self.globs)}); leave "
            f"{'it' if len(outside) == 1 else 'them'} unchanged and change only matching paths.",
            paths=outside,
        )


class DeniedChanges(Rule):
    """Paths matching ``globs`` must not change at all (``action`` defaults to reject)."""

    type: Literal["denied_changes"] = "denied_changes"
    globs: Globs = Field(description="Globs of paths that must never change.")
    action: Action = "reject"

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        hits = {p: g for p in evidence.changed_paths if (g := matching(self.globs, p)) is not None}
        if not hits:
            return None
        first = next(iter(hits))
        if self.action == "review":
            reason = (
                f"{describe_paths(hits)} may only change with a human's approval (matched "
                f"'{hits[first]}'); leave these paths unchanged unless a human asked for it."
            )
        else:
            reason = (
                f"{describe_paths(hits)} must not be changed (denied by '{hits[first]}'); "
                "undo the change to these paths and leave them exactly as they were."
            )
        return self.verdict(self.action, reason, paths=list(hits))


class ProtectedReads(Rule):
    """Reading paths matching ``globs`` gets ``action`` (review by default).

    Content reads count; with ``include_metadata`` listing a directory or checking
    that a file exists counts too.
    """

    type: Literal["protected_reads"] = "protected_reads"
    globs: Globs = Field(description="Globs of paths whose contents must not be read.")
    action: Action = "review"
    include_metadata: bool = False

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        read = evidence.inspected_paths if self.include_metadata else evidence.read_paths
        hits = [p for p in read if matching(self.globs, p) is not None]
        if not hits:
            return None
        return self.verdict(
            self.action,
            f"The program read protected {describe_paths(hits)}; do not read "
            f"{'it' if len(hits) == 1 else 'them'}: this work must succeed without "
            "their contents.",
            paths=hits,
        )


_WRITE_EFFECTS = frozenset(
    ("create", "modify_content", "copy", "delete", "rename", "modify_metadata")
)


class NoRefusedAccess(Rule):
    """The program must not attempt accesses VSH refused (default action: reject).

    Refused means VSH counted denied accesses, or the program wrote bytes that left no
    write effect (a write through a link escaping the workspace, for instance).
    """

    type: Literal["no_refused_access"] = "no_refused_access"
    action: Action = "reject"

    def check(self, evidence: Evidence, /) -> Verdict | None:
        counters = evidence.counters
        wrote = any(e.operation in _WRITE_EFFECTS for e in evidence.effects)
        if counters.denied_accesses == 0 and (wrote or counters.write_bytes == 0):
            return None
        what = (
            f"{counters.denied_accesses} access(es) VSH denied"
            if counters.denied_accesses
            else f"a {counters.write_bytes}-byte write VSH refused"
        )
        return self.verdict(
            self.action,
            f"The program attempted {what} (a protected path or a link leaving the "
            "workspace); do not try to access such paths, even inside try/except.",
        )
