"""JSON, INI/CFG/CONF, ``.env`` and ``.properties`` readers (see :mod:`._config`)."""

from __future__ import annotations

import configparser
import io
import json
import re
from typing import Any

import javaproperties
from dotenv import dotenv_values

from ._config_directives import parse_directives
from ._config_types import ConfigSyntaxError, PathKeys, line_of

__all__ = ("parse_env", "parse_ini", "parse_json", "parse_properties")

# JSON


def parse_json(text: str) -> Any:
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
    return f" (line {line_of(text, hits[1])})" if len(hits) > 1 else ""


def _json_constant_line(text: str, name: str) -> str:
    hit = re.search(r"(?<![\w\"])" + re.escape(name), text)
    return f" (line {line_of(text, hit.start())})" if hit else ""


# INI


MAX_INI_SECTIONS = 2_000
"""Section headers in one INI file: ``configparser`` costs about 30 us a section (its
section proxies), so a 490 KB file of empty sections took over a second to compare. Real
files have tens; more are not analysed."""
_SECTION = re.compile(r"(?m)^\s*\[")  # configparser strips any whitespace first


def parse_ini(text: str) -> Any:
    headers = len(_SECTION.findall(text))
    if headers > MAX_INI_SECTIONS:
        raise ConfigSyntaxError(
            f"ini: {headers} section headers, more than the {MAX_INI_SECTIONS} analysed"
        )
    parser = configparser.ConfigParser(
        strict=True, interpolation=None, default_section="DEFAULT", allow_no_value=False
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.MissingSectionHeaderError:
        return parse_directives(text)  # nginx-style blocks or `key value` lines
    except configparser.Error as error:
        raise ConfigSyntaxError("ini: " + _ini_problem(error)) from None
    out = PathKeys()
    defaults = parser.defaults()
    if defaults:
        out["DEFAULT"] = PathKeys(defaults)
    for name in parser.sections():
        out[name] = PathKeys(parser.items(name, raw=True))
    return out


def _ini_problem(error: configparser.Error) -> str:
    """What is wrong, by names and line numbers only: configparser quotes whole lines,
    and a line may hold a secret (the message reaches the worker)."""
    line = getattr(error, "lineno", None)
    where = f" (line {line})" if line else ""
    if isinstance(error, configparser.DuplicateOptionError):
        return f"option {error.option!r} in section {error.section!r} already exists{where}"
    if isinstance(error, configparser.DuplicateSectionError):
        return f"section {error.section!r} already exists{where}"
    if isinstance(error, configparser.ParsingError):
        lines = ", ".join(str(number) for number, _ in error.errors[:5])
        return f"line {lines} is not `name = value`"
    return type(error).__name__


# .env

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ENV_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "$": "$", "`": "`"}


def parse_env(text: str) -> Any:
    """``.env`` read by this parser and by python-dotenv; any disagreement is refused.

    python-dotenv is what applications load ``.env`` files with (``load_dotenv``), so a
    value the two read differently (an escape, a quote, a comment) could hide a change:
    such a file is a :class:`ConfigSyntaxError`, never a guess.
    """
    own = _own_env(text)
    theirs = dotenv_values(stream=io.StringIO(text), interpolate=False)
    if dict(own) != dict(theirs):
        differs = sorted(set(own) ^ set(theirs)) or sorted(
            k for k in own if own[k] != theirs.get(k)
        )
        raise ConfigSyntaxError(
            f"env: python-dotenv reads {differs[0]!r} differently; write it plainly "
            "(KEY=value, or a quoted value without unusual escapes)"
        )
    return own


def _own_env(text: str) -> PathKeys:
    out = PathKeys()
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


def parse_properties(text: str) -> Any:
    _check_continuations(text)
    out = PathKeys()
    line = 1
    for element in javaproperties.parse(text):
        if isinstance(element, javaproperties.KeyValue):
            if element.key in out:
                raise ConfigSyntaxError(f"properties: duplicate key {element.key!r} (line {line})")
            out[element.key] = element.value
        line += element.source.count("\n")
    return out
