"""Shared pieces of the inbox tests: real deferred calls on real workspaces, a served
inbox on a free 127.0.0.1 port, and a small HTTP client that keeps cookies and never
follows redirects (so each test sees exactly what the server answered)."""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.agent import AgentRunResult
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshToolset
from vsh_ai.inbox._app import InboxConfig, create_app
from vsh_ai.inbox._auth import Tokens
from vsh_ai.inbox._server import InboxServer

if TYPE_CHECKING:
    from vsh_ai.inbox._dbos_items import DbosInbox

__all__ = (
    "Http",
    "Reply",
    "defer",
    "deferred_agent",
    "patch_call",
    "serving",
)


def patch_call(
    call_id: str, path: str = "notes.txt", old: str = "a", new: str = "b"
) -> ToolCallPart:
    return ToolCallPart(
        "vsh_patch", {"path": f"/workspace/{path}", "old": old, "new": new}, tool_call_id=call_id
    )


def deferred_agent(
    toolset: VshToolset, calls: list[ToolCallPart], seen: list[Any]
) -> Agent[None, str | DeferredToolRequests]:
    """An agent whose model makes ``calls`` in one response, records every tool return
    it is then given in ``seen``, and stops."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(p, ToolReturnPart | RetryPromptPart) for p in last.parts
        ):
            seen.extend(last.parts)
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=list(calls))

    return Agent(
        FunctionModel(respond), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )


async def defer(
    toolset: VshToolset, calls: list[ToolCallPart]
) -> tuple[AgentRunResult[str | DeferredToolRequests], list[Any]]:
    """Run the agent once: its calls wait for a person (``DeferredToolRequests``)."""
    seen: list[Any] = []
    first = await deferred_agent(toolset, calls, seen).run("edit")
    assert isinstance(first.output, DeferredToolRequests)
    return first, seen


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    set_cookies: list[str]
    body: str

    def csrf(self) -> str:
        match = re.search(r'name="csrf" value="([^"]+)"', self.body)
        assert match, "no CSRF field on the page"
        return match.group(1)

    def field(self, name: str) -> str:
        match = re.search(rf'name="{name}" value="([^"]*)"', self.body)
        assert match, f"no {name} field on the page"
        return match.group(1)


@dataclass
class Http:
    """Requests to the inbox at ``base``; the session cookie is kept between requests."""

    base: str
    cookies: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        *,
        origin: str | None = "self",
        headers: dict[str, str] | None = None,
    ) -> Reply:
        parts = urlsplit(self.base)
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        sent = dict(headers or {})
        if origin == "self":
            sent.setdefault("Origin", self.base)
        elif origin is not None:
            sent["Origin"] = origin
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            text = response.read().decode()
            set_cookies = response.headers.get_all("set-cookie") or []
            for cookie in set_cookies:
                name, _, rest = cookie.partition("=")
                value = rest.split(";", 1)[0].strip('"')
                if value and "max-age=0" not in cookie.lower():
                    self.cookies[name] = value
                else:
                    self.cookies.pop(name, None)
            reply_headers = {k.lower(): v for k, v in response.getheaders()}
            return Reply(response.status, reply_headers, set_cookies, text)
        finally:
            connection.close()

    def get(self, path: str, **options: Any) -> Reply:
        return self.request("GET", path, **options)

    def post(self, path: str, form: dict[str, str], **options: Any) -> Reply:
        return self.request("POST", path, form, **options)

    def login(self, token: str) -> Reply:
        reply = self.post("/login", {"token": token})
        assert reply.status == 303, reply.body
        return reply


@contextmanager
def serving(
    workspaces: list[Path],
    *,
    principal: str = "alice",
    ttl_s: float = 600.0,
    dbos: DbosInbox | None = None,
) -> Iterator[tuple[InboxServer, str]]:
    """The inbox for ``workspaces`` (and ``dbos``'s waiting workflows) served in a
    thread; yields the server and its token."""
    tokens, token = Tokens.generated(principal)
    config = InboxConfig(workspaces=workspaces, tokens=tokens, ttl_s=ttl_s, dbos=dbos)
    app = create_app(config)
    server = InboxServer(app).start()
    try:
        yield server, token
    finally:
        server.stop()
