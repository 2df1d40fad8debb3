"""Path globs with ``**`` semantics, compiled once to a regular expression.

* ``*`` matches within one path segment, ``?`` one character, ``[abc]`` a class;
* ``**`` matches any number of whole segments (``src/**`` is ``src`` and all below it);
* a pattern without ``/`` matches the file name at any depth (``*.log``, ``.env``);
* a trailing ``/``, a ``.`` or ``..`` segment and ``//`` are refused: paths are canonical,
  so such a glob would silently match less than it seems to.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ("check_globs", "glob_matches", "glob_regex", "matching")


@lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a path glob (see module docs) to an anchored regex."""
    glob = pattern.strip().removeprefix("./").removeprefix("/workspace/").lstrip("/")
    if not glob:
        raise ValueError("an empty glob matches nothing; use '**' for every path")
    # Paths are canonical, so these spellings would silently match less than they seem
    # to (for a deny rule or a withhold list, a bypass): refuse them with the fix.
    if glob.endswith("/"):
        name = glob.rstrip("/")
        raise ValueError(
            f"glob {pattern!r} ends with '/': write '{name}/**' for the directory and "
            f"everything in it, or '{name}' for the entry itself"
        )
    for bad in (".", ".."):
        if bad in glob.split("/"):
            raise ValueError(f"glob {pattern!r} has a {bad!r} segment; write the canonical path")
    if "" in glob.split("/"):
        raise ValueError(f"glob {pattern!r} has an empty segment ('//'); write one '/'")
    if "/" not in glob and glob != "**":
        glob = "**/" + glob
    parts = glob.split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment(part) + ("" if last else "/"))
    regex = "".join(out)
    if regex.endswith("/.*"):  # 'dir/**' also matches 'dir' itself
        regex = regex[: -len("/.*")] + "(?:/.*)?"
    return re.compile(regex + r"\Z", re.DOTALL)


def _segment(part: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        char = part[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := part.find("]", i + 2)) != -1:
            body = part[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def check_globs(globs: tuple[str, ...]) -> tuple[str, ...]:
    """``globs`` unchanged once each compiles: a bad glob fails at load time, naming the fix."""
    for glob in globs:
        glob_regex(glob)
    return globs


def glob_matches(pattern: str, path: str) -> bool:
    """True when the workspace-relative ``path`` matches ``pattern``."""
    return glob_regex(pattern).match(path) is not None


@lru_cache(maxsize=1024)
def _any_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    body = "|".join(f"(?:{glob_regex(p).pattern})" for p in patterns) or "(?!)"
    return re.compile(body, re.DOTALL)


def matching(patterns: tuple[str, ...] | list[str], path: str) -> str | None:
    """The first pattern that matches ``path``, or None (one regex test when none match)."""
    if _any_regex(tuple(patterns)).match(path) is None:
        return None
    return next((p for p in patterns if glob_matches(p, path)), None)
