"""Dependency manifests and lock files parsed into typed records, and compared.

Python requirements and pyproject dependencies are parsed with :mod:`packaging`
(PEP 440 versions and specifiers, PEP 508 names, extras, markers and URLs); npm ranges
with ``node-semver`` (a port of npm's own range grammar). Lock files (package-lock v1-v3,
``uv.lock``, ``poetry.lock``) become name -> entry maps that can be checked against a
manifest. Nothing here decides: :mod:`vsh_ai.rules._deps` does, with these facts.

Version ranges are compared as unions of intervals, so "is the new range inside the old
one" is answered exactly for the operators both grammars share (``==2.32.*``, ``~=``,
``^``, ``~``, ``||``, hyphen ranges), never by looking at the first digits.

Parsing time is bounded: files over :data:`MAX_FILE_BYTES` (192 KiB; lock files up to
:data:`MAX_LOCK_FILE_BYTES`, 512 KiB to 1 MiB) or with more than 10,000 requirement
lines raise :class:`DependencySyntaxError`. Requirement strings are parsed once per
process (memoised), so the two versions of an edit share the work for unchanged lines.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from itertools import product
from pathlib import PurePosixPath
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import nodesemver  # type: ignore[import-untyped]
from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = (
    "Dependency",
    "DependencyChange",
    "DependencySyntaxError",
    "Ecosystem",
    "FileKind",
    "LockChange",
    "LockEntry",
    "Manifest",
    "ManifestDiff",
    "compare_locks",
    "compare_manifests",
    "file_kind",
    "is_newer",
    "lock_entry_for",
    "lock_mismatches",
    "major_of",
    "marker_never_holds",
    "npm_exact",
    "npm_range_subset",
    "parse_dependency_file",
    "pep440_exact",
    "pep440_subset",
    "satisfies",
)

Ecosystem = Literal["pypi", "npm"]
FileKind = Literal[
    "requirements",
    "pyproject",
    "package.json",
    "package-lock",
    "uv.lock",
    "poetry.lock",
    "pip-config",
    "installer-config",
]

_NPM_SECTIONS = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
_NPM_OVERRIDES = ("overrides", "resolutions", "pnpm.overrides")
# Per-requirement options pip accepts after a requirement on the same line.
_LINE_OPTIONS = ("--hash", "--global-option", "--config-settings", "--install-option")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
# npm specs that name a source instead of a version range.
_NPM_SOURCE = re.compile(
    r"(?i)^\s*(git\+|git:|https?:|file:|link:|npm:|github:|gitlab:|bitbucket:|gist:|workspace:|portal:|patch:|\.\.?/|~/|/|[\w.-]+/[\w.-]+(#.*)?$)"
)


# Bounds on untrusted input: node-semver's range parser is quadratic in whitespace runs,
# and every `!=` clause splits an interval, so longer specs are "cannot tell" (None).
MAX_NPM_SPEC = 256
MAX_PEP440_CLAUSES = 32
# Larger dependency files are not analysed (unparsable -> unproven -> review): parsing
# both versions stays under about a second for the slowest shapes of each kind (about
# 3 s/MiB for requirement lines, 2 s/MiB for TOML locks, 0.8 s/MiB for package-lock).
MAX_FILE_BYTES = 192 << 10
MAX_LOCK_FILE_BYTES: dict[str, int] = {
    "package-lock": 1 << 20,
    "uv.lock": 512 << 10,
    "poetry.lock": 512 << 10,
}
MAX_REQUIREMENT_LINES = 10_000  # pip requirement lines in one file (each is a PEP 508 parse)
_SHLEX_LIMIT = 4096


class DependencySyntaxError(ValueError):
    """A manifest or lock file that cannot be parsed (the message says where)."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """One declared dependency.

    ``name`` is normalised (PEP 503 for Python; npm names as written). ``spec`` is the
    version part (PEP 440 specifier or npm range) or "" when a ``source`` replaces it.
    ``source`` is None for the default index, else the URL, path, git or alias spec,
    or the ``[tool.uv.sources]``/poetry source that redirects the name.
    """

    ecosystem: Ecosystem
    section: str
    name: str
    spec: str
    extras: tuple[str, ...] = ()
    marker: str | None = None
    source: str | None = None
    hashes: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    line: int | None = None
    raw: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.section, self.name)

    @property
    def pin(self) -> str | None:
        """The exact version this dependency is pinned to (``==X`` / npm ``X``), else None."""
        if self.source is not None:
            return None
        if self.ecosystem == "npm":
            return npm_exact(self.spec)
        return pep440_exact(self.spec)


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One resolved package in a lock file."""

    key: str
    name: str
    version: str | None
    source: str | None
    integrity: tuple[str, ...] = ()
    install_script: bool = False
    fields: str = ""  # canonical JSON of everything else in the entry


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed dependency file: dependencies, installer options, and everything else."""

    path: str
    kind: FileKind
    ecosystem: Ecosystem
    dependencies: tuple[Dependency, ...] = ()
    options: tuple[str, ...] = ()
    scripts: Mapping[str, str] = field(default_factory=dict)
    rest: Mapping[str, str] = field(default_factory=dict)
    locked: Mapping[str, LockEntry] = field(default_factory=dict)

    @property
    def is_lock(self) -> bool:
        return self.kind in ("package-lock", "uv.lock", "poetry.lock")

    def by_key(self) -> dict[tuple[str, str], Dependency]:
        found: dict[tuple[str, str], Dependency] = {}
        last: dict[tuple[str, str], int] = {}  # the last '#n' given to a repeated key
        for dep in self.dependencies:
            key = dep.key
            if key in found:  # the same name twice (e.g. per-marker pins) stays distinct
                n = last.get(key, 1)  # '#2'..'#n' are taken already: resume (linear time)
                while (dep.section, f"{dep.name}#{n}") in found or n == 1:
                    n += 1
                last[key] = n
                key = (dep.section, f"{dep.name}#{n}")
            found[key] = dep
        return found

    def names(self) -> set[str]:
        return {dep.name for dep in self.dependencies}


# -- versions and ranges --------------------------------------------------------------

_K = TypeVar("_K")
# An interval: (low, low_inclusive, high, high_inclusive); None is unbounded.
_Interval = tuple[Any, bool, Any, bool]


def _lt_low(a: _Interval, b: _Interval) -> bool:
    """a's lower bound is strictly below b's."""
    if a[0] is None:
        return b[0] is not None
    if b[0] is None:
        return False
    return bool(a[0] < b[0] or (a[0] == b[0] and a[1] and not b[1]))


def _intersect(a: _Interval, b: _Interval) -> _Interval | None:
    low = b if _lt_low(a, b) else a
    if a[2] is None:
        high = b
    elif b[2] is None or a[2] < b[2] or (a[2] == b[2] and not a[3]):
        high = a
    else:
        high = b
    result = (low[0], low[1], high[2], high[3])
    low_value, high_value = result[0], result[2]
    empty = (
        low_value is not None
        and high_value is not None
        and (low_value > high_value or (low_value == high_value and not (result[1] and result[3])))
    )
    if empty:
        return None
    return result


def _intersect_all(sets: Iterable[list[_Interval]]) -> list[_Interval]:
    current: list[_Interval] = [(None, False, None, False)]
    for intervals in sets:
        current = [i for a in current for b in intervals if (i := _intersect(a, b)) is not None]
    return current


def _covered(inner: _Interval, outers: Sequence[_Interval]) -> bool:
    """``inner`` lies within one interval of ``outers`` (callers merge nothing: sound, strict)."""
    for outer in outers:
        if _lt_low(inner, outer):
            continue
        if outer[2] is None:
            return True
        if inner[2] is None:
            continue
        if inner[2] < outer[2] or (inner[2] == outer[2] and (outer[3] or not inner[3])):
            return True
    return False


def _merge(intervals: list[_Interval]) -> list[_Interval]:
    """Sorted, touching intervals joined (so a range split by ``||`` still covers a subset)."""
    ordered = sorted(
        intervals,
        key=lambda i: (i[0] is not None, i[0] if i[0] is not None else 0, not i[1]),
    )
    merged: list[_Interval] = []
    for interval in ordered:
        if merged:
            last = merged[-1]
            touches = (
                last[2] is None
                or interval[0] is None
                or interval[0] < last[2]
                or (interval[0] == last[2] and (last[3] or interval[1]))
            )
            if touches:
                if last[2] is None or (
                    interval[2] is not None
                    and (last[2] > interval[2] or (last[2] == interval[2] and last[3]))
                ):
                    continue
                merged[-1] = (last[0], last[1], interval[2], interval[3])
                continue
        merged.append(interval)
    return merged


def _subset(inner: list[_Interval], outer: list[_Interval]) -> bool:
    outer = _merge(outer)
    return all(_covered(i, outer) for i in inner)


def _prefix_bounds(text: str) -> tuple[Version, Version]:
    """``2.32`` (from ``==2.32.*``) -> [2.32.dev0, 2.33.dev0)."""
    parts = [int(p) for p in Version(text).release]
    upper = [*parts[:-1], parts[-1] + 1]
    low = Version(".".join(map(str, parts)) + ".dev0")
    return low, Version(".".join(map(str, upper)) + ".dev0")


def _pep440_intervals(spec: Specifier) -> list[_Interval]:
    op, text = spec.operator, spec.version
    if text.endswith(".*"):
        low, high = _prefix_bounds(text[:-2])
        if op == "==":
            return [(low, True, high, False)]
        if op == "!=":
            return [(None, False, low, False), (high, True, None, False)]
        raise InvalidSpecifier(str(spec))
    version = Version(text)
    if op in ("==", "==="):
        return [(version, True, version, True)]
    if op == "!=":
        return [(None, False, version, False), (version, False, None, False)]
    if op == ">=":
        return [(version, True, None, False)]
    if op == ">":
        return [(version, False, None, False)]
    if op == "<=":
        return [(None, False, version, True)]
    if op == "<":
        return [(None, False, version, False)]
    if op == "~=":
        release = version.release
        _, high = _prefix_bounds(".".join(map(str, release[:-1])))
        return [(version, True, high, False)]
    raise InvalidSpecifier(str(spec))


def pep440_intervals(specifier: str) -> list[_Interval] | None:
    """The versions a PEP 440 specifier set admits, as intervals; None if not parseable."""
    try:
        specs = list(SpecifierSet(specifier))
        if len(specs) > MAX_PEP440_CLAUSES:
            return None
        return _intersect_all(_pep440_intervals(s) for s in specs)
    except (InvalidSpecifier, InvalidVersion, ValueError):
        return None


def pep440_subset(new: str, old: str) -> bool | None:
    """True when every version ``new`` admits, ``old`` admits too (never loosened)."""
    a, b = pep440_intervals(new), pep440_intervals(old)
    return None if a is None or b is None else _subset(a, b)


_SHORT = 256  # specifiers up to this long are remembered (bounded memory on crafted input)


def _by_spec(function: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """``function`` remembered per (short) specifier: a pin is read many times per change."""
    remembered = lru_cache(maxsize=1 << 14)(function)

    @wraps(function)
    def cached(spec: str) -> str | None:
        return remembered(spec) if len(spec) <= _SHORT else function(spec)

    return cached


@_by_spec
def pep440_exact(specifier: str) -> str | None:
    """``==2.31.0`` -> "2.31.0"; anything else (``==2.32.*``, ``>=``, two clauses) -> None."""
    try:
        specs = list(SpecifierSet(specifier))
    except InvalidSpecifier:
        return None
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        return None
    try:
        return str(Version(specs[0].version))
    except InvalidVersion:
        return None


def _semver_key(version: Any) -> tuple[Any, ...]:
    pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in version.prerelease)
    return (version.major, version.minor, version.patch, 0 if pre else 1, pre)


def npm_intervals(spec: str) -> list[_Interval] | None:
    """The versions an npm range admits, as intervals over semver keys; None if not a range."""
    text = _npm_text(spec)
    if text is None or _NPM_SOURCE.match(text):
        return None
    try:
        parsed = nodesemver.make_range(text, loose=False)
    except (ValueError, TypeError):
        return None
    union: list[_Interval] = []
    for comparators in parsed.set:
        pieces: list[list[_Interval]] = []
        for comparator in comparators:
            op = comparator.operator
            if op is None:  # "*", "" : any version
                pieces.append([(None, False, None, False)])
                continue
            key = _semver_key(comparator.semver)
            if op in ("", "="):
                pieces.append([(key, True, key, True)])
            elif op == ">=":
                pieces.append([(key, True, None, False)])
            elif op == ">":
                pieces.append([(key, False, None, False)])
            elif op == "<=":
                pieces.append([(None, False, key, True)])
            elif op == "<":
                pieces.append([(None, False, key, False)])
            else:
                return None
        union.extend(_intersect_all(pieces))
    return union


def _npm_text(spec: str) -> str | None:
    """``spec`` with whitespace runs collapsed; None when too long to parse safely."""
    text = " ".join(spec.split())
    return text if len(text) <= MAX_NPM_SPEC else None


def _intervals(ecosystem: Ecosystem, spec: str) -> list[_Interval] | None:
    return npm_intervals(spec) if ecosystem == "npm" else pep440_intervals(spec)


def _lowest(intervals: Sequence[_Interval]) -> Any:
    """The smallest lower bound (None: unbounded below)."""
    lows = [i[0] for i in intervals]
    return None if any(low is None for low in lows) else min(lows)


def npm_range_subset(new: str, old: str) -> bool | None:
    a, b = npm_intervals(new), npm_intervals(old)
    return None if a is None or b is None else _subset(a, b)


@_by_spec
def npm_exact(spec: str) -> str | None:
    """``4.17.21`` / ``=4.17.21`` / ``v4.17.21`` -> "4.17.21"; ranges and sources -> None."""
    text = _npm_text(spec) or ""
    if text.startswith("="):
        text = text[1:].strip()
    if not text or text[0] not in "v0123456789":
        return None
    valid = nodesemver.valid(text, loose=False)
    return str(valid) if valid else None


def is_newer(ecosystem: Ecosystem, old: str, new: str) -> bool | None:
    """``new`` is a strictly newer version than ``old``; None if either is not a version."""
    try:
        if ecosystem == "npm":
            if max(len(new), len(old)) > MAX_NPM_SPEC:
                return None
            return bool(nodesemver.gt(new, old, False))
        return Version(new) > Version(old)
    except (InvalidVersion, ValueError, TypeError):
        return None


def satisfies(ecosystem: Ecosystem, version: str, spec: str) -> bool | None:
    """``version`` is admitted by ``spec`` (None: either cannot be parsed)."""
    try:
        if ecosystem == "npm":
            text = _npm_text(spec)
            if text is None or _NPM_SOURCE.match(text) or len(version) > MAX_NPM_SPEC:
                return None
            return bool(nodesemver.satisfies(version, text, False))
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidVersion, InvalidSpecifier, ValueError, TypeError):
        return None


def major_of(ecosystem: Ecosystem, version: str) -> int | None:
    try:
        if ecosystem == "npm":
            return int(nodesemver.make_semver(version, loose=False).major)
        return Version(version).release[0]
    except (InvalidVersion, ValueError, TypeError, IndexError):
        return None


# -- markers --------------------------------------------------------------------------

_PLATFORMS = (
    {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"},
    {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"},
    {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"},
)
_IMPLEMENTATIONS = (
    {"implementation_name": "cpython", "platform_python_implementation": "CPython"},
    {"implementation_name": "pypy", "platform_python_implementation": "PyPy"},
)
_MACHINES = ("x86_64", "aarch64")
_PYTHONS = tuple(f"3.{minor}" for minor in range(8, 16))


def _environments(platforms: Sequence[str] = ()) -> Iterable[dict[str, str]]:
    chosen = [p for p in _PLATFORMS if not platforms or p["sys_platform"] in platforms]
    for python, plat, impl, machine in product(_PYTHONS, chosen, _IMPLEMENTATIONS, _MACHINES):
        yield {
            **plat,
            **impl,
            "platform_machine": machine,
            "python_version": python,
            "python_full_version": f"{python}.0",
            "implementation_version": f"{python}.0",
            "platform_release": "",
            "platform_version": "",
        }


@lru_cache(maxsize=4096)
def marker_never_holds(marker: str, *, platforms: tuple[str, ...] = ()) -> bool:
    """True when a PEP 508 marker is false on every supported Python (3.8-3.15, 3 OSes).

    ``; python_version < "3"`` silently drops a package; markers on ``extra`` are left
    to the extra's own semantics (False here). ``platforms`` (``sys_platform`` values,
    e.g. ``("linux",)``) limits the environments tried.
    """
    try:
        parsed = Marker(marker)
    except InvalidMarker:
        return True  # unparseable: pip refuses it, the package is not installed
    if "extra" in marker:
        return False
    try:
        return not any(parsed.evaluate(env) for env in _environments(platforms))
    except Exception:
        return True


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


# -- pyproject.toml -------------------------------------------------------------------


def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):  # an empty table is no setting: it flattens to nothing
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = json.dumps(value, sort_keys=True, default=str)


def _flat(data: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    _flatten(dict(data), "", out)
    return out


def _pop(data: dict[str, Any], dotted: str) -> Any:
    """Remove and return ``a.b.c`` from nested dicts (None when absent)."""
    *parents, last = dotted.split(".")
    node: Any = data
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node.pop(last, None) if isinstance(node, dict) else None


def _source_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _poetry_spec(value: Any) -> tuple[str, tuple[str, ...], str | None, str | None]:
    """A poetry dependency value -> (spec, extras, marker, source)."""
    if isinstance(value, str):
        spec = value.strip()
        if pep440_exact(spec) is None and npm_exact(spec) is not None:
            spec = f"=={spec}"  # poetry's bare "1.2.3" is an exact pin
        return spec, (), None, None
    if isinstance(value, dict):
        spec = str(value.get("version", ""))
        if spec and pep440_exact(spec) is None and npm_exact(spec) is not None:
            spec = f"=={spec}"
        extras = tuple(sorted(canonicalize_name(str(e)) for e in value.get("extras", ())))
        marker_parts = [str(value[k]) for k in ("markers",) if k in value]
        if "python" in value:
            marker_parts.append(f"python {value['python']}")
        marker = " and ".join(marker_parts) or None
        source_keys = {
            k: value[k]
            for k in ("git", "path", "url", "source", "branch", "rev", "tag", "develop")
            if k in value
        }
        return spec, extras, marker, _source_text(source_keys) if source_keys else None
    return _source_text(value), (), None, _source_text(value)


def parse_pyproject(text: str, path: str = "pyproject.toml") -> Manifest:
    """``[project]`` dependency lists, dependency groups, uv/poetry sources and indexes."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    deps: list[Dependency] = []
    options: list[str] = []

    def pep508_list(section: str, items: Any) -> None:
        if items is None:
            return
        if not isinstance(items, list):
            raise DependencySyntaxError(f"{path}: {section} is not a list")
        for item in items:
            if isinstance(item, str):
                deps.append(_pep508(item, section))
            else:  # {include-group = "x"} and similar: an option of the file
                options.append(f"{section}: {_source_text(item)}")

    pep508_list("project.dependencies", _pop(data, "project.dependencies"))
    pep508_list("build-system.requires", _pop(data, "build-system.requires"))
    for table in ("project.optional-dependencies", "dependency-groups"):
        groups = _pop(data, table)
        if isinstance(groups, dict):
            for group, items in groups.items():
                pep508_list(f"{table}.{group}", items)
        elif groups is not None:
            raise DependencySyntaxError(f"{path}: {table} is not a table")

    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    poetry_tables: list[tuple[str, Any]] = []
    if isinstance(poetry, dict):
        for name in ("dependencies", "dev-dependencies"):
            poetry_tables.append((f"tool.poetry.{name}", poetry.pop(name, None)))
        groups = poetry.get("group")
        if isinstance(groups, dict):
            for group, body in groups.items():
                if isinstance(body, dict):
                    poetry_tables.append(
                        (f"tool.poetry.group.{group}.dependencies", body.pop("dependencies", None))
                    )
    for section, table in poetry_tables:
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            spec, extras, marker, source = _poetry_spec(value)
            deps.append(
                Dependency("pypi", section, canonicalize_name(name), spec, extras, marker, source)
            )

    sources = _pop(data, "tool.uv.sources")
    if isinstance(sources, dict):
        redirected: dict[str, str] = {
            canonicalize_name(k): _source_text(v) for k, v in sources.items()
        }
        deps = [
            Dependency(
                d.ecosystem,
                d.section,
                d.name,
                d.spec,
                d.extras,
                d.marker,
                d.source or (f"uv:{redirected[d.name]}" if d.name in redirected else None),
                d.hashes,
                d.options,
                d.line,
                d.raw,
            )
            for d in deps
        ]
        for name, value in sorted(redirected.items()):
            options.append(f"tool.uv.sources.{name} = {value}")
    for key in (
        "tool.uv.index",
        "tool.uv.index-url",
        "tool.uv.extra-index-url",
        "tool.uv.find-links",
        "tool.uv.no-index",
        "tool.poetry.source",
        "tool.pdm.source",
        "tool.pip",
        "tool.uv.pip",
    ):
        value = _pop(data, key)
        if value is not None:
            options.append(f"{key} = {_source_text(value)}")
    return Manifest(path, "pyproject", "pypi", tuple(deps), tuple(options), rest=_flat(data))


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
            data = tomllib.loads(text)
        elif name == ".yarnrc":
            data = {}
            for line in text.splitlines():
                key, _, value = line.strip().partition(" ")
                if key and not key.startswith("#"):
                    data[key] = value.strip()
        else:
            import yaml  # a declared dependency; imported here as only these files need it

            data = yaml.safe_load(text) or {}
    except (tomllib.TOMLDecodeError, ValueError) as error:
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


