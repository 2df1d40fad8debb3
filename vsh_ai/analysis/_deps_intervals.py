"""Sets of versions as sorted unions of intervals, and how two such sets relate.

An interval is ``(low, low_inclusive, high, high_inclusive)`` over totally ordered keys
(:mod:`._deps_pep440` keys for Python, semver keys for npm); ``None`` is unbounded. The
grammars (PEP 440, Poetry, npm) build intervals; every rule that says "loosened",
"narrowed", "widened" or "downgraded" decides with :func:`relate`, never with digits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# An interval: (low, low_inclusive, high, high_inclusive); None is unbounded.
_Interval = tuple[Any, bool, Any, bool]
FULL: _Interval = (None, False, None, False)


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


def _lowest(intervals: Sequence[_Interval]) -> Any:
    """The smallest lower bound (None: unbounded below)."""
    lows = [i[0] for i in intervals]
    return None if any(low is None for low in lows) else min(lows)


def complement(intervals: list[_Interval]) -> list[_Interval]:
    """Every key the intervals leave out."""
    out: list[_Interval] = []
    low: Any = None
    low_inclusive = False
    for lo, lo_inclusive, hi, hi_inclusive in _merge(intervals):
        if lo is not None:
            gap = (low, low_inclusive, lo, not lo_inclusive)
            if _nonempty(gap):
                out.append(gap)
        if hi is None:
            return out
        low, low_inclusive = hi, not hi_inclusive
    out.append((low, low_inclusive, None, False))
    return out


def _nonempty(i: _Interval) -> bool:
    if i[0] is None or i[2] is None:
        return True
    return bool(i[0] < i[2] or (i[0] == i[2] and i[1] and i[3]))


@dataclass(frozen=True, slots=True)
class Relation:
    """How a new range relates to the old one (each answer exact over the interval keys).

    ``floor``: "lower" when the new range admits a version below every version the old
    one admits, "higher" when the old range admits a version below everything the new
    one admits, else "same". ``ceiling_dropped``: the old range had an upper bound and
    the new one has none.
    """

    subset: bool  # every version the new range admits, the old one admitted
    superset: bool  # every version the old range admitted, the new one admits
    disjoint: bool
    empty: bool  # the new range admits nothing
    floor: str
    ceiling_dropped: bool

    @property
    def equal(self) -> bool:
        return self.subset and self.superset

    @property
    def narrowed(self) -> bool:
        """Strictly fewer versions, all of them admitted before."""
        return self.subset and not self.superset and not self.empty

    @property
    def widened(self) -> bool:
        """Strictly more versions, including all the old ones."""
        return self.superset and not self.subset


def relate(new: list[_Interval], old: list[_Interval]) -> Relation:
    """The relation of ``new`` to ``old``."""
    if not new or not old:
        floor = "same"
    elif _lt_low(_low_of(new), _low_of(old)):
        floor = "lower"
    elif _lt_low(_low_of(old), _low_of(new)):
        floor = "higher"
    else:
        floor = "same"
    unbounded_new = any(i[2] is None for i in new)
    unbounded_old = any(i[2] is None for i in old)
    return Relation(
        subset=_subset(new, old),
        superset=_subset(old, new),
        disjoint=not _intersect_all([new, old]),
        empty=not new,
        floor=floor,
        ceiling_dropped=bool(old) and unbounded_new and not unbounded_old,
    )


def _low_of(intervals: Sequence[_Interval]) -> _Interval:
    """The interval with the smallest lower bound (for :func:`_lt_low`)."""
    best = intervals[0]
    for interval in intervals[1:]:
        if _lt_low(interval, best):
            best = interval
    return best


def intersect_all(sets: Iterable[list[_Interval]]) -> list[_Interval]:
    return _intersect_all(sets)
