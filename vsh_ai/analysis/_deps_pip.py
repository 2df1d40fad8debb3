"""pip requirement files, pip.conf/pip.ini and installer configs (uv.toml, .yarnrc, ...)."""

from __future__ import annotations

import configparser
import re
import shlex
from collections.abc import Iterable
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import _toml
from ._deps_model import (
    MAX_REQUIREMENT_LINES,
    Dependency,
    DependencySyntaxError,
    Manifest,
    _flat,
)

_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_SHLEX_LIMIT = 4096


# -- Python requirement files ---------------------------------------------------------


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(first line number, logical line) exactly as pip reads a requirements file.

    pip joins a line ending in ``\\`` with the next unless the line is a comment line
    (``# ... \\`` does not continue: the next line is live), then strips comments
    (``#`` at the start or after whitespace).
    """
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        comment_line = line.lstrip().startswith("#")  # pip's COMMENT_RE.match
        if not line.endswith("\\") or comment_line:
            if comment_line:
                line = " " + line
            if pending:
                pending.append(line)
                joined, pending = "".join(pending), []
                yield from _live(start, joined)
            else:
                yield from _live(number, line)
        else:
            if not pending:
                start = number
            pending.append(line.strip("\\"))
    if pending:
        yield from _live(start, "".join(pending))


def _strip_comment(line: str) -> str:
    """pip's ``COMMENT_RE.sub``: drop from a ``#`` at the start or after whitespace (linear)."""
    at = line.find("#")
    while at != -1:
        if at == 0 or line[at - 1].isspace():
            return line[:at]
        at = line.find("#", at + 1)
    return line


def _live(number: int, line: str) -> Iterable[tuple[int, str]]:
    stripped = _strip_comment(line).strip()
    if stripped:
        yield number, stripped


def _split_words(text: str) -> list[str]:
    """pip's ``shlex.split`` of options; plain ``split`` when no quoting is involved.

    shlex builds tokens by concatenation (quadratic on a huge token), so beyond
    ``_SHLEX_LIMIT`` characters plain splitting is used.
    """
    if not any(c in text for c in "'\"\\") or len(text) > _SHLEX_LIMIT:
        return text.split()
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _option_words(words: list[str]) -> tuple[list[str], list[str]]:
    """Per-line options -> (hashes, other options), each ``--name=value``."""
    hashes: list[str] = []
    other: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, value = word.partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
            value = words[i + 1]
            i += 1
        (hashes if name == "--hash" else other).append(f"{name}={value}" if value else name)
        i += 1
    return hashes, other


def _url_name(url: str) -> str:
    egg = _EGG.search(url)
    if egg:
        return canonicalize_name(egg.group(1))
    tail = PurePosixPath(urlsplit(url).path).name
    return canonicalize_name(re.split(r"[-_]\d", tail, maxsplit=1)[0]) if tail else url


_Parsed = tuple[str, str, tuple[str, ...], str | None, str | None]


@lru_cache(maxsize=1 << 16)
def _requirement(text: str) -> _Parsed | None:
    """(name, specifier, extras, marker, url) of a PEP 508 string; None when invalid.

    Memoised: the two versions of an edited file share most of their lines.
    """
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    return (
        canonicalize_name(req.name),
        str(req.specifier),
        tuple(sorted(canonicalize_name(e) for e in req.extras)),
        str(req.marker) if req.marker is not None else None,
        req.url,
    )


def _pep508(text: str, section: str, *, line: int | None = None, raw: str = "") -> Dependency:
    """A PEP 508 requirement string as a Dependency (URLs and paths become ``source``)."""
    parsed = _requirement(text)
    if parsed is None:
        stripped = text.split(";", 1)[0].strip()
        if (
            "://" in stripped
            or stripped.startswith((".", "/", "~"))
            or stripped.endswith((".whl", ".zip", ".tar.gz"))
        ):
            return Dependency(
                "pypi", section, _url_name(stripped), "", source=stripped, line=line, raw=raw
            )
        raise DependencySyntaxError(f"line {line}: not a requirement: {text[:80]!r}")
    name, spec, extras, marker, url = parsed
    return Dependency(
        "pypi",
        section,
        name,
        spec,
        extras=extras,
        marker=marker,
        source=url,
        line=line,
        raw=raw or text,
    )


def parse_requirements(
    text: str, path: str = "requirements.txt", *, strict: bool = True
) -> Manifest:
    """A pip requirements file: requirements with hashes, and file-level options.

    ``strict=False`` skips lines that are not requirements instead of raising.
    """
    deps: list[Dependency] = []
    options: list[str] = []
    for count, (number, line) in enumerate(_logical_lines(text), 1):
        if count > MAX_REQUIREMENT_LINES:
            raise DependencySyntaxError(
                f"{path}: more than {MAX_REQUIREMENT_LINES} requirement lines (line {number})"
            )
        if line.startswith("-"):
            words = _split_words(line)
            head = words[0]
            if head in ("-e", "--editable") or head.startswith(("-e", "--editable=")):
                target = head.partition("=")[2] or (head[2:] if head.startswith("-e") else "")
                target = target or (words[1] if len(words) > 1 else "")
                deps.append(
                    Dependency(
                        "pypi",
                        "requirements",
                        _url_name(target),
                        "",
                        source=f"editable:{target}",
                        line=number,
                        raw=line,
                    )
                )
                continue
            _, normalised = _option_words(words)
            options.append(" ".join(normalised))
            continue
        requirement, parsed, hashes, other = _requirement_line(line)
        if parsed is None:  # a URL or path, or not a requirement
            try:
                dep = _pep508(requirement, "requirements", line=number, raw=line)
            except DependencySyntaxError:
                if strict:
                    raise
                continue
            parsed = (dep.name, dep.spec, dep.extras, dep.marker, dep.source)
        name, spec, extras, marker, source = parsed
        deps.append(
            Dependency(
                "pypi",
                "requirements",
                name,
                spec,
                extras,
                marker,
                source,
                hashes,
                other,
                number,
                line,
            )
        )
    return Manifest(path, "requirements", "pypi", tuple(deps), tuple(options))


@lru_cache(maxsize=1 << 16)
def _requirement_line(
    line: str,
) -> tuple[str, _Parsed | None, tuple[str, ...], tuple[str, ...]]:
    """(requirement, its parse or None, sorted hashes, other options) of a logical line.

    Memoised like :func:`_requirement`: an edit re-reads only the lines it changed.
    """
    requirement, _, tail = _split_requirement(line)
    hashes, other = _option_words(_split_words(tail))
    return requirement, _requirement(requirement), tuple(sorted(hashes)), tuple(other)


def _split_requirement(line: str) -> tuple[str, str, str]:
    """``req --hash=... --x`` -> (req, " ", options) at the first `` -option``."""
    match = re.search(r"\s(?=--?[A-Za-z])", line)
    if match is None:
        return line, "", ""
    return line[: match.start()].strip(), " ", line[match.end() :]


# -- pip.conf / pip.ini ---------------------------------------------------------------

_PIP_INDEX_KEYS = (
    "index-url",
    "extra-index-url",
    "find-links",
    "trusted-host",
    "no-index",
    "index",
    "require-hashes",
    "require-virtualenv",
    "cert",
    "client-cert",
    "proxy",
    "pre",
    "only-binary",
    "no-binary",
)


def parse_pip_config(text: str, path: str = "pip.conf") -> Manifest:
    """Index and trust settings of a pip.conf/pip.ini, as options (``[section] key = value``)."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    options: list[str] = []
    rest: dict[str, str] = {}
    for section in parser.sections():
        for key, value in parser.items(section, raw=True):
            name = key.replace("_", "-").lower()
            entry = f"[{section}] {name} = {' '.join(value.split())}"
            if name in _PIP_INDEX_KEYS or "index" in name or "url" in name or "host" in name:
                options.append(entry)
            else:
                rest[f"{section}.{name}"] = value
    return Manifest(path, "pip-config", "pypi", (), tuple(options), rest=rest)


_INSTALLER_CONFIGS = ("uv.toml", "bunfig.toml", ".yarnrc.yml", ".yarnrc", ".condarc")
# Settings that decide where packages come from and whether they are verified.
_SOURCE_WORDS = re.compile(
    r"(?i)(index|registr|url|find.?links|trusted|source|scope|channel|ssl|ca.?file|\bca\b|"
    r"cert|proxy|no.?verify|insecure|checksum|integrity|hash|unsafe|mirror)"
)


def parse_installer_config(text: str, path: str = "uv.toml") -> Manifest:
    """uv.toml, bunfig.toml, .yarnrc(.yml), .condarc: source and trust settings as options."""
    name = PurePosixPath(path).name.lower()
    data: Any
    try:
        if name.endswith(".toml"):
            data = _toml.loads(text)
        elif name == ".yarnrc":
            data = {}
            for line in text.splitlines():
                key, _, value = line.strip().partition(" ")
                if key and not key.startswith("#"):
                    data[key] = value.strip()
        else:
            import yaml  # a declared dependency; imported here as only these files need it

            data = yaml.safe_load(text) or {}
    except (_toml.TOMLDecodeError, ValueError) as error:
        raise DependencySyntaxError(f"{path}: {str(error)[:120]}") from None
    except Exception as error:  # yaml's YAMLError and its subclasses
        raise DependencySyntaxError(f"{path}: {type(error).__name__}") from None
    if not isinstance(data, dict):
        raise DependencySyntaxError(f"{path}: the top level is not a table")
    options: list[str] = []
    rest: dict[str, str] = {}
    for key, value in _flat(data).items():
        if _SOURCE_WORDS.search(key):
            options.append(f"{key} = {value}")
        else:
            rest[key] = value
    return Manifest(path, "installer-config", "pypi", (), tuple(options), rest=rest)