# -- package.json ---------------------------------------------------------------------


def _npm_dep(section: str, name: str, spec: Any) -> Dependency:
    if not isinstance(spec, str):
        return Dependency("npm", section, name, "", source=_source_text(spec), raw=str(spec))
    text = spec.strip()
    source = text if _NPM_SOURCE.match(text) else None
    return Dependency("npm", section, name, "" if source else text, source=source, raw=spec)


def parse_package_json(text: str, path: str = "package.json") -> Manifest:
    """npm manifest: the four dependency maps, overrides/resolutions, scripts, the rest."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    if not isinstance(data, dict):
        raise DependencySyntaxError(f"{path}: the top level is not an object")
    deps: list[Dependency] = []
    for section in (*_NPM_SECTIONS, *_NPM_OVERRIDES):
        table = _pop(data, section)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise DependencySyntaxError(f"{path}: {section} is not an object")
        for name, spec in table.items():
            deps.append(_npm_dep(section, str(name), spec))
    scripts = data.get("scripts", {})
    scripts = {str(k): str(v) for k, v in scripts.items()} if isinstance(scripts, dict) else {}
    options = [
        f"{key} = {_source_text(data[key])}"
        for key in ("publishConfig", "bundleDependencies", "bundledDependencies", "workspaces")
        if key in data
    ]
    return Manifest(path, "package.json", "npm", tuple(deps), tuple(options), scripts, _flat(data))


# -- lock files -----------------------------------------------------------------------


def _npm_source(resolved: Any) -> str | None:
    if not isinstance(resolved, str):
        return None
    if resolved.startswith(("http://", "https://")) and "/-/" in resolved:
        parts = urlsplit(resolved)
        return f"{parts.scheme}://{parts.netloc}"
    return resolved.split("#", 1)[0]


def parse_package_lock(text: str, path: str = "package-lock.json") -> Manifest:
    """package-lock.json v1, v2, v3 (and npm-shrinkwrap.json)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    if not isinstance(data, dict):
        raise DependencySyntaxError(f"{path}: the top level is not an object")
    locked: dict[str, LockEntry] = {}
    deps: list[Dependency] = []
    packages = data.pop("packages", None)
    legacy = data.pop("dependencies", None)
    if isinstance(packages, dict):
        for key, entry in packages.items():
            if not isinstance(entry, dict):
                raise DependencySyntaxError(f"{path}: packages[{key!r}] is not an object")
            if key == "":  # the root: a copy of the manifest's dependency maps
                for section in _NPM_SECTIONS:
                    table = entry.get(section) or {}
                    if isinstance(table, dict):
                        deps.extend(_npm_dep(section, str(n), s) for n, s in table.items())
                rest = {k: v for k, v in entry.items() if k not in _NPM_SECTIONS}
                locked[""] = LockEntry("", "", None, None, fields=_source_text(rest))
                continue
            name = str(entry.get("name") or key.rpartition("node_modules/")[2])
            locked[key] = _lock_entry(key, name, entry)
    elif isinstance(legacy, dict):

        def walk(table: Mapping[str, Any], prefix: str) -> None:
            for name, entry in table.items():
                if not isinstance(entry, dict):
                    raise DependencySyntaxError(f"{path}: dependencies[{name!r}] is not an object")
                key = f"{prefix}node_modules/{name}"
                nested = entry.get("dependencies")
                locked[key] = _lock_entry(
                    key, str(name), {k: v for k, v in entry.items() if k != "dependencies"}
                )
                if isinstance(nested, dict):
                    walk(nested, f"{key}/")

        walk(legacy, "")
    rest = _flat(data)
    return Manifest(path, "package-lock", "npm", tuple(deps), rest=rest, locked=locked)


