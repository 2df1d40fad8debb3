"""A configured judge sees every mutation, and decides in time (issue 10, items 0 and 4)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from conftest import snapshot_tree
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

from vsh_ai import Evidence, Verdict, as_hook
from vsh_ai.rules import Rule, RuleSet
from vsh_ai.toolset import VshCapability, VshToolset
from vsh_ai.toolset._result import VshResult

pytestmark = pytest.mark.anyio

SERVICE = {"service.toml": "tls = true\nport = 443\n"}
TLS_OFF = ToolCallPart(
    "vsh_patch",
    {"path": "/workspace/service.toml", "old": "tls = true", "new": "tls = false"},
    tool_call_id="tls-1",
)


class NoTlsOff:
    """Rejects turning TLS off; approves anything else."""

    id = "no-tls-off"

    def __init__(self) -> None:
        self.calls = 0

    async def review(self, evidence: Evidence, /) -> Verdict:
        self.calls += 1
        for path in evidence.changed_paths:
            if any("tls = false" in line for line in evidence.added_lines(path)):
                return Verdict.reject("TLS must stay on.", judge=self.id)
        return Verdict.approve("fine", judge=self.id)


def one_call(part: ToolCallPart, returns: list[ToolReturnPart]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[part])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returns.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


@pytest.mark.parametrize("via", ["toolset", "capability"])
async def test_a_judge_sees_the_edit_balanced_policy_would_auto_approve(
    make_workspace: Callable[..., Path], via: str
) -> None:
    """Regression: `tls = true -> false` committed under the default policy, judge unasked."""
    workspace = make_workspace(SERVICE)
    judge = NoTlsOff()
    returns: list[ToolReturnPart] = []
    model = one_call(TLS_OFF, returns)
    if via == "toolset":
        agent = Agent(model, toolsets=[VshToolset(workspace, judge=judge)])
    else:
        agent = Agent(model, capabilities=[VshCapability(workspace, judge=judge)])
    await agent.run("turn tls off")
    result = returns[0].content
    assert isinstance(result, VshResult)
    assert result.state == "rejected"
    assert judge.calls == 1
    assert snapshot_tree(workspace) == {"service.toml": b"tls = true\nport = 443\n"}


async def test_auto_approval_without_the_judge_is_an_explicit_choice(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(SERVICE)
    judge = NoTlsOff()
    returns: list[ToolReturnPart] = []
    toolset = VshToolset(workspace, judge=judge, judge_scope="policy_pending")
    await Agent(one_call(TLS_OFF, returns), toolsets=[toolset]).run("turn tls off")
    assert (returns[0].content.state, judge.calls) == ("committed", 0)
    with pytest.raises(ValueError, match="judge_scope"):
        VshToolset(workspace, judge=judge, judge_scope="everything")  # type: ignore[arg-type]


async def test_reads_follow_policy_unless_asked_for(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace(SERVICE)
    judge = NoTlsOff()
    read = await VshToolset(workspace, judge=judge).vsh_read("service.toml")
    assert (read.state, judge.calls) == ("read", 0)
    read = await VshToolset(workspace, judge=judge, judge_scope="all").vsh_read("service.toml")
    assert (read.state, judge.calls) == ("read", 1)


class Abstains:
    id = "abstains"

    async def review(self, evidence: Evidence, /) -> Verdict:
        return Verdict.abstain("no opinion", judge=self.id)


async def test_a_final_abstain_on_a_mutation_never_commits(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(SERVICE)
    result = await VshToolset(workspace, judge=Abstains()).vsh_write("new.txt", "x\n")
    assert result.state == "pending"
    assert snapshot_tree(workspace) == {"service.toml": b"tls = true\nport = 443\n"}


# -- item 4: fail closed in time ----------------------------------------------------------


class Computes:
    """A judge that computes without ever yielding to the event loop, then approves."""

    def __init__(self, seconds: float) -> None:
        self.id = "computes"
        self.seconds = seconds

    async def review(self, evidence: Evidence, /) -> Verdict:
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            pass
        return Verdict.approve("approved late", judge=self.id)


class Swallows:
    """A judge that ignores every cancellation, forever."""

    id = "swallows"

    async def review(self, evidence: Evidence, /) -> Verdict:
        while True:
            try:
                await anyio.sleep(3600)
            except BaseException:
                continue


class SlowRule(Rule):
    """A denial rule whose synchronous check takes ``seconds`` (like a pathological regex)."""

    type: Literal["slow_for_tests"] = "slow_for_tests"
    seconds: float = 1.5

    def check(self, evidence: Evidence, /) -> Verdict | None:
        time.sleep(self.seconds)
        return None


async def test_a_judge_that_never_yields_cannot_approve_late(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(SERVICE)
    toolset = VshToolset(workspace, judge=as_hook(Computes(0.6), timeout=0.2))
    result = await toolset.vsh_write("new.txt", "x\n")
    assert result.state == "pending"
    assert result.verdict is not None
    assert result.verdict.failure == "timeout"
    assert snapshot_tree(workspace) == {"service.toml": b"tls = true\nport = 443\n"}


async def test_rule_sets_run_off_the_loop_and_time_out_on_time(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(SERVICE)
    toolset = VshToolset(workspace, judge=as_hook(RuleSet([SlowRule(seconds=1.5)]), timeout=0.2))
    started = time.monotonic()
    result = await toolset.vsh_write("new.txt", "x\n")
    elapsed = time.monotonic() - started
    assert result.verdict is not None
    assert result.verdict.failure == "timeout"
    assert result.state == "pending"
    assert elapsed < 1.0, f"the decision outlived its 0.2 s timeout by {elapsed - 0.2:.2f} s"


async def test_a_judge_swallowing_cancellation_does_not_hang_agent_run(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace(SERVICE)
    toolset = VshToolset(workspace, judge=as_hook(Swallows(), timeout=0.2))
    returns: list[ToolReturnPart] = []
    with anyio.fail_after(10):
        await Agent(one_call(TLS_OFF, returns), toolsets=[toolset]).run("turn tls off")
    result: Any = returns[0].content
    assert (result.state, result.verdict.failure) == ("pending", "timeout")
    assert snapshot_tree(workspace) == {"service.toml": b"tls = true\nport = 443\n"}
