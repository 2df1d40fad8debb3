"""Python analyses of one evidence, each computed once and shared by every Python rule.

``python_risks``, ``allow_python_docs``, the proofs of :mod:`._proofs` and
``intent_scope`` ask the same questions of the same bytes (the AST without docstrings,
the code tokens, whether only annotations changed); the answers are remembered on the
evidence (:func:`vsh_ai.analysis._memo.analysis_of`), keyed by the bytes themselves,
so one decision parses and compares each version once per question.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .._evidence import Evidence
from ..analysis._memo import analysis_of
from ..analysis._python_layout import code_tokens, docstring_free_dump

__all__ = ("memo_dump", "memo_proof", "memo_tokens")

T = TypeVar("T")


def memo_dump(evidence: Evidence, data: bytes) -> str | None:
    """:func:`docstring_free_dump` of ``data``, once per evidence."""
    return analysis_of(evidence).remember(("python-dump", data), lambda: docstring_free_dump(data))


def memo_tokens(evidence: Evidence, data: bytes) -> tuple[tuple[int, str], ...] | None:
    """:func:`code_tokens` of ``data``, once per evidence."""
    return analysis_of(evidence).remember(("python-tokens", data), lambda: code_tokens(data))


def memo_proof(evidence: Evidence, name: str, compute: Callable[[], T], *key: object) -> T:
    """``compute()`` once per evidence for the proof ``name`` over ``key`` (the bytes)."""
    return analysis_of(evidence).remember(("python-proof", name, *key), compute)
