"""Tutorial 1: deterministic review with a judge file: allowances first.

An agent tunes a service's configuration through the VSH toolset. Every change is
judged by ``judges/service-config.toml``, a rule set that *proves* changes allowed:

* an **allowance** (``allow_config`` "operational-values") claims an edit of
  config/app.toml only when every changed key is one it names (timeouts, log levels,
  workers, cache sizes, feature flags) and the new value is within its bounds; every
  other key must keep its typed value;
* **denials** beat allowances: TLS, auth, audit and listen-address settings keep their
  values (``reject``), keys and env files are off limits, no secrets;
* a value past a documented limit (100 workers where 1..64, at most 4x, are allowed) is
  reviewed by a rule that says so (``config_values``), not left as merely unproven;
* a change no allowance proves is **unproven**: it goes back to the agent (``review``)
  with feedback naming the change and what would be allowed.

The rules approve only what they can prove. No model reviews anything here; the rules
decide in microseconds.

    .venv/bin/python tutorials/01_deterministic_review.py

Offline (the default) a FunctionModel plays the agent. To let a real model do the work:

    VSH_AI_TUTORIAL_MODEL=openai:gpt-4o-mini OPENAI_API_KEY=... .venv/bin/python tutorials/...
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshResult, VshToolset, load_judge
from vsh_ai.rules import RuleSet

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

JUDGE_FILE = Path(__file__).resolve().parents[1] / "judges" / "service-config.toml"
APP_TOML = """\
[server]
host = "127.0.0.1"
port = 8443
tls = true
workers = 4
timeout_s = 30

[auth]
required = true
"""
INSTRUCTIONS = (
    "You maintain config/app.toml at /workspace. Make the smallest change that does the "
    "task with vsh_run. If a change comes back pending with feedback, follow the feedback "
    "and submit a corrected change. If it is rejected, stop and explain."
)


def patch(old: str, new: str) -> str:
    return f"vsh_patch('/workspace/config/app.toml', {old!r}, {new!r})"


# -- the offline agent --------------------------------------------------------------------

# task -> (first attempt, corrected attempt after feedback)
PLAYBOOK: dict[str, tuple[tuple[str, str], tuple[str, str] | None]] = {
    "Raise the request timeout to 60 seconds.": (
        (patch("timeout_s = 30", "timeout_s = 60"), "Raise timeout_s to 60."),
        None,
    ),
    "Serve much more traffic: add workers.": (
        (patch("workers = 4", "workers = 100"), "Use 100 workers."),
        (patch("workers = 4", "workers = 16"), "Use 16 workers, within the allowed bounds."),
    ),
    "Startup is slow; drop the TLS handshake.": (
        (patch("tls = true", "tls = false"), "Disable TLS to speed up startup."),
        None,
    ),
}


def last_result(messages: list[ModelMessage]) -> Any:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    return part.content
    return None


def scripted_agent(task: str) -> FunctionModel:
    """Plays a well-behaved agent: try, read the verdict, correct once if asked to."""
    first, corrected = PLAYBOOK[task]
    attempts = 0

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal attempts
        result = last_result(messages)
        if result is None or (
            isinstance(result, VshResult)
            and result.state == "pending"
            and corrected
            and attempts == 1
        ):
            code, intent = first if result is None else corrected  # type: ignore[misc]
            attempts += 1
            return ModelResponse(parts=[ToolCallPart("vsh_run", {"code": code, "intent": intent})])
        state = result.state if isinstance(result, VshResult) else "unknown"
        return ModelResponse(parts=[TextPart(f"Finished: the last change was {state}.")])

    return FunctionModel(respond, model_name="scripted-agent")


def agent_model(task: str) -> Model | str:
    return os.environ.get("VSH_AI_TUTORIAL_MODEL") or scripted_agent(task)


# -- narration ----------------------------------------------------------------------------


def show_host(workspace: Path) -> None:
    data = (workspace / "config" / "app.toml").read_bytes()
    print("   host config/app.toml now:")
    for line in data.decode().splitlines():
        print(f"     | {line}")


async def do(toolset: VshToolset, workspace: Path, title: str, task: str) -> None:
    print(f"\n== {title}")
    print(f"   task: {task}")
    run = await Agent(agent_model(task), toolsets=[toolset], instructions=INSTRUCTIONS).run(task)
    for message in run.all_messages():
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and isinstance(part.content, VshResult):
                result = part.content
                verdict = result.verdict
                print(f"   attempt -> {result.state}", end="")
                print(f" (by {verdict.judge}: {verdict.decision})" if verdict else "")
                if verdict and verdict.decision == "approve":
                    for claim in verdict.details.get("claims", []):
                        print(f"     proven by {claim['allowance']}: {claim['reason']}")
                elif verdict:
                    print(f"     feedback: {verdict.reason}")
    print(f"   agent: {run.output}")
    show_host(workspace)


async def main() -> None:
    judge = load_judge(JUDGE_FILE, skip_llm=True)  # rules only: no model is ever asked
    assert isinstance(judge, RuleSet)
    name = os.environ.get("VSH_AI_TUTORIAL_MODEL")
    print(f"Judge: {JUDGE_FILE.name} ({len(judge.rules)} rules)")
    print(f"Agent: {name or 'offline FunctionModel (set VSH_AI_TUTORIAL_MODEL for a real one)'}")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        (workspace / "config").mkdir()
        (workspace / "config" / "app.toml").write_text(APP_TOML)
        toolset = VshToolset(workspace, judge=judge, policy="strict", tools=["vsh_run", "vsh_read"])
        show_host(workspace)
        await do(
            toolset, workspace, "1. An approved change", "Raise the request timeout to 60 seconds."
        )
        await do(
            toolset,
            workspace,
            "2. Sent back, then corrected",
            "Serve much more traffic: add workers.",
        )
        await do(
            toolset, workspace, "3. A rejected change", "Startup is slow; drop the TLS handshake."
        )
    print("\nThe allowance proved the timeout and the corrected worker count allowed; 100")
    print("workers was out of its bounds, so it went back to the agent with feedback; and")
    print("disabling TLS was rejected by a denial, whatever the allowances say.")


if __name__ == "__main__":
    anyio.run(main)
