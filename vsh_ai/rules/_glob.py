"""Path globs for rules: the one dialect of :mod:`vsh_ai.analysis._globs`, re-exported.

Globs are root-anchored (``*.log`` is a root file only; ``**/*.log`` any depth); ``**``
is a whole segment; deny and protected sets match case-insensitively (``ignore_case``).
Globs that do not mean what they look like are refused at load time, naming the fix.

While a :class:`~vsh_ai.rules.RuleSet` evaluates, :func:`matching` answers from the rule
set's :class:`~vsh_ai.analysis._globs.GlobTable` (:func:`matching_with`): every glob set of
every rule compiled into one matcher, each path matched once for all of them. The answers
are exactly :func:`vsh_ai.analysis._globs.matching`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from ..analysis._globs import GLOB_DIALECT, GlobTable, check_globs, fold, glob_matches
from ..analysis._globs import matching as _matching

__all__ = ("GLOB_DIALECT", "check_globs", "fold", "glob_matches", "matching", "matching_with")

_TABLE: ContextVar[GlobTable | None] = ContextVar("vsh_ai_rule_globs", default=None)


def matching(patterns: Sequence[str], path: str, *, ignore_case: bool = False) -> str | None:
    """The first of ``patterns`` that matches ``path``, or None (see the module docs)."""
    table = _TABLE.get()
    if table is None:
        return _matching(patterns, path, ignore_case=ignore_case)
    return table.first(patterns, path, ignore_case=ignore_case)


@contextmanager
def matching_with(table: GlobTable) -> Iterator[None]:
    """Answer :func:`matching` from ``table`` in this context (thread and task local)."""
    token = _TABLE.set(table)
    try:
        yield
    finally:
        _TABLE.reset(token)
