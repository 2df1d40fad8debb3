"""The toolset uses its records as they belong: failures are results, never crashes.

Each test runs a real agent on a real VSH workspace through ``VshToolset`` (the unit
tests of the stores are in ``test_toolset_records.py``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import git_staged, snapshot_tree
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence, Verdict, VshResult, VshToolset
from vsh_ai.toolset._background import wait_for_folder

pytestmark = pytest.mark.anyio


def one_call(call: ToolCallPart, seen: list[Any]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if isinstance(last, ModelRequest) and returns:
            seen.extend(p.content for p in returns)
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[call])

    return FunctionModel(respond)


def append(text: str, call_id: str = "append-1") -> ToolCallPart:
    return ToolCallPart(
        "vsh_write",
        {"path": "/workspace/log.txt", "content": text, "append": True},
        tool_call_id=call_id,
    )


async def test_an_unusable_signing_key_location_is_a_failed_result(
    make_workspace: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file where the key's folder should be (as a read-only home would): the run goes
    on with a failed result saying why, and nothing is committed."""
    (tmp_path / "not-a-folder").write_text("x")
    monkeypatch.setenv("VSH_AI_APPROVAL_KEY_FILE", str(tmp_path / "not-a-folder" / "key"))
    workspace = make_workspace({"log.txt": "line 1\n"})
    seen: list[Any] = []
    toolset = VshToolset(workspace)
    await Agent(one_call(append("line 2\n"), seen), toolsets=[toolset]).run("log", run_id="r")
    [result] = seen
    assert isinstance(result, VshResult)
    assert result.state == "failed"
    assert "VSH_AI_APPROVAL_KEY_FILE" in (result.feedback or "")
    assert snapshot_tree(workspace) == {"log.txt": b"line 1\n"}


async def test_a_state_directory_copied_into_another_checkout_is_refused(
    make_workspace: Callable[..., Path],
) -> None:
    first = make_workspace({"log.txt": "line 1\n"})
    seen: list[Any] = []
    toolset = VshToolset(first)
    await Agent(one_call(append("line 2\n"), seen), toolsets=[toolset]).run("log", run_id="r")
    assert [r.state for r in seen] == ["committed"]
    other = make_workspace({"log.txt": "line 1\n"})
    # A quiescent state directory: the call's final record may still be on its way to the
    # disk (written in the background once the prepared record answers for it), and a copy
    # taken meanwhile can see a temporary file vanish (seen: shutil.Error under load).
    assert toolset.journal is not None
    wait_for_folder(toolset.journal.directory)
    shutil.copytree(first / ".vsh-runtime" / "vsh-ai", other / ".vsh-runtime" / "vsh-ai")
    again: list[Any] = []
    await Agent(one_call(append("line 2\n"), again), toolsets=[VshToolset(other)]).run(
        "log", run_id="r"
    )
    [result] = again
    assert result.state == "failed"  # never the first checkout's recorded "committed"
    assert "belongs to" in (result.feedback or "")
    assert snapshot_tree(other) == {"log.txt": b"line 1\n"}


async def test_a_call_key_used_once_cannot_commit_again_under_other_arguments(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"log.txt": "line 1\n"})
    toolset = VshToolset(workspace)
    seen: list[Any] = []
    await Agent(one_call(append("line 2\n"), seen), toolsets=[toolset]).run("x", run_id="r")
    replay: list[Any] = []
    await Agent(one_call(append("line 2!\n"), replay), toolsets=[toolset]).run("x", run_id="r")
    [result] = replay
    assert result.state == "failed"
    assert "append-1" in (result.feedback or "")  # names the key
    assert snapshot_tree(workspace) == {"log.txt": b"line 1\nline 2\n"}  # committed once


class Rejects:
    id = "rejects"

    async def review(self, evidence: Evidence) -> Verdict:
        return Verdict.reject("No.", judge=self.id)


async def test_git_add_after_a_rejected_write_stages_nothing_of_vsh_runtime(
    make_workspace: Callable[..., Path],
) -> None:
    secret = "rejected-bytes-5e1d"
    workspace = make_workspace({"a.txt": "a\n"})
    seen: list[Any] = []
    write = ToolCallPart(
        "vsh_write", {"path": "/workspace/b.txt", "content": secret}, tool_call_id="w1"
    )
    await Agent(one_call(write, seen), toolsets=[VshToolset(workspace, judge=Rejects())]).run(
        "write"
    )
    assert [r.state for r in seen] == ["rejected"]
    ignore = (workspace / ".vsh-runtime" / ".gitignore").read_text().splitlines()
    assert "*" in ignore
    assert git_staged(workspace) == ["a.txt"]
