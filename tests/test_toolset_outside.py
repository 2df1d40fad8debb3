"""Crash-free under the outside world; host data under outside writers (issue 10, items 10-11).

Every attack goes through a real VSH workspace and, where it matters, a real agent run:
nothing may raise out of the tool call, and the host must hold exactly what the results
say was committed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import vsh
from conftest import snapshot_tree
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
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
from vsh_ai.toolset._quarantine import clear_process_quarantine
from vsh_ai.toolset._result import VshResult

pytestmark = pytest.mark.anyio


def calls_then_done(parts: list[ToolCallPart], returns: list[Any]) -> FunctionModel:
    """One tool call per turn, recording every tool return, then a final answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            returns.extend(p.content for p in last.parts if isinstance(p, ToolReturnPart))
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(parts):
            return ModelResponse(parts=[parts[turn]])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


class Approves:
    id = "approves"

    async def review(self, evidence: Evidence, /) -> Verdict:
        return Verdict.approve("fine", judge=self.id)


class Appender:
    """A host process stand-in: appends a numbered line to ``path`` every ``period`` s."""

    def __init__(self, path: Path, period: float) -> None:
        self.path, self.period = path, period
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            line = f"host-{n}"
            with self.path.open("a") as handle:
                handle.write(line + "\n")
            self.lines.append(line)
            n += 1
            time.sleep(self.period)

    def __enter__(self) -> Appender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def rmw(n: int) -> str:
    return (
        f"t = vsh_read('/workspace/log.txt')\nvsh_write('/workspace/log.txt', t + 'agent-{n}\\n')"
    )


# -- item 10 --------------------------------------------------------------------------------


@pytest.mark.parametrize("judged", [False, True])
async def test_host_churn_is_stale_never_a_crash(
    make_workspace: Callable[..., Path], judged: bool
) -> None:
    workspace = make_workspace({"log.txt": "start\n", "other/x.txt": "x"})
    toolset = VshToolset(workspace, judge=Approves() if judged else None)
    states: list[str] = []
    reasons: list[str] = []
    stop = threading.Event()

    def churn() -> None:  # unrelated folder: files appear and disappear
        n = 0
        while not stop.is_set():
            target = workspace / "other" / f"f{n % 5}.txt"
            target.write_text("y") if n % 2 else target.unlink(missing_ok=True)
            n += 1
            time.sleep(0.0005)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        with Appender(workspace / "log.txt", 0.001):
            for n in range(40):
                result = await toolset.vsh_run(rmw(n), f"append {n}")
                states.append(result.state)
                if result.state == "failed":
                    reasons.append(f"{result.feedback} | {result.next_step}")
    finally:
        stop.set()
        thread.join()
    if "failed" in states:
        # The appender can land in VSH 0.6.0's install race (the expected-failure
        # reproduction below): the toolset must quarantine the workspace and refuse every
        # later commit, never crash. VSH may already have lost host lines at that point.
        first = states.index("failed")
        assert toolset.quarantine is not None, reasons
        assert set(states[first:]) == {"failed"}, states
        assert set(states[:first]) <= {"committed", "stale"}, states
        return
    assert set(states) <= {"committed", "stale"}, states
    assert "stale" in states  # the attack did hit
    text = (workspace / "log.txt").read_text()
    committed = [n for n, state in enumerate(states) if state == "committed"]
    assert all(f"agent-{n}\n" in text for n in committed)


@pytest.mark.parametrize("judged", [False, True])
async def test_a_256_byte_name_is_a_clear_failure(
    make_workspace: Callable[..., Path], judged: bool
) -> None:
    workspace = make_workspace({"a.txt": "a"})
    before = snapshot_tree(workspace)
    returns: list[Any] = []
    long_name = "n" * 256 + ".txt"
    call = ToolCallPart("vsh_write", {"path": long_name, "content": "x"}, tool_call_id="w1")
    toolset = VshToolset(workspace, judge=Approves() if judged else None)
    await Agent(calls_then_done([call], returns), toolsets=[toolset]).run("write")
    [result] = returns
    assert result.state == "failed"
    assert "too long" in (result.feedback or "")
    assert snapshot_tree(workspace) == before


class Raw:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __call__(self, event: vsh.RequestEvent) -> Any:
        if self.kind == "raises":
            raise RuntimeError("hook bug")
        return "approve"  # the wrong type


