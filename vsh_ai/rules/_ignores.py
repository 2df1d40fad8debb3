"""``ignore_reincludes``: a ``!`` rule in an ignore file must not re-include secret files.

A re-include is judged by what it can match, with git's pattern rules (a pattern without
a slash matches a name at any depth, ``/`` anchors it to the ignore file's folder, a
trailing ``/`` matches folders and so everything inside; wcmatch matches each piece):

- *re-includes secrets* (the rule's ``action``, reject by default) when it matches an
  example of a ``secret_paths`` glob (``.env``, ``x.pem``, ``secrets/x``...), or when the
  name it spells (wildcards filled in) matches one and is not a ``public`` path
  (``.env.example``, ``id_ed25519.pub``);
- *unclear* (review) when it uses character classes or escapes this check does not model;
- otherwise fine: ``!docs/*.md`` or ``!.env.example`` re-include nothing secret.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator
from wcmatch import fnmatch, glob

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._memo import analysis_of
from ._base import Action, GlobFields, Rule, describe_paths
from ._glob import check_globs, matching

__all__ = ("IgnoreReincludes",)

_FILLS = ("", "x")
_MAX_REINCLUDES = 40
"""More added ``!`` rules than this in one file are reviewed, not traced one by one."""
_GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE
_NAME_FLAGS = fnmatch.DOTMATCH
_UNMODELLED = re.compile(r"[\[\]\\]")


@functools.lru_cache(maxsize=1024)
def _examples(secret: str) -> tuple[str, ...]:
    """Concrete paths a root-anchored secret glob matches (wildcards filled in)."""
    out: list[str] = []
    for variant in _braces(secret):
        body = variant[3:] if variant.startswith("**/") else variant
        body = body.replace("/**", "/x")
        pieces = re.split(r"\*+|\?", body)
        for fills in itertools.product(_FILLS, repeat=len(pieces) - 1):
            name = pieces[0] + "".join(f + p for f, p in zip(fills, pieces[1:], strict=True))
            if name and "[" not in name:
                out.append(name)
    return tuple(out)


def _braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    return [
        variant
        for option in match.group(1).split(",")
        for variant in _braces(pattern[: match.start()] + option + pattern[match.end() :])
    ]


def _matches(pattern: str, relative: str) -> bool:
    """Whether the git pattern (no ``!``) re-includes ``relative`` or a folder above it."""
    directory = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    anchored = "/" in pattern
    pattern = pattern.lstrip("/")
    parts = relative.split("/")
    for end in range(1, len(parts) + 1):
        if directory and end == len(parts):
            break  # the path itself is a file: a folder pattern matches only above it
        prefix = "/".join(parts[:end])
        if anchored:
            if glob.globmatch(prefix, pattern, flags=_GLOB_FLAGS):
                return True
        elif fnmatch.fnmatch(parts[end - 1], pattern, flags=_NAME_FLAGS):
            return True
    return False


_SECRET_WORDS = re.compile(
    r"(?i)(env|pem|key|secret|credential|token|passw|p12|pfx|id_|settings|vault|\.ssh|\.aws)"
)


def _folders(pattern: str) -> list[str]:
    """The literal folders a pattern names before its first wildcard (``a``, ``a/b``)."""
    pieces = pattern.strip("/").split("/")[:-1]
    out: list[str] = []
    for piece in pieces:
        if not piece or any(c in piece for c in "*?"):
            break
        out.append(f"{out[-1]}/{piece}" if out else piece)
    return out


def _secret_ignores(text: str) -> tuple[str, ...]:
    """The file's ignore rules that name secrets (``settings.toml``, ``/secrets/``), as
    globs relative to its folder: what a later ``!`` rule must not undo."""
    out: list[str] = []
    for line in text.splitlines():
        body = line.strip()
        if not body or body.startswith(("#", "!")) or not _SECRET_WORDS.search(body):
            continue
        if _UNMODELLED.search(body):
            continue
        directory = body.endswith("/")
        body = body.rstrip("/")
        glob_ = body.lstrip("/") if "/" in body else f"**/{body}"
        out.append(f"{glob_}/**" if directory else glob_)
    return tuple(out)


class IgnoreReincludes(Rule):
    """Added ``!`` lines in ignore files must not re-include ``secret_paths``."""

    type: Literal["ignore_reincludes"] = "ignore_reincludes"
    glob_fields: ClassVar[GlobFields] = (
        ("globs", False),
        ("secret_paths", True),
        ("public", True),
    )
    globs: tuple[str, ...] = Field(
        default=("**/.gitignore", "**/.dockerignore"), description="The ignore files."
    )
    secret_paths: tuple[str, ...] = Field(description="Globs of secret-bearing paths.")
    public: tuple[str, ...] = Field(
        default=(
            "**/*.example",
            "**/*.sample",
            "**/*.template",
            "**/*.dist",
            "**/*.pub",
            "**/*.example.*",
            "**/*.sample.*",
            "**/*.template.*",
        ),
        description="Globs of paths that are public although a secret glob matches them.",
    )
    action: Action = "reject"
    description: str = Field(default="", description="What this rule is for.")

    _check_globs = field_validator("globs", "secret_paths", "public")(check_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        memo = analysis_of(evidence)
        secret: dict[str, str] = {}
        unclear: dict[str, str] = {}
        for change in evidence.changes:
            if change.after is None or matching(self.globs, change.path) is None:
                continue
            try:
                added = memo.new_lines(change.path)
            except (EvidenceGap, ValueError):
                added = None
            if added is None:
                unclear[change.path] = "its lines cannot be read"
                continue
            folder = change.path.rpartition("/")[0]
            ignored = _secret_ignores(evidence.before_text(change.path) or "")
            negations = [(n, line.strip()) for n, line in added if line.strip().startswith("!")]
            if len(negations) > _MAX_REINCLUDES:
                unclear[f"{change.path} ({len(negations)} `!` rules)"] = "too many to check"
                continue
            for number, body in negations:
                found = self._judge(body[1:].strip(), folder, ignored)
                where = f"{change.path} line {number} (`{body[:80]}`)"
                if found == "unclear":
                    unclear[where] = found
                elif found is not None:
                    secret[where] = found
        if secret:
            first = next(iter(secret.values()))
            return self.verdict(
                self.action,
                f"{describe_paths(secret)} re-include{'s' if len(secret) == 1 else ''} "
                f"secret files (it matches {first}); remove the `!` rule and keep secret "
                "files ignored.",
                paths=[w.split(" line ")[0] for w in secret],
            )
        if unclear:
            return self.verdict(
                "review",
                f"{describe_paths(unclear)} re-include{'s' if len(unclear) == 1 else ''} "
                "files with a pattern this check cannot read (character classes or "
                "escapes, or more `!` rules than it traces); spell them plainly, or ask a "
                "human to review it.",
                paths=[w.split(" line ")[0] for w in unclear],
            )
        return None

    def _private(self, examples: tuple[str, ...]) -> list[str]:
        """The examples no ``public`` glob matches (each decided once per rule)."""
        cache: dict[str, bool] = self.__dict__.setdefault("_public_cache", {})
        out: list[str] = []
        for example in examples:
            private = cache.get(example)
            if private is None:
                private = cache[example] = matching(self.public, example, ignore_case=True) is None
            if private:
                out.append(example)
        return out

    def _judge(self, pattern: str, folder: str, ignored: tuple[str, ...] = ()) -> str | None:
        """A secret path the pattern re-includes, "unclear", or None (nothing secret).

        Examples of a secret glob at any depth are tried at the root and under each folder
        the pattern names (``!config/*`` re-includes ``config/.env``); ``ignored`` are the
        file's own ignore rules that name secrets (``settings.toml``), tried the same way.
        """
        if not pattern or _UNMODELLED.search(pattern):
            return "unclear" if pattern else None
        prefixes = _folders(pattern)
        for secret in (*self.secret_paths, *ignored):
            rooted = not secret.startswith("**/")
            if rooted and folder and secret not in ignored:
                continue  # a root-anchored glob: nothing below another folder matches it
            examples = self._private(_examples(secret))
            if not rooted:
                examples += self._private(tuple(f"{p}/{e}" for p in prefixes for e in examples))
            for example in examples:
                if _matches(pattern, example):
                    return example
        spelled = pattern.strip("/").replace("**", "x").replace("*", "x").replace("?", "x")
        candidates = (
            [spelled, spelled + "/x"] if pattern.endswith("/") or "*" in pattern else [spelled]
        )
        for name in candidates:
            path = f"{folder}/{name}" if folder else name
            if (
                matching(self.secret_paths, path, ignore_case=True) is not None
                and matching(self.public, path, ignore_case=True) is None
            ):
                return path
        return None
