"""Loading YAML and TOML with positions: duplicate keys refused, every key located.

Suites (YAML) and judge files (TOML) are read here. The result keeps where each key and
sequence item is (1-based line and column), so a schema error can name the line of the
field it is about. YAML's loader refuses what PyYAML accepts silently: a key given twice
in one mapping (PyYAML keeps the last) and a quoted value that runs on past lines its
key owns (an unclosed quote that swallowed the next case). TOML's own parser already
refuses duplicate keys; its error is mapped to a line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from . import _toml

__all__ = ("Located", "SourceError", "load_toml", "load_yaml")

Path_ = tuple[str | int, ...]

# libyaml's parser when PyYAML was built with it (10x faster); construction stays Python.
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SourceError(ValueError):
    """The text is not a valid document: ``line``/``column`` (1-based) say where."""

    def __init__(self, line: int, column: int, problem: str, fix: str) -> None:
        super().__init__(f"{line}:{column}: {problem}; fix: {fix}")
        self.line = line
        self.column = column
        self.problem = problem
        self.fix = fix


@dataclass(frozen=True)
class Located:
    """A loaded document and where each key (or sequence item) of it is."""

    data: Any
    positions: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    """Key path -> (line, column) of the key, 1-based."""
    values: dict[Path_, tuple[int, str]] = field(default_factory=dict)
    """Key path -> (line of the value's first content line, scalar style) for strings."""

    def where(self, loc: Path_) -> tuple[int, int] | None:
        """Where ``loc`` is, or its nearest located parent (None: not even the top)."""
        for end in range(len(loc), 0, -1):
            found = self.positions.get(tuple(loc[:end]))
            if found is not None:
                return found
        return None


# -- YAML ---------------------------------------------------------------------------------


def load_yaml(text: str) -> Located:
    """Parse one YAML document; raise :class:`SourceError` for syntax errors, duplicate
    keys and quoted values that run past their key's lines."""
    loader = _YAML_LOADER(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
            problem = " ".join(str(error.problem or error.context or "invalid YAML").split())
            raise SourceError(
                line,
                column,
                f"not valid YAML: {problem}",
                "check the quotes, brackets and indentation on this line and the lines above",
            ) from None
        except yaml.YAMLError as error:
            raise SourceError(1, 1, f"not valid YAML: {error}", "fix the syntax") from None
        if node is None:
            return Located(None)
        located = Located(None)
        _walk(node, (), text.splitlines(), located, block_column=-1)
        try:
            data = loader.construct_document(node)
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark
            line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
            raise SourceError(
                line, column, f"unsupported YAML: {error.problem}", "use plain YAML values"
            ) from None
        return Located(data, located.positions, located.values)
    finally:
        loader.dispose()


def _walk(
    node: yaml.Node, path: Path_, lines: list[str], out: Located, *, block_column: int
) -> None:
    if isinstance(node, yaml.MappingNode):
        inner = block_column if node.flow_style else node.start_mark.column
        seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if key in seen:
                first = seen[key].start_mark
                raise SourceError(
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                    f"key {key!r} appears twice in this mapping (first at line "
                    f"{first.line + 1}); YAML would silently keep only the last",
                    f"delete one of the two `{key}:` lines or rename one",
                )
            seen[key] = key_node
            child = (*path, key)
            out.positions[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            owner = block_column if node.flow_style else key_node.start_mark.column
            _check_quoted(value_node, owner, lines)
            _walk(value_node, child, lines, out, block_column=inner)
    elif isinstance(node, yaml.SequenceNode):
        inner = block_column if node.flow_style else node.start_mark.column
        for index, item in enumerate(node.value):
            child = (*path, index)
            out.positions[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _check_quoted(item, inner, lines)
            _walk(item, child, lines, out, block_column=inner)
    elif isinstance(node, yaml.ScalarNode) and path:
        first = node.start_mark.line + (2 if node.style in ("|", ">") else 1)
        out.values[path] = (first, node.style or "")


def _check_quoted(node: yaml.Node, owner_column: int, lines: list[str]) -> None:
    """A quoted value whose continuation lines are not indented past its key (or item)
    did not end where its author meant: its closing quote is missing."""
    if not isinstance(node, yaml.ScalarNode) or node.style not in ('"', "'"):
        return
    start, end = node.start_mark.line, node.end_mark.line
    for number in range(start + 1, min(end, len(lines) - 1) + 1):
        line = lines[number]
        if line.strip() and len(line) - len(line.lstrip(" ")) <= owner_column:
            quote = node.style
            raise SourceError(
                start + 1,
                node.start_mark.column + 1,
                f"the {quote}-quoted value starting here runs on to line {end + 1}, past "
                f"line {number + 1} ({line.strip()[:40]!r}), which is not indented under it: "
                "its closing quote is probably missing",
                f"close the quote on line {start + 1}, or write multi-line text as a block "
                "scalar (`key: |` and the text indented on the lines below)",
            )


# -- TOML ---------------------------------------------------------------------------------

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def load_toml(text: str) -> Located:
    """Parse TOML (tomli refuses duplicate keys); keys located by a line scan."""
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as error:
        message = str(error)
        found = _TOML_POSITION.search(message)
        line, column = (int(found[1]), int(found[2])) if found else (1, 1)
        problem = _TOML_POSITION.sub("", message).strip()
        fix = "fix the TOML syntax on this line"
        if "overwrite" in problem.lower() or "redefin" in problem.lower():
            fix = "this key or table is defined twice: delete or rename one of them"
        raise SourceError(line, column, f"invalid TOML: {problem}", fix) from None
    return Located(data, _toml_positions(text))


def _toml_key(text: str) -> tuple[list[str], str] | None:
    """Split ``a."b.c" = rest`` into (["a", "b.c"], "rest")."""
    parts: list[str] = []
    rest = text.lstrip()
    while True:
        if rest[:1] in ('"', "'"):
            close = rest.find(rest[0], 1)
            if close < 0:
                return None
            parts.append(rest[1:close])
            rest = rest[close + 1 :].lstrip()
        else:
            bare = _BARE.match(rest)
            if bare is None:
                return None
            parts.append(bare.group(0))
            rest = rest[bare.end() :].lstrip()
        if rest.startswith("."):
            rest = rest[1:].lstrip()
            continue
        return parts, rest


def _strip_strings(value: str) -> str:
    """``value`` with its strings emptied and its comment dropped (brackets left to count)."""
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', '""', value).split("#", 1)[0]


def _toml_positions(text: str) -> dict[Path_, tuple[int, int]]:
    positions: dict[Path_, tuple[int, int]] = {}
    counts: dict[Path_, int] = {}
    table: Path_ = ()
    depth = 0  # open brackets of a multi-line array or inline table
    in_string: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        if in_string is not None:
            if raw.count(in_string) % 2 == 1:
                in_string = None
            continue
        line = raw.strip()
        if depth > 0:
            cleaned = _strip_strings(line)
            depth += cleaned.count("[") + cleaned.count("{")
            depth -= cleaned.count("]") + cleaned.count("}")
            continue
        if not line or line.startswith("#"):
            continue
        column = len(raw) - len(raw.lstrip()) + 1
        if line.startswith("["):
            array = line.startswith("[[")
            parsed = _toml_key(line[2 if array else 1 :])
            if parsed is None:
                continue
            table = _table_path(parsed[0], counts, array=array)
            if array:
                positions.setdefault(table[:-1], (number, column))
            positions[table] = (number, column)
            continue
        parsed = _toml_key(line)
        if parsed is None or not parsed[1].startswith("="):
            continue
        keys, rest = parsed
        for end in range(1, len(keys) + 1):
            positions.setdefault((*table, *keys[:end]), (number, column))
        value = rest[1:].strip()
        for quote in ('"""', "'''"):
            if value.startswith(quote) and value.count(quote) == 1:
                in_string = quote
        if in_string is None:
            cleaned = _strip_strings(value)
            depth = max(
                0,
                cleaned.count("[") + cleaned.count("{") - cleaned.count("]") - cleaned.count("}"),
            )
    return positions


def _table_path(keys: list[str], counts: dict[Path_, int], *, array: bool) -> Path_:
    """A table header's key path, with the index of every array of tables it is in:
    ``[rules.rule.may_change]`` after two ``[[rules.rule]]`` is ``rules.rule[1].may_change``."""
    out: list[str | int] = []
    names: list[str] = []
    for position, part in enumerate(keys):
        out.append(part)
        names.append(part)
        last = position == len(keys) - 1
        if last and array:
            index = counts.get(tuple(names), 0)
            counts[tuple(names)] = index + 1
            out.append(index)
        elif not last and tuple(names) in counts:
            out.append(counts[tuple(names)] - 1)
    return tuple(out)
