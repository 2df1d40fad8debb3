"""Allowances: path allowances (kinds, sizes, text) and typed config allowances.

An allowance never denies: it *claims* the net changes it can prove allowed
(:class:`~vsh_ai.rules.Claim`) and a :class:`~vsh_ai.rules.RuleSet` approves only when
every change is claimed. A change in an allowance's scope whose constraints fail gets a
``Claim(ok=False)`` whose reason tells the agent what would be allowed.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._evidence import Evidence, is_binary
from ..analysis._config import (
    MISSING,
    ConfigSyntaxError,
    check_key_pattern,
    config_changes,
    detect_format,
    flatten,
    key_matches,
    name_matches,
    parse_config,
    typed_equal,
)
from ..analysis._diff import line_opcodes
from ..analysis._memo import analysis_of
from ..analysis._tokens import credential_line as _credential_line
from ..analysis._tokens import opaque_line as _opaque_line
from ._base import Allowance, Claim, GlobFields, NetChange
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
ConstraintType = Literal["string", "integer", "number", "boolean", "list", "table", "any"]
ConfigFormatName = Literal["auto", "toml", "json", "yaml", "ini", "env", "properties"]

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_BOOLEANS: dict[str, dict[str, bool]] = {
    "ini": {"1": True, "yes": True, "true": True, "on": True}
    | {"0": False, "no": False, "false": False, "off": False},
    "env": {"1": True, "yes": True, "true": True, "on": True}
    | {"0": False, "no": False, "false": False, "off": False},
    "properties": {"true": True, "false": False},
}
_STRING_FORMATS = frozenset(_BOOLEANS)


def _globs(globs: tuple[str, ...]) -> tuple[str, ...]:
    if not globs:
        raise ValueError("give at least one glob in `paths`")
    return check_globs(globs)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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
    A create or modify whose bytes copy a file from outside ``paths`` is not claimed.
    """

    type: Literal["allow_paths"] = "allow_paths"
    glob_fields: ClassVar[GlobFields] = (("paths", False), ("rename_to", False))
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
    mode_change: Literal["add_exec", "any"] = Field(
        default="add_exec",
        description="metadata_change claimed: only added exec bits (add_exec) or any mode.",
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(_globs)
    _check_rename_to = field_validator("rename_to")(check_globs)

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
        if kind == "modify" and change.destructive and not self.destructive:
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
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(_globs)

    @field_validator("pattern")
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


# -- config allowances ----------------------------------------------------------------


class KeyConstraint(BaseModel):
    """What a changed config key may become.

    ``type`` is required. ``min``/``max`` bound numbers (list length for lists);
    ``enum`` lists allowed values (typed: ``true`` is not ``1``); ``pattern`` is an RE2
    full match for strings; ``direction`` restricts numbers to increase or decrease (for
    strings: a version, ``name@v1.2`` or ``1.2.3``, whose name stays and whose version
    only moves that way; a value that is not such a version is not claimed);
    ``only_to`` restricts booleans to one value; ``may_add``/``may_remove`` allow the key
    (or list items) to appear or disappear.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: ConstraintType
    min: float | None = None
    max: float | None = None
    enum: tuple[Any, ...] | None = None
    pattern: str | None = Field(default=None, description="RE2 full match for strings.")
    direction: Literal["increase", "decrease"] | None = None
    only_to: bool | None = Field(default=None, description="Booleans may only become this.")
    may_add: bool = False
    may_remove: bool = False
    items: KeyConstraint | None = Field(
        default=None, description="list: what each added item must be (else any item)."
    )
    keys: dict[str, KeyConstraint] | None = Field(
        default=None,
        description="table: every key of the table must match one of these patterns.",
    )

    @field_validator("pattern")
    @classmethod
    def _re2(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            compile_re2(pattern)
        return pattern

    @model_validator(mode="after")
    def _consistent(self) -> KeyConstraint:
        if (self.min is not None or self.max is not None) and self.type not in (
            "integer",
            "number",
            "list",
        ):
            raise ValueError(f"min/max apply to integer, number or list, not {self.type}")
        if self.direction is not None and self.type not in ("integer", "number", "string"):
            raise ValueError(
                "direction applies to integer, number or (version) string; for booleans use "
                "only_to = true|false"
            )
        if self.only_to is not None and self.type != "boolean":
            raise ValueError("only_to applies to booleans")
        if self.items is not None and self.type != "list":
            raise ValueError("items applies to lists")
        if self.keys is not None:
            if self.type != "table":
                raise ValueError("keys applies to tables")
            for pattern in self.keys:
                _name_glob(pattern)
        if self.pattern is not None and self.type not in ("string", "list"):
            raise ValueError("pattern applies to strings (or lists of strings)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    def describe(self) -> str:
        parts: list[str] = [self.type]
        if self.min is not None or self.max is not None:
            low = "" if self.min is None else _num(self.min)
            high = "" if self.max is None else _num(self.max)
            parts.append(f"within {low}..{high}")
        if self.enum is not None:
            parts.append("one of " + ", ".join(_short(v) for v in self.enum))
        if self.pattern is not None:
            parts.append(f"matching {self.pattern!r}")
        if self.direction is not None:
            parts.append(f"{self.direction} only")
        if self.only_to is not None:
            parts.append(f"only to {str(self.only_to).lower()}")
        return " ".join(parts)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_VERSION = re.compile(r"(?P<name>.*[@:])?[vV]?(?P<version>[0-9]+(?:\.[0-9]+)*)")


def _version(text: Any) -> tuple[str, tuple[int, ...]] | None:
    match = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    return match.group("name") or "", tuple(int(p) for p in match.group("version").split("."))


def _version_problem(old: Any, new: Any, direction: str) -> str | None:
    """Why ``old`` -> ``new`` is not a version move in ``direction`` (None when it is)."""
    before, after = _version(old), _version(new)
    if before is None or after is None:
        return f"is not a version comparable with {_short(old)} (name@vX.Y or X.Y.Z)"
    if before[0] != after[0]:
        return f"changes the name from {before[0][:-1]!r}"
    width = max(len(before[1]), len(after[1]))
    a = before[1] + (0,) * (width - len(before[1]))
    b = after[1] + (0,) * (width - len(after[1]))
    if (direction == "increase" and b <= a) or (direction == "decrease" and b >= a):
        return f"does not {direction} the version from {_short(old)}"
    return None


class AllowConfig(Allowance):
    """Claims config file changes when every changed key is allowed by ``may_change``.

    Both sides are parsed (TOML, JSON, YAML, INI/CFG, .env, .properties) into typed trees.
    Every key no ``may_change`` pattern matches must keep its typed value and presence
    (``true`` -> ``1`` is a change). Comment- or formatting-only edits are claimed.
    ``kinds`` may include ``create``: a new file all of whose keys are allowed. For
    INI/.env/.properties, string values are read as the constraint's ``type``.
    Patterns: dotted keys, ``[0]``/``[*]`` list items, ``*`` one key, ``**`` any depth;
    the last segment may glob a key's name (``**.*_timeout_s``); the first pattern that
    matches decides; a ``list``/``table``/``any`` constraint also covers everything below
    its key.
    """

    type: Literal["allow_config"] = "allow_config"
    glob_fields: ClassVar[GlobFields] = (("paths", False),)
    paths: tuple[str, ...] = Field(description="Root-anchored globs of the config files.")
    format: ConfigFormatName = "auto"
    kinds: tuple[Literal["create", "modify"], ...] = ("modify",)
    may_change: dict[str, KeyConstraint] = Field(
        default_factory=dict, description="Key pattern -> what the key may become."
    )
    opaque_tokens: bool = Field(
        default=False,
        description="True: added lines (comments included) may hold opaque tokens (12+ "
        "characters mixing letters and digits). By default they are not claimed: a comment "
        "is free text, and a credential copied into one parses as no change at all.",
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(_globs)

    @field_validator("kinds")
    @classmethod
    def _some_kinds(
        cls, kinds: tuple[Literal["create", "modify"], ...]
    ) -> tuple[Literal["create", "modify"], ...]:
        if not kinds:
            raise ValueError("give at least one kind (modify, create)")
        return kinds

    @field_validator("may_change")
    @classmethod
    def _patterns(cls, may_change: dict[str, KeyConstraint]) -> dict[str, KeyConstraint]:
        for pattern in may_change:
            if not pattern:
                raise ValueError("an empty key pattern matches nothing; name the key")
            try:
                _name_glob(pattern)
            except ValueError as error:
                raise ValueError(f"key pattern {pattern!r}: {error}") from None
        return may_change

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        if change.kind not in self.kinds or matching(self.paths, change.path) is None:
            return None
        path = change.path
        fmt = self.format
        if fmt == "auto":
            try:
                fmt = detect_format(path)
            except ValueError as error:
                return Claim(False, f"{path}: {error}; set `format` on the allowance")
            if fmt == "auto":
                return Claim(False, f"{path}: unknown config format; set `format`")
        sides: list[Any] = []
        for side, data in (
            ("before", evidence.before_bytes(path) if change.kind == "modify" else None),
            ("after", evidence.after_bytes(path)),
        ):
            if data is None:
                sides.append(MISSING)
                continue
            try:
                sides.append(parse_config(data, fmt, path))
            except ConfigSyntaxError as error:
                return Claim(False, f"{path} ({side}) cannot be parsed as {fmt}: {error}")
        before, after = sides
        if after is MISSING:
            return Claim(False, f"{path} has no content after the change")
        if not self.opaque_tokens:
            line = _opaque_line(evidence, path, evidence.after_bytes(path) or b"")
            if line is not None:
                return Claim(
                    False,
                    f"{path} line {line} adds an opaque token (a key, password, hash or "
                    "encoded value?); config edits here change operational values only",
                )
        changes = config_changes(before, after)
        if not changes:
            return Claim(True, f"{path}: same {fmt} values (only comments or formatting)")
        checker = _Checker(self.may_change, fmt, before, after, MISSING)
        problems: list[str] = []
        proven: list[str] = []
        for key_change in changes:
            ok, text = checker.check(key_change.key, key_change.before, key_change.after)
            (proven if ok else problems).append(text)
        if problems:
            shown = "; ".join(problems[:5]) + (
                f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
            )
            return Claim(False, f"{path}: {shown}")
        return Claim(True, f"{path}: " + "; ".join(dict.fromkeys(proven)))


_SEGMENT = re.compile(r'\[(\d+)\]|"((?:[^"\\]|\\.)*)"|([^.\[\]"]+)')


@lru_cache(maxsize=65536)
def _split_key(key: str) -> tuple[tuple[int, str | int], ...]:
    """``a.b[0]."c.d"`` -> [(end offset, segment), ...]; empty when it does not parse."""
    out: list[tuple[int, str | int]] = []
    index = 0
    while index < len(key):
        if out and key[index] == ".":
            index += 1
        match = _SEGMENT.match(key, index)
        if match is None:
            return ()
        if match.group(1) is not None:
            out.append((match.end(), int(match.group(1))))
        elif match.group(2) is not None:
            out.append((match.end(), json.loads(f'"{match.group(2)}"')))
        else:
            out.append((match.end(), match.group(3)))
        index = match.end()
    return tuple(out)


@lru_cache(maxsize=1024)
def _name_glob(pattern: str) -> tuple[str, str | None]:
    """``(structural pattern, last-segment name glob or None)``; ValueError if invalid.

    The last segment may glob a mapping key's name (``**.*_timeout_s``); every other
    segment is H2's key-pattern syntax (``*`` one key, ``[*]`` one index, ``**`` any).
    """
    parts = _split_key(pattern)
    last = parts[-1][1] if parts else None
    if isinstance(last, str) and "*" in last and last not in ("*", "**"):
        if pattern.endswith('"'):
            return check_key_pattern(pattern), None
        start = parts[-2][0] if len(parts) > 1 else 0
        prefix = pattern[:start]
        structural = f"{prefix}.*" if prefix else "*"
        if "**" in last:
            raise ValueError("'**' inside a name glob; use '*' within a name")
        return check_key_pattern(structural), last
    return check_key_pattern(pattern), None


@lru_cache(maxsize=65536)
def _pattern_matches(pattern: str, key: str) -> bool:
    structural, name = _name_glob(pattern)
    if not key_matches(structural, key):
        return False
    if name is None:
        return True
    parts = _split_key(key)
    return bool(parts) and isinstance(parts[-1][1], str) and name_matches(name, parts[-1][1])


def _list_diff(old: list[Any], new: list[Any]) -> tuple[list[Any], list[Any]]:
    """(added, removed): ``old`` aligned in order as a subsequence of ``new``.

    Items of ``old`` that cannot be found in order (removed, changed or reordered) are
    ``removed``; items of ``new`` left over are ``added``.
    """
    added: list[Any] = []
    removed: list[Any] = []
    index = 0
    for item in new:
        if index < len(old) and typed_equal(old[index], item):
            index += 1
        elif any(typed_equal(item, o) for o in old[index:]):
            # an old item is skipped here: it went missing or moved
            while index < len(old) and not typed_equal(old[index], item):
                removed.append(old[index])
                index += 1
            index += 1
        else:
            added.append(item)
    removed.extend(old[index:])
    return added, removed


def _subtree(tree: Any, segments: list[str | int], missing: object) -> Any:
    node = tree
    for segment in segments:
        in_list = isinstance(segment, int) and isinstance(node, list) and segment < len(node)
        in_table = isinstance(segment, str) and isinstance(node, Mapping) and segment in node
        if in_list or in_table:
            node = node[segment]
        else:
            return missing
    return node


class _Checker:
    """Checks key changes against ``may_change`` (one instance per claimed file)."""

    def __init__(
        self,
        constraints: dict[str, KeyConstraint],
        fmt: str,
        before: Any,
        after: Any,
        missing: object,
    ) -> None:
        self.constraints = constraints
        self.fmt = fmt
        self.before = before
        self.after = after
        self.missing = missing
        self.checked: dict[str, tuple[bool, str]] = {}

    def _match(self, key: str) -> tuple[str, str, KeyConstraint] | None:
        """(pattern, matched key or ancestor, constraint).

        A list constraint on an ancestor whose length changed decides first (its
        indices shifted, so per-item patterns would compare different items); then the
        key itself; then the nearest list/table/any constraint on an ancestor.
        """
        parts = _split_key(key)
        ancestors = [key[:end] for end, _ in reversed(parts[:-1])]
        for ancestor in reversed(ancestors):
            for pattern, constraint in self.constraints.items():
                if constraint.type == "list" and _pattern_matches(pattern, ancestor):
                    segments = [s for _, s in _split_key(ancestor)]
                    old = _subtree(self.before, segments, self.missing)
                    new = _subtree(self.after, segments, self.missing)
                    if not (isinstance(old, list) and isinstance(new, list)) or len(old) != len(
                        new
                    ):
                        return pattern, ancestor, constraint
        for pattern, constraint in self.constraints.items():
            if _pattern_matches(pattern, key):
                return pattern, key, constraint
        for ancestor in ancestors:
            for pattern, constraint in self.constraints.items():
                if constraint.type in ("list", "table", "any") and _pattern_matches(
                    pattern, ancestor
                ):
                    return pattern, ancestor, constraint
        return None

    def check(self, key: str, before: Any, after: Any) -> tuple[bool, str]:
        found = self._match(key)
        if found is None:
            return False, (
                f"{key} changed ({self._show(before)} -> {self._show(after)}) but this "
                "work may not change it; restore its value"
            )
        _pattern, where, constraint = found
        if where != key:  # a list or table constraint covers the whole value at ``where``
            if where in self.checked:
                return self.checked[where]
            segments = [s for _, s in _split_key(where)]
            before = _subtree(self.before, segments, self.missing)
            after = _subtree(self.after, segments, self.missing)
            result = self._value(where, before, after, constraint)
            self.checked[where] = result
            return result
        return self._value(key, before, after, constraint)

    def _show(self, value: Any) -> str:
        return "absent" if value is self.missing else _short(value)

    def _value(
        self, key: str, before: Any, after: Any, constraint: KeyConstraint
    ) -> tuple[bool, str]:
        want = constraint.describe()
        if before is self.missing and after is self.missing:
            return True, f"{key} unchanged"
        if before is self.missing and not constraint.may_add and self.before is not self.missing:
            return False, f"{key} was added but may only be changed, not added"
        if after is self.missing:
            if not constraint.may_remove:
                return False, f"{key} was removed; keep it (it may only change as {want})"
            return True, f"{key} removed"
        value, error = self._coerce(after, constraint.type)
        if error:
            return False, f"{key} = {_short(after)} is not {error}; it must be {want}"
        old: Any = self.missing
        if before is not self.missing:
            old, old_error = self._coerce(before, constraint.type)
            if old_error:
                old = self.missing
        problem = self._problem(value, old, constraint)
        if problem:
            return False, f"{key} = {_short(after)} {problem}; it must be {want}"
        return True, f"{key} {self._show(before)} -> {_short(after)} ({want})"

    def _coerce(self, value: Any, kind: ConstraintType) -> tuple[Any, str | None]:
        if self.fmt in _STRING_FORMATS and isinstance(value, str):
            text = value.strip()
            if kind == "integer":
                return (int(text), None) if _INTEGER.fullmatch(text) else (None, "an integer")
            if kind == "number":
                if _NUMBER.fullmatch(text):
                    number = float(text)
                    return (int(number) if _INTEGER.fullmatch(text) else number), None
                return None, "a number"
            if kind == "boolean":
                parsed = _BOOLEANS[self.fmt].get(text.lower())
                return (parsed, None) if parsed is not None else (None, "a boolean")
        ok = {
            "string": isinstance(value, str),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "boolean": isinstance(value, bool),
            "list": isinstance(value, list | tuple),
            "table": isinstance(value, Mapping),
            "any": True,
        }[kind]
        if not ok:
            return None, f"a {kind}"
        if isinstance(value, float) and not math.isfinite(value):
            return None, "a finite number"
        return value, None

    def _item_problem(self, item: Any, constraint: KeyConstraint) -> str | None:
        value, error = self._coerce(item, constraint.type)
        if error:
            return f"is not {error} ({_short(item)})"
        return self._problem(value, self.missing, constraint)

    def _table_problem(self, table: Any, keys: dict[str, KeyConstraint]) -> str | None:
        """Why a whole table is not claimed by ``keys`` (every leaf must be), or None."""
        nested = _Checker(keys, self.fmt, self.missing, table, self.missing)
        try:
            leaves = flatten(table)
        except ConfigSyntaxError as error:
            return f"has ambiguous keys ({error})"
        for key, leaf in leaves.items():
            ok, text = nested.check(key, self.missing, leaf)
            if not ok:
                return f"has {text}"
        return None

    def _problem(self, value: Any, old: Any, constraint: KeyConstraint) -> str | None:
        kind = constraint.type
        if kind in ("integer", "number"):
            if constraint.min is not None and value < constraint.min:
                return f"is below {_num(constraint.min)}"
            if constraint.max is not None and value > constraint.max:
                return f"is above {_num(constraint.max)}"
        if kind == "string" and constraint.direction is not None:
            if old is self.missing:
                return "has no earlier version to compare with"
            moved = _version_problem(old, value, constraint.direction)
            if moved:
                return moved
        numeric = kind in ("integer", "number") and old is not self.missing
        if numeric and constraint.direction is not None:
            if constraint.direction == "increase" and value < old:
                return f"decreases from {old}"
            if constraint.direction == "decrease" and value > old:
                return f"increases from {old}"
        if kind == "boolean" and constraint.only_to is not None and value != constraint.only_to:
            return f"may only become {str(constraint.only_to).lower()}"
        items = list(value) if kind == "list" else [value]
        if kind == "list":
            if constraint.min is not None and len(items) < constraint.min:
                return f"has {len(items)} items (at least {_num(constraint.min)})"
            if constraint.max is not None and len(items) > constraint.max:
                return f"has {len(items)} items (at most {_num(constraint.max)})"
            before = list(old) if isinstance(old, list | tuple) else []
            added, removed = _list_diff(before, items)
            if added and not constraint.may_add:
                return f"adds {_short(added[0])}"
            if removed and not constraint.may_remove:
                return f"removes or reorders {_short(removed[0])}"
            if constraint.items is not None:
                for item in added:
                    problem = self._item_problem(item, constraint.items)
                    if problem:
                        return f"adds an item that {problem}"
        if kind == "table" and constraint.keys is not None:
            problem = self._table_problem(value, constraint.keys)
            if problem:
                return problem
        if constraint.enum is not None:
            for item in items:
                if not any(typed_equal(item, allowed) for allowed in constraint.enum):
                    return f"{'has' if kind == 'list' else 'is'} {_short(item)}, not allowed"
        if constraint.pattern is not None:
            compiled = compile_re2(constraint.pattern)
            for item in items:
                if not isinstance(item, str) or compiled.fullmatch(item) is None:
                    return f"{'has' if kind == 'list' else 'is'} {_short(item)}, not matching"
        return None
