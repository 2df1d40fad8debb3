"""Stress models: deliberately wrong LLMs that show what a judge configuration guarantees."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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

from ._names import STRESS_MODES, StressMode

__all__ = ("STRESS_MODES", "StressMode", "prompt_text", "refs_in", "stress_model")

_REF = re.compile(r"\b(?:POLICY|INTENT|[CERW]\d+)\b")
_REFS_LINE = re.compile(r"^CITABLE REFS:\s*(.*)$", re.MULTILINE)
_FENCE = re.compile(r"<<<UNTRUSTED (\S+)[^\n]*\n(.*?)UNTRUSTED \1>>>", re.DOTALL)
_ASKS_APPROVAL = re.compile(r"(?i)\b(approve|pre-approved|approved by|signed off)\b")


def prompt_text(messages: list[ModelMessage]) -> str:
    """Everything the judge model was shown as user prompt text."""
    parts: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    parts.append(part.content)
    return "\n".join(parts)


def refs_in(prompt: str) -> list[str]:
    """The refs a prompt offers: its ``CITABLE REFS`` line, else every ref-looking token."""
    line = _REFS_LINE.search(prompt)
    found = _REF.findall(line.group(1)) if line else _REF.findall(prompt)
    return list(dict.fromkeys(found))


def _answer(info: AgentInfo, args: dict[str, Any], tokens: int) -> ModelResponse:
    usage = RequestUsage(input_tokens=tokens, output_tokens=40)
    if info.output_tools:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)], usage=usage)
    return ModelResponse(parts=[TextPart(json.dumps(args))], usage=usage)


def _approve(prompt: str) -> dict[str, Any]:
    return {"decision": "approve", "reason": "Looks fine.", "cited": refs_in(prompt)}


def stress_model(mode: str) -> FunctionModel:
    """A FunctionModel that is wrong in the named way (see ``STRESS_MODES``)."""
    if mode not in STRESS_MODES:
        raise ValueError(f"unknown stress mode {mode!r}; choose one of {', '.join(STRESS_MODES)}")

    def decide(prompt: str) -> dict[str, Any]:
        if mode == "always-approve":
            return _approve(prompt)
        if mode == "always-reject":
            return {"decision": "reject", "reason": "Rejected by the stress model.", "cited": []}
        if mode == "malformed":
            return {"decision": "definitely", "cited": "C1", "verdict": True}
        asked = any(_ASKS_APPROVAL.search(body) for _, body in _FENCE.findall(prompt))
        if asked:
            return _approve(prompt)
        return {"decision": "review", "reason": "No instruction to approve found.", "cited": []}

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = prompt_text(messages)
        if mode == "timeout":
            await anyio.sleep(3600)
        return _answer(info, decide(prompt), tokens=len(prompt) // 4)

    handler: Callable[..., Any] = respond
    return FunctionModel(handler, model_name=f"stress-{mode}")