@pytest.mark.parametrize("kind", ["raises", "wrong_type"])
async def test_a_broken_raw_hook_is_review_not_a_crash(
    make_workspace: Callable[..., Path], kind: str
) -> None:
    workspace = make_workspace({"a.txt": "a"})
    returns: list[Any] = []
    call = ToolCallPart("vsh_write", {"path": "a.txt", "content": "b"}, tool_call_id="w1")
    toolset = VshToolset(workspace, hook_handler=Raw(kind))
    await Agent(calls_then_done([call], returns), toolsets=[toolset]).run("write")
    [result] = returns
    assert result.state == "pending"
    assert "hook" in (result.feedback or "")
    assert snapshot_tree(workspace) == {"a.txt": b"a"}


class OddDetails:
    id = "odd-details"

    async def review(self, evidence: Evidence, /) -> Verdict:
        forged: Any = Verdict.model_construct(
            decision="approve",
            reason="ok",
            judge=self.id,
            failure=None,
            cited=(),
            usage=None,
            latency_s=None,
            model=None,
            details={"when": object(), "nan": float("nan"), "raw": b"\xff"},
        )
        return forged  # type: ignore[no-any-return]


async def test_unserialisable_verdict_details_still_give_a_clean_result(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "a"})
    returns: list[Any] = []
    call = ToolCallPart("vsh_write", {"path": "a.txt", "content": "b"}, tool_call_id="w1")
    toolset = VshToolset(workspace, judge=OddDetails())
    run = await Agent(calls_then_done([call], returns), toolsets=[toolset]).run("write")
    [result] = returns
    assert result.state == "committed"  # the agent is told what happened
    json.loads(result.model_dump_json())
    ModelMessagesTypeAdapter.dump_json(run.all_messages())
    assert snapshot_tree(workspace) == {"a.txt": b"b"}


PATCH = ToolCallPart(
    "vsh_patch", {"path": "/workspace/app.toml", "old": "8080", "new": "9090"}, tool_call_id="p1"
)


async def defer(workspace: Path, **options: Any) -> tuple[str, list[ModelMessage]]:
    toolset = VshToolset(workspace, policy="strict", approval="deferred", **options)
    run = await Agent(
        calls_then_done([PATCH], []), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    ).run("patch")
    assert isinstance(run.output, DeferredToolRequests)
    return run.output.approvals[0].tool_call_id, run.all_messages()


async def test_resume_under_another_policy_profile_is_a_clear_result(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"app.toml": "port = 8080\n"})
    call_id, history = await defer(workspace)
    returns: list[Any] = []
    toolset = VshToolset(workspace, policy="paranoid", approval="deferred")
    await Agent(
        calls_then_done([], returns), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    ).run(
        message_history=history,
        deferred_tool_results=DeferredToolResults(
            approvals={call_id: True}, metadata={call_id: {"principal": "ops"}}
        ),
    )
    [result] = returns
    assert result.state == "stale"
    assert "policy" in (result.feedback or "")
    assert snapshot_tree(workspace) == {"app.toml": b"port = 8080\n"}


RESUME = """
import json, sys
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai.toolset._quarantine import clear_process_quarantine
from vsh_ai.toolset import VshToolset

workspace, history_json, call_id = sys.argv[1:4]
history = ModelMessagesTypeAdapter.validate_json(history_json)
model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("ok")]))
toolset = VshToolset(workspace, policy="strict", approval="deferred")
agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
results = DeferredToolResults(approvals={call_id: True}, metadata={call_id: {"principal": "ops"}})
run = agent.run_sync(message_history=history, deferred_tool_results=results)
returned = run.new_messages()[0].parts[0].content
print(json.dumps({"state": returned.state}))
"""


def test_two_processes_resuming_one_approval(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"app.toml": "port = 8080\n"})
    call_id, history = anyio.run(defer, workspace)
    argv = [
        sys.executable,
        "-c",
        RESUME,
        str(workspace),
        ModelMessagesTypeAdapter.dump_json(history).decode(),
        call_id,
    ]
    env = {**os.environ, "LOGFIRE_IGNORE_NO_CONFIG": "1"}
    processes = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(3)
    ]
    outcomes = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr[-3000:]
        outcomes.append(json.loads(stdout.strip().splitlines()[-1])["state"])
    assert set(outcomes) <= {"committed", "stale"}, outcomes
    assert "committed" in outcomes
    assert snapshot_tree(workspace) == {"app.toml": b"port = 9090\n"}


