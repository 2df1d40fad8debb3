"""What each judge stage reviews: the evidence shared by vsh-ai's own reading-only judges,
or a copy of its own that nothing it does can carry to another stage or the hook."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._evidence import Evidence, gc_paused

if TYPE_CHECKING:
    from ._hooks import Judge

__all__ = ("isolated", "lazy_copies", "reads_only", "stage_evidence")


def isolated(evidence: Evidence) -> Callable[[], Evidence]:
    """A maker of copies of ``evidence`` that no holder of another copy can change.

    ``evidence`` is dumped once to plain data (kept on it, never handed out); every call
    validates a new :class:`Evidence` from it: new model objects and containers throughout,
    sharing only immutable leaves (``str``, ``bytes``, numbers). A stage that writes to its
    copy (frozen models still yield to ``object.__setattr__``) changes nothing anyone else
    sees. The copy starts with no memoised analysis (``cached_property`` values stay behind).
    """
    data = evidence._plain

    def copy() -> Evidence:
        with gc_paused():
            return Evidence.model_validate(data)

    return copy


def lazy_copies(evidence: Evidence) -> Callable[[], Evidence]:
    """:func:`isolated`, dumping ``evidence`` only when a first copy is asked for."""
    maker: list[Callable[[], Evidence]] = []

    def copy() -> Evidence:
        if not maker:
            maker.append(isolated(evidence))
        return maker[0]()

    return copy


def reads_only(judge: Judge) -> bool:
    """Whether ``judge`` is vsh-ai's own code that only reads the evidence it is given:
    exactly an :class:`~vsh_ai.llm.LLMCommitJudge`, or exactly a
    :class:`~vsh_ai.rules.RuleSet` whose every rule is one of vsh-ai's own rule types.

    Such a judge may review the evidence other such judges read (and share its memoised
    analysis: secrets found once for the rules and the packet's redaction); any other
    judge, a subclass or a rule set holding a custom rule gets its own copy
    (:func:`isolated`), so nothing it does reaches another stage or the hook.
    """
    from .rules._base import RuleSet  # the rules package imports this module

    kind = type(judge)
    # An LLMCommitJudge exists only once its module is loaded: a rules-only process (an
    # eval worker) never imports Pydantic AI just to ask.
    llm = sys.modules.get(f"{__package__}.llm._judge")
    if llm is not None and kind is llm.LLMCommitJudge:
        return True
    if kind is not RuleSet:
        return False
    rules = getattr(judge, "rules", None)
    return type(rules) is tuple and all(
        type(rule).__module__.startswith("vsh_ai.rules.") for rule in rules
    )


def stage_evidence(judge: Judge, evidence: Evidence, copy: Callable[[], Evidence]) -> Evidence:
    """What one stage reviews: the shared evidence for a reading-only judge, else a copy."""
    return evidence if reads_only(judge) else copy()
