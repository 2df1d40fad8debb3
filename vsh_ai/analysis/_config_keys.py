"""Key paths, :func:`flatten`, :func:`lookup` and key patterns (see :mod:`._config`)."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from threading import Lock
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2: linear time on agent-written keys

from ._config_types import MISSING, ConfigSyntaxError, PathKeys

__all__ = (
    "check_key_pattern",
    "flatten",
    "key_matches",
    "linear_regex",
    "lookup",
    "matchable",
    "name_matches",
)

# -- key paths -----------------------------------------------------------------------

_BARE = re.compile(r'[^.\[\]"\s*]+')
_TOKEN = re.compile(
    r'(?P<dot>\.)|\[(?P<index>\d+|\*)\]|(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<bare>[^.\[\]"\s]+)'
)

# A segment: ("key", name) | ("index", n) | ("any_key",) | ("any_index",) | ("any",)
_Segment = tuple[Any, ...]


def _name(name: str) -> str:
    return name if _BARE.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return repr(key)
    isoformat = getattr(key, "isoformat", None)
    if callable(isoformat):
        return str(isoformat())
    raise ConfigSyntaxError(f"a mapping key must be a scalar, not {type(key).__name__}")


@lru_cache(maxsize=65536)
def _segments(text: str, pattern: bool) -> tuple[_Segment, ...]:
    """Parse a key path (or, with ``pattern``, a key pattern); ValueError when malformed."""
    out: list[_Segment] = []
    position = 0
    expect_name = True  # at the start or after '.'
    after_dot = False
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"key path {text!r}: unexpected {text[position]!r} at {position}")
        position = match.end()
        if match["dot"]:
            if expect_name:
                raise ValueError(f"key path {text!r}: empty segment at {match.start()}")
            expect_name = after_dot = True
            continue
        if match["index"] is not None:
            if after_dot:
                raise ValueError(f"key path {text!r}: write 'a[0]', not 'a.[0]'")
            if match["index"] == "*":
                if not pattern:
                    raise ValueError(f"key path {text!r}: '[*]' is a pattern, not a key")
                out.append(("any_index",))
            else:
                out.append(("index", int(match["index"])))
            expect_name = after_dot = False
            continue
        if not expect_name:
            raise ValueError(f"key path {text!r}: missing '.' before {match[0]!r}")
        if match["quoted"]:
            out.append(("key", json.loads(match["quoted"])))
        else:
            bare = match["bare"]
            if pattern and bare == "*":
                out.append(("any_key",))
            elif pattern and bare == "**":
                out.append(("any",))
            elif "*" in bare:
                raise ValueError(
                    f"key pattern {text!r}: '*' must be a whole segment ('a.*', 'a[*]', "
                    f"'**'); quote a key that contains '*' (\"{bare}\")"
                )
            else:
                out.append(("key", bare))
        expect_name = after_dot = False
    if expect_name and out:
        raise ValueError(f"key path {text!r} ends with '.'")
    return tuple(out)


def _join(segments: tuple[_Segment, ...]) -> str:
    parts: list[str] = []
    for segment in segments:
        if segment[0] == "index":
            parts.append(f"[{segment[1]}]")
        else:
            parts.append(("." if parts else "") + _name(segment[1]))
    return "".join(parts)


@lru_cache(maxsize=65536)
def _path_like(key: str) -> str:
    """A flat-format key as a key path: itself when it is a canonical key path, else quoted."""
    try:
        segments = _segments(key, False)
    except ValueError:
        return _name(key)
    return key if segments and _join(segments) == key else _name(key)


_MAX_DEPTH = 200
_FLAT: OrderedDict[int, tuple[Any, dict[str, Any]]] = OrderedDict()
_FLAT_LOCK = Lock()
_FLAT_ENTRIES = 4096


def flatten(tree: Any) -> dict[str, Any]:
    """Every leaf of ``tree`` by key path (see the module docs), in document order.

    Raises :class:`ConfigSyntaxError` when two spellings flatten to one key path, or when
    the tree nests deeper than 200 levels. The result is cached per tree object (trees
    from :func:`parse_config` are shared): treat it as read-only.
    """
    if tree is None or tree is MISSING:
        return {}
    with _FLAT_LOCK:
        hit = _FLAT.get(id(tree))
        if hit is not None and hit[0] is tree:
            return hit[1]
    out: dict[str, Any] = {}
    if not _is_container(tree):
        out[""] = tree  # a top-level scalar
    elif tree:
        _flatten_into(out, tree, "", 0)
    if isinstance(tree, Mapping | list | tuple):
        with _FLAT_LOCK:
            _FLAT[id(tree)] = (tree, out)
            while len(_FLAT) > _FLAT_ENTRIES:
                _FLAT.popitem(last=False)
    return out


_SCALAR_TYPES = frozenset((str, int, float, bool, type(None)))
_NAMES: dict[str, str] = {}


def _name_of(key: Any) -> str:
    """A mapping key's key-path segment (string keys memoised; others by type)."""
    if type(key) is str:
        name = _NAMES.get(key)
        if name is None:
            name = _name(key)
            if len(_NAMES) < 65536:
                _NAMES[key] = name
        return name
    return _name(_key_text(key))


