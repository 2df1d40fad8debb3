"""Cancellation, several agents on one workspace, and Logfire spans."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import vsh
from conftest import snapshot_tree
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence, Verdict
from vsh_ai.toolset import VshToolset

pytestmark = pytest.mark.anyio

SLOW = "x = 0\nfor i in range(3000000):\n    x += i\nvsh_write('/workspace/slow.txt', 'done')\n'ok'"


def one_call(tool: str, called: anyio.Event | None = None, **args: Any) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            if called is not None:
                called.set()
            return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id="only")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


class GateJudge:
    """Approves, but only after the test opens the gate; records the transactions it saw."""

    id = "gate"

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.gate = anyio.Event()
        self.transactions: list[str] = []

    async def review(self, evidence: Evidence) -> Verdict:
        self.transactions.append(evidence.transaction)
        self.entered.set()
        await self.gate.wait()
        return Verdict.approve("looks fine", judge=self.id)


async def test_cancel_during_program_leaves_nothing_behind(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "a"})
    # SLOW takes ~0.2 s idle but ~1 s on a loaded 2-core box: VSH's default 1000 ms
    # duration budget would then turn the completing run below into a guest error.
    toolset = VshToolset(workspace, budget=vsh.ExecutionBudget(max_duration_ms=60_000))
    called = anyio.Event()
    agent = Agent(one_call("vsh_run", called, code=SLOW, intent="slow write"), toolsets=[toolset])
    async with anyio.create_task_group() as group:
        group.start_soon(agent.run, "go")
        await called.wait()
        await anyio.sleep(0.05)  # the program runs for about 0.2 s: cancel it mid-flight
        group.cancel_scope.cancel()
    assert snapshot_tree(workspace) == {"a.txt": b"a"}
    # No preview or pending transaction was left: the identical program runs and commits.
    result = await toolset.vsh_run(SLOW, "slow write")
    assert result.state == "committed"
    assert snapshot_tree(workspace) == {"a.txt": b"a", "slow.txt": b"done"}


async def test_cancel_during_judge_keeps_work_pending(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "a"})
    judge = GateJudge()
    toolset = VshToolset(workspace, policy="strict", judge=judge)
    agent = Agent(one_call("vsh_write", path="a.txt", content="b"), toolsets=[toolset])
    async with anyio.create_task_group() as group:
        group.start_soon(agent.run, "go")
        with anyio.fail_after(30):  # a judge never asked: fail, do not hang
            await judge.entered.wait()
        group.cancel_scope.cancel()
    assert snapshot_tree(workspace) == {"a.txt": b"a"}
    [transaction] = judge.transactions
    assert toolset.native.transaction_state(transaction) == "pending_approval"
    # The pending work is still exactly approvable by a person.
    now = vsh_now()
    toolset.native.approve(transaction, "alice", now, now + 60_000)
    assert toolset.native.commit(transaction, now).state == "committed"
    assert snapshot_tree(workspace) == {"a.txt": b"b"}


def vsh_now() -> int:
    import time

    return time.time_ns() // 1_000_000


async def test_two_agents_on_one_workspace_stale_not_corrupt(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"app.toml": "port = 1\n"})
    judge = GateJudge()
    slow = VshToolset(workspace, policy="strict", judge=judge)
    fast = VshToolset(workspace)
    results: dict[str, Any] = {}

    async def slow_agent() -> None:
        program = (
            "t = vsh_read('/workspace/app.toml')\n"
            "vsh_write('/workspace/app.toml', t + 'slow = 1\\n')"
        )
        results["slow"] = await slow.vsh_run(program, "append slow")

    async with anyio.create_task_group() as group:
        group.start_soon(slow_agent)
        with anyio.fail_after(30):  # a judge never asked: fail, do not hang
            await judge.entered.wait()
        results["fast"] = await fast.vsh_patch("app.toml", "port = 1", "port = 2")
        judge.gate.set()
    assert results["fast"].state == "committed"
    assert results["slow"].state == "stale"
    assert results["slow"].next_step.startswith("NOT applied: the workspace changed")
    assert snapshot_tree(workspace) == {"app.toml": b"port = 2\n"}


async def test_concurrent_appends_never_lose_a_committed_write(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"log.txt": ""})
    toolsets = [VshToolset(workspace), VshToolset(workspace)]
    states: list[str] = []

    async def append(index: int) -> None:
        program = (
            "t = vsh_read('/workspace/log.txt')\n"
            f"vsh_write('/workspace/log.txt', t + 'line {index}\\n')"
        )
        states.append((await toolsets[index % 2].vsh_run(program, f"append {index}")).state)

    async with anyio.create_task_group() as group:
        for index in range(8):
            group.start_soon(append, index)
    assert len(states) == 8
    assert set(states) <= {"committed", "stale"}
    assert "committed" in states, "the first append to commit has nothing to be stale against"
    lines = (workspace / "log.txt").read_text().splitlines()
    assert len(lines) == states.count("committed") == len(set(lines))


async def test_spans_carry_ids_and_counts_never_contents(
    make_workspace: Callable[..., Path], capfire: CaptureLogfire
) -> None:
    workspace = make_workspace({"app.toml": "secret_value = 1\n"})
    toolset = VshToolset(workspace, policy="strict", judge=GateJudge())
    toolset.judge_hook.judge.gate.set()  # type: ignore[union-attr, attr-defined]
    result = await toolset.vsh_patch("app.toml", "secret_value = 1", "secret_value = 2")
    assert result.state == "committed"
    spans = [
        s for s in capfire.exporter.exported_spans_as_dict() if s["name"] == "vsh-ai transaction"
    ]
    [span] = spans
    attributes = span["attributes"]
    assert attributes["tool"] == "vsh_patch"
    assert attributes["transaction"] == result.transaction
    assert (attributes["state"], attributes["changed_paths"], attributes["verdict"]) == (
        "committed",
        1,
        "approve",
    )
    program = "raise ValueError(vsh_read('/workspace/app.toml'))"
    with pytest.raises(ModelRetry, match=r"error type, message and line are withheld") as raised:
        await toolset.vsh_run(program, "leak it in an error")
    assert "secret_value" not in str(raised.value)  # the judge never cleared that read
    spans = [
        s for s in capfire.exporter.exported_spans_as_dict() if s["name"] == "vsh-ai transaction"
    ]
    assert [s["attributes"]["state"] for s in spans] == ["committed", "guest_error"]
    dumped = json.dumps(capfire.exporter.exported_spans_as_dict(), default=str)
    assert "secret_value" not in dumped  # spans never carry contents
