"""YAML with PyYAML's safe loader: duplicate keys refused, spec-order merge keys, alias
bombs and deep flow nesting refused, ``on:`` keys as names (see :mod:`._config`)."""

from __future__ import annotations

from typing import Any

import yaml

from ._config_types import ConfigSyntaxError, line_of

__all__ = ("parse_yaml",)

# YAML

_MAX_YAML_NODES = 100_000
_MAX_YAML_DOCUMENTS = 1_000  # each costs its own pass; real files hold a few
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG = "tag:yaml.org,2002:bool"


_MAX_FLOW_DEPTH = 100


_RESOLVED: dict[tuple[type, str, bool], str] = {}
_RESOLVED_CHARS = 64  # longer scalars are rarely repeated: resolved each time, not kept
_RESOLVED_KEPT = 8192
_INT_TAG = "tag:yaml.org,2002:int"


def _decimal(value: str) -> bool:
    """``[1-9][0-9]*`` or ``0``, in ASCII."""
    return value.isdigit() and value.isascii() and (value[0] != "0" or value == "0")


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

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        """PyYAML's tag resolution, remembered for short plain scalars.

        The composer asks for every scalar (libyaml's too: it calls this Python method).
        Without path resolvers (the safe loaders have none), a scalar's tag is a function of
        the loader class, its text and whether it was plain (``implicit[0]``), so the answer
        for one can serve the next.
        """
        paths = self.yaml_path_resolvers  # type: ignore[attr-defined]  # {} in both loaders
        if kind is not yaml.ScalarNode or paths:
            return super().resolve(kind, value, implicit)  # type: ignore[misc, no-any-return]
        if _STANDARD_RESOLVERS:
            if not implicit[0] or (value and value[0] not in _RESOLVER_STARTS):
                return _STR_TAG  # quoted, or no implicit resolver starts with its character
            if _decimal(value):
                return _INT_TAG  # what the int resolver answers, without the three regexes
        if len(value) > _RESOLVED_CHARS:
            return super().resolve(kind, value, implicit)  # type: ignore[misc, no-any-return]
        key = (type(self), value, bool(implicit[0]))
        tag = _RESOLVED.get(key)
        if tag is None:  # asked on a miss only: the hit path makes no further call
            tag = str(super().resolve(kind, value, implicit))  # type: ignore[misc]
            if len(_RESOLVED) >= _RESOLVED_KEPT:
                _RESOLVED.clear()
            _RESOLVED[key] = tag
        return tag

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

# PyYAML tags a quoted scalar str, and a plain one by the first of the implicit resolvers
# registered for its first character whose regex matches, else str. So a plain scalar whose
# first character starts no resolver is str, and one of ASCII digits not starting with 0
# (or "0" itself) is int: YAML 1.1's float and timestamp forms need a '.', ':', '-' or a
# letter (the resolvers for a digit are float, int, timestamp, in that order).
# ``resolve`` answers these without the regexes when both loaders' resolvers are PyYAML's
# own (checked once, here) and none applies to every character.
_RESOLVER_STARTS = frozenset(
    start
    for loader in (_PureLoader, _Loader)
    for start, resolvers in loader.yaml_implicit_resolvers.items()
    if resolvers and start is not None
)
_STANDARD_RESOLVERS = all(
    [tag.rsplit(":", 1)[-1] for tag, _ in loader.yaml_implicit_resolvers.get(c, [])]
    == ["float", "int", "timestamp"]
    and not loader.yaml_implicit_resolvers.get(None)
    for loader in (_PureLoader, _Loader)
    for c in "0123456789"
)


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


def _within_size(root: yaml.Node) -> bool:
    """For a document without aliases (no node shared): True when it has at most the node
    limit and nests flow collections no deeper than allowed (one pass, no bookkeeping of
    shared nodes); False means :func:`_check_size` must look (and say where)."""
    count = 0
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    while stack:
        node, flow = stack.pop()
        count += 1
        if type(node) is yaml.ScalarNode:
            continue
        if not isinstance(node, yaml.CollectionNode):
            return False  # a node class of another kind: the full check decides
        if node.flow_style:
            flow += 1
            if flow > _MAX_FLOW_DEPTH:
                return False
        if type(node) is yaml.SequenceNode:
            stack.extend((child, flow) for child in node.value)
        elif type(node) is yaml.MappingNode:
            stack.extend((child, flow) for pair in node.value for child in pair)
        else:
            return False  # a node class of another kind: the full check decides
        if count + len(stack) > _MAX_YAML_NODES:
            return False
    return True


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


def parse_yaml(
    text: str,
    loader_class: type[_PureLoader | yaml.CSafeLoader] | None = None,
    *,
    direct: bool = True,
) -> Any:
    bom = text.find("\ufeff")
    if bom >= 0:  # libyaml and PyYAML read a byte order mark inside the text differently
        raise ConfigSyntaxError(
            f"yaml: a byte order mark inside the text (line {line_of(text, bom)})"
        )
    plain = _cannot_explode(text)  # then no document can fail the size check
    aliased = "*" in text  # without one, no node is shared: every document is a tree
    loader = (loader_class or _Loader)(text)
    try:
        documents: list[Any] = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node said there is one
                break
            if len(documents) >= _MAX_YAML_DOCUMENTS:
                raise ConfigSyntaxError(
                    f"yaml: more than {_MAX_YAML_DOCUMENTS} documents (not analysed)"
                )
            if not plain and (aliased or not _within_size(node)):
                _check_size(node)
            if aliased:
                documents.append(loader.construct_document(node))
            elif direct:
                try:
                    documents.append(_tree(loader, node))
                except Exception:  # anything unusual: the loader's own way, from the start
                    loader.dispose()
                    return parse_yaml(text, loader_class, direct=False)
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
        if node.tag == _STR_TAG:
            return node.value  # what construct_yaml_str returns for a scalar node
        if node.tag not in _SCALAR_TAGS:
            raise _Unusual(node.tag)
        if node.tag == _INT_TAG and _decimal(node.value):
            return int(node.value)  # construct_yaml_int's value for plain decimal digits
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
        key = key_node.value if tag == _STR_TAG else constructors[tag](loader, key_node)
        typed = (type(key), key)
        if typed in seen:  # unhashable keys raise here too
            raise _Unusual("duplicate key")
        seen.add(typed)
        mapping[key] = _tree(loader, value_node)
    return mapping
