"""``may_change`` key patterns: key paths whose last segment may glob a name."""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Hashable, Mapping
from functools import lru_cache
from typing import Any

from ..analysis._config import (
    check_key_pattern,
    key_matches,
    name_matches,
    typed_equal,
    typed_key,
)
from ..analysis._config_keys import _segments
from ..analysis._config_words import canonical_key, snake, words

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
    """True when ``key`` matches ``pattern`` as written, or once both are read as words
    (``**.*timeout_ms`` matches ``server.readTimeoutMs`` and ``read-timeout-ms``)."""
    if _spelled_matches(pattern, key):
        return True
    if _dotted_words_match(pattern, key):
        return True
    words_key = canonical_key(key)
    words_pattern = _canonical_pattern(pattern)
    if words_key == key and words_pattern == pattern:
        return False
    return _spelled_matches(words_pattern, words_key)


_DOTTED_WORDS = 4


def _dotted_words_match(pattern: str, key: str) -> bool:
    """``**.<name glob>`` against the key's last few segments read as one name's words:
    ``zookeeper.connection.timeout.ms`` (a ``.properties`` key) is a ``*timeout_ms``."""
    structural, name = name_glob(pattern)
    if structural != "**.*" or name is None:
        return False
    names = [str(s[1]) for s in _segments(key, False)] if "." in key else []
    if len(names) < 2 or any(s[0] != "key" for s in _segments(key, False)[-_DOTTED_WORDS:]):
        return False
    glob = _glob_snake(name)
    for width in range(2, min(_DOTTED_WORDS, len(names)) + 1):
        joined = "_".join(snake(n) for n in names[-width:])
        if name_matches(glob, joined):
            return True
    return False


_GLOB_PIECES = re.compile(r"([*?]+)")


def _glob_snake(glob: str) -> str:
    """A name glob's literal pieces snake-cased (``*TimeoutMs`` -> ``*timeout_ms``)."""
    out: list[str] = []
    for piece in _GLOB_PIECES.split(glob):
        if not piece or piece[0] in "*?" or not words(piece):
            out.append(piece)
            continue
        lead = "_" if piece[0] in "_-" else ""
        trail = "_" if piece[-1] in "_-" else ""
        out.append(lead + snake(piece) + trail)
    return "".join(out)


@lru_cache(maxsize=1024)
def _canonical_pattern(pattern: str) -> str:
    structural, name = name_glob(pattern)
    parts: list[str] = []
    for segment in _segments(structural, True):
        tag = segment[0]
        if tag == "index":
            parts.append(f"[{segment[1]}]")
        elif tag == "any_index":
            parts.append("[*]")
        else:
            text = {"any_key": "*", "any": "**"}.get(tag) or json.dumps(snake(segment[1]))
            parts.append(("." if parts else "") + text)
    joined = "".join(parts)
    if name is None:
        return joined
    return joined[: -len("*")] + _glob_snake(name) if joined.endswith("*") else joined


def _spelled_matches(pattern: str, key: str) -> bool:
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
    keys = [typed_key(item) for item in old]
    places: dict[Hashable, list[int]] = {}  # typed key -> positions in ``old``, ascending
    for position, key in enumerate(keys):
        places.setdefault(key, []).append(position)
    new_keys = [typed_key(item) for item in new]
    if None in places or None in new_keys:
        return _list_diff_by_scan(old, new)  # a value without a typed key (never parsed)
    added: list[Any] = []
    removed: list[Any] = []
    index = 0
    for item, key in zip(new, new_keys, strict=True):
        if index < len(old) and keys[index] == key:
            index += 1
            continue
        found = places.get(key, ())
        at = bisect_left(found, index)
        if at < len(found):  # the next equal old item: the ones before it are skipped
            removed.extend(old[index : found[at]])
            index = found[at] + 1
        else:
            added.append(item)
    removed.extend(old[index:])
    return added, removed


def _list_diff_by_scan(old: list[Any], new: list[Any]) -> tuple[list[Any], list[Any]]:
    """:func:`list_diff` by comparing values one by one (quadratic; for values that
    :func:`typed_key` cannot stand in for)."""
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
