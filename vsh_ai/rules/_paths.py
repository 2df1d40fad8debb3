"""Path rules: where changes may happen, where they must not, and protected reads."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ..analysis._provenance import read_origins
from ..analysis._skeleton import skeleton
from ._base import Action, GlobFields, Rule, describe_paths, secret_reads
from ._glob import check_globs, matching

__all__ = (
    "DeniedChanges",
    "NoRefusedAccess",
    "ProtectedReads",
    "protected_match",
    "validate_globs",
)

Globs = tuple[str, ...]


def protected_match(globs: Globs, path: str) -> str | None:
    """The glob protecting ``path``: any case, any width, and by its skeleton (a Cyrillic
    е, a zero-width space or an accent does not unprotect ``.env``)."""
    found = matching(globs, path, ignore_case=True)
    if found is None and not path.isascii():
        found = matching(globs, skeleton(path), ignore_case=True)
    return found


def validate_globs(globs: Globs) -> Globs:
    """At least one glob, each compiled: a bad one fails at load time, not at review time."""
    if not globs:
        raise ValueError("give at least one glob")
    return check_globs(globs)


class DeniedChanges(Rule):
    """Paths matching ``globs`` must not change at all (``action`` defaults to reject).

    Matching ignores case and Unicode width (``SERVER.PEM`` matches ``**/*.pem``); both
    ends of a rename count. (Copying a denied file reads it: see ``protected_reads``.)
    """

    type: Literal["denied_changes"] = "denied_changes"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: Globs = Field(description="Globs of paths that must never change (any case).")
    action: Action = "reject"

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        hits = {
            p: g
            for p in evidence.changed_paths
            if (g := protected_match(self.globs, p)) is not None
        }
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
    that a file exists counts too. Matching ignores case and Unicode width, and compares
    skeletons (lookalike letters, invisible characters). A read is judged by where its
    bytes came from: a protected file renamed or copied out of the globs and read there is
    a read of the protected file. With
    ``content = true`` a content read whose bytes hold detected secrets or key material
    counts as protected too, whatever the path's name.
    """

    type: Literal["protected_reads"] = "protected_reads"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: Globs = Field(
        default=(), description="Globs of paths whose contents must not be read (any case)."
    )
    action: Action = "review"
    include_metadata: bool = False
    content: bool = Field(
        default=False, description="Also protect any read whose bytes hold secrets."
    )

    @field_validator("globs")
    @classmethod
    def _check_globs(cls, globs: Globs) -> Globs:
        return check_globs(globs)

    @model_validator(mode="after")
    def _something(self) -> ProtectedReads:
        if not self.globs and not self.content:
            raise ValueError("give `globs`, or set content = true (or both)")
        return self

    def check(self, evidence: Evidence, /) -> Verdict | None:
        read = evidence.inspected_paths if self.include_metadata else evidence.read_paths
        origins = read_origins(evidence) if evidence.renames or _copies(evidence) else {}
        hits: list[str] = []
        for path in read:
            for origin in sorted(origins.get(path, ()), key=lambda o: o != path) or (path,):
                if protected_match(self.globs, origin) is not None:
                    hits.append(origin)
                    break
        if self.content:
            hits.extend(p for p in secret_reads(evidence) if p not in hits)
        if not hits:
            return None
        return self.verdict(
            self.action,
            f"The program read protected {describe_paths(hits)}; do not read "
            f"{'it' if len(hits) == 1 else 'them'}: this work must succeed without "
            "their contents.",
            paths=hits,
        )


def _copies(evidence: Evidence) -> bool:
    return any(e.operation in ("rename", "copy") for e in evidence.effects)


_WRITE_EFFECTS = frozenset(
    ("create", "modify_content", "copy", "delete", "rename", "modify_metadata")
)


class NoRefusedAccess(Rule):
    """The program must not attempt accesses VSH refused (default action: reject).

    Refused means VSH counted denied accesses, or the program wrote bytes that left no
    write effect (a write through a link escaping the workspace, for instance). A program
    whose filesystem calls outnumber the effects VSH recorded made a call that left no
    trace (a refused ``open()`` through such a link records nothing): that is a
    ``review``, since a refused call and a failed one cannot be told apart.
    """

    type: Literal["no_refused_access"] = "no_refused_access"
    action: Action = "reject"

    def check(self, evidence: Evidence, /) -> Verdict | None:
        counters = evidence.counters
        wrote = any(e.operation in _WRITE_EFFECTS for e in evidence.effects)
        if counters.denied_accesses == 0 and (wrote or counters.write_bytes == 0):
            if counters.os_calls > len(evidence.effects):
                return self.verdict(  # no count: refused calls follow what is refused
                    "review",
                    "The program made filesystem calls that left no effect "
                    "(refused, for instance through a link leaving the workspace); access "
                    "only regular paths inside the workspace.",
                )
            return None
        # No counts or sizes: how many accesses were denied follows how many protected
        # paths exist, and the reason reaches the program.
        what = "an access VSH denied" if counters.denied_accesses else "a write VSH refused"
        return self.verdict(
            self.action,
            f"The program attempted {what} (a protected path or a link leaving the "
            "workspace); do not try to access such paths, even inside try/except.",
        )
