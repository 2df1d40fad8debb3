"""Facts about Python source from its AST (:mod:`ast`; nothing is ever executed).

:func:`code_changes` compares two versions of a module and returns :class:`CodeFact`
records for what the new version *adds* or *takes away*: calls that run processes,
evaluate strings, import dynamically, download, deserialise or open sockets (resolved
through imports and aliases: ``from subprocess import run as r``, ``import os as o``,
``__import__("subprocess")``, ``importlib.import_module``, ``getattr(os, "system")``);
tests skipped or deselected whatever the alias (``from pytest import mark as m``,
``pytestmark``, ``collect_ignore``, ``pytest_*`` hooks); assertions removed, weakened
or made unable to fail; definitions removed; a module emptied or commented out. Source
that does not parse is the fact ``unparsable``, never harmless; so is a module over
256 KiB or with more than 500 risky calls (:data:`MAX_RISKY_FACTS`).

The work is split by concern: call tables and tooling names (``_python_names``), one
module's facts (``_python_facts``), comparing versions (``_python_compare``), layout
(``_python_layout``), and proofs that an edit is harmless (``_python_proofs``,
``_python_tests``). This module is the one place the rest of the package imports from.
"""

from __future__ import annotations

from ._python_compare import LineDiff, code_changes, iter_python_facts, line_diff
from ._python_facts import (
    MAX_ANALYSED_BYTES,
    MAX_RISKY_FACTS,
    CodeFact,
    ModuleFacts,
    module_facts,
    remembered_facts,
)
from ._python_layout import code_tokens, docstring_free_dump
from ._python_names import (
    CALL_CATEGORIES,
    FLAGGED_FACTS,
    FactKind,
    is_python_source,
    is_tooling_code,
)

__all__ = (
    "CALL_CATEGORIES",
    "FLAGGED_FACTS",
    "MAX_ANALYSED_BYTES",
    "MAX_RISKY_FACTS",
    "CodeFact",
    "FactKind",
    "LineDiff",
    "ModuleFacts",
    "code_changes",
    "code_tokens",
    "docstring_free_dump",
    "is_python_source",
    "is_tooling_code",
    "iter_python_facts",
    "line_diff",
    "module_facts",
)


def benchmark_text(text: str) -> object:
    """What a decision does with ``text`` as a new module (benchmarks/analysis.py)."""
    remembered_facts.cache_clear()
    return code_changes(None, text)
