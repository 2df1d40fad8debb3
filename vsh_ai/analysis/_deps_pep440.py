"""PEP 440 specifiers and Poetry constraints as intervals over version keys.

Keys order versions exactly as :class:`packaging.version.Version` does (epoch, release
without trailing zeros, pre, post, dev, local). Bounds follow PEP 440's exclusions:
``<2.0`` is ``<2.0.dev0`` (it leaves out ``2.0rc1``); ``==1.0`` and ``<=1.0`` reach past
every local label (``1.0+local``); ``>1.0`` starts after every post release of 1.0. Where PEP 440's
exclusions are not an interval (``>1.0rc1``, ``<1.0.post1``, ``===``) the answer is
None: "cannot tell", never a guess. Versions are compared as ``contains(v,
prereleases=True)`` would (pre-releases are versions too).

Poetry's grammar (``^``, ``~``, ``*``, ``1.2.*``, bare versions, ``,``/space for "and",
``||`` for "or") is translated operator by operator into the same intervals, following
poetry-core's ``parse_constraint`` (``^0.2.3`` is ``>=0.2.3,<0.3.0``).
"""

from __future__ import annotations

import re
from typing import Any

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ._deps_intervals import FULL, _intersect_all, _Interval, complement

MAX_PEP440_CLAUSES = 32
_AFTER = (3, "", 0)  # sorts after every version of a release
_AFTER_LOCALS = ((2, 0, ""),)  # sorts after every local label


def _release(version: Version) -> tuple[int, ...]:
    release = list(version.release)
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    if release == [0]:
        return ()
    return tuple(release)


def version_key(version: Version) -> tuple[Any, ...]:
    """A tuple ordered exactly like ``version`` (packaging's comparison key, spelled out)."""
    if version.pre is None and version.post is None and version.dev is not None:
        pre: tuple[Any, ...] = (0, "", 0)
    elif version.pre is None:
        pre = (2, "", 0)
    else:
        pre = (1, version.pre[0], version.pre[1])
    post = -1 if version.post is None else version.post
    dev = (1, 0) if version.dev is None else (0, version.dev)
    local: tuple[Any, ...] = ()
    if version.local is not None:
        local = tuple(
            (1, int(part), "") if part.isdigit() else (0, 0, part)
            for part in version.local.split(".")
        )
    return (version.epoch, _release(version), pre, post, dev, local)


def _before_release(version: Version, release: tuple[int, ...] | None = None) -> tuple[Any, ...]:
    """The key of ``R.dev0``, the smallest version of a release (bounds stay canonical)."""
    parts = ".".join(map(str, version.release if release is None else release))
    return version_key(Version(f"{version.epoch}!{parts}.dev0"))


def _after_release(version: Version) -> tuple[Any, ...]:
    return (version.epoch, _release(version), _AFTER)


def _after_locals(version: Version) -> tuple[Any, ...]:
    return (*version_key(version)[:5], _AFTER_LOCALS)


def _plain(version: Version) -> bool:
    return version.pre is None and version.post is None and version.dev is None


def _prefix(version: Version, release: tuple[int, ...]) -> list[_Interval]:
    """``==X.Y.*``: every version whose zero-padded release starts with ``release``."""
    upper = (*release[:-1], release[-1] + 1)
    return [(_before_release(version, release), True, _before_release(version, upper), False)]


