"""The agents of the Temporal crash matrix (tests/test_durable_temporal.py), built per process.

A worker process (tests/durable_temporal_worker.py) sets ``VSH_AI_TEMPORAL_CASES`` (a
JSON list of case directories), then imports this module once: it builds one agent per
case, each with a :class:`~vsh_ai.VshToolset` on ``<case dir>/ws``, configured by
``<case dir>/case.json``: ``engine`` (``durability``: Pydantic AI's ``TemporalDurability``
capability; ``agent``: the deprecated ``TemporalAgent`` wrapper), ``path`` (``auto`` or
``judged``), ``journal`` (false: the "before" figures), ``key`` (``default``, ``activity``
or the wrong ``attempt``: which call key the journal uses) and ``inline`` (true: the VSH
tool runs in workflow code, its activity turned off, so every replay runs it again).

The workflow module imports this one through ``workflow.unsafe.imports_passed_through()``:
Temporal's sandbox then shares this host module (and its native VSH runtimes) instead of
re-executing it. User code must do the same: build the agent in a module the workflow
imports pass-through (a sandboxed re-import would open VSH runtimes inside the sandbox).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from durable_support import CountingJudge, tool_returns
from pydantic_ai import Agent, RunContext
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.capabilities import SetToolMetadata
from pydantic_ai.durable_exec.temporal import TemporalAgent, TemporalDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig

from vsh_ai import VshResult, VshToolset, default_call_key

PROGRAM = "p = '/workspace/log.txt'\nvsh_write(p, vsh_read(p) + 'line 1\\n')\n"


def state_of(content: Any) -> str:
    """The ``state`` of a tool return (a VshResult, or its JSON form after a payload trip)."""
    if isinstance(content, VshResult):
        return content.state
    if isinstance(content, dict) and isinstance(content.get("state"), str):
        return str(content["state"])
    return type(content).__name__


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Append once; when the tool's result is back, say which state it reported."""
    returns = tool_returns(messages)
    if not returns:
        return ModelResponse(
            parts=[ToolCallPart("vsh_run", {"code": PROGRAM, "intent": "append line 1"})]
        )
    return ModelResponse(parts=[TextPart(f"finished: {state_of(returns[-1].content)}")])


def activity_call_key(ctx: RunContext[Any]) -> str | None:
    """Temporal's own identity of a tool call: workflow id, workflow run id, activity id.

    The activity id is recorded in the workflow history when the call is scheduled, so
    every retry of that activity (on any worker) carries it. Outside an activity (no
    Temporal) the call is not journaled.
    """
    if not activity.in_activity():
        return None
    info = activity.info()
    return json.dumps(["temporal", info.workflow_id, info.workflow_run_id, info.activity_id])


def attempt_call_key(ctx: RunContext[Any]) -> str | None:
    """A wrong key (the control): it names the attempt, not the call, so a retry is new."""
    if not activity.in_activity():
        return None
    info = activity.info()
    return json.dumps(["temporal", info.workflow_id, info.activity_id, info.attempt])


# The server notices a dead worker through missed heartbeats (the integration heartbeats
# every activity); a short timeout on the tool activity keeps the matrix fast. A live
# worker whose heartbeat is late by more than this gets a second, concurrent attempt
# (the ``stall_*`` cases): model activities keep the integration's 30 s default.
TOOL_ACTIVITY_CONFIG = ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    heartbeat_timeout=timedelta(seconds=2),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
)


def logged(call_key: Callable[[RunContext[Any]], str | None], log: Path) -> Any:
    """``call_key`` that also records, per attempt, the key and the identities it saw."""

    def key(ctx: RunContext[Any]) -> str | None:
        attempt = activity.info().attempt if activity.in_activity() else 0
        line: dict[str, Any] = {
            "pid": os.getpid(),
            "attempt": attempt,
            "run_id": ctx.run_id,
            "tool_call_id": ctx.tool_call_id,
        }
        try:
            value = line["key"] = call_key(ctx)
        except Exception as error:
            line["key"], line["error"] = None, f"{type(error).__name__}: {error}"
            raise
        finally:
            with log.open("a") as handle:
                handle.write(json.dumps(line) + "\n")
        return value

    return key


def build_agent(case_dir: Path) -> AbstractAgent[None, str]:
    case = json.loads((case_dir / "case.json").read_text())
    engine, inline = case.get("engine", "durability"), case.get("inline", False)
    options: dict[str, Any] = {"tools": ["vsh_run"], "journal": case["journal"]}
    keys = {"default": default_call_key, "activity": activity_call_key, "attempt": attempt_call_key}
    key = keys[case["key"]]
    options["call_key"] = logged(key, case_dir / "keys.jsonl")
    if case["path"] == "judged":
        options["judge"] = CountingJudge(case_dir / "judge_calls.txt")
    toolset = VshToolset(case_dir / "ws", **options)
    model = FunctionModel(respond, model_name="crash-agent")
    toolset_config = {toolset.id or "": TOOL_ACTIVITY_CONFIG}
    if engine == "agent":
        plain = Agent(model, name=agent_name(case_dir.name), toolsets=[toolset])
        tool_config: dict[str, dict[str, ActivityConfig | Literal[False]]] = {}
        if inline:
            tool_config = {toolset.id or "": {"vsh_run": False}}
        with warnings.catch_warnings():  # TemporalAgent is deprecated: covered while it ships
            warnings.simplefilter("ignore")
            return TemporalAgent(
                plain, toolset_activity_config=toolset_config, tool_activity_config=tool_config
            )
    capabilities: list[Any] = [TemporalDurability(toolset_activity_config=toolset_config)]
    if inline:
        capabilities.append(SetToolMetadata(tools=["vsh_run"], temporal=False))
    return Agent(
        model,
        name=agent_name(case_dir.name),
        toolsets=[toolset],
        capabilities=capabilities,
    )


def agent_name(case: str) -> str:
    """The case's agent name (activity names carry it: one per case in a process)."""
    return "crash_" + case.replace("-", "_")


AGENTS = {
    Path(case_dir).name: build_agent(Path(case_dir))
    for case_dir in json.loads(os.environ.get("VSH_AI_TEMPORAL_CASES", "[]"))
}
