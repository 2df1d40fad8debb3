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
    TOML via :mod:`tomllib`. JSON with duplicate keys and ``NaN``/``Infinity`` refused.
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
    stays a string (GitHub Actions' ``on:`` is the key ``on``, not ``true``).
    INI/CFG/CONF via :mod:`configparser`: strict
    (duplicate sections and options refused), no interpolation, section and option names
    case-sensitive as written; sections hold their effective values (``DEFAULT`` values
    included) and ``DEFAULT`` itself is a section when present; ``;``/``#`` start only
    whole-line comments. ``.env``: ``KEY=VALUE`` lines, optional ``export``, single quotes
    literal, double quotes with ``\\n``/``\\"``/``\\\\`` escapes (and multi-line), ``#``
    comments (inline after whitespace for unquoted values), no ``${VAR}`` expansion,
    duplicates refused. ``.properties``: Java rules (``=``, ``:`` or whitespace
    separators, ``\\`` continuations, ``\\uXXXX`` escapes, ``#``/``!`` comments) via
    ``javaproperties``, duplicates refused, more than 1,000 continuation lines in a
    row (or very long continued entries) refused. Bytes are UTF-8 (a BOM is ignored).

Parsed trees are cached by content hash and shared: treat them as read-only.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import math
import re
import tomllib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from threading import Lock
from typing import Any, Final, Literal

import javaproperties
import re2  # type: ignore[import-untyped]  # google-re2: linear time on agent-written keys
import yaml

__all__ = (
    "MISSING",
    "ConfigFormat",
    "ConfigSyntaxError",
    "KeyChange",
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
)

ConfigFormat = Literal["auto", "toml", "json", "yaml", "ini", "env", "properties"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""A key's value on a side where the key (or the whole file) does not exist."""


class ConfigSyntaxError(ValueError):
    """Config bytes that cannot be read safely: bad syntax, duplicate or ambiguous keys."""


@dataclass(frozen=True, slots=True)
class KeyChange:
    """One key path whose typed value differs; MISSING on the side where it is absent."""

    key: str
    before: Any
    after: Any


class _PathKeys(dict[str, Any]):
    """A mapping whose keys are themselves key paths (flat formats, INI names)."""


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


_PARSED: OrderedDict[tuple[bytes, str], Any] = OrderedDict()
_PARSED_LOCK = Lock()
_CACHE_ENTRIES = 4096
_CACHE_MAX_BYTES = 256 * 1024


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
    with _PARSED_LOCK:
        if key in _PARSED:
            _PARSED.move_to_end(key)
            return _PARSED[key]
    parsed = _parse(data, fmt, path)
    if len(data) <= _CACHE_MAX_BYTES:
        with _PARSED_LOCK:
            _PARSED[key] = parsed
            while len(_PARSED) > _CACHE_ENTRIES:
                _PARSED.popitem(last=False)
    return parsed


def _parse(data: bytes, fmt: ConfigFormat, path: str) -> Any:
    where = f"{path}: " if path else ""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigSyntaxError(f"{where}not UTF-8 (byte {error.start}: {error.reason})") from None
    try:
        if fmt == "toml":
            return tomllib.loads(text)
        if fmt == "json":
            return _parse_json(text)
        if fmt == "yaml":
            return _parse_yaml(text)
        if fmt == "ini":
            return _parse_ini(text)
        if fmt == "env":
            return _parse_env(text)
        if fmt == "properties":
            return _parse_properties(text)
    except ConfigSyntaxError as error:
        raise ConfigSyntaxError(f"{where}{error}") from None
    except Exception as error:  # any parser failure is unreadable input, never a crash
        message = " ".join(str(error).split()) or type(error).__name__
        raise ConfigSyntaxError(f"{where}{fmt}: {message}") from None
    raise ConfigSyntaxError(f"unknown config format {fmt!r}")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


# JSON


def _parse_json(text: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ConfigSyntaxError(f"duplicate key {key!r}{_json_key_line(text, key)}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ConfigSyntaxError(f"{name} is not JSON{_json_constant_line(text, name)}")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as error:
        raise ConfigSyntaxError(
            f"json: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None


def _json_key_line(text: str, key: str) -> str:
    spelled = re.escape(json.dumps(key)) + r"\s*:"
    hits = [m.start() for m in re.finditer(spelled, text)]
    return f" (line {_line_of(text, hits[1])})" if len(hits) > 1 else ""


def _json_constant_line(text: str, name: str) -> str:
    hit = re.search(r"(?<![\w\"])" + re.escape(name), text)
    return f" (line {_line_of(text, hit.start())})" if hit else ""


# YAML

_MAX_YAML_NODES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG = "tag:yaml.org,2002:bool"


_MAX_FLOW_DEPTH = 100


class _Rules:
    """Duplicate keys refused and spec-order merge keys (mixed into both loaders)."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        explicit: list[tuple[yaml.Node, yaml.Node]] = []
        merges: list[yaml.Node] = []
        seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                if merges:
                    raise _marked("duplicate merge key '<<'", key_node)
                merges = (
                    list(value_node.value)
                    if isinstance(value_node, yaml.SequenceNode)
                    else [value_node]
                )
                continue
            if key_node.tag == "tag:yaml.org,2002:value":
                key_node.tag = "tag:yaml.org,2002:str"
            if key_node.tag == _BOOL_TAG and key_node.value.lower() not in ("true", "false"):
                key_node.tag = "tag:yaml.org,2002:str"  # 'on:' is a name, not True
            key = self._hashable_key(key_node)
            if key in seen:
                raise _marked(f"duplicate key {key[1]!r}", key_node)
            seen[key] = key_node
            explicit.append((key_node, value_node))
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        for source in merges:  # earlier mappings win over later ones, explicit keys over all
            if not isinstance(source, yaml.MappingNode):
                raise _marked(f"a merge key needs mappings, found {type(source).__name__}", source)
            self.flatten_mapping(source)
            for key_node, value_node in source.value:
                key = self._hashable_key(key_node)
                if key not in seen:
                    seen[key] = key_node
                    merged.append((key_node, value_node))
        node.value = merged + explicit

    def _hashable_key(self, key_node: yaml.Node) -> tuple[type, Any]:
        key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
        try:
            hash(key)
        except TypeError:
            raise _marked("a mapping key must be a scalar", key_node) from None
        return (type(key), key)


class _PureLoader(_Rules, yaml.SafeLoader):
    """The pure-Python loader (used when PyYAML was built without libyaml)."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        # PyYAML's scanner is quadratic in flow depth (stale_possible_simple_keys walks
        # every level per token): refuse early what _check_size would refuse anyway.
        if self.flow_level >= _MAX_FLOW_DEPTH:
            mark = self.get_mark()
            raise ConfigSyntaxError(
                f"yaml: flow collections nest deeper than {_MAX_FLOW_DEPTH} levels "
                f"(line {mark.line + 1}, column {mark.column + 1})"
            )
        super().fetch_flow_collection_start(TokenClass)


_Loader: type[_PureLoader | yaml.CSafeLoader]
if getattr(yaml, "__with_libyaml__", False):

    class _CLoader(_Rules, yaml.CSafeLoader):
        """The same rules on libyaml's parser (about 2.5 times faster)."""

    _Loader = _CLoader
else:  # pragma: no cover - PyYAML without libyaml
    _Loader = _PureLoader


def _marked(message: str, node: yaml.Node) -> ConfigSyntaxError:
    mark = node.start_mark
    return ConfigSyntaxError(f"yaml: {message} (line {mark.line + 1}, column {mark.column + 1})")


def _cannot_explode(text: str) -> bool:
    """True when no document of ``text`` can fail :func:`_check_size` (so it is skipped).

    Without a ``*`` there is no alias (nothing shared, nothing recursive); a text of fewer
    than a quarter of the node limit in characters has fewer nodes than the limit (a node
    takes at least one character, an implicit null value excepted); flow collections nest
    no deeper than twice the number of ``[`` and ``{`` in the text (``[a: b]`` is a
    sequence holding a mapping).
    """
    return (
        "*" not in text
        and len(text) <= _MAX_YAML_NODES // 4
        and 2 * (text.count("[") + text.count("{")) <= _MAX_FLOW_DEPTH
    )


def _check_size(root: yaml.Node) -> None:
    """Refuse alias bombs, recursive aliases and deep flow nesting before construction."""
    sizes: dict[int, tuple[int, int]] = {}  # id -> (nodes, flow collections nested here)
    active: set[int] = set()

    def size(node: yaml.Node) -> tuple[int, int]:
        if isinstance(node, yaml.ScalarNode):
            return 1, 0  # a leaf (no alias can recurse through it): no bookkeeping
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in active:
            raise _marked("recursive alias", node)
        active.add(id(node))
        total = 1
        inner = 0
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        for child in children:
            child_total, child_flow = size(child)
            total += child_total
            inner = max(inner, child_flow)
        flow = inner + 1 if isinstance(node, yaml.CollectionNode) and node.flow_style else 0
        active.discard(id(node))
        if total > _MAX_YAML_NODES:
            raise _marked(f"document expands to more than {_MAX_YAML_NODES} nodes", node)
        if flow > _MAX_FLOW_DEPTH:
            raise _marked(f"flow collections nest deeper than {_MAX_FLOW_DEPTH} levels", node)
        sizes[id(node)] = (total, flow)
        return total, flow

    size(root)


def _parse_yaml(
    text: str,
    loader_class: type[_PureLoader | yaml.CSafeLoader] | None = None,
    *,
    direct: bool = True,
) -> Any:
    bom = text.find("\ufeff")
    if bom >= 0:  # libyaml and PyYAML read a byte order mark inside the text differently
        raise ConfigSyntaxError(
            f"yaml: a byte order mark inside the text (line {_line_of(text, bom)})"
        )
    plain = _cannot_explode(text)  # no alias: nothing to check, every document a tree
    loader = (loader_class or _Loader)(text)
    try:
        documents: list[Any] = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node said there is one
                break
            if not plain:
                _check_size(node)
                documents.append(loader.construct_document(node))
            elif direct:
                try:
                    documents.append(_tree(loader, node))
                except Exception:  # anything unusual: the loader's own way, from the start
                    loader.dispose()
                    return _parse_yaml(text, loader_class, direct=False)
            else:
                documents.append(loader.construct_document(node))
    finally:
        loader.dispose()
    if not documents:
        return None
    return documents[0] if len(documents) == 1 else documents


_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_STR_TAG = "tag:yaml.org,2002:str"
_VALUE_TAG = "tag:yaml.org,2002:value"
_TRUE_FALSE = frozenset(("true", "false"))
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp")
)


class _Unusual(Exception):
    """A node the direct construction leaves to the loader (a tag it does not know)."""


def _tree(loader: Any, node: yaml.Node) -> Any:
    """The safe loader's value for an alias-free document, built directly (no generators).

    What the loader's ``construct_document`` gives for the same nodes: its own scalar
    constructors and its mapping rules (:meth:`_Rules.flatten_mapping`: ``on:`` and ``=``
    keys are names). Only for text without ``*`` (no alias, so no node is shared or
    recursive); merge keys, non-scalar keys, other tags, duplicates and any error go back
    to the loader, which then reads them and reports exactly what it always did.
    """
    if isinstance(node, yaml.ScalarNode):
        if node.tag not in _SCALAR_TAGS:
            raise _Unusual(node.tag)
        return loader.yaml_constructors[node.tag](loader, node)
    if isinstance(node, yaml.SequenceNode):
        if node.tag != _SEQ_TAG:
            raise _Unusual(node.tag)
        return [_tree(loader, child) for child in node.value]
    if not isinstance(node, yaml.MappingNode) or node.tag != _MAP_TAG:
        raise _Unusual(node.tag)
    # _Rules.flatten_mapping's rules for a mapping of scalar keys without merge keys (any
    # other mapping, and any duplicate, is the loader's to read and to word).
    constructors = loader.yaml_constructors
    seen: set[tuple[type, Any]] = set()
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        tag = key_node.tag
        if not isinstance(key_node, yaml.ScalarNode) or tag == _MERGE_TAG:
            raise _Unusual(tag)
        if tag == _VALUE_TAG or (tag == _BOOL_TAG and key_node.value.lower() not in _TRUE_FALSE):
            tag = _STR_TAG  # '=' and 'on:' are names, not values
        elif tag not in _SCALAR_TAGS:
            raise _Unusual(tag)
        key = constructors[tag](loader, key_node)
        typed = (type(key), key)
        if typed in seen:  # unhashable keys raise here too
            raise _Unusual("duplicate key")
        seen.add(typed)
        mapping[key] = _tree(loader, value_node)
    return mapping


# INI


def _parse_ini(text: str) -> Any:
    parser = configparser.ConfigParser(
        strict=True, interpolation=None, default_section="DEFAULT", allow_no_value=False
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error as error:
        raise ConfigSyntaxError("ini: " + " ".join(str(error).split())) from None
    out = _PathKeys()
    defaults = parser.defaults()
    if defaults:
        out["DEFAULT"] = _PathKeys(defaults)
    for name in parser.sections():
        out[name] = _PathKeys(parser.items(name, raw=True))
    return out


# .env

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ENV_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "$": "$", "`": "`"}


def _parse_env(text: str) -> Any:
    out = _PathKeys()
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index].strip()
        index += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[len("export") :].strip()
        key, sep, rest = line.partition("=")
        key = key.strip()
        if not sep or not _ENV_KEY.fullmatch(key):
            raise ConfigSyntaxError(f"env: line {number} is not KEY=VALUE")
        rest = rest.lstrip()
        if rest[:1] in ("'", '"'):
            quote = rest[0]
            body = rest[1:]
            while True:
                end = _closing_quote(body, quote)
                if end >= 0 or index >= len(lines):
                    break
                body += "\n" + lines[index]
                index += 1
            if end < 0:
                raise ConfigSyntaxError(f"env: line {number}: unterminated {quote} quote")
            tail = body[end + 1 :].strip()
            if tail and not tail.startswith("#"):
                raise ConfigSyntaxError(f"env: line {number}: text after the closing quote")
            value = body[:end]
            if quote == '"':
                value = re.sub(
                    r"\\(.)", lambda m: _ENV_ESCAPES.get(m[1], "\\" + m[1]), value, flags=re.S
                )
        else:
            value = re.split(r"\s#", rest, maxsplit=1)[0].rstrip()
        if key in out:
            raise ConfigSyntaxError(f"env: duplicate key {key!r} (line {number})")
        out[key] = value
    return out


def _closing_quote(body: str, quote: str) -> int:
    escaped = False
    for position, char in enumerate(body):
        if escaped:
            escaped = False
        elif char == "\\" and quote == '"':
            escaped = True
        elif char == quote:
            return position
    return -1


# .properties


_JAVA_LINE_END = re.compile(r"\r\n?|\n")
_MAX_CONTINUATIONS = 1000
_MAX_CONTINUATION_SCAN = 4_000_000


def _check_continuations(text: str) -> None:
    """Refuse continuations that would make ``javaproperties`` slow (quadratic per entry).

    It rescans the entry gathered so far for each continuation line: more than 1,000
    continuation lines in a row, or more than 4 million characters rescanned in all
    (about 100 ms), are refused. Lines ending in an odd run of backslashes are counted
    (comment lines too: counting more only refuses sooner).
    """
    if "\\\n" not in text and "\\\r" not in text:
        return
    run = 0
    entry = 0
    scanned = 0
    for number, line in enumerate(_JAVA_LINE_END.split(text), 1):
        if (len(line) - len(line.rstrip("\\"))) % 2:
            run += 1
            entry += len(line)
            scanned += entry
            if run > _MAX_CONTINUATIONS:
                raise ConfigSyntaxError(
                    f"properties: an entry continues over more than {_MAX_CONTINUATIONS} "
                    f"lines (line {number})"
                )
            if scanned > _MAX_CONTINUATION_SCAN:
                raise ConfigSyntaxError(
                    f"properties: continuation lines too long to read in time (line {number})"
                )
        else:
            run = entry = 0


def _parse_properties(text: str) -> Any:
    _check_continuations(text)
    out = _PathKeys()
    line = 1
    for element in javaproperties.parse(text):
        if isinstance(element, javaproperties.KeyValue):
            if element.key in out:
                raise ConfigSyntaxError(f"properties: duplicate key {element.key!r} (line {line})")
            out[element.key] = element.value
        line += element.source.count("\n")
    return out


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
    name = _path_like if isinstance(node, _PathKeys) else _name_of
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


def config_changes(before: Any, after: Any) -> tuple[KeyChange, ...]:
    """Every key path whose typed value differs between two trees from :func:`parse_config`.

    ``before``/``after`` may be :data:`MISSING` (a new or deleted file): every key is then
    added or removed. Order: ``before``'s keys, then keys only ``after`` has.
    """
    old = flatten(before)
    new = flatten(after)
    changes = [
        KeyChange(key, value, new.get(key, MISSING))
        for key, value in old.items()
        if key not in new or not typed_equal(value, new[key])
    ]
    changes.extend(KeyChange(key, MISSING, value) for key, value in new.items() if key not in old)
    return tuple(changes)
