"""Versions and version ranges: PEP 440 (``packaging``) and npm (``node-semver``).

Ranges are compared as unions of intervals, so "is the new range inside the old one" is
answered exactly for the operators both grammars share, never by looking at digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache, wraps
from typing import Any, Literal

import nodesemver  # type: ignore[import-untyped]
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

Ecosystem = Literal["pypi", "npm"]

# npm specs that name a source instead of a version range.
_NPM_SOURCE = re.compile(
    r"(?i)^\s*(git\+|git:|https?:|file:|link:|npm:|github:|gitlab:|bitbucket:|gist:|workspace:|portal:|patch:|\.\.?/|~/|/|[\w.-]+/[\w.-]+(#.*)?$)"
)
# Bounds on untrusted input: node-semver's range parser is quadratic in whitespace runs,
# and every `!=` clause splits an interval, so longer specs are "cannot tell" (None).
MAX_NPM_SPEC = 256
MAX_PEP440_CLAUSES = 32

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
