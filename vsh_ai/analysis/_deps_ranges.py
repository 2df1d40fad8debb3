"""Versions and version ranges: PEP 440 (``packaging``) and npm (``node-semver``).

Ranges are compared as unions of intervals, so "is the new range inside the old one" is
answered exactly for the operators both grammars share, never by looking at digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, Literal

import nodesemver  # type: ignore[import-untyped]
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ._deps_intervals import Relation, _intersect_all, _Interval, _subset, relate
from ._deps_pep440 import python_intervals as _python_intervals
from ._deps_pep440 import version_key

Ecosystem = Literal["pypi", "npm"]

# npm specs that name a source instead of a version range.
_NPM_SOURCE = re.compile(
    r"(?i)^\s*(git\+|git:|https?:|file:|link:|npm:|github:|gitlab:|bitbucket:|gist:|workspace:|portal:|patch:|\.\.?/|~/|/|[\w.-]+/[\w.-]+(#.*)?$)"
)
# Bounds on untrusted input: node-semver's range parser is quadratic in whitespace runs,
# and every `!=` clause splits an interval, so longer specs are "cannot tell" (None).
MAX_NPM_SPEC = 256


def pep440_subset(new: str, old: str) -> bool | None:
    """True when every version ``new`` admits, ``old`` admits too (never loosened)."""
    a, b = python_intervals(new), python_intervals(old)
    return None if a is None or b is None else _subset(a, b)


_SHORT = 256  # specifiers up to this long are remembered (bounded memory on crafted input)


def _by_spec(function: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """``function`` remembered per (short) specifier: a pin is read many times per change."""
    remembered = lru_cache(maxsize=1 << 14)(function)

    @wraps(function)
    def cached(spec: str) -> str | None:
        return remembered(spec) if len(spec) <= _SHORT else function(spec)

    return cached


def _intervals_by_spec(
    function: Callable[[str], list[_Interval] | None],
) -> Callable[[str], list[_Interval] | None]:
    """``function`` remembered per (short) specifier, each caller getting its own list: one
    change asks about each range several times (every rule, both sides), and parsing a
    range (node-semver, ``packaging``) costs about 0.1 ms."""
    remembered = lru_cache(maxsize=1 << 14)(
        lambda spec: None if (found := function(spec)) is None else tuple(found)
    )

    @wraps(function)
    def cached(spec: str) -> list[_Interval] | None:
        if len(spec) > _SHORT:
            return function(spec)
        found = remembered(spec)
        return None if found is None else list(found)

    return cached


python_intervals = _intervals_by_spec(_python_intervals)


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


@_intervals_by_spec
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
    return npm_intervals(spec) if ecosystem == "npm" else python_intervals(spec)


def floor_major(ecosystem: Ecosystem, spec: str) -> int | None:
    """The major version of the lowest version ``spec`` admits (None: unbounded or unknown)."""
    found = _intervals(ecosystem, spec)
    if not found or any(i[0] is None for i in found):
        return None
    low = min(i[0] for i in found)
    if ecosystem == "npm":
        return int(low[0])
    release = low[1]
    return int(release[0]) if release else 0


def below_major(ecosystem: Ecosystem, spec: str, major: int) -> bool:
    """Every version ``spec`` admits is below ``major + 1`` (its pre-releases excluded)."""
    found = _intervals(ecosystem, spec)
    if not found or any(i[2] is None for i in found):
        return False
    if ecosystem == "npm":  # "<9.0.0" leaves out 9.0.0-beta by npm's pre-release rule
        return all(
            i[2] <= (major + 1, 0, 0, 1, ()) if not i[3] else i[2] < (major + 1, 0, 0, 0, ())
            for i in found
        )
    limit = version_key(Version(f"{major + 1}.dev0"))
    return all(i[2] <= limit if not i[3] else i[2] < limit for i in found)


def relate_ranges(ecosystem: Ecosystem, new: str, old: str) -> Relation | None:
    """How the range ``new`` relates to ``old`` (None: either cannot be read as a range)."""
    a, b = _intervals(ecosystem, new), _intervals(ecosystem, old)
    return None if a is None or b is None else relate(a, b)


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
        try:
            return SpecifierSet(spec).contains(Version(version), prereleases=True)
        except InvalidSpecifier:  # a Poetry constraint (^1.2, ~1.2.3, 1.2.*)
            found = python_intervals(spec)
            key = version_key(Version(version))
            return None if found is None else any(_holds(i, key) for i in found)
    except (InvalidVersion, InvalidSpecifier, ValueError, TypeError):
        return None


def _holds(interval: _Interval, key: object) -> bool:
    low, low_inclusive, high, high_inclusive = interval
    above = low is None or low < key or (low_inclusive and low == key)
    below = high is None or key < high or (high_inclusive and key == high)
    return bool(above and below)


def major_of(ecosystem: Ecosystem, version: str) -> int | None:
    try:
        if ecosystem == "npm":
            return int(nodesemver.make_semver(version, loose=False).major)
        return Version(version).release[0]
    except (InvalidVersion, ValueError, TypeError, IndexError):
        return None


def _release_of(ecosystem: Ecosystem, key: Any) -> tuple[int, ...] | None:
    """The release numbers of an interval bound's key (None: another PEP 440 epoch)."""
    if ecosystem == "npm":
        return (int(key[0]), int(key[1]), int(key[2]))
    return None if key[0] != 0 else tuple(key[1])


