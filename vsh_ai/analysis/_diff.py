"""Line pairing in bounded time: difflib where it is cheap, unique-line anchors where not.

:func:`line_opcodes` returns :class:`difflib.SequenceMatcher`-style opcodes (``equal``,
``replace``, ``delete``, ``insert``) pairing the lines of two versions of a file.

1. Common leading and trailing lines are paired first (linear).
2. A middle of at most :data:`EXACT_CELLS` lines x lines goes to difflib itself
   (``autojunk=False``): small edits pair exactly as difflib pairs them.
3. A larger middle is split at *anchors*, lines that occur exactly once in each version
   (their longest increasing run of positions, patience-diff style, ``O(k log k)``); each
   gap between anchors is paired the same way, recursively (small gaps by difflib).
4. Work is bounded: each anchoring pass costs the size of its range, each difflib call
   its cells, both drawn from a budget linear in the input; a range left when the budget
   runs out, or one without anchors that is too large for difflib (long runs of
   repeated lines), is one ``replace`` block, and the result says so (``exact`` false),
   so a caller that needs a precise pairing can fail closed.

difflib alone is quadratic or worse (``autojunk=False`` on 400 repeated lines takes over a
second; every 20th line of a 20,000-line file edited takes seconds with either setting).
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

__all__ = ("EXACT_CELLS", "LineOpcodes", "Opcode", "line_opcodes")

Opcode = tuple[str, int, int, int, int]
Block = tuple[int, int, int]  # (i, j, size): old[i:i+size] == new[j:j+size]

EXACT_CELLS = 2_500
"""A middle of at most this many lines x lines is paired by difflib (a millisecond at worst)."""
_DIFFLIB_BUDGET = 250_000  # difflib cells over all gaps of one diff (~100 ms at worst)
_ANCHOR_BUDGET = 8  # anchoring passes may look at each line this many times, in all


@dataclass(frozen=True, slots=True)
class LineOpcodes:
    """Opcodes pairing ``old`` with ``new``; ``exact`` False when a gap went unpaired."""

    opcodes: tuple[Opcode, ...]
    exact: bool

    @property
    def changed(self) -> int:
        """Lines removed plus lines added (each side of a ``replace`` counts)."""
        return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in self.opcodes if tag != "equal")


# Work items: (RANGE, alo, ahi, blo, bhi) to pair, or (BLOCK, i, j, size, 0) to emit.
_RANGE, _BLOCK = 0, 1
_Item = tuple[int, int, int, int, int]


class _Pairing:
    def __init__(self, old: Sequence[Hashable], new: Sequence[Hashable]) -> None:
        self.old = old
        self.new = new
        self.difflib_budget = _DIFFLIB_BUDGET
        self.anchor_budget = _ANCHOR_BUDGET * (len(old) + len(new)) + 1024
        self.exact = True

    def blocks(self) -> list[Block]:
        """Matching blocks of ``old`` and ``new``, in order (adjacent ones not yet joined)."""
        out: list[Block] = []
        work: list[_Item] = [(_RANGE, 0, len(self.old), 0, len(self.new))]
        while work:  # depth first, in order: a range's parts go on top, first part last
            kind, a, b, c, d = work.pop()
            if kind == _BLOCK:
                out.append((a, b, c))
            else:
                work.extend(reversed(self._range(a, b, c, d)))
        return out

    def _range(self, alo: int, ahi: int, blo: int, bhi: int) -> list[_Item]:
        """The parts of one range: its common head, its middle's parts, its common tail."""
        old, new = self.old, self.new
        start_a, start_b, end_a = alo, blo, ahi
        while alo < ahi and blo < bhi and old[alo] == new[blo]:
            alo += 1
            blo += 1
        while alo < ahi and blo < bhi and old[ahi - 1] == new[bhi - 1]:
            ahi -= 1
            bhi -= 1
        parts: list[_Item] = []
        if alo > start_a:
            parts.append((_BLOCK, start_a, start_b, alo - start_a, 0))
        if alo < ahi and blo < bhi:
            parts.extend(self._middle(alo, ahi, blo, bhi))
        if ahi < end_a:
            parts.append((_BLOCK, ahi, bhi, end_a - ahi, 0))
        return parts

    def _middle(self, alo: int, ahi: int, blo: int, bhi: int) -> list[_Item]:
        cells = (ahi - alo) * (bhi - blo)
        if cells <= EXACT_CELLS and cells <= self.difflib_budget:
            self.difflib_budget -= cells
            matcher = difflib.SequenceMatcher(
                None, self.old[alo:ahi], self.new[blo:bhi], autojunk=False
            )
            return [
                (_BLOCK, alo + i, blo + j, n, 0) for i, j, n in matcher.get_matching_blocks() if n
            ]
        size = (ahi - alo) + (bhi - blo)
        if size > self.anchor_budget:
            self.exact = False  # out of budget: this range stays one replace block
            return []
        self.anchor_budget -= size
        anchors = self._anchors(alo, ahi, blo, bhi)
        if not anchors:
            self.exact = False  # nothing unique to pair by, and too large for difflib
            return []
        parts: list[_Item] = []
        i, j = alo, blo
        for a, b in anchors:
            if a > i or b > j:
                parts.append((_RANGE, i, a, j, b))
            parts.append((_BLOCK, a, b, 1, 0))
            i, j = a + 1, b + 1
        if i < ahi or j < bhi:
            parts.append((_RANGE, i, ahi, j, bhi))
        return parts

    def _anchors(self, alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
        """Lines unique in both ranges, as (old, new) positions increasing in both."""
        seen: dict[Hashable, int] = {}  # line -> its position in old, or -1 if repeated
        for i in range(alo, ahi):
            line = self.old[i]
            seen[line] = -1 if line in seen else i
        where: dict[Hashable, int] = {}  # line unique in old -> its position in new, or -1
        for j in range(blo, bhi):
            line = self.new[j]
            if seen.get(line, -1) >= 0:
                where[line] = -1 if line in where else j
        pairs = sorted((seen[line], j) for line, j in where.items() if j >= 0)
        return _increasing(pairs)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of ``pairs`` (sorted by old position) increasing in new position."""
    tails: list[int] = []  # tails[k]: smallest new position ending a run of length k + 1
    tail_index: list[int] = []
    previous: list[int] = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        k = bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_index.append(index)
        else:
            tails[k] = j
            tail_index[k] = index
        previous[index] = tail_index[k - 1] if k else -1
    run: list[tuple[int, int]] = []
    index = tail_index[-1] if tail_index else -1
    while index >= 0:
        run.append(pairs[index])
        index = previous[index]
    run.reverse()
    return run


def _merged(blocks: list[Block], old_len: int, new_len: int) -> list[Block]:
    """Adjacent blocks joined, and difflib's closing ``(len(old), len(new), 0)``."""
    out: list[Block] = []
    for i, j, n in blocks:
        if out and out[-1][0] + out[-1][2] == i and out[-1][1] + out[-1][2] == j:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + n)
        else:
            out.append((i, j, n))
    out.append((old_len, new_len, 0))
    return out


