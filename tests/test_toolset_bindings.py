"""Approval bindings that stay honest (issue 10, items 6, 8 and 9)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import vsh
from conftest import snapshot_tree
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence, Verdict
from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._result import MAX_CHANGES

pytestmark = pytest.mark.anyio


def turns(*responses: list[ToolCallPart], returns: list[Any] | None = None) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if returns is not None and isinstance(last, ModelRequest):
            returns.extend(p.content for p in last.parts if isinstance(p, ToolReturnPart))
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(responses):
            return ModelResponse(parts=list(responses[turn]))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def patch(call_id: str, new: str) -> ToolCallPart:
    args = {"path": "/workspace/app.toml", "old": "8080", "new": new}
    return ToolCallPart("vsh_patch", args, tool_call_id=call_id)


def deferred(workspace: Path, model: FunctionModel, **options: Any) -> Agent[None, Any]:
    toolset = VshToolset(workspace, policy="strict", approval="deferred", **options)
    return Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])


def approve(call_ids: list[str]) -> DeferredToolResults:
    return DeferredToolResults(
        approvals=dict.fromkeys(call_ids, True),
        metadata={call_id: {"principal": "ops"} for call_id in call_ids},
    )


# -- item 6 ---------------------------------------------------------------------------------


def test_existing_runtime_refuses_a_state_directory_in_its_workspace(
    make_workspace: Callable[..., Path], tmp_path: Path
) -> None:
    workspace = make_workspace({"a.txt": "a"})
    runtime = vsh.Runtime.open(workspace, policy="strict")
    for inside in (workspace / "approvals", workspace / "deep" / "er"):
        with pytest.raises(ValueError, match="inside the runtime's workspace"):
            VshToolset(runtime, approval="deferred", state_directory=inside)
    assert VshToolset(runtime, approval="deferred", state_directory=tmp_path / "outside").store
    guarded = workspace / ".vsh-runtime" / "vsh-ai" / "mine"
    assert VshToolset(runtime, approval="deferred", state_directory=guarded).store
    assert snapshot_tree(workspace) == {"a.txt": b"a"}


async def test_a_rewritten_binding_is_detected_and_commits_nothing(
    make_workspace: Callable[..., Path],
) -> None:
    """A binding redirected to another pending transaction (e.g. a delete) is refused."""
    workspace = make_workspace({"app.toml": "port = 8080\n", "important.txt": "keep\n"})
    first = await deferred(workspace, turns([patch("p1", "9090")])).run("patch")
    assert isinstance(first.output, DeferredToolRequests)
    toolset = VshToolset(workspace, policy="strict")
    other = await toolset.vsh_remove("important.txt")  # another pending transaction
    assert other.state == "pending"
    [binding_file] = (workspace / ".vsh-runtime" / "vsh-ai" / "approvals").glob("*.json")
    data = json.loads(binding_file.read_text())
    data["transaction"] = other.approver_view()["transaction"]
    binding_file.write_text(json.dumps(data))
    returns: list[Any] = []
    await deferred(workspace, turns(returns=returns)).run(
        message_history=first.all_messages(), deferred_tool_results=approve(["p1"])
    )
    [result] = returns
    assert result.state == "failed"
    assert "modified outside vsh-ai" in (result.feedback or "")
    assert snapshot_tree(workspace) == {"app.toml": b"port = 8080\n", "important.txt": b"keep\n"}


# -- items 8 and 9 --------------------------------------------------------------------------


async def test_a_replayed_call_is_never_rerun_or_rebound(
    make_workspace: Callable[..., Path],
) -> None:
    """The same call again after the commit (a durable engine replaying the resume: the
    same history, so the same model response made the call)."""
    workspace = make_workspace({"app.toml": "port = 8080\n"})
    first = await deferred(workspace, turns([patch("p1", "9090")])).run("patch")
    returns: list[Any] = []
    await deferred(workspace, turns(returns=returns)).run(
        message_history=first.all_messages(), deferred_tool_results=approve(["p1"])
    )
    assert returns[0].state == "committed"
    (workspace / "app.toml").write_text("port = 8080\n")  # the host moves on
    replay: list[Any] = []
    run = await deferred(workspace, turns(returns=replay)).run(
        message_history=first.all_messages(), deferred_tool_results=approve(["p1"])
    )
    assert run.output == "done"
    assert (replay[0].state, replay[0].transaction) == ("committed", returns[0].transaction)
    assert snapshot_tree(workspace) == {"app.toml": b"port = 8080\n"}  # not run again


async def test_a_new_call_reusing_an_id_gets_its_own_binding(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"app.toml": "port = 8080\n"})
    first = await deferred(workspace, turns([patch("p1", "9090")])).run("patch")
    assert isinstance(first.output, DeferredToolRequests)
    # A different conversation reuses the id "p1" with other arguments.
    second = await deferred(workspace, turns([patch("p1", "7070")])).run("patch differently")
    assert isinstance(second.output, DeferredToolRequests)
    meta_1, meta_2 = first.output.metadata["p1"], second.output.metadata["p1"]
    assert meta_1["transaction"] != meta_2["transaction"]
    assert "+port = 7070" in meta_2["diff"]
    returns: list[Any] = []
    await deferred(workspace, turns(returns=returns)).run(
        message_history=second.all_messages(), deferred_tool_results=approve(["p1"])
    )
    assert (returns[0].state, returns[0].transaction) == ("committed", meta_2["transaction"])
    assert snapshot_tree(workspace) == {"app.toml": b"port = 7070\n"}


class SlowReview:
    id = "slow-review"

    async def review(self, evidence: Evidence, /) -> Verdict:
        await anyio.sleep(0.2)
        return Verdict.review("a person decides", judge=self.id)


async def test_every_approval_request_carries_its_diff_under_load(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"app.toml": "port = 8080\n"})
    toolset = VshToolset(workspace, approval="deferred", judge=SlowReview())
    outputs: list[Any] = []

    async def one(n: int) -> None:
        call = ToolCallPart(
            "vsh_write", {"path": f"f{n}.txt", "content": f"{n}\n"}, tool_call_id=f"w{n}"
        )
        agent = Agent(turns([call]), toolsets=[toolset], output_type=[str, DeferredToolRequests])
        outputs.append((await agent.run("write")).output)

    async with anyio.create_task_group() as group:
        for n in range(72):
            group.start_soon(one, n)
    assert len(outputs) == 72
    for output in outputs:
        assert isinstance(output, DeferredToolRequests)
        [meta] = output.metadata.values()
        assert meta["diff"], meta
        assert "+++ b/" in meta["diff"]


async def test_changes_are_bounded(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "a"})
    toolset = VshToolset(
        workspace, policy="strict", budget=vsh.ExecutionBudget(max_duration_ms=30_000)
    )
    code = "for i in range(3000):\n    vsh_write('/workspace/f' + str(i) + '.txt', 'x')"
    result = await toolset.vsh_run(code, "create many files")
    assert result.state == "pending"
    assert (result.changes, result.changes_omitted) == ((), 0)  # refused: computed by the program
    view = result.approver_view()
    assert len(view["changes"]) == MAX_CHANGES
    assert view["changes_omitted"] == 3000 - MAX_CHANGES
    assert len(json.dumps(view)) < 64_000


async def test_many_approvals_in_one_folder_explain_stale(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "a", "out/keep.txt": "k"})
    calls = [
        ToolCallPart("vsh_write", {"path": f"out/f{n}.txt", "content": "x"}, tool_call_id=f"w{n}")
        for n in range(12)
    ]
    first = await deferred(workspace, turns(calls)).run("write them all")
    assert isinstance(first.output, DeferredToolRequests)
    returns: list[Any] = []
    await deferred(workspace, turns(returns=returns)).run(
        message_history=first.all_messages(),
        deferred_tool_results=approve([c.tool_call_id for c in calls]),
    )
    assert len(returns) == 12
    committed = [r for r in returns if r.state == "committed"]
    stale = [r for r in returns if r.state == "stale"]
    assert committed
    assert len(committed) + len(stale) == 12
    for result in stale:
        assert "folder" in (result.feedback or ""), result.feedback
    on_host = {p for p in snapshot_tree(workspace) if p.startswith("out/f")}
    assert len(on_host) == len(committed)


# -- issue 16 item 8: a binding belongs to its conversation -----------------------------------


async def test_a_new_conversation_reusing_a_call_id_does_not_inherit_a_denial(
    make_workspace: Callable[..., Path],
) -> None:
    """Models say ``call_0`` every time: a new conversation making the same call under the
    same id (on a workspace that moved on, so VSH sees a new transaction) got the other
    conversation's denial instead of its own approval request."""
    workspace = make_workspace({"app.toml": "port = 8080\n"})
    first = await deferred(workspace, turns([patch("call_0", "9090")])).run("patch")
    assert isinstance(first.output, DeferredToolRequests)
    await deferred(workspace, turns()).run(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"call_0": ToolDenied("No.")}),
    )
    (workspace / "app.toml").write_text("port = 8080\n# reviewed\n")
    second = await deferred(workspace, turns([patch("call_0", "9090")])).run("patch again")
    assert isinstance(second.output, DeferredToolRequests), second.output
    returns: list[Any] = []
    await deferred(workspace, turns(returns=returns)).run(
        message_history=second.all_messages(), deferred_tool_results=approve(["call_0"])
    )
    assert returns[0].state == "committed"
    assert snapshot_tree(workspace) == {"app.toml": b"port = 9090\n# reviewed\n"}