def _lock_entry(key: str, name: str, entry: Mapping[str, Any]) -> LockEntry:
    other = {
        k: v
        for k, v in entry.items()
        if k not in ("version", "resolved", "integrity", "hasInstallScript")
    }
    version = entry.get("version")
    integrity = entry.get("integrity")
    return LockEntry(
        key,
        name,
        str(version) if version is not None else None,
        _npm_source(entry.get("resolved")),
        (str(integrity),) if integrity else (),
        bool(entry.get("hasInstallScript")),
        _source_text(other),
    )


def _python_lock(text: str, path: str, kind: Literal["uv.lock", "poetry.lock"]) -> Manifest:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    packages = data.pop("package", [])
    if not isinstance(packages, list):
        raise DependencySyntaxError(f"{path}: package is not an array of tables")
    locked: dict[str, LockEntry] = {}
    deps: list[Dependency] = []
    for entry in packages:
        if not isinstance(entry, dict) or "name" not in entry:
            raise DependencySyntaxError(f"{path}: a [[package]] has no name")
        name = canonicalize_name(str(entry["name"]))
        source = entry.get("source")
        if (
            kind == "uv.lock"
            and isinstance(source, dict)
            and (source.get("virtual") is not None or source.get("editable") == ".")
        ):
            # The project itself: its declared requirements mirror the manifest.
            requires = (entry.get("metadata") or {}).get("requires-dist") or []
            for item in requires:
                if isinstance(item, dict) and "name" in item:
                    deps.append(
                        Dependency(
                            "pypi",
                            "project.dependencies",
                            canonicalize_name(str(item["name"])),
                            str(item.get("specifier", "")),
                            tuple(sorted(item.get("extras", ()))),
                            item.get("marker"),
                            _source_text(
                                {k: item[k] for k in ("git", "url", "path", "index") if k in item}
                            )
                            if any(k in item for k in ("git", "url", "path", "index"))
                            else None,
                        )
                    )
            metadata = entry.get("metadata")
            kept = {k: v for k, v in entry.items() if k != "metadata"}
            if isinstance(metadata, dict):  # requires-dist is compared as dependencies
                kept["metadata"] = {k: v for k, v in metadata.items() if k != "requires-dist"}
            locked["<project>"] = LockEntry(
                "<project>", name, None, None, fields=_source_text(kept)
            )
            continue
        hashes: list[str] = []
        for blob in [entry.get("sdist"), *(entry.get("wheels") or [])]:
            if isinstance(blob, dict) and blob.get("hash"):
                hashes.append(str(blob["hash"]))
        for blob in entry.get("files") or []:
            if isinstance(blob, dict) and blob.get("hash"):
                hashes.append(str(blob["hash"]))
        other = {
            k: v
            for k, v in entry.items()
            if k not in ("name", "version", "source", "sdist", "wheels", "files")
        }
        key: str = name
        n = 1
        while key in locked:
            n += 1
            key = f"{name}#{n}"
        version = entry.get("version")
        locked[key] = LockEntry(
            key,
            name,
            str(version) if version is not None else None,
            _source_text(source) if source is not None else None,
            tuple(sorted(hashes)),
            False,
            _source_text(other),
        )
    data.pop(
        "metadata", None
    ) if kind == "poetry.lock" else None  # content-hash changes on any bump
    return Manifest(path, kind, "pypi", tuple(deps), rest=_flat(data), locked=locked)


