"""Judged and deferred approval through real Agents: feedback, round trip, resume, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import snapshot_tree
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence, Verdict
from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._result import VshResult
from vsh_ai.toolset._signing import VshApprovalError

pytestmark = pytest.mark.anyio

PATCH = ToolCallPart(
    "vsh_patch",
    {"path": "/workspace/app.toml", "old": "8080", "new": "9090"},
    tool_call_id="patch-1",
)


class FixedJudge:
    """A deterministic judge that always answers ``decision`` (and records what it saw)."""

    def __init__(self, decision: str, reason: str) -> None:
        self.id = f"always-{decision}"
        self.decision = decision
        self.reason = reason
        self.seen: list[Evidence] = []

    async def review(self, evidence: Evidence) -> Verdict:
        self.seen.append(evidence)
        return Verdict(decision=self.decision, reason=self.reason, judge=self.id)  # type: ignore[arg-type]


def patch_then_report(returns_seen: list[Any]) -> FunctionModel:
    """Step 1 patches app.toml; step 2 records the tool return and answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if len([m for m in messages if isinstance(m, ModelResponse)]) == 0:
            return ModelResponse(parts=[PATCH])
        assert isinstance(last, ModelRequest)
        returns_seen.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart("reported")])

    return FunctionModel(respond)


APP = {"app.toml": "port = 8080\n"}
PATCHED = {"app.toml": b"port = 9090\n"}
ORIGINAL = {"app.toml": b"port = 8080\n"}


@pytest.mark.parametrize(
    ("decision", "state", "host"),
    [
        ("review", "pending", ORIGINAL),
        ("reject", "rejected", ORIGINAL),
        ("approve", "committed", PATCHED),
    ],
)
async def test_judge_verdict_and_feedback_reach_the_agent(
    make_workspace: Callable[..., Path], decision: str, state: str, host: dict[str, bytes]
) -> None:
    workspace = make_workspace(APP)
    judge = FixedJudge(decision, "Keep the port below 9000.")
    seen: list[ToolReturnPart] = []
    agent = Agent(
        patch_then_report(seen), toolsets=[VshToolset(workspace, policy="strict", judge=judge)]
    )
    await agent.run("change the port")
    result = seen[0].content
    assert isinstance(result, VshResult)
    assert result.state == state
    assert result.verdict is not None
    assert (result.verdict.decision, result.verdict.judge) == (decision, "always-" + decision)
    if decision != "approve":
        assert result.feedback == "Keep the port below 9000."
        assert "NOT applied" in result.next_step
    view = result.approver_view()
    if decision != "approve":  # refused work: the worker sees no diff, the approver does
        assert (result.diff, result.transaction, result.changes) == (None, None, ())
    else:
        assert result.diff == view["diff"]
    assert "-port = 8080\n+port = 9090" in view["diff"]
    assert [e.transaction for e in judge.seen] == [view["transaction"]]
    assert snapshot_tree(workspace) == host


def deferred_agent(
    workspace: Path, seen: list[Any], **options: Any
) -> Agent[None, str | DeferredToolRequests]:
    toolset = VshToolset(workspace, policy="strict", approval="deferred", **options)
    return Agent(
        patch_then_report(seen), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )


async def request_approval(workspace: Path) -> tuple[DeferredToolRequests, list[ModelMessage]]:
    first = await deferred_agent(workspace, []).run("change the port")
    assert isinstance(first.output, DeferredToolRequests)
    assert snapshot_tree(workspace) == ORIGINAL
    return first.output, first.all_messages()


