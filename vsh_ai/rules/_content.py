"""Content rules: exact bytes for a path, forbidden patterns in added lines."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, ClassVar, Literal

import re2  # type: ignore[import-untyped]
from pydantic import Field, field_validator, model_validator

from .._evidence import Evidence, normalize_path
from .._verdict import Verdict
from ..analysis._memo import analysis_of
from ._base import Action, GlobFields, Rule, describe_paths
from ._glob import matching
from ._paths import validate_globs

__all__ = (
    "ExactContent",
    "ForbiddenPatterns",
    "added_text_lines",
    "compile_re2",
    "located",
)


def added_text_lines(
    evidence: Evidence,
    globs: tuple[str, ...],
    *,
    removed: bool = False,
    ignore_case: bool = True,
) -> Iterator[tuple[str, int, str] | tuple[str, None, None]]:
    """``(path, n, line)`` for each new line (or, with ``removed``, each dropped line).

    A new line is a line of the file after the change beyond the number of times it
    appeared before (a duplicated line counts); ``n`` is its line number in that file
    (in the old file for ``removed``).
    Only changed files matching ``globs`` (any case, unless ``ignore_case`` is false:
    these are deny sets) are scanned; binary files yield
    ``(path, None, None)`` once, since they cannot be scanned line by line.
    """
    memo = analysis_of(evidence)
    for change in evidence.changes:
        if (
            change.kind == "metadata_change"
            or matching(globs, change.path, ignore_case=ignore_case) is None
        ):
            continue
        # Counted once per change and decision, whichever rule asks (the analysis memo).
        lines = memo.new_lines(change.path, removed=removed)
        if lines is None:
            yield change.path, None, None
            continue
        for number, line in lines:
            yield change.path, number, line


@lru_cache(maxsize=512)
def _any_of(patterns: tuple[str, ...]) -> Callable[[str], object]:
    """``search(line)``: not None where any of ``patterns`` matches, one RE2 pass a line.

    Each pattern is its own group, so its inline flags (``(?i)``) stay its own. Patterns
    too large to combine within RE2's memory are searched one by one.
    """
    try:
        search: Callable[[str], object] = compile_re2(
            "|".join(f"(?:{pattern})" for pattern in patterns)
        ).search
        return search
    except ValueError:
        compiled = [compile_re2(pattern) for pattern in patterns]
        return lambda line: next((m for c in compiled if (m := c.search(line))), None)


@lru_cache(maxsize=512)
def compile_re2(pattern: str) -> Any:
    """Compile with RE2; unsupported syntax is a load-time ValueError naming the fix."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options=options)
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(
            f"pattern {pattern!r} is not supported ({detail}): patterns are RE2, which has "
            "no backreferences (\\1) or lookaround ((?=...), (?!...), (?<=...)); rewrite it "
            "without them, e.g. as two patterns or a character class"
        ) from None


def located(lines: dict[str, list[int]]) -> list[str]:
    """``{"a.py": [3, 9]}`` → ``["a.py (lines 3, 9)"]`` for readable reasons."""
    return [
        f"{path} (line{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers[:5]))}"
        f"{', ...' if len(numbers) > 5 else ''})"
        for path, numbers in lines.items()
    ]


class ExactContent(Rule):
    """If ``path`` changes, its new bytes must be exactly ``text`` or hash to ``sha256``.

    ``absent = true`` means the path must not exist after the change.
    """

    type: Literal["exact_content"] = "exact_content"
    path: str
    text: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    absent: bool = False
    action: Action = "review"

    @field_validator("path")
    @classmethod
    def _canonical(cls, path: str) -> str:
        name = normalize_path(path)
        if any(part in ("", ".", "..") for part in name.split("/")):
            raise ValueError(
                f"path {path!r} is not a canonical workspace path (like 'config/app.toml'), "
                "so the rule would never match a change"
            )
        return path

    @model_validator(mode="after")
    def _one_expectation(self) -> ExactContent:
        given = sum((self.text is not None, self.sha256 is not None, self.absent))
        if given != 1:
            raise ValueError("set exactly one of text, sha256 or absent = true")
        return self

    def check(self, evidence: Evidence, /) -> Verdict | None:
        change = evidence.change(self.path)
        if change is None:
            return None
        name = normalize_path(self.path)
        data = evidence.after_bytes(name)
        if self.absent:
            ok = data is None
            want = "must not exist"
        elif data is None:
            ok, want = False, "must exist with the expected content"
        elif self.text is not None:
            ok, want = data == self.text.encode(), "must contain exactly the expected text"
        else:
            ok = hashlib.sha256(data).hexdigest() == self.sha256
            want = f"must have sha256 {self.sha256}"
        if ok:
            return None
        return self.verdict(
            self.action,
            f"{name} {want} after this change, but it does not; write exactly the "
            "required content to it or leave it unchanged.",
            paths=[name],
        )


class ForbiddenPatterns(Rule):
    """Added lines in files matching ``globs`` must not match any of ``patterns``.

    Patterns are RE2 regular expressions (linear time: no backreferences or lookaround),
    searched anywhere in each line; globs match in any case.

    With ``lines = "removed"`` the rule checks removed lines instead (each removed copy
    counts: a second ``run: pytest`` step dropped from a workflow is a removal). With
    ``lines = "dropped"`` only lines that no longer appear anywhere in the file count
    (for ignore lists, where removing a duplicate copy of a rule changes nothing).
    """

    type: Literal["forbidden_patterns"] = "forbidden_patterns"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    patterns: tuple[str, ...] = Field(description="RE2 regular expressions, searched per line.")
    globs: tuple[str, ...] = ("**",)
    description: str = Field(default="", description="What the patterns catch, for the reason.")
    lines: Literal["added", "removed", "dropped"] = "added"
    action: Action = "reject"

    _check_globs = field_validator("globs")(validate_globs)

    @field_validator("patterns")
    @classmethod
    def _compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        if not patterns:
            raise ValueError("give at least one pattern")
        for pattern in patterns:
            compile_re2(pattern)
        return patterns

    def check(self, evidence: Evidence, /) -> Verdict | None:
        search = _any_of(self.patterns)
        memo = analysis_of(evidence)
        found: dict[str, list[int]] = {}
        binary: list[str] = []
        removed = self.lines != "added"
        kept: dict[str, set[str]] = {}
        for path, number, line in added_text_lines(evidence, self.globs, removed=removed):
            if line is None or number is None:
                binary.append(path)
                continue
            if self.lines == "dropped":
                if path not in kept:
                    kept[path] = set(memo.lines(evidence.after_bytes(path)))
                if line in kept[path]:
                    continue  # another copy of the line stays
            if search(line) is not None:
                found.setdefault(path, []).append(number)
        hits = located(found)
        what = self.description or "a forbidden pattern"
        if hits and removed:
            return self.verdict(
                self.action,
                f"{describe_paths(hits)} {'removes' if len(hits) == 1 else 'remove'} {what}; "
                "put those lines back and keep them.",
                paths=list(found),
            )
        if hits:
            return self.verdict(
                self.action,
                f"{describe_paths(hits)} {'adds' if len(hits) == 1 else 'add'} {what}; "
                "remove those lines and do not add them back in another form.",
                paths=list(found),
            )
        if binary:
            return self.verdict(
                "review",
                f"{describe_paths(binary)} is binary and cannot be checked for {what}; "
                "write text files only, or ask a human to review it.",
                paths=binary,
            )
        return None