def file_kind(path: str) -> FileKind | None:
    """What a dependency-related file is, by name; None for anything else."""
    name = PurePosixPath(path).name.lower()
    if name == "package.json":
        return "package.json"
    if name in ("package-lock.json", "npm-shrinkwrap.json"):
        return "package-lock"
    if name == "uv.lock":
        return "uv.lock"
    if name == "poetry.lock":
        return "poetry.lock"
    if name == "pyproject.toml":
        return "pyproject"
    if name in ("pip.conf", "pip.ini"):
        return "pip-config"
    if name in _INSTALLER_CONFIGS:
        return "installer-config"
    if name.endswith((".txt", ".in")) and ("requirement" in name or "constraint" in name):
        return "requirements"
    return None


def parse_dependency_file(path: str, data: bytes, kind: FileKind | None = None) -> Manifest:
    """Parse ``data`` as the dependency file ``path`` names (or as ``kind``)."""
    kind = kind or file_kind(path)
    limit = MAX_LOCK_FILE_BYTES.get(kind or "", MAX_FILE_BYTES)
    if len(data) > limit:
        raise DependencySyntaxError(f"{path}: too large to analyse ({len(data)} bytes > {limit})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DependencySyntaxError(f"{path}: not UTF-8 ({error.reason})") from None
    parsers: dict[FileKind, Callable[[str, str], Manifest]] = {
        "requirements": parse_requirements,
        "pyproject": parse_pyproject,
        "package.json": parse_package_json,
        "package-lock": parse_package_lock,
        "uv.lock": lambda t, p: _python_lock(t, p, "uv.lock"),
        "poetry.lock": lambda t, p: _python_lock(t, p, "poetry.lock"),
        "pip-config": parse_pip_config,
        "installer-config": parse_installer_config,
    }
    if kind is None:
        raise DependencySyntaxError(f"{path}: not a known dependency file")
    try:
        return parsers[kind](text, path)
    except DependencySyntaxError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError, IndexError, RecursionError) as error:
        # An unexpected shape (a table where a string belongs, ...): unparsable, not a crash.
        raise DependencySyntaxError(
            f"{path}: unexpected structure ({type(error).__name__})"
        ) from None


