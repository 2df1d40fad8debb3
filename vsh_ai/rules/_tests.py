"""Tests taken out of the run: files renamed or moved out of collection, pytest config.

:class:`KeepTestsCollected` is a denial for the path-level ways of neutering tests (the
code-level ones, tautologies, swallowed failures, skips and functions renamed out of
``test*``, are facts of ``python_risks``): a test module renamed out of pytest's
``test_*.py``/``*_test.py`` pattern or moved out of its tests directory, and changes
to pytest's options (:func:`vsh_ai.analysis._pytest_config.collection_changes`) that
select, deselect, ignore or stop tests, or drop collection patterns and paths.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Literal

from pydantic import Field

from .._evidence import Evidence
from .._verdict import Verdict
from ..analysis._pytest_config import PYTEST_CONFIG_NAMES, collection_changes
from ._base import Action, Rule, net_changes

__all__ = ("KeepTestsCollected",)

_TEST_DIRS = frozenset({"tests", "test", "testing"})


def _is_test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _in_test_dir(path: str) -> bool:
    return any(part in _TEST_DIRS for part in PurePosixPath(path).parts[:-1])


class KeepTestsCollected(Rule):
    """Test modules renamed or moved out of collection; pytest options that run fewer tests.

    Reasons name the file and what changed (``tests/test_core.py renamed to
    tests/core_checks.py, which pytest's test_*.py pattern does not collect``;
    ``pyproject.toml: addopts selects tests by keyword (-k)``).
    """

    type: Literal["test_collection"] = "test_collection"
    action: Action = Field(default="reject", description="Decision when tests are taken out.")

    def check(self, evidence: Evidence, /) -> Verdict | None:
        reasons: list[str] = []
        for change in net_changes(evidence):
            path = change.path
            if change.kind == "rename" and change.after is not None and change.partner:
                source = change.partner
                if _is_test_module(source) and not _is_test_module(path):
                    reasons.append(
                        f"{source} renamed to {path}, which pytest's test_*.py pattern "
                        "does not collect"
                    )
                elif _is_test_module(source) and _in_test_dir(source) and not _in_test_dir(path):
                    reasons.append(f"{source} moved out of its tests directory to {path}")
            if PurePosixPath(path).name.lower() in PYTEST_CONFIG_NAMES and change.kind in (
                "modify",
                "create",
            ):
                before = evidence.before_bytes(path) if change.kind == "modify" else None
                found = collection_changes(path, before, evidence.after_bytes(path))
                reasons.extend(f"{path}: {why}" for why in found)
        if not reasons:
            return None
        return self.verdict(
            self.action,
            "Tests would no longer run: "
            + "; ".join(reasons[:8])
            + ". Keep every test collected; fix a failing test instead of hiding it.",
            facts=reasons[:50],
        )