def _flatten_into(out: dict[str, Any], node: Any, prefix: str, depth: int) -> None:
    if depth >= _MAX_DEPTH:
        raise ConfigSyntaxError(f"{prefix[:60]!r}... nests deeper than {_MAX_DEPTH} levels")
    scalars = _SCALAR_TYPES
    if isinstance(node, list | tuple):
        for index, value in enumerate(node):
            path = f"{prefix}[{index}]"
            if type(value) in scalars or not _is_container(value) or not value:
                if path in out:
                    _spelled_twice(path)
                out[path] = value
            else:
                _flatten_into(out, value, path, depth + 1)
        return
    name = _path_like if isinstance(node, PathKeys) else _name_of
    for key, value in node.items():
        segment = name(key)
        if not prefix:
            path = segment
        elif segment[0] == "[":
            path = prefix + segment
        else:
            path = f"{prefix}.{segment}"
        if type(value) in scalars or not _is_container(value) or not value:
            if path in out:
                _spelled_twice(path)
            out[path] = value
        else:
            _flatten_into(out, value, path, depth + 1)


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple | Mapping)


def _spelled_twice(key: str) -> None:
    raise ConfigSyntaxError(f"key {key!r} is spelled twice (two keys flatten to it)")


def lookup(tree: Any, key: str) -> Any:
    """The value at key path ``key`` in ``tree`` (a leaf or a whole subtree), or MISSING.

    Consistent with :func:`flatten` in every format (``server`` in ``.properties`` with
    ``server.port=1`` is ``{"port": "1"}``): a subtree is rebuilt from its leaves, with
    lists where the indices run 0..n-1 and dicts (int keys) otherwise. Raises
    :class:`ConfigSyntaxError` when a flat format gives a key both a value and members
    (``logging.level=INFO`` and ``logging.level.root=DEBUG``, asked for ``logging``).
    """
    flat = flatten(tree)
    if key in flat:
        return flat[key]
    target = _segments(key, False)
    key = _join(target)  # the canonical spelling ('"a"' is 'a')
    if key in flat:
        return flat[key]
    width = len(target)
    below: list[tuple[tuple[_Segment, ...], Any]] = []
    for path, value in flat.items():
        if key and not path.startswith(key):
            continue
        segments = _segments(path, False)
        if segments[:width] == target and len(segments) > width:
            below.append((segments[width:], value))
    if not below:
        return MISSING
    return _rebuild(below)


def _rebuild(entries: list[tuple[tuple[_Segment, ...], Any]]) -> Any:
    groups: dict[Any, list[tuple[tuple[_Segment, ...], Any]]] = {}
    leaves: dict[Any, Any] = {}
    heads: dict[Any, None] = {}
    for segments, value in entries:
        head = segments[0][1]
        heads[head] = None
        if len(segments) == 1:
            leaves[head] = value
        else:
            groups.setdefault(head, []).append((segments[1:], value))
    node: dict[Any, Any] = {}
    for head in heads:
        if head in leaves and head in groups:
            raise ConfigSyntaxError(f"key {head!r} is both a value and a table here")
        node[head] = leaves[head] if head in leaves else _rebuild(groups[head])
    if node and all(type(k) is int for k in node) and sorted(node) == list(range(len(node))):
        return [node[index] for index in range(len(node))]
    return node


def check_key_pattern(pattern: str) -> str:
    """``pattern`` unchanged once it parses; ValueError naming the problem otherwise."""
    _segments(pattern, True)
    return pattern


def key_matches(pattern: str, key: str) -> bool:
    """True when the key path ``key`` matches ``pattern`` (see the module docs).

    Linear time in the key (RE2 over an encoding of its segments): keys come from files
    the agent writes, and ``**`` backtracking over a deep key is polynomial in its depth.
    """
    return _pattern_regex(pattern).fullmatch(_encoded(key)) is not None


def linear_regex(pattern: str) -> Any:
    """``pattern`` compiled with RE2 (linear-time matching; no backreferences/lookaround)."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


def matchable(text: str) -> str:
    """``text`` as RE2 can match it: a lone surrogate (JSON ``"\\ud800"``) becomes U+FFFD.

    One code point for one, so ``?`` and ``*`` match as before; RE2 takes only UTF-8.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


# A key path as RE2 sees it: each segment is NUL, a tag (k: mapping key, i: list index) and
# the key as JSON text (ASCII, NUL escaped) or the index in decimal. Patterns compile to
# regexes over the same encoding, so matching is exactly segment-by-segment equality.
_KEY_SEGMENT = r"\x00k[^\x00]*"
_INDEX_SEGMENT = r"\x00i[0-9]+"


def _encode(segments: tuple[_Segment, ...]) -> str:
    return "".join(
        f"\x00i{segment[1]}" if segment[0] == "index" else "\x00k" + json.dumps(segment[1])
        for segment in segments
    )


@lru_cache(maxsize=65536)
def _encoded(key: str) -> str:
    return _encode(_segments(key, False))


@lru_cache(maxsize=4096)
def _pattern_regex(pattern: str) -> Any:
    parts: list[str] = []
    for segment in _segments(pattern, True):
        if segment[0] == "any":
            parts.append(r"(?:\x00[^\x00]*)*")
        elif segment[0] == "any_key":
            parts.append(_KEY_SEGMENT)
        elif segment[0] == "any_index":
            parts.append(_INDEX_SEGMENT)
        elif segment[0] == "index":
            parts.append(rf"\x00i{segment[1]}")
        else:
            parts.append(r"\x00k" + re.escape(json.dumps(segment[1])))
    return linear_regex("".join(parts))


@lru_cache(maxsize=4096)
def _name_regex(glob: str) -> Any:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return linear_regex("(?s)" + body)


def name_matches(glob: str, name: str) -> bool:
    """``fnmatchcase(name, glob)`` for a key-name glob (``*``, ``?``, no classes), in
    linear time (RE2): ``*a*a*a*b`` against a long agent-written name never backtracks."""
    return _name_regex(glob).fullmatch(matchable(name)) is not None