# -- comparisons ----------------------------------------------------------------------

HashState = Literal["none", "kept", "replaced", "removed", "added"]


@dataclass(frozen=True, slots=True)
class DependencyChange:
    """One dependency added, removed or changed between two versions of a manifest."""

    section: str
    name: str
    before: Dependency | None
    after: Dependency | None

    @property
    def kind(self) -> Literal["added", "removed", "changed"]:
        if self.before is None:
            return "added"
        return "removed" if self.after is None else "changed"

    def _same(self, field: str) -> bool:
        """Both sides exist and agree on ``field``."""
        if self.before is None or self.after is None:
            return False
        return bool(getattr(self.before, field) == getattr(self.after, field))

    @property
    def same_source(self) -> bool:
        return self._same("source")

    @property
    def same_extras(self) -> bool:
        return self._same("extras")

    @property
    def same_marker(self) -> bool:
        return self._same("marker")

    @property
    def same_options(self) -> bool:
        return self._same("options")

    @property
    def hashes(self) -> HashState:
        old = self.before.hashes if self.before else ()
        new = self.after.hashes if self.after else ()
        if not old:
            return "added" if new else "none"
        if not new:
            return "removed"
        return "kept" if set(old) <= set(new) else "replaced"

    @property
    def old_pin(self) -> str | None:
        return self.before.pin if self.before else None

    @property
    def new_pin(self) -> str | None:
        return self.after.pin if self.after else None

    @property
    def ecosystem(self) -> Ecosystem:
        dep = self.after or self.before
        assert dep is not None
        return dep.ecosystem

    @property
    def newer(self) -> bool | None:
        """Exact pin -> strictly newer exact pin."""
        if self.old_pin is None or self.new_pin is None:
            return None
        return is_newer(self.ecosystem, self.old_pin, self.new_pin)

    @property
    def major_bump(self) -> bool:
        if self.old_pin is None or self.new_pin is None:
            return False
        old, new = major_of(self.ecosystem, self.old_pin), major_of(self.ecosystem, self.new_pin)
        return old is None or new is None or old != new

    @property
    def narrowed(self) -> bool | None:
        """The new range admits only versions the old one did (None: cannot tell)."""
        if self.before is None or self.after is None:
            return None
        if self.before.source is not None or self.after.source is not None:
            return None
        if self.ecosystem == "npm":
            return npm_range_subset(self.after.spec, self.before.spec)
        return pep440_subset(self.after.spec, self.before.spec)

    @property
    def loosened(self) -> bool:
        """The new range lets in versions the old one kept out, other than by an upgrade.

        An exact pin that became a range (or nothing), a lower bound that moved down, an
        upper bound that was dropped, or a range that cannot be parsed. An exact pin moved
        to another exact pin is not loosened (see :attr:`newer` for the direction);
        ``^4.17.20`` -> ``^5.0.0`` is an upgrade, not a loosening.
        """
        if self.before is None or self.after is None or self.after.source is not None:
            return False
        if self.before.source is not None:
            return False
        if self.new_pin is not None:
            return False
        if self.old_pin is not None:
            return True
        if self.narrowed is True:
            return False
        old, new = (
            _intervals(self.ecosystem, self.before.spec),
            _intervals(self.ecosystem, self.after.spec),
        )
        if old is None or new is None or not new:
            return new is None or old is None
        old_low, new_low = _lowest(old), _lowest(new)
        if new_low is None and old_low is not None:
            return True
        if new_low is not None and old_low is not None and new_low < old_low:
            return True
        return any(i[2] is None for i in new) and all(i[2] is not None for i in old)

    @property
    def disabled(self) -> bool:
        """A marker that holds nowhere now drops a package that was installed before."""
        if self.after is None or self.after.marker is None:
            return False
        before_off = (
            self.before is not None
            and self.before.marker is not None
            and (marker_never_holds(self.before.marker))
        )
        return not before_off and marker_never_holds(self.after.marker)

    @property
    def disabled_on_linux(self) -> bool:
        """A changed marker now drops a package on Linux (where CI and servers run)."""
        if self.before is None or self.after is None or self.after.marker is None:
            return False
        if self.before.marker == self.after.marker:
            return False
        was_on = self.before.marker is None or not marker_never_holds(
            self.before.marker, platforms=("linux",)
        )
        return was_on and marker_never_holds(self.after.marker, platforms=("linux",))

    def bump_problems(self, *, allow_major: bool) -> list[str]:
        """Why this is not "an exact pin moved to a strictly newer exact version" ([] if it is)."""
        where = f"{self.name} ({self.section})"
        if self.before is None:
            return [f"{where} is a new package"]
        if self.after is None:
            return [f"{where} was removed"]
        problems: list[str] = []
        if not self.same_source:
            problems.append(f"{where} changes its source")
        if not self.same_extras:
            problems.append(
                f"{where} changes extras {list(self.before.extras)} -> {list(self.after.extras)}"
            )
        if not self.same_marker:
            problems.append(f"{where} changes its environment marker")
        if not self.same_options:
            problems.append(f"{where} changes its per-line installer options")
        if self.hashes == "removed":
            problems.append(f"{where} drops its --hash values")
        elif self.hashes == "added":
            problems.append(f"{where} gains --hash values it did not have")
        if self.old_pin is None:
            problems.append(f"{where} was not pinned exactly before ({self.before.spec or 'any'})")
        elif self.new_pin is None:
            problems.append(
                f"{where} is no longer an exact pin ({self.before.spec} -> "
                f"{self.after.spec or self.after.source or 'any'})"
            )
        elif self.newer is not True:
            problems.append(
                f"{where} does not move to a newer version ({self.old_pin} -> {self.new_pin})"
            )
        elif self.major_bump and not allow_major:
            problems.append(f"{where} is a major upgrade ({self.old_pin} -> {self.new_pin})")
        return problems


