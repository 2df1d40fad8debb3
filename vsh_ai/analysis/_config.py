"""Typed config trees for TOML, JSON, YAML, INI/CFG/CONF, ``.env`` and ``.properties``.

:func:`parse_config` turns complete file bytes into a plain tree (dicts, lists, scalars);
:func:`flatten` lists every leaf by **key path**; :func:`config_changes` says which key
paths a change added, removed or changed, comparing values with :func:`typed_equal`.

Key paths
    ``server.port``; list items by index, ``upstreams[0].verify_tls``, ``hosts[2]``; a top
    level list starts with its index (``[0].name``). A key that is empty or contains
    ``.``, ``[``, ``]``, ``"``, ``*`` or whitespace is written as a JSON string:
    ``"a.b"``, ``servers."my host".port``. Empty dicts and lists are leaves (``{}``,
    ``[]``); an empty file has no leaves; a top-level scalar is the key ``""``. Two
    spellings that flatten to one key path (YAML ``1:`` and ``"1":``) raise
    :class:`ConfigSyntaxError`: one could hide a change to the other.

    In the flat formats (``.env``, ``.properties``) and in INI section and option names,
    a key that is itself a valid key path is read as one: ``server.port=8080`` in
    ``application.properties`` is the key path ``server.port``, as in YAML
    ``server: {port: 8080}``, and ``servers[0].host`` is indexed. Any other key is quoted.

Key patterns (:func:`key_matches`, case-sensitive)
    The key-path syntax plus three wildcards, each a whole segment: ``.*`` (or a leading
    ``*``) matches exactly one mapping key, ``[*]`` exactly one list index, ``**`` zero or
    more segments of either kind. So ``features.*`` matches ``features.beta`` but not
    ``features[0]`` or ``features.beta.level``; write ``upstreams[*].weight`` for every
    upstream's weight and ``**.port`` for a ``port`` at any depth. A quoted ``"*"`` is a
    literal key. A ``*`` inside a segment (``log_*``) is refused: no partial matches.

Typed values
    :func:`typed_equal` holds only for the same type and value: ``true`` is not ``1``,
    ``"1"`` is not ``1``, and ``1`` (int) is not ``1.0`` (float): a type change is a change.
    INI, ``.env`` and ``.properties`` values are always strings; rules coerce them.

Formats
    TOML via tomli (:mod:`vsh_ai._toml`: ``tomllib``, compiled). JSON with duplicate keys
    and ``NaN``/``Infinity`` refused.
    YAML with PyYAML's safe loader only (on libyaml, ``yaml.CSafeLoader``, when PyYAML
    has it; else the pure ``yaml.SafeLoader``): anchors and aliases resolved, merge keys
    ``<<: *base`` and ``<<: [*a, *b]`` resolved as the YAML merge spec says (explicit keys
    win, then earlier mappings in the list), explicit duplicate keys refused (a merged key
    is not a duplicate), documents expanding past 100,000 nodes or recursive aliases
    refused (alias bombs), flow collections nested more than 100 deep refused (aliases
    and ``[a: b]`` pairs count), a byte order mark after the start refused (the two
    loaders read it differently; otherwise what both accept they read alike, but libyaml
    accepts some text the pure loader refuses, such as tabs between tokens), one document
    is the tree, several are a list (``[0]``,
    ``[1]``...), none is an empty file. Values follow YAML 1.1 as PyYAML reads them
    (``yes``/``on`` are ``true``), but a mapping key spelled ``on``/``off``/``yes``/``no``
    stays a string (GitHub Actions' ``on:`` is the key ``on``, not ``true``); a Compose
    ``environment:`` list of ``KEY=value`` strings is the mapping it means
    (:mod:`._config_shapes`).
    INI/CFG/CONF via :mod:`configparser`: a file with no ``[section]`` header is read
    as nginx-style blocks or ``key value`` lines (:mod:`._config_directives`; a change
    between the two syntaxes is one change of the whole file, key ``""``). INI is strict
    (duplicate sections and options refused), no interpolation, section and option names
    case-sensitive as written; sections hold their effective values (``DEFAULT`` values
    included) and ``DEFAULT`` itself is a section when present; ``;``/``#`` start only
    whole-line comments. ``.env``: ``KEY=VALUE`` lines, optional ``export``, single quotes
    literal, double quotes with ``\\n``/``\\"``/``\\\\`` escapes (and multi-line), ``#``
    comments (inline after whitespace for unquoted values), no ``${VAR}`` expansion,
    duplicates refused, and a file python-dotenv (what applications load ``.env`` with)
    reads differently is refused. ``.properties``: Java rules (``=``, ``:`` or whitespace
    separators, ``\\`` continuations, ``\\uXXXX`` escapes, ``#``/``!`` comments) via
    ``javaproperties``, duplicates refused, more than 1,000 continuation lines in a
    row (or very long continued entries) refused. Bytes are UTF-8 (a BOM is ignored).

Parsed trees are cached by content hash and shared: treat them as read-only.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from functools import lru_cache
from threading import Lock
from typing import Any

from .. import _toml
from ._config_directives import DirectiveKeys
from ._config_formats import parse_env, parse_ini, parse_json, parse_properties
from ._config_keys import _FLAT as _FLAT  # a result cache benchmarks/rules.py clears
from ._config_keys import (
    check_key_pattern,
    flatten,
    key_matches,
    linear_regex,
    lookup,
    matchable,
    name_matches,
)
from ._config_shapes import environment_mappings
from ._config_types import MISSING, ConfigFormat, ConfigSyntaxError, KeyChange
from ._config_yaml import parse_yaml

__all__ = (
    "MISSING",
    "ConfigFormat",
    "ConfigSyntaxError",
    "KeyChange",
    "TypedSet",
    "check_key_pattern",
    "config_changes",
    "detect_format",
    "flatten",
    "key_matches",
    "linear_regex",
    "lookup",
    "matchable",
    "name_matches",
    "parse_config",
    "typed_equal",
    "typed_key",
)

# -- formats -------------------------------------------------------------------------

_SUFFIXES: dict[str, ConfigFormat] = {
    ".toml": "toml",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".ini": "ini",
    ".cfg": "ini",
    ".conf": "ini",
    ".env": "env",
    ".properties": "properties",
}


@lru_cache(maxsize=4096)
def detect_format(path: str) -> ConfigFormat:
    """The format a file name implies: by suffix, ``.env`` and ``.env.*``; else ``auto``."""
    name = path.rsplit("/", 1)[-1].lower()
    if name == ".env" or name.startswith(".env."):
        return "env"
    dot = name.rfind(".")
    return _SUFFIXES.get(name[dot:], "auto") if dot > 0 or name == ".env" else "auto"


_PARSED: OrderedDict[tuple[bytes, str], tuple[Any, int]] = OrderedDict()
_PARSED_LOCK = Lock()
# Enough entries that every file of a large change stays parsed while each rule reads it
# (several rules read the same files: a smaller cache re-parses them all per rule), bounded
# by the bytes parsed, not only by their number.
_CACHE_ENTRIES = 65536
_CACHE_TOTAL_BYTES = 64 * 1024 * 1024
_CACHE_MAX_BYTES = 1024 * 1024  # the review budget: every file a decision reads stays parsed once
_cached_bytes = 0


def parse_config(data: bytes, fmt: ConfigFormat = "auto", path: str = "") -> Any:
    """Parse complete config bytes into a tree; :class:`ConfigSyntaxError` on bad input.

    ``fmt="auto"`` takes the format from ``path`` (:func:`detect_format`). Results are
    cached by content hash and shared between callers: never modify them.
    """
    if fmt == "auto":
        fmt = detect_format(path)
        if fmt == "auto":
            raise ConfigSyntaxError(f"cannot tell the config format of {path!r}; name it")
    key = (hashlib.sha256(data).digest(), fmt)
    global _cached_bytes
    with _PARSED_LOCK:
        if key in _PARSED:
            _PARSED.move_to_end(key)
            return _PARSED[key][0]
    parsed = _parse(data, fmt, path)
    if len(data) <= _CACHE_MAX_BYTES:
        with _PARSED_LOCK:
            if not _PARSED:
                _cached_bytes = 0  # emptied (tests and benchmarks clear the cache)
            if key not in _PARSED:
                _PARSED[key] = (parsed, len(data))
                _cached_bytes += len(data)
            while _PARSED and (len(_PARSED) > _CACHE_ENTRIES or _cached_bytes > _CACHE_TOTAL_BYTES):
                _cached_bytes -= _PARSED.popitem(last=False)[1][1]
    return parsed


def _parse(data: bytes, fmt: ConfigFormat, path: str) -> Any:
    where = f"{path}: " if path else ""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigSyntaxError(f"{where}not UTF-8 (byte {error.start}: {error.reason})") from None
    try:
        if fmt == "toml":
            return _toml.loads(text)
        if fmt == "json":
            return parse_json(text)
        if fmt == "yaml":
            return environment_mappings(parse_yaml(text))
        if fmt == "ini":
            return parse_ini(text)
        if fmt == "env":
            return parse_env(text)
        if fmt == "properties":
            return parse_properties(text)
    except ConfigSyntaxError as error:
        raise ConfigSyntaxError(f"{where}{error}") from None
    except Exception as error:  # any parser failure is unreadable input, never a crash
        message = " ".join(str(error).split()) or type(error).__name__
        raise ConfigSyntaxError(f"{where}{fmt}: {message}") from None
    raise ConfigSyntaxError(f"unknown config format {fmt!r}")


# -- values --------------------------------------------------------------------------


_PLAIN = frozenset((str, int, bool))


def typed_equal(a: Any, b: Any) -> bool:
    """Same type and same value, recursively (``True`` != ``1`` != ``1.0`` != ``"1"``)."""
    if a is b:
        return True
    kind = type(a)
    if kind is type(b) and kind in _PLAIN:
        return bool(a == b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(typed_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(typed_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    try:
        return bool(a == b)
    except Exception:  # exotic values that refuse comparison are different
        return False


_NAN = object()  # every NaN's key: typed_equal holds between any two NaNs


def typed_key(value: Any) -> Hashable | None:
    """A hashable stand-in for ``value``: two keys are equal exactly when
    :func:`typed_equal` holds for their values (so a set or dict of keys answers "is an
    equal value among these?" at once, where a scan of ``typed_equal`` is quadratic).

    None for a value it cannot stand in for (an unhashable key or scalar of a type parsed
    trees never hold): the caller compares that one with :func:`typed_equal`.
    """
    kind = type(value)
    if kind in _PLAIN:
        return (kind, value)
    if isinstance(value, Mapping):
        pairs = []
        for key, item in value.items():
            inner = typed_key(item)
            if inner is None:
                return None
            pairs.append((key, inner))  # keys compare with ==, as ``keys() ==`` does
        try:
            return (Mapping, frozenset(pairs))
        except TypeError:  # an unhashable mapping key
            return None
    if isinstance(value, list | tuple):
        items = []
        for item in value:
            inner = typed_key(item)
            if inner is None:
                return None
            items.append(inner)
        return (list, tuple(items))  # a list equals a tuple of equal items
    if kind is float and math.isnan(value):
        return (float, _NAN)
    try:
        hash(value)
    except TypeError:
        return None
    return (kind, value)


class TypedSet:
    """Values asked about by :func:`typed_equal` in constant time (by :func:`typed_key`),
    where ``any(typed_equal(x, v) for v in values)`` per item is quadratic."""

    __slots__ = ("_keys", "_unkeyed", "_values")

    def __init__(self, values: Iterable[Any]) -> None:
        self._values = list(values)
        self._keys: set[Hashable] = set()
        self._unkeyed: list[Any] = []
        for value in self._values:
            key = typed_key(value)
            if key is None:
                self._unkeyed.append(value)
            else:
                self._keys.add(key)

    def __contains__(self, value: object) -> bool:
        key = typed_key(value)
        if key is None:  # never in a parsed tree: compared one by one
            return any(typed_equal(value, other) for other in self._values)
        return key in self._keys or any(typed_equal(value, other) for other in self._unkeyed)


def config_changes(before: Any, after: Any) -> tuple[KeyChange, ...]:
    """Every key path whose typed value differs between two trees from :func:`parse_config`.

    ``before``/``after`` may be :data:`MISSING` (a new or deleted file): every key is then
    added or removed. Order: ``before``'s keys, then keys only ``after`` has.
    """
    old = flatten(before)
    new = flatten(after)
    if isinstance(before, DirectiveKeys) != isinstance(after, DirectiveKeys) and (
        before is not MISSING and after is not MISSING
    ):  # INI <-> directive syntax: the application reads one of them, never both
        syntax = ("INI syntax", "directive syntax")
        flip = isinstance(before, DirectiveKeys)
        return (KeyChange("", syntax[flip], syntax[not flip]),)
    changes = [
        KeyChange(key, value, new.get(key, MISSING))
        for key, value in old.items()
        if (key not in new or not typed_equal(value, new[key])) and not _filled(key, value, new)
    ]
    changes.extend(
        KeyChange(key, MISSING, value)
        for key, value in new.items()
        if key not in old and not _filled(key, value, old)
    )
    return tuple(changes)


def _filled(key: str, value: Any, other: dict[str, Any]) -> bool:
    """An empty table (``[coordinator]`` with every option commented out) that the other
    side fills with keys (or empties): the keys under it are the changes, not the table."""
    if not (isinstance(value, Mapping) and not value) or key in other:
        return False
    return any(k.startswith((key + ".", key + "[")) for k in other)
