"""Change-kind rules: which kinds of change may happen where; executable and symlink changes."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Change, Evidence
from .._verdict import Verdict
from ._base import Action, GlobFields, Rule, describe_paths, net_changes
from ._glob import check_globs, matching
from ._paths import validate_globs

__all__ = ("ChangeKind", "ChangeKinds", "NoExecutableChanges", "NoSymlinkChanges")

ChangeKind = Literal["create", "modify", "delete", "rename", "metadata_change"]


def change_kinds(evidence: Evidence) -> dict[str, ChangeKind]:
    """Net kind of change per path (:func:`~vsh_ai.rules.net_changes`).

    Both ends of a true rename are ``rename``; a move followed by a delete or an edit is
    a delete plus a create (or modify), never a rename.
    """
    return {change.path: change.kind for change in net_changes(evidence)}


class ChangeKinds(Rule):
    """Paths matching ``globs`` (any case) may only change in the ``allow``-ed net kinds."""

    type: Literal["change_kinds"] = "change_kinds"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: tuple[str, ...] = ("**",)
    allow: tuple[ChangeKind, ...] = Field(description="Kinds of change allowed on these paths.")
    action: Action = "review"

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        bad = {
            path: kind
            for path, kind in change_kinds(evidence).items()
            if kind not in self.allow and matching(self.globs, path, ignore_case=True) is not None
        }
        if not bad:
            return None
        kinds = sorted(set(bad.values()))
        return self.verdict(
            self.action,
            f"{describe_paths(bad)}: {'/'.join(kinds)} is not allowed on "
            f"{', '.join(self.globs)} (allowed: {', '.join(self.allow) or 'nothing'}); "
            "undo it and make only allowed kinds of change.",
            paths=list(bad),
        )


def _gains_exec(change: Change) -> bool:
    after = change.after
    if after is None or after.kind != "file" or not after.mode & 0o111:
        return False
    before = change.before
    return before is None or before.kind != "file" or bool(after.mode & 0o111 & ~before.mode)


class NoExecutableChanges(Rule):
    """Files must not become executable (new executable files or added exec bits).

    ``allow`` lists globs where an existing file may gain exec bits, as long as that is
    its only change (a ``chmod +x`` on a script that is already there).
    """

    type: Literal["no_executable_changes"] = "no_executable_changes"
    glob_fields: ClassVar[GlobFields] = (("allow", False),)
    allow: tuple[str, ...] = ()
    action: Action = "review"

    _check_allow = field_validator("allow")(check_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        hits = [
            c.path
            for c in evidence.changes
            if _gains_exec(c)
            and not (c.kind == "metadata_change" and matching(self.allow, c.path) is not None)
        ]
        if not hits:
            return None
        return self.verdict(
            self.action,
            f"{describe_paths(hits)} would become executable; keep file modes unchanged "
            "(no chmod +x) and ask a human if a file really must be executable.",
            paths=hits,
        )


class NoSymlinkChanges(Rule):
    """Symlinks must not be created, changed or removed.

    ``allow_removal`` lists globs where removing an existing symlink is fine.
    """

    type: Literal["no_symlink_changes"] = "no_symlink_changes"
    glob_fields: ClassVar[GlobFields] = (("allow_removal", False),)
    allow_removal: tuple[str, ...] = ()
    action: Action = "review"

    _check_allow_removal = field_validator("allow_removal")(check_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        hits = [
            c.path
            for c in evidence.changes
            if any(n is not None and n.kind == "symlink" for n in (c.before, c.after))
            and not (c.after is None and matching(self.allow_removal, c.path) is not None)
        ]
        if not hits:
            return None
        return self.verdict(
            self.action,
            f"{describe_paths(hits)} {'is a symlink' if len(hits) == 1 else 'are symlinks'}; "
            "do not create, change or remove symlinks, edit regular files instead.",
            paths=hits,
        )
