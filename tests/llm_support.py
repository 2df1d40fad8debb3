"""Helpers for the LLM judge tests: a scripted reviewer model that records what it saw."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

_REQUIRED = re.compile(r"^REQUIRED REFS \(an approval must cite every one\): (.*)$", re.M)
_CITABLE = re.compile(r"^CITABLE REFS: (.*)$", re.M)


def packet_text(messages: Sequence[ModelMessage]) -> str:
    """The user prompt (the evidence packet) of the first request."""
    request = messages[0]
    assert isinstance(request, ModelRequest)
    parts = [p for p in request.parts if isinstance(p, UserPromptPart)]
    assert len(parts) == 1
    assert isinstance(parts[0].content, str)
    return parts[0].content


def required_refs(packet: str) -> list[str]:
    matches = _REQUIRED.findall(packet)
    assert len(matches) == 1, "packet must have exactly one REQUIRED REFS line at column 0"
    match = _REQUIRED.search(packet)
    assert match
    return [] if match.group(1) == "none" else match.group(1).split(", ")


def citable_refs(packet: str) -> list[str]:
    match = _CITABLE.search(packet)
    assert match
    return match.group(1).split(", ")


def everything_sent(messages: Sequence[ModelMessage], info: AgentInfo) -> str:
    """Every string the provider received: instructions, prompts, tool schemas."""
    chunks = [info.instructions or ""]
    chunks += [json.dumps(t.parameters_json_schema) for t in info.output_tools]
    for message in messages:
        chunks.append(repr(message))
    return "\n".join(chunks)


@dataclass
class Reviewer:
    """A FunctionModel script: decides, cites, and records every call it received."""

    decision: str = "approve"
    cite: str | list[str] = "required"
    concerns: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    reason: str = "The diff does what the intent says and nothing else."
    delay: float = 0.0
    decide: Callable[[str], dict[str, Any]] | None = None
    calls: list[tuple[list[ModelMessage], AgentInfo]] = field(default_factory=list)

    def report(self, packet: str) -> dict[str, Any]:
        if self.decide is not None:
            return self.decide(packet)
        cited = required_refs(packet) if self.cite == "required" else list(self.cite)
        return {
            "decision": self.decision,
            "reason": self.reason,
            "cited": cited,
            "concerns": self.concerns,
            "missing_evidence": self.missing,
        }

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append((list(messages), info))
        if self.delay:
            await anyio.sleep(self.delay)
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, self.report(packet_text(messages)))],
            usage=RequestUsage(input_tokens=120, output_tokens=30),
            model_name="scripted-reviewer",
        )

    def model(self) -> FunctionModel:
        return FunctionModel(self, model_name="scripted-reviewer")


def text_reply(text: str) -> FunctionModel:
    """A model that answers in prose instead of the structured verdict."""

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(text)])

    return FunctionModel(reply, model_name="prose")


# Issue 10 item 1: the seven ways a rename carried unshared bytes to the judge model.
KEYS = {"keys/a.txt": "db: hunter2\n", "public/old.txt": "x\n"}
MOVE = "vsh_move('/workspace/keys/a.txt', '/workspace/public/a.txt')\n"
LEAKS = {
    "monty read": ("monty", MOVE + "print(vsh_read('/workspace/public/a.txt'))"),
    "monty edit": (
        "monty",
        MOVE + "p = '/workspace/public/a.txt'\nvsh_write(p, vsh_read(p).replace('db', 'DB'))",
    ),
    "monty append": (
        "monty",
        MOVE + "import pathlib\n"
        "with pathlib.Path('/workspace/public/a.txt').open('a') as f:\n"
        "    f.write('more\\n')\n",
    ),
    "move out, read, move back": (
        "monty",
        MOVE + "s = vsh_read('/workspace/public/a.txt')\n"
        "vsh_move('/workspace/public/a.txt', '/workspace/keys/a.txt')\n"
        "vsh_write('/workspace/public/old.txt', s)\n",
    ),
    "bash mv && cat": ("bash", "mv keys/a.txt public/a.txt && cat public/a.txt"),
    "bash mv && echo >>": ("bash", "mv keys/a.txt public/a.txt && echo more >> public/a.txt"),
    "bash mv && sed -i": ("bash", "mv keys/a.txt public/a.txt && sed -i 's/db/DB/' public/a.txt"),
}
