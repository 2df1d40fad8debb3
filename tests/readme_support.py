"""Offline stand-ins for the models the README's agents name (used by tests/test_readme.py).

A README block builds its agent on a real model name ("openai:gpt-4o-mini"); the test
never calls that model. A :class:`Play` scripts what the agent does for a prompt: one
``vsh_run`` program, then a sentence naming the state of the tool's result. The same
script reaches the agent in one of two ways:

* :func:`function_model`, a Pydantic AI ``FunctionModel`` the test installs with
  ``agent.override(model=...)`` (with ``ALLOW_MODEL_REQUESTS = False`` as the backstop);
* :class:`ResponsesServer`, a loopback HTTP server speaking the part of OpenAI's Responses
  API that ``openai:`` models use, for agents that ``override`` cannot reach: a DBOS
  workflow runs in a context of its own and rebuilds its model from the name inside each
  step, so only a model *name* crosses into it (``OPENAI_BASE_URL`` then points here).

Neither touches vsh-ai or VSH: the agent's tool calls run the real toolset on a real
workspace.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshResult


@dataclass(frozen=True)
class Play:
    """For a run whose prompt contains ``prompt``: submit ``code`` with ``vsh_run``."""

    prompt: str
    code: str
    intent: str = ""

    def call_args(self) -> dict[str, str]:
        return {"code": self.code, "intent": self.intent or self.prompt}


def choose(plays: Sequence[Play], prompt: str) -> Play:
    for play in plays:
        if play.prompt in prompt:
            return play
    raise AssertionError(f"no scripted play for the prompt {prompt!r}")


def answer(state: str) -> str:
    """What the scripted agent says after its tool call: the result's state."""
    return f"vsh_run: {state}"


# -- FunctionModel (agent.override) -------------------------------------------------------


def _prompt(messages: Sequence[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    raise AssertionError("the run has no text prompt")


def function_model(plays: Sequence[Play]) -> FunctionModel:
    """One ``vsh_run`` call per run (chosen by its prompt), then :func:`answer`."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        called = any(
            isinstance(part, ToolCallPart)
            for message in messages
            if isinstance(message, ModelResponse)
            for part in message.parts
        )
        if not called:
            play = choose(plays, _prompt(messages))
            return ModelResponse(parts=[ToolCallPart("vsh_run", play.call_args())])
        last = messages[-1]
        for part in last.parts if isinstance(last, ModelRequest) else ():
            if isinstance(part, ToolReturnPart):
                content = part.content
                state = content.state if isinstance(content, VshResult) else str(content)
                return ModelResponse(parts=[TextPart(answer(state))])
            if isinstance(part, RetryPromptPart):
                return ModelResponse(parts=[TextPart(answer(f"retry: {part.model_response()}"))])
        return ModelResponse(parts=[TextPart(answer("no tool result"))])

    return FunctionModel(respond, model_name="readme-player")


# -- a loopback Responses API (for agents inside DBOS workflows) --------------------------


@dataclass
class ResponsesServer:
    """``POST /v1/responses`` on 127.0.0.1, playing ``plays``; ``requests`` keeps every body."""

    plays: Sequence[Play]
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        if not any(i.get("type") == "function_call" for i in items):
            prompt = next(str(i.get("content")) for i in items if i.get("role") == "user")
            play = choose(self.plays, prompt)
            n = len(self.requests)
            output: list[dict[str, Any]] = [
                {
                    "type": "function_call",
                    "id": f"fc_{n}",
                    "call_id": f"call_{n}",
                    "name": "vsh_run",
                    "arguments": json.dumps(play.call_args()),
                    "status": "completed",
                }
            ]
        else:
            state = "no tool result"
            if outputs:
                text = str(outputs[-1].get("output"))
                try:
                    state = str(json.loads(text).get("state"))
                except (ValueError, AttributeError):
                    state = f"retry: {text[:200]}"
            output = [
                {
                    "type": "message",
                    "id": f"msg_{len(self.requests)}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": answer(state), "annotations": []}],
                }
            ]
        return {
            "id": f"resp_{len(self.requests)}",
            "object": "response",
            "created_at": 0,
            "model": body.get("model"),
            "status": "completed",
            "output": output,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 1,
                "output_tokens": 1,
                "total_tokens": 2,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }

    @contextmanager
    def running(self) -> Iterator[ResponsesServer]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/responses"):
                    owner.requests.append(body)
                    status, data = 200, owner.reply(body)
                else:
                    status, data = 404, {"error": {"message": f"no {self.path} here"}}
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join(timeout=5)
