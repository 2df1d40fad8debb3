"""``may_change`` key patterns: key paths whose last segment may glob a name."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..analysis._config import check_key_pattern, key_matches, name_matches, typed_equal

__all__ = ("list_diff", "name_glob", "pattern_matches", "split_key", "subtree")


_SEGMENT = re.compile(r'\[(\d+)\]|"((?:[^"\\]|\\.)*)"|([^.\[\]"]+)')


@lru_cache(maxsize=65536)
def split_key(key: str) -> tuple[tuple[int, str | int], ...]:
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
def name_glob(pattern: str) -> tuple[str, str | None]:
    """``(structural pattern, last-segment name glob or None)``; ValueError if invalid.

    The last segment may glob a mapping key's name (``**.*_timeout_s``); every other
    segment is H2's key-pattern syntax (``*`` one key, ``[*]`` one index, ``**`` any).
    """
    parts = split_key(pattern)
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
def pattern_matches(pattern: str, key: str) -> bool:
    structural, name = name_glob(pattern)
    if not key_matches(structural, key):
        return False
    if name is None:
        return True
    parts = split_key(key)
    return bool(parts) and isinstance(parts[-1][1], str) and name_matches(name, parts[-1][1])


def list_diff(old: list[Any], new: list[Any]) -> tuple[list[Any], list[Any]]:
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


def subtree(tree: Any, segments: list[str | int], missing: object) -> Any:
    node = tree
    for segment in segments:
        in_list = isinstance(segment, int) and isinstance(node, list) and segment < len(node)
        in_table = isinstance(segment, str) and isinstance(node, Mapping) and segment in node
        if in_list or in_table:
            node = node[segment]
        else:
            return missing
    return node
