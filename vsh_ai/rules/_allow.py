"""Allowances: path allowances (kinds, sizes, text) and typed config allowances.

An allowance never denies: it *claims* the net changes it can prove allowed
(:class:`~vsh_ai.rules.Claim`) and a :class:`~vsh_ai.rules.RuleSet` approves only when
every change is claimed. A change in an allowance's scope whose constraints fail gets a
``Claim(ok=False)`` whose reason tells the agent what would be allowed.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence, is_binary
from ..analysis._diff import line_opcodes
from ..analysis._memo import analysis_of
from ..analysis._tokens import credential_line as _credential_line
from ..analysis._tokens import opaque_line as _opaque_line
from ._allow_config import AllowConfig
from ._base import Allowance, Claim, GlobFields, NetChange
from ._constraints import ConstraintType, KeyConstraint, globs_given
from ._content import compile_re2
from ._glob import check_globs, matching

__all__ = (
    "AllowAddedLines",
    "AllowConfig",
    "AllowPaths",
    "ConstraintType",
    "KeyConstraint",
    "NetKind",
)

NetKind = Literal["create", "modify", "delete", "rename", "metadata_change"]


# -- path allowances ------------------------------------------------------------------


class AllowPaths(Allowance):
    """Claims changes of the given ``kinds`` on paths matching ``paths`` (root-anchored).

    * ``kinds``: the net kinds claimed (create, modify, delete, rename, metadata_change);
      a rename is claimed only when both ends match ``paths`` (or, with ``rename_to``,
      its source matches ``paths`` and its destination ``rename_to``).
    * ``destructive``: a modify that empties or guts a file (most lines removed or
      commented out) is only claimed when true.
    * ``max_bytes``: the largest new file size claimed.
    * ``text_only``: binary content written by a create or modify is not claimed unless
      false (it cannot be reviewed).
    * ``directories``: where new folders are claimed (to hold the files ``paths`` claims;
      a folder holds nothing by itself, its files are claimed one by one).
    A create or modify whose bytes copy a file from outside ``paths`` is not claimed.
    """

    type: Literal["allow_paths"] = "allow_paths"
    glob_fields: ClassVar[GlobFields] = (
        ("paths", False),
        ("rename_to", False),
        ("directories", False),
    )
    paths: tuple[str, ...] = Field(description="Root-anchored globs of the paths claimed.")
    kinds: tuple[NetKind, ...] = Field(description="Net change kinds claimed on these paths.")
    destructive: bool = Field(
        default=False, description="Also claim modifications that empty or gut a file."
    )
    max_bytes: int | None = Field(default=None, ge=0, description="Largest file size claimed.")
    max_changed_lines: int | None = Field(
        default=None, ge=0, description="Most lines a modify may add plus remove (small edits)."
    )
    text_only: bool = Field(default=True, description="Claim text content only.")
    opaque_tokens: bool = Field(
        default=True,
        description="False: text adding an opaque token (12+ characters mixing letters and "
        "digits, like a key, hash or an encoding of one) is not claimed.",
    )
    credential_text: bool = Field(
        default=False,
        description="True: added lines may name a credential with a literal value after it "
        "(`password is swordfish`, `api key: 8c1f...`). By default they are not claimed: "
        "the secret detector cannot tell a dictionary-word password in prose.",
    )
    rename_to: tuple[str, ...] = Field(
        default=(),
        description="If set, a rename is claimed only from `paths` to these globs.",
    )
    directories: tuple[str, ...] = Field(
        default=(),
        description="Root-anchored globs where created directories are claimed (folders "
        "for the files `paths` claims; never a file).",
    )
    mode_change: Literal["add_exec", "any"] = Field(
        default="add_exec",
        description="metadata_change claimed: only added exec bits (add_exec) or any mode.",
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(globs_given)
    _check_rename_to = field_validator("rename_to")(check_globs)
    _check_directories = field_validator("directories")(check_globs)

    @field_validator("kinds")
    @classmethod
    def _some_kinds(cls, kinds: tuple[NetKind, ...]) -> tuple[NetKind, ...]:
        if not kinds:
            raise ValueError("give at least one kind (create, modify, delete, rename, ...)")
        return kinds

    def _covers(self, change: NetChange) -> str | None:
        glob = matching(self.paths, change.path)
        if glob is None and self.rename_to and change.before is None:
            glob = matching(self.rename_to, change.path)  # a destination end, or its dirs
        return glob

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        made = change.after if change.kind == "create" and change.before is None else None
        if made is not None and made.kind == "directory" and self.directories:
            folder = matching(self.directories, change.path)
            if folder is not None:
                return Claim(True, f"new directory {change.path} matches '{folder}'")
        glob = self._covers(change)
        if glob is None:
            return None
        if change.kind not in self.kinds:
            made = change.after if change.kind == "create" else None
            if made is not None and made.kind == "directory" and "rename" in self.kinds:
                return Claim(True, f"new directory {change.path} (to hold renamed files)")
            return None
        path, kind = change.path, change.kind
        before, after = change.before, change.after
        if kind == "delete" and before is not None and before.kind == "symlink":
            return Claim(True, f"removal of the link {path} (never its target) matches '{glob}'")
        for node in (before, after):
            if node is not None and node.kind not in ("file", "directory"):
                return Claim(False, f"{path} is a {node.kind}; only regular files are claimed")
        if kind == "rename":
            partner = change.partner
            source, target = (path, partner) if after is None else (partner, path)
            to = self.rename_to or self.paths
            if (
                source is None
                or target is None
                or matching(self.paths, source) is None
                or matching(to, target) is None
            ):
                return Claim(
                    False,
                    f"{path} is renamed {'from or to ' + partner if partner else ''} outside "
                    f"what is allowed (from {', '.join(self.paths)} to {', '.join(to)}); "
                    "move files only there",
                )
        if kind == "modify" and not self.destructive and change.destructive:
            return Claim(
                False,
                f"{path}: {change.destructive}; emptying or gutting a file is not allowed "
                "here, edit only what the work needs",
            )
        if kind == "metadata_change" and self.mode_change == "add_exec":
            old = before.mode if before is not None else 0
            new = after.mode if after is not None else 0
            if (old & ~0o111) != (new & ~0o111) or (old & 0o111) & ~new:
                return Claim(
                    False,
                    f"{path}: mode {old:o} -> {new:o} changes more than adding exec bits; "
                    "only chmod +x is allowed here",
                )
        if kind == "modify" and self.max_changed_lines is not None:
            changed = _changed_lines(evidence, path)
            if changed > self.max_changed_lines:
                return Claim(
                    False,
                    f"{path}: {changed} lines changed (at most {self.max_changed_lines} here); "
                    "keep the edit to what the work asks for",
                )
        if kind in ("create", "modify") and after is not None and after.kind == "file":
            if self.max_bytes is not None and after.size > self.max_bytes:
                return Claim(
                    False, f"{path} would be {after.size} bytes (at most {self.max_bytes})"
                )
            data = evidence.after_bytes(path)
            if self.text_only and data is not None and is_binary(data):
                return Claim(False, f"{path} is binary and cannot be reviewed; write text")
            if not self.opaque_tokens and data is not None:
                line = _opaque_line(evidence, path, data)
                if line is not None:
                    return Claim(
                        False,
                        f"{path} line {line} adds an opaque token (a key, hash or encoded "
                        "value?); write names and placeholders, never values",
                    )
            if not self.credential_text and data is not None and not is_binary(data):
                line = _credential_line(evidence, path, data)
                if line is not None:
                    return Claim(
                        False,
                        f"{path} line {line} names a credential with a value after it; "
                        "write the variable or secret-manager name, never the value",
                    )
            outside = [p for p in change.copied_from if matching(self.paths, p) is None]
            if outside:
                return Claim(
                    False,
                    f"{path} copies the contents of {', '.join(outside)}, which is outside "
                    f"{', '.join(self.paths)}; do not copy files into these paths",
                )
        what = f"{kind} of {path}" + (f" (with {change.partner})" if change.partner else "")
        return Claim(True, f"{what} matches '{glob}'")


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    if is_binary(data):
        raise ValueError("binary content has no lines to compare")
    return data.decode("utf-8").splitlines()


def _changed_lines(evidence: Evidence, path: str) -> int:
    """Lines added plus lines removed between the two sides of ``path``.

    Paired by :func:`vsh_ai.analysis._diff.line_opcodes` (difflib's pairing for small
    files, bounded time for any): lines it cannot pair count as changed.
    """
    memo = analysis_of(evidence)
    before = memo.lines(evidence.before_bytes(path))
    after = memo.lines(evidence.after_bytes(path))
    return memo.remember(
        ("changed_lines", path), lambda: line_opcodes(before, after, trim=False).changed
    )


class AllowAddedLines(Allowance):
    """Claims edits of ``paths`` that only add lines, each a full match of ``pattern``.

    No existing line may be removed or changed (reordering is not a removal; with
    ``dedupe`` an extra copy of a line that stays may go). For
    append-only files such as ignore lists or changelogs: e.g. ``.gitignore`` with
    ``pattern = "[^!#\\s].*|#.*|"`` (new ignore rules, comments or blank lines, never a
    ``!`` re-include). ``kinds`` may add ``create`` (a new file of such lines only).
    ``removable`` names existing lines that may go or change (comments, blank lines).
    """

    type: Literal["allow_added_lines"] = "allow_added_lines"
    glob_fields: ClassVar[GlobFields] = (("paths", False),)
    paths: tuple[str, ...] = Field(description="Root-anchored globs of the files claimed.")
    pattern: str = Field(description="RE2 full match every added line must satisfy.")
    kinds: tuple[Literal["create", "modify"], ...] = ("modify",)
    dedupe: bool = Field(
        default=False,
        description="Also claim removing extra copies of a line that stays in the file.",
    )
    removable: str = Field(
        default="",
        description="RE2 full match of existing lines that may be removed or changed (e.g. "
        "comments and blank lines of an ignore list: a typo fixed in a comment); empty: none.",
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(globs_given)

    @field_validator("pattern", "removable")
    @classmethod
    def _re2(cls, pattern: str) -> str:
        compile_re2(pattern)
        return pattern

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        if change.kind not in self.kinds or matching(self.paths, change.path) is None:
            return None
        path = change.path
        memo = analysis_of(evidence)
        try:
            before = memo.lines(evidence.before_bytes(path) if change.kind == "modify" else None)
            after = memo.lines(evidence.after_bytes(path))
        except ValueError as error:
            return Claim(False, f"{path}: {error}")
        unmatched = Counter(after)
        unmatched.subtract(before)
        remaining = set(after) if self.dedupe else set()
        removed = [line for line, n in unmatched.items() if n < 0 and line not in remaining]
        if removed and self.removable:
            removable = compile_re2(self.removable).fullmatch
            removed = [line for line in removed if not removable(line)]
        if removed:
            return Claim(
                False,
                f"{path}: {len(removed)} existing line(s) removed or changed; only add "
                "lines here and keep every existing one",
            )
        fullmatch = compile_re2(self.pattern).fullmatch
        added = [line for line, n in unmatched.items() if n > 0]
        failing = {line for line in added if not fullmatch(line)}  # each distinct line once
        if failing:
            first = next(n for n, line in enumerate(after, 1) if line in failing)
            return Claim(
                False,
                f"{path}: added line {first} does not match {self.pattern!r}; add only such lines",
            )
        return Claim(True, f"{path}: only adds {sum(unmatched[a] for a in added)} allowed line(s)")