@dataclass(frozen=True, slots=True)
class ManifestDiff:
    """What changed between two parses of the same dependency file."""

    changes: tuple[DependencyChange, ...]
    options_added: tuple[str, ...]
    options_removed: tuple[str, ...]
    other_keys: tuple[str, ...]
    scripts_added: tuple[str, ...]
    scripts_changed: tuple[str, ...]


def compare_manifests(before: Manifest, after: Manifest) -> ManifestDiff:
    """Dependencies added/removed/changed, options and scripts, other changed keys."""
    old, new = before.by_key(), after.by_key()
    changes = tuple(
        DependencyChange(key[0], key[1].partition("#")[0], old.get(key), new.get(key))
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key) and not _same_dep(old.get(key), new.get(key))
    )
    old_opts, new_opts = set(before.options), set(after.options)
    other = tuple(
        sorted(
            k
            for k in before.rest.keys() | after.rest.keys()
            if before.rest.get(k) != after.rest.get(k)
        )
    )
    return ManifestDiff(
        changes,
        tuple(sorted(new_opts - old_opts)),
        tuple(sorted(old_opts - new_opts)),
        other,
        tuple(sorted(after.scripts.keys() - before.scripts.keys())),
        tuple(
            sorted(
                k
                for k in after.scripts.keys() & before.scripts.keys()
                if after.scripts[k] != before.scripts[k]
            )
        ),
    )