def _opcodes(blocks: list[Block]) -> tuple[Opcode, ...]:
    """difflib's ``get_opcodes`` over matching blocks (the same algorithm)."""
    i = j = 0
    out: list[Opcode] = []
    for ai, bj, size in blocks:
        tag = ""
        if i < ai and j < bj:
            tag = "replace"
        elif i < ai:
            tag = "delete"
        elif j < bj:
            tag = "insert"
        if tag:
            out.append((tag, i, ai, j, bj))
        i, j = ai + size, bj + size
        if size:
            out.append(("equal", ai, i, bj, j))
    return tuple(out)


def line_opcodes(
    old: Sequence[Hashable], new: Sequence[Hashable], *, trim: bool = True
) -> LineOpcodes:
    """Opcodes pairing ``old`` with ``new`` (see the module docs), in bounded time.

    ``trim`` False: when the whole input is small enough for difflib, difflib pairs it
    whole, without pairing common leading and trailing lines first (as a plain
    ``SequenceMatcher(None, old, new, autojunk=False)`` does).
    """
    if not trim and len(old) * len(new) <= EXACT_CELLS:
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        return LineOpcodes(tuple(matcher.get_opcodes()), True)
    pairing = _Pairing(old, new)
    blocks = _merged(pairing.blocks(), len(old), len(new))
    return LineOpcodes(_opcodes(blocks), pairing.exact)