async def test_deferred_round_trip_resumes_in_a_new_toolset(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    [pending] = requests.approvals
    meta = requests.metadata[pending.tool_call_id]
    assert meta["changes"] == [{"path": "app.toml", "kind": "modify"}]
    assert "-port = 8080\n+port = 9090" in meta["diff"]
    assert meta["risk_flags"] == ["mutation"]
    transaction = meta["transaction"]

    # An approval naming another transaction (forged, or another run's) commits nothing.
    forged: list[ToolReturnPart] = []
    await deferred_agent(workspace, forged).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={pending.tool_call_id: True},
            metadata={pending.tool_call_id: {"principal": "alice", "transaction": "f" * 64}},
        ),
    )
    assert forged[0].content.state == "stale"
    assert snapshot_tree(workspace) == ORIGINAL

    # A brand-new toolset (as in a new process) resumes the approval of its transaction.
    seen: list[ToolReturnPart] = []
    resumed = await deferred_agent(workspace, seen).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={pending.tool_call_id: True},
            metadata={pending.tool_call_id: {"principal": "alice", "transaction": transaction}},
        ),
    )
    assert resumed.output == "reported"
    result = seen[0].content
    assert (result.state, result.transaction) == ("committed", transaction)
    assert [(c.path, c.kind) for c in result.changes] == [("app.toml", "modify")]
    assert snapshot_tree(workspace) == PATCHED
    assert VshToolset(workspace).native.transaction_state(transaction) == "committed"


async def test_denied_approval_leaves_host_and_releases_the_transaction(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    call_id = requests.approvals[0].tool_call_id
    seen: list[ToolReturnPart] = []
    await deferred_agent(workspace, seen).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(approvals={call_id: ToolDenied("Not today.")}),
    )
    assert seen[0].outcome == "denied"
    assert "Not today." in str(seen[0].content)
    assert snapshot_tree(workspace) == ORIGINAL
    transaction = requests.metadata[call_id]["transaction"]
    assert VshToolset(workspace).native.transaction_state(transaction) == "rejected"


@pytest.mark.parametrize(
    ("approval", "metadata", "message"),
    [
        (
            ToolApproved(override_args={"path": "/workspace/app.toml", "old": "8080", "new": "1"}),
            True,
            "override_args is refused",
        ),
        (True, False, "needs a principal"),
    ],
)
async def test_refused_approvals_change_nothing(
    make_workspace: Callable[..., Path], approval: Any, metadata: bool, message: str
) -> None:
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    call_id = requests.approvals[0].tool_call_id
    results = DeferredToolResults(
        approvals={call_id: approval},
        metadata={call_id: {"principal": "alice"}} if metadata else {},
    )
    with pytest.raises(VshApprovalError, match=message):
        await deferred_agent(workspace, []).run(
            message_history=history, deferred_tool_results=results
        )
    assert snapshot_tree(workspace) == ORIGINAL
    transaction = requests.metadata[call_id]["transaction"]
    assert VshToolset(workspace).native.transaction_state(transaction) == "pending_approval"


async def test_host_change_before_approval_is_stale(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    call_id = requests.approvals[0].tool_call_id
    (workspace / "app.toml").write_text("port = 7070\n")
    seen: list[ToolReturnPart] = []
    await deferred_agent(workspace, seen).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={call_id: True}, metadata={call_id: {"principal": "alice"}}
        ),
    )
    result = seen[0].content
    assert result.state == "stale"
    assert "Re-read" in result.next_step
    assert snapshot_tree(workspace) == {"app.toml": b"port = 7070\n"}