def _padded(release: tuple[int, ...], width: int) -> tuple[int, ...]:
    return (*release, *(0,) * (width - len(release)))


def ceiling_widened(ecosystem: Ecosystem, new: str, old: str) -> tuple[str, str] | None:
    """(old ceiling, new ceiling) when ``new``'s upper bound rises further above its floor
    than ``old``'s did above its own: ``~18.2.0`` (below 18.3) -> ``^18.2.1`` (below 19),
    ``~=0.27.0`` -> ``~=0.27``, ``>=2.0.7,<3`` -> ``>=2.2.2,<4``. A same-width move
    (``~4.18.2`` -> ``~4.19.2``, ``~=2.31.0`` -> ``~=2.32.0``) and an unchanged ceiling
    are None, and so are ranges unbounded above (a dropped ceiling is its own finding)
    or not intervals. The span is measured where the old bounds first differ: below
    4.19 from 4.18.2 is one minor, so the new ceiling may sit one minor above its floor.
    """
    a, b = _intervals(ecosystem, new), _intervals(ecosystem, old)
    if not a or not b or any(i[2] is None for i in a) or any(i[2] is None for i in b):
        return None
    new_high = _release_of(ecosystem, max(i[2] for i in a))
    old_high = _release_of(ecosystem, max(i[2] for i in b))
    if new_high is None or old_high is None:
        return None
    width = max(len(new_high), len(old_high), 3)
    new_high, old_high = _padded(new_high, width), _padded(old_high, width)
    if new_high <= old_high:
        return None
    shown = (".".join(map(str, old_high)), ".".join(map(str, new_high)))
    if any(i[0] is None for i in a) or any(i[0] is None for i in b):
        return shown  # no floor to measure a span from: a higher ceiling is wider
    old_low = _release_of(ecosystem, min(i[0] for i in b))
    new_low = _release_of(ecosystem, min(i[0] for i in a))
    if old_low is None or new_low is None:
        return shown
    width = max(width, len(old_low), len(new_low))
    old_low, new_low = _padded(old_low, width), _padded(new_low, width)
    old_high, new_high = _padded(old_high, width), _padded(new_high, width)
    at = next((k for k in range(width) if old_low[k] != old_high[k]), None)
    if at is None:
        return shown  # the old range spanned no release at all
    limit = (*new_low[:at], new_low[at] + old_high[at] - old_low[at], *old_high[at + 1 :])
    return shown if new_high > limit else None