def _spec_intervals(spec: Specifier) -> list[_Interval] | None:
    op, text = spec.operator, spec.version
    if op == "===":
        return None
    if text.endswith(".*"):
        version = Version(text[:-2])
        if not _plain(version) or version.local is not None:
            return None
        prefix = _prefix(version, version.release)
        if op == "==":
            return prefix
        return complement(prefix) if op == "!=" else None
    version = Version(text)
    exact = [(version_key(version), True, version_key(version), True)]
    if version.local is None:
        exact = [(version_key(version), True, _after_locals(version), True)]
    if op == "==":
        return exact
    if op == "!=":
        return complement(exact)
    if op == ">=":
        return [(version_key(version), True, None, False)]
    if op == "<=":
        return [(None, False, _after_locals(version), True)]
    if op == ">":
        return [(_after_release(version), False, None, False)] if _plain(version) else None
    if op == "<":
        if version.is_prerelease:
            return [(None, False, version_key(version), False)]
        return [(None, False, _before_release(version), False)] if _plain(version) else None
    if op == "~=":
        release = version.release
        if len(release) < 2:
            return None
        floor: _Interval = (version_key(version), True, None, False)
        return _intersect_all([[floor], _prefix(version, release[:-1])])
    return None


_UNIVERSE: list[_Interval] = [((0, (), (0, "", 0), -1, (0, 0), ()), True, None, False)]  # >=0.dev0


def pep440_intervals(specifier: str) -> list[_Interval] | None:
    """The versions a PEP 440 specifier set admits, as intervals; None if not parseable."""
    try:
        specs = list(SpecifierSet(specifier))
        if len(specs) > MAX_PEP440_CLAUSES:
            return None
        pieces = [_spec_intervals(s) for s in specs]
    except (InvalidSpecifier, InvalidVersion, ValueError):
        return None
    if any(p is None for p in pieces):
        return None
    return _intersect_all([_UNIVERSE, *(p for p in pieces if p is not None)])


# -- Poetry ---------------------------------------------------------------------------

_POETRY_OR = re.compile(r"\s*\|\|?\s*")
_POETRY_ATOM = re.compile(r"\s*(\^|~=|~|===|==|!=|>=|<=|>|<|=)?\s*([^\s,|<>=!~^]+)\s*,?")
_ANY = ("*", "x", "X", "")


def _next(release: tuple[int, ...], at: int) -> tuple[int, ...]:
    padded = (*release, 0, 0, 0)[: at + 1]
    return (*padded[:at], padded[at] + 1)


def _poetry_atom(op: str, text: str) -> list[_Interval] | None:
    if text in _ANY and op in ("", "=", "=="):
        return [FULL]
    if text.endswith((".*", ".x", ".X")):
        text = text[:-2] + ".*"
        op = op or "=="
        if op == "=":
            op = "=="
    if op in ("^", "~"):
        version = Version(text)
        release = version.release
        if op == "~":
            at = 0 if len(release) == 1 else 1
        elif release[0] > 0 or len(release) == 1:
            at = 0
        elif len(release) == 2 or release[1] > 0:
            at = 1
        else:
            at = 2
        upper = Version(".".join(map(str, _next(release, at))))
        return [(version_key(version), True, _before_release(upper), False)]
    if op in ("", "="):
        op = "=="
    return pep440_intervals(f"{op}{text}")


def poetry_intervals(constraint: str) -> list[_Interval] | None:
    """The versions a Poetry constraint admits (``^1.2``, ``~1.2.3``, ``>=1,<2 || 3.*``)."""
    text = constraint.strip()
    if len(text) > 256:
        return None
    union: list[_Interval] = []
    try:
        for alternative in _POETRY_OR.split(text):
            pieces: list[list[_Interval]] = []
            at = 0
            while at < len(alternative):
                match = _POETRY_ATOM.match(alternative, at)
                if match is None or match.end() == at:
                    return None
                atom = _poetry_atom(match.group(1) or "", match.group(2))
                if atom is None:
                    return None
                pieces.append(atom)
                at = match.end()
            union.extend(_intersect_all([_UNIVERSE, *pieces]))
    except (InvalidVersion, InvalidSpecifier, ValueError, IndexError):
        return None
    return union


def python_intervals(spec: str) -> list[_Interval] | None:
    """A Python requirement's range: PEP 440 first, else Poetry's grammar."""
    found = pep440_intervals(spec)
    return found if found is not None else poetry_intervals(spec)