async def test_approval_without_binding_runs_as_a_fresh_call(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(APP)
    _, history = await request_approval(workspace)
    other = make_workspace(APP)  # same history, another workspace: no binding there
    results = DeferredToolResults(
        approvals={"patch-1": True}, metadata={"patch-1": {"principal": "a"}}
    )
    again = await deferred_agent(other, []).run(
        message_history=history, deferred_tool_results=results
    )
    # Nothing is committed on the strength of that approval: VSH policy asks again.
    assert isinstance(again.output, DeferredToolRequests)
    assert snapshot_tree(other) == ORIGINAL


RESUME_SCRIPT = """
import json, sys
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai.toolset import VshToolset

workspace, history_json, call_id = sys.argv[1:4]
history = ModelMessagesTypeAdapter.validate_json(history_json)
model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("reported")]))
toolset = VshToolset(workspace, policy="strict", approval="deferred")
agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
results = DeferredToolResults(approvals={call_id: True}, metadata={call_id: {"principal": "ops"}})
run = agent.run_sync(message_history=history, deferred_tool_results=results)
returned = run.new_messages()[0].parts[0].content
print(json.dumps({"state": returned.state, "transaction": returned.transaction}))
"""


def test_resume_in_a_new_process(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace(APP)
    requests, history = anyio.run(request_approval, workspace)
    call_id = requests.approvals[0].tool_call_id
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            RESUME_SCRIPT,
            str(workspace),
            ModelMessagesTypeAdapter.dump_json(history).decode(),
            call_id,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LOGFIRE_IGNORE_NO_CONFIG": "1"},
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    outcome = json.loads(completed.stdout.strip().splitlines()[-1])
    assert outcome == {
        "state": "committed",
        "transaction": requests.metadata[call_id]["transaction"],
    }
    assert snapshot_tree(workspace) == PATCHED


def patch_model(call_id: str) -> FunctionModel:
    """One vsh_patch call (the same arguments as PATCH) under ``call_id``, then an answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(
                parts=[ToolCallPart(PATCH.tool_name, PATCH.args, tool_call_id=call_id)]
            )
        return ModelResponse(parts=[TextPart("reported")])

    return FunctionModel(respond)


async def test_a_denial_is_final_and_durable(make_workspace: Callable[..., Path]) -> None:
    """ToolDenied is recorded: a later approval of that call and a resubmission commit nothing."""
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    denied_id = requests.approvals[0].tool_call_id
    transaction = requests.metadata[denied_id]["transaction"]
    await deferred_agent(workspace, []).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(approvals={denied_id: ToolDenied("No.")}),
    )
    assert VshToolset(workspace).native.transaction_state(transaction) == "rejected"
    # A later "approval" of the same call (e.g. a replayed decision) commits nothing.
    seen: list[ToolReturnPart] = []
    await deferred_agent(workspace, seen).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={denied_id: True}, metadata={denied_id: {"principal": "mallory"}}
        ),
    )
    assert seen[0].content.state == "rejected"
    assert "denied" in (seen[0].content.feedback or "")
    # Resubmitting the identical change under a new id is told it was refused.
    toolset = VshToolset(workspace, policy="strict", approval="deferred")
    returns: list[Any] = []
    agent = Agent(
        patch_then_report(returns), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )
    await agent.run("change the port")
    assert returns[0].content.state == "rejected"
    assert snapshot_tree(workspace) == ORIGINAL


async def test_a_reused_tool_call_id_cannot_redirect_an_outstanding_approval(
    make_workspace: Callable[..., Path],
) -> None:
    """The approver saw the diff of the first transaction; a new conversation reusing the
    id gets a binding of its own, and approving the first still means the first."""
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    call_id = requests.approvals[0].tool_call_id
    (workspace / "app.toml").write_text("port = 8080\n# hand edit\n")
    again = Agent(
        patch_model(call_id),
        toolsets=[VshToolset(workspace, policy="strict", approval="deferred")],
        output_type=[str, DeferredToolRequests],
    )
    other = await again.run("change the port again")  # another conversation, same call id
    assert isinstance(other.output, DeferredToolRequests)
    mine, theirs = requests.metadata[call_id], other.output.metadata[call_id]
    assert theirs["transaction"] != mine["transaction"]  # its own transaction and diff
    assert "# hand edit" in theirs["diff"]
    assert "# hand edit" not in mine["diff"]
    seen: list[ToolReturnPart] = []
    await deferred_agent(workspace, seen).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={call_id: True}, metadata={call_id: {"principal": "alice"}}
        ),
    )
    assert seen[0].content.state == "stale"
    assert snapshot_tree(workspace) == {"app.toml": b"port = 8080\n# hand edit\n"}


async def test_an_approval_does_not_commit_a_rerun_that_reuses_the_call_id(
    make_workspace: Callable[..., Path],
) -> None:
    """The app approves the first run's request (its metadata names T1, 8080 -> 9090) but
    resumes a later run whose call reuses the id with other content (T2, 8080 -> 6666):
    the approval names T1, so T2 is refused as stale and nothing commits."""
    workspace = make_workspace(APP)
    requests, _ = await request_approval(workspace)
    call_id = requests.approvals[0].tool_call_id
    evil = ToolCallPart(PATCH.tool_name, {**PATCH.args_as_dict(), "new": "6666"}, call_id)
    seen: list[ToolReturnPart] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[evil])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        seen.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart("reported")])

    toolset = VshToolset(workspace, policy="strict", approval="deferred")
    agent = Agent(
        FunctionModel(respond), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )
    rerun = await agent.run("change the port")
    assert isinstance(rerun.output, DeferredToolRequests)
    first, second = requests.metadata[call_id], rerun.output.metadata[call_id]
    assert first["transaction"] != second["transaction"]
    await agent.run(
        message_history=rerun.all_messages(),
        deferred_tool_results=DeferredToolResults(
            approvals={call_id: True}, metadata={call_id: {**first, "principal": "alice"}}
        ),
    )
    [answer] = seen
    assert answer.content.state == "stale"
    assert first["transaction"] in (answer.content.feedback or "")
    assert snapshot_tree(workspace) == ORIGINAL
    assert toolset.native.transaction_state(second["transaction"]) != "committed"


async def test_an_approval_after_approval_ttl_commits_nothing(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    call_id = requests.approvals[0].tool_call_id
    await anyio.sleep(0.05)
    seen: list[ToolReturnPart] = []
    await deferred_agent(workspace, seen, approval_ttl=0.01).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={call_id: True}, metadata={call_id: {"principal": "alice"}}
        ),
    )
    result = seen[0].content
    assert result.state == "stale"
    assert "expired" in (result.feedback or "")
    assert snapshot_tree(workspace) == ORIGINAL
    transaction = requests.metadata[call_id]["transaction"]
    assert VshToolset(workspace).native.transaction_state(transaction) == "rejected"
    # Expired stays expired, whatever TTL the next resuming toolset has.
    again: list[ToolReturnPart] = []
    await deferred_agent(workspace, again, approval_ttl=3600).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={call_id: True}, metadata={call_id: {"principal": "alice"}}
        ),
    )
    assert again[0].content.state == "stale"
    assert snapshot_tree(workspace) == ORIGINAL
    with pytest.raises(ValueError, match="approval_ttl"):
        VshToolset(workspace, approval_ttl=float("nan"))


async def test_concurrent_resumes_commit_once_and_all_report_it(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(APP)
    requests, history = await request_approval(workspace)
    call_id = requests.approvals[0].tool_call_id
    results = DeferredToolResults(
        approvals={call_id: True}, metadata={call_id: {"principal": "alice"}}
    )
    seen: list[ToolReturnPart] = []

    async def resume() -> None:
        await deferred_agent(workspace, seen).run(
            message_history=history, deferred_tool_results=results
        )

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(resume)
    assert [r.content.state for r in seen] == ["committed"] * 4
    assert {r.content.transaction for r in seen} == {requests.metadata[call_id]["transaction"]}
    assert snapshot_tree(workspace) == PATCHED


def test_bindings_may_not_live_where_the_agent_can_write(
    make_workspace: Callable[..., Path],
) -> None:
    """A binding file the agent could write would let it choose what an approval commits."""
    workspace = make_workspace(APP)
    with pytest.raises(ValueError, match="state_directory"):
        VshToolset(workspace, approval="deferred", state_directory=workspace / "approvals")
    inside_vsh_state = workspace / ".vsh-runtime" / "mine"
    assert VshToolset(workspace, approval="deferred", state_directory=inside_vsh_state).store