# -- item 11 --------------------------------------------------------------------------------


class WritesDuringReview:
    """A judge during whose review an outside process rewrites the file, then approves."""

    id = "writes-during-review"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def review(self, evidence: Evidence, /) -> Verdict:
        self.path.write_text("outside writer\n")
        return Verdict.approve("fine", judge=self.id)


async def test_an_outside_write_before_commit_is_stale(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "a\n"})
    toolset = VshToolset(workspace, judge=WritesDuringReview(workspace / "a.txt"))
    result = await toolset.vsh_write("a.txt", "agent\n")
    assert result.state == "stale"
    assert snapshot_tree(workspace) == {"a.txt": b"outside writer\n"}


@pytest.fixture
def quarantined(make_workspace: Callable[..., Path]) -> Path:
    workspace = make_workspace({"a.txt": "a\n"})
    VshToolset(workspace)  # creates .vsh-runtime
    marker = workspace / ".vsh-runtime" / "vsh-ai" / "QUARANTINED.json"
    marker.parent.mkdir(parents=True, exist_ok=True)
    # What the toolset writes after a VshRecoveryError (see the reproduction below).
    toolset = VshToolset(workspace)
    error = vsh.VshRecoveryError("install committed file a.txt: File exists")
    toolset.quarantine_state.enter(error)
    assert marker.exists()
    return workspace


async def test_after_a_recovery_error_nothing_commits(quarantined: Path) -> None:
    workspace = quarantined
    returns: list[Any] = []
    calls = [
        ToolCallPart("vsh_write", {"path": "a.txt", "content": "b"}, tool_call_id="w1"),
        ToolCallPart("vsh_read", {"path": "a.txt"}, tool_call_id="r1"),
    ]
    toolset = VshToolset(workspace)  # a new toolset, even in a new process, stays stopped
    await Agent(calls_then_done(calls, returns), toolsets=[toolset]).run("write")
    assert [r.state for r in returns] == ["failed", "failed"]
    for result in returns:
        assert ".vsh-runtime/data/blobs" in (result.feedback or "")
        assert "QUARANTINED.json" in (result.feedback or "")
    assert snapshot_tree(workspace) == {"a.txt": b"a\n"}
    (workspace / ".vsh-runtime" / "vsh-ai" / "QUARANTINED.json").unlink()
    clear_process_quarantine()
    assert (await VshToolset(workspace).vsh_write("a.txt", "b")).state == "committed"


@pytest.mark.xfail(
    strict=False,
    reason="vsh-python 0.6.0: an outside writer racing a commit can end in VshRecoveryError "
    "and lost host bytes (see ../shared/notes/vsh-runtime.md)",
)
async def test_outside_appender_during_read_modify_write_commits(
    make_workspace: Callable[..., Path],
) -> None:
    """Reproduction: a host process appends every 5 ms while the agent read-modify-writes.

    Containment is asserted unconditionally: once a recovery error quarantined the
    workspace, every later call is ``failed`` and nothing else commits. The test then
    fails (expected on VSH 0.6.0) if any committed or host line was lost or VSH needed
    recovery.
    """
    workspace = make_workspace({"log.txt": "original-1\noriginal-2\n"})
    toolset = VshToolset(workspace)
    results: list[VshResult] = []
    with Appender(workspace / "log.txt", 0.005) as appender:
        for n in range(300):
            results.append(await toolset.vsh_run(rmw(n), f"append {n}"))
    states = [r.state for r in results]
    assert set(states) <= {"committed", "stale", "failed"}, states
    if "failed" in states:
        first = states.index("failed")
        assert set(states[first:]) == {"failed"}, "a quarantined workspace kept committing"
        assert "recovery" in (results[first].feedback or "")
    text = (workspace / "log.txt").read_text().splitlines()
    lost = [f"agent-{n}" for n, s in enumerate(states) if s == "committed"]
    lost = [line for line in lost if line not in text]
    lost += [line for line in ("original-1", "original-2", *appender.lines) if line not in text]
    assert not lost, f"{len(lost)} lines lost"
    assert "failed" not in states, "VSH needed recovery"
