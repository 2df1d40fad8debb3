"""Directive ``.conf`` files: nginx-style blocks and ``key value`` lines (see :mod:`._config`).

Two shapes real services use where INI's ``[section]`` header is missing:

* **blocks** (nginx, and anything with ``;`` or ``{`` outside comments and quotes):
  ``name arg...;`` statements and ``name arg... { ... }`` blocks, ``#`` comments;
* **HOCON-like blocks** (braces but no ``;``: Akka/Play ``application.conf``):
  ``key = value`` or ``key: value`` lines and ``key {`` objects, ``#``/``//`` comments,
  dotted keys nest (``a.b = 1`` is ``a { b = 1 }``), objects of one name merge, a value
  given twice, inline objects and multi-line arrays are refused;
* **lines** (redis.conf, postgresql.conf, sshd_config, haproxy globals): one
  ``key value...`` or ``key = value`` per line, ``#`` comments (inline after whitespace).

A directive's value is its arguments joined by one space (``listen 443 ssl;`` is
``listen = "443 ssl"``); a value quoted as a whole loses its quotes in the line shape. A
block is a mapping named by its directive and arguments (``location /api``). A name that
occurs once in its block is one value (or mapping); a repeated name (``listen``,
``server``, redis ``save``) is a list in file order: ``http.server[1].listen``. Every
value is a string, as in INI. Refused (:class:`ConfigSyntaxError`): Apache ``<Section>``
tags, unbalanced braces, unterminated quotes, a line that is not ``key value``.
"""

from __future__ import annotations

import re
from typing import Any

from ._config_types import ConfigSyntaxError

__all__ = ("DirectiveKeys", "parse_directives")

# No token starts with whitespace, so the search steps over it in C (a Python step per
# whitespace run doubled the cost of a dense file).
_TOKEN = re.compile(r"""#[^\n]*|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[{};]|[^\s{};#"']+|["']""")
_KEY = re.compile(r"[A-Za-z_][\w.\-]*")


class DirectiveKeys(dict[str, Any]):
    """The tree of a directive file (a distinct type: INI and directive trees never
    compare equal by accident, see :func:`._config.config_changes`)."""


def _add(block: dict[str, Any], name: str, value: Any, repeated: set[int]) -> None:
    if name not in block:
        block[name] = value
        return
    current = block[name]
    if isinstance(current, list) and id(current) in repeated:
        current.append(value)
        return
    items = [current, value]
    repeated.add(id(items))
    block[name] = items


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _tokens(text: str) -> list[tuple[str, int]]:
    """Each token but comments, with its offset in ``text``."""
    out: list[tuple[str, int]] = []
    for match in _TOKEN.finditer(text):
        token = match[0]
        if token in ('"', "'"):
            line = _line(text, match.start())
            raise ConfigSyntaxError(f"conf: unterminated {token} quote (line {line})")
        if token[0] != "#":
            out.append((token, match.start()))
    return out


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _blocks(text: str, tokens: list[tuple[str, int]]) -> DirectiveKeys:
    root = DirectiveKeys()
    stack: list[dict[str, Any]] = [root]
    repeated: set[int] = set()
    words: list[str] = []
    for token, offset in tokens:
        if token == ";":
            if words:
                _add(stack[-1], words[0], " ".join(words[1:]), repeated)
            words = []
        elif token == "{":
            if not words:
                line = _line(text, offset)
                raise ConfigSyntaxError(f"conf: a block without a name (line {line})")
            child: dict[str, Any] = {}
            _add(stack[-1], " ".join(words), child, repeated)
            stack.append(child)
            words = []
        elif token == "}":
            if words or len(stack) == 1:
                line = _line(text, offset)
                raise ConfigSyntaxError(f"conf: unexpected '}}' (line {line})")
            stack.pop()
        else:
            words.append(token)
    if words or len(stack) != 1:
        raise ConfigSyntaxError("conf: the file ends inside a statement or block")
    return root


def _lines(text: str) -> DirectiveKeys:
    root = DirectiveKeys()
    repeated: set[int] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        tokens = [t for t, _ in _tokens(line)]  # drops an inline comment, checks quotes
        if not tokens:
            continue
        name, rest = tokens[0], tokens[1:]
        if "=" in name and name[0] != "=":  # key=value written together
            name, _, first = name.partition("=")
            rest = ([first] if first else []) + rest
        elif rest[:1] == ["="]:
            rest = rest[1:]
        if not _KEY.fullmatch(name):
            raise ConfigSyntaxError(f"conf: line {number} is not `key value`")
        _add(root, name, _unquote(" ".join(rest)), repeated)
    return root


_HOCON_LINE = re.compile(r'("(?:[^"\\]|\\.)*"|[A-Za-z0-9_.\-]+)\s*(?:[=:]\s*|(?=\{))(.*)')


def _strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote and line[index - 1] != "\\" else quote
        elif char in "\"'":
            quote = char
        elif char == "#" or line.startswith("//", index):
            return line[:index]
    return line


def _child(block: dict[str, Any], name: str, number: int) -> dict[str, Any]:
    current = block.setdefault(name, {})
    if not isinstance(current, dict):
        raise ConfigSyntaxError(f"conf: {name!r} is a value and an object (line {number})")
    return current


def _hocon(text: str) -> DirectiveKeys:
    """HOCON-like blocks: ``key = value`` / ``key: value`` lines, ``key {`` objects, dotted
    keys as nesting, objects of one name merged; a value given twice is refused."""
    root = DirectiveKeys()
    stack: list[dict[str, Any]] = [root]
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip().rstrip(",").strip()
        while line.startswith("}"):
            if len(stack) == 1:
                raise ConfigSyntaxError(f"conf: unexpected '}}' (line {number})")
            stack.pop()
            line = line[1:].strip().lstrip(",").strip()
        if not line:
            continue
        match = _HOCON_LINE.fullmatch(line)
        if match is None:
            raise ConfigSyntaxError(f"conf: line {number} is not `key = value` or `key {{`")
        key, value = match[1], match[2].strip()
        parts = [key[1:-1]] if key.startswith('"') else key.split(".")
        if not all(parts):
            raise ConfigSyntaxError(f"conf: an empty key (line {number})")
        target = stack[-1]
        for part in parts[:-1]:
            target = _child(target, part, number)
        if value in ("{", "{}"):
            child = _child(target, parts[-1], number)
            if value == "{":
                stack.append(child)
            continue
        unquoted = re.sub(r'"(?:[^"\\]|\\.)*"|\$\{\??[\w.\-]+\}', "", value)  # ${?ENV} kept
        if any(c in unquoted for c in "{}") or (value.startswith("[") != value.endswith("]")):
            raise ConfigSyntaxError(f"conf: line {number}: an inline object or open array")
        if parts[-1] in target:
            raise ConfigSyntaxError(f"conf: {key!r} is given twice (line {number})")
        target[parts[-1]] = _unquote(value)
    if len(stack) != 1:
        raise ConfigSyntaxError("conf: the file ends inside a block")
    return root


def parse_directives(text: str) -> DirectiveKeys:
    """The tree of an nginx-style, HOCON-like or ``key value`` ``.conf`` file."""
    if re.search(r"(?m)^\s*</?[A-Za-z]", text):
        raise ConfigSyntaxError("conf: <Section> tags (Apache style) are not read")
    tokens = _tokens(text)
    kinds = {t for t, _ in tokens}
    if ";" in kinds:
        return _blocks(text, tokens)
    return _hocon(text) if "{" in kinds or "}" in kinds else _lines(text)
