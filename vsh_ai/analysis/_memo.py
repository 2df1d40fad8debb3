"""One analysis per Evidence: what every rule, the read rule, redaction and the packet share.

:func:`analysis_of` returns the :class:`Analysis` of an evidence, made on first use. It
remembers what rules ask of the evidence more than once (decoded text, lines, the lines a
change adds or removes, line pairings, net changes, secret reads, changed paths per
folder, parsed manifests), each computed at most once per decision.

Two levels, by what each result costs and what it depends on:

* **per content**, across evidence objects: secret findings, the most expensive result,
  are remembered by the detector itself, keyed by the sha256 of the scanned text
  (:func:`vsh_ai.analysis._secrets.find_secrets`, a bounded cache), as parsed config
  trees are by their bytes. Every rule, the read rule, redaction and the LLM packet, in
  every pipeline stage, share one scan of the same bytes, although each stage gets its
  own validated copy of the evidence; the key is the content itself, never a blob id an
  evidence claims (a forged evidence could pair a known id with other bytes).
* **per evidence object**: the rest (cheap to recompute, tied to one transaction's
  structure) lives in the evidence's own ``__dict__`` under a private name, the way
  ``functools.cached_property`` keeps its values (never a field: not dumped, validated,
  compared or part of the digest). It belongs to that one object (a weak reference, so no
  cycle keeps an evidence alive): a copy, shallow, deep or pickled, or one with fields
  replaced (``model_copy(update=...)``), is analysed afresh and can never see a stale
  answer. It holds immutable results only.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from itertools import accumulate
from typing import Any, TypeVar

from .._evidence import Evidence, is_binary

__all__ = ("Analysis", "analysis_of")

_SLOT = "_vsh_ai_analysis"
T = TypeVar("T")


def _stale() -> None:
    return None


class Analysis:
    """The shared analysis of one :class:`~vsh_ai.Evidence` (see the module docs).

    Methods that read content raise what the evidence raises
    (:class:`~vsh_ai._evidence.EvidenceGap` for uncaptured bytes), every time they are
    asked, exactly as the evidence's own accessors do.
    """

    __slots__ = ("_memo", "_owner")

    def __init__(self, evidence: Evidence) -> None:
        self._owner = weakref.ref(evidence)
        self._memo: dict[tuple[Any, ...], Any] = {}

    @property
    def evidence(self) -> Evidence:
        evidence = self._owner()
        assert evidence is not None, "an analysis outlived its evidence"
        return evidence

    def fits(self, evidence: Evidence) -> bool:
        """True for the evidence object this analysis was made for (not a copy of it)."""
        return self._owner() is evidence

    def __deepcopy__(self, memo: dict[int, Any]) -> None:
        return None  # a deep copy of an evidence is analysed afresh

    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _stale, ()  # never pickled along with an evidence

    def remember(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """``compute()`` once per ``key`` for this evidence (keys start with a topic)."""
        memo = self._memo
        if key in memo:
            value: T = memo[key]
            return value
        value = compute()
        memo[key] = value
        return value

    def remember_for(
        self, topic: str, first: object, second: object, compute: Callable[[], T]
    ) -> T:
        """``compute()`` once per ``topic`` and pair of objects (by identity: parsed trees
        and manifests that several rules of one decision compare). The entry holds both
        objects, so their ids name them while it exists."""
        held = self.remember((topic, id(first), id(second)), lambda: (first, second, compute()))
        result: T = held[2]
        return result

    # -- content (keyed by the bytes themselves: equal bytes, one answer) --------------

    def text(self, data: bytes) -> str:
        """``data`` decoded as UTF-8 (bad bytes replaced), once per captured blob."""
        return self.remember(("text", data), lambda: data.decode("utf-8", errors="replace"))

    def binary(self, data: bytes) -> bool:
        return self.remember(("binary", data), lambda: is_binary(data))

    def lines(self, data: bytes | None) -> tuple[str, ...]:
        """``splitlines()`` of a text blob (``()`` for None); ValueError for binary bytes."""
        if data is None:
            return ()
        if self.binary(data):
            raise ValueError("binary content has no lines to compare")
        return self.remember(("lines", data), lambda: tuple(self.text(data).splitlines()))

    def line_of(self, data: bytes, offset: int) -> int:
        """1-based line of character ``offset`` in the text of ``data`` (bisect, not a recount)."""
        text = self.text(data)
        starts: list[int] = self.remember(
            ("starts", data),
            lambda: [0, *accumulate(len(line) + 1 for line in text.split("\n"))],
        )
        return bisect_right(starts, offset)

    def new_lines(self, path: str, *, removed: bool = False) -> tuple[tuple[int, str], ...] | None:
        """``(number, line)`` of each line the change at ``path`` adds (``removed``: drops).

        A line is new when the file holds more copies of it than before (a duplicated line
        counts); ``number`` is its line in the new file (in the old one for ``removed``).
        None when either side is binary; EvidenceGap when bytes were not captured.
        """
        key = ("new_lines", path, removed)
        if key in self._memo:  # computed: its bytes were captured (a gap is never stored)
            known: tuple[tuple[int, str], ...] | None = self._memo[key]
            return known
        evidence = self.evidence
        before, after = evidence.before_bytes(path), evidence.after_bytes(path)
        old, new = (after, before) if removed else (before, after)

        def compute() -> tuple[tuple[int, str], ...] | None:
            if new is None:
                return ()
            if self.binary(new) or (old is not None and self.binary(old)):
                return None
            unmatched = Counter(self.lines(old))
            out: list[tuple[int, str]] = []
            for number, line in enumerate(self.lines(new), start=1):
                if unmatched[line] > 0:
                    unmatched[line] -= 1
                else:
                    out.append((number, line))
            return tuple(out)

        return self.remember(key, compute)


def analysis_of(evidence: Evidence) -> Analysis:
    """The one :class:`Analysis` of ``evidence`` (made on first use, then remembered)."""
    memo = evidence.__dict__.get(_SLOT)
    if isinstance(memo, Analysis) and memo.fits(evidence):
        return memo
    memo = Analysis(evidence)
    evidence.__dict__[_SLOT] = memo
    return memo