def _same_dep(a: Dependency | None, b: Dependency | None) -> bool:
    """Equal but for position and spelling (line numbers, raw text)."""
    if a is None or b is None:
        return False
    return (
        a.ecosystem,
        a.section,
        a.name,
        a.spec,
        a.extras,
        a.marker,
        a.source,
        a.hashes,
        a.options,
    ) == (b.ecosystem, b.section, b.name, b.spec, b.extras, b.marker, b.source, b.hashes, b.options)


@dataclass(frozen=True, slots=True)
class LockChange:
    """One lock entry added, removed or changed."""

    key: str
    before: LockEntry | None
    after: LockEntry | None

    @property
    def name(self) -> str:
        entry = self.after or self.before
        assert entry is not None
        return entry.name

    def problems(self, ecosystem: Ecosystem, *, allow_major: bool) -> list[str]:
        """Why this is not a same-source upgrade of an existing entry ([] if it is)."""
        where = f"lock entry {self.key or '<root>'}"
        if self.before is None:
            return [f"{where} is new"]
        if self.after is None:
            return [f"{where} was removed"]
        if self.key in ("", "<project>"):
            return [f"{where} (the project's own requirements) changed"]
        problems: list[str] = []
        if self.before.source != self.after.source:
            problems.append(f"{where} changes its source")
        if self.after.install_script and not self.before.install_script:
            problems.append(f"{where} gains an install script")
        if self.before.integrity and not self.after.integrity:
            problems.append(f"{where} drops its integrity hashes")
        old, new = self.before.version, self.after.version
        if old is None or new is None:
            problems.append(f"{where} has no version")
        elif old != new:
            newer = is_newer(ecosystem, old, new)
            if newer is not True:
                problems.append(f"{where} does not move to a newer version ({old} -> {new})")
            elif major_of(ecosystem, old) != major_of(ecosystem, new) and not allow_major:
                problems.append(f"{where} is a major upgrade ({old} -> {new})")
            elif self.before.integrity == self.after.integrity:
                problems.append(f"{where} changes version but keeps the old integrity hash")
        elif self.before.integrity != self.after.integrity:
            problems.append(f"{where} changes its integrity hash without a new version")
        return problems


