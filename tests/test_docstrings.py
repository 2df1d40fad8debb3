"""The public toolset types document every option and every state a user meets."""

from __future__ import annotations

import inspect
import re
from typing import get_args

from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._result import OutputLimits, ToolState, VshResult


def test_every_toolset_option_is_documented() -> None:
    doc = inspect.getdoc(VshToolset) or ""
    params = [p for p in inspect.signature(VshToolset.__init__).parameters if p != "self"]
    explained = {"hook_handler", "approval_ttl", "journal"}  # inside another option's entry
    for name in params:
        if name in explained:
            assert f"``{name}" in doc, name
        else:
            assert re.search(rf"^\s+{name}: \S", doc, re.M), f"{name} has no Args entry"


def test_policy_docstring_names_every_valid_profile() -> None:
    doc = inspect.getdoc(VshToolset) or ""
    entry = doc.split("policy:", 1)[1].split("judge:", 1)[0]
    for profile in ("balanced", "strict", "paranoid"):
        assert f'"{profile}"' in entry


def test_limits_and_budget_entries_name_their_fields() -> None:
    doc = inspect.getdoc(VshToolset) or ""
    limits = doc.split("limits:", 1)[1].split("max_retries:", 1)[0]
    for field in OutputLimits.model_fields:
        assert f"``{field}``" in limits, field
    budget = doc.split("budget:", 1)[1].split("bash:", 1)[0]
    assert "ExecutionBudget" in budget
    assert "retry" in budget


def test_result_docstring_lists_every_state() -> None:
    doc = inspect.getdoc(VshResult) or ""
    for state in get_args(ToolState):
        assert f"``{state}``" in doc, state