def compare_locks(before: Manifest, after: Manifest) -> tuple[LockChange, ...]:
    keys = sorted(before.locked.keys() | after.locked.keys())
    return tuple(
        LockChange(k, before.locked.get(k), after.locked.get(k))
        for k in keys
        if before.locked.get(k) != after.locked.get(k)
    )


def lock_entry_for(lock: Manifest, name: str) -> LockEntry | None:
    """The top-level lock entry of a package (``node_modules/x`` or the name)."""
    if lock.kind == "package-lock":
        return lock.locked.get(f"node_modules/{name}")
    return lock.locked.get(canonicalize_name(name))


def lock_mismatches(
    manifest: Manifest, lock: Manifest, *, names: set[str] | None = None
) -> list[str]:
    """Exact manifest pins whose lock entry has another version, and lock roots that differ.

    ``names`` limits the check to those packages (e.g. the ones a change moved).
    """
    problems: list[str] = []
    for dep in manifest.dependencies:
        if names is not None and dep.name not in names:
            continue
        pin = dep.pin
        if pin is None or dep.section in _NPM_OVERRIDES:
            continue
        entry = lock_entry_for(lock, dep.name)
        if entry is None:
            if lock.kind != "package-lock" or dep.section != "peerDependencies":
                problems.append(f"{dep.name} {pin} has no entry in {lock.path}")
            continue
        if entry.version is None or (
            entry.version != pin
            and is_newer(dep.ecosystem, entry.version, pin) is not None
            and not _same_version(dep.ecosystem, entry.version, pin)
        ):
            problems.append(
                f"{dep.name}: {manifest.path} pins {pin}, {lock.path} has {entry.version}"
            )
    if lock.dependencies:  # the lock's copy of the manifest requirements must agree
        for dep in lock.dependencies:
            if names is not None and dep.name not in names:
                continue
            if manifest.kind == "pyproject" and dep.section != "project.dependencies":
                continue
            match = [d for d in manifest.dependencies if d.name == dep.name]
            if not match:
                problems.append(
                    f"{lock.path} requires {dep.name}, which {manifest.path} does not list"
                )
            elif not any(_same_spec(dep, d) for d in match):
                problems.append(
                    f"{dep.name}: {lock.path} records {dep.spec or dep.source}, "
                    f"{manifest.path} declares {match[0].spec or match[0].source}"
                )
    return problems


def _same_version(ecosystem: Ecosystem, a: str, b: str) -> bool:
    try:
        if ecosystem == "npm":
            return bool(nodesemver.eq(a, b, False))
        return Version(a) == Version(b)
    except (InvalidVersion, ValueError, TypeError):
        return a == b


def _same_spec(a: Dependency, b: Dependency) -> bool:
    if a.ecosystem == "npm":
        return a.spec == b.spec and a.source == b.source
    try:
        return SpecifierSet(a.spec) == SpecifierSet(b.spec)
    except InvalidSpecifier:
        return a.spec == b.spec


def benchmark_text(text: str) -> object:
    """What a decision does with ``text`` as a requirements file (benchmarks/analysis.py)."""
    manifest = parse_requirements(text, strict=False)
    return compare_manifests(manifest, manifest)
