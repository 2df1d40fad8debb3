"""``vsh-ai inbox --dbos``: calls of workflows waiting in ``run_with_approvals`` listed
through a ``DBOSClient`` on the system database, decided as DBOS messages bound to the
round and transaction the page showed (real DBOS on SQLite, real VSH, real agents)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest

pytest.importorskip("dbos")

from dbos import DBOS, SetWorkflowID
from durable_support import tool_returns
from inbox_support import Http, serving
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshResult, VshToolset
from vsh_ai.dbos import dbos_config, pending_approvals_async, run_with_approvals
from vsh_ai.inbox._dbos_items import DbosInbox, system_database_url

pytestmark = pytest.mark.anyio

AGENTS: dict[str, Agent[None, Any]] = {}
APPEND = "f = open('/workspace/a.txt', 'a')\nf.write('more\\n')\nf.close()"


def _model() -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = tool_returns(messages)
        if not returns:
            call = ToolCallPart("vsh_run", {"code": APPEND, "intent": "append"}, tool_call_id="c1")
            return ModelResponse(parts=[call])
        part = returns[0]
        state = part.content.state if isinstance(part.content, VshResult) else part.outcome
        return ModelResponse(parts=[TextPart(f"{part.tool_call_id}={state}")])

    return FunctionModel(respond)


@DBOS.workflow(name="vsh-ai-inbox-test")
async def inbox_workflow(key: str) -> str:
    result = await run_with_approvals(AGENTS[key], "append", timeout_s=30)
    return str(result.output)


@pytest.fixture(scope="module")
def dbos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("dbos-inbox")
    config = dbos_config(
        "vsh-ai-inbox-tests",
        directory=folder,
        notification_listener_polling_interval_sec=0.02,
        log_level="WARNING",
    )
    DBOS(config=config)
    DBOS.launch()
    try:
        yield str(config["system_database_url"])
    finally:
        DBOS.destroy()


async def _start(key: str, tmp_path: Path) -> tuple[Path, Any]:
    workspace = tmp_path / key
    workspace.mkdir()
    (workspace / "a.txt").write_text("one\n")
    toolset = VshToolset(workspace, approval="deferred", policy="strict", tools=["vsh_run"])
    AGENTS[key] = Agent(
        _model(),
        name=f"agent_inbox_{key}",
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        capabilities=[DBOSDurability()],
    )
    with SetWorkflowID(f"wf-inbox-{key}"):
        handle = await DBOS.start_workflow_async(inbox_workflow, key)
    with anyio.fail_after(20):
        while True:
            pending = await pending_approvals_async(f"wf-inbox-{key}", wait_s=0.1)
            if pending is not None and pending.state == "waiting":
                return workspace, handle
            await anyio.sleep(0.02)


def test_a_file_path_is_a_sqlite_url(tmp_path: Path) -> None:
    assert system_database_url(str(tmp_path / "x.sqlite")) == f"sqlite:///{tmp_path}/x.sqlite"
    assert system_database_url("postgresql://u@h/db") == "postgresql://u@h/db"


async def test_a_waiting_workflow_is_listed_and_approved_from_the_page(
    dbos: str, tmp_path: Path
) -> None:
    workspace, handle = await _start("approve", tmp_path)
    inbox = DbosInbox(dbos)
    try:
        with serving([], dbos=inbox, principal="carol") as (server, token):
            http = Http(server.url)
            http.login(token)
            listing = http.get("/")
            assert "wf-inbox-approve" in listing.body
            query = urlencode({"id": "wf-inbox-approve", "call": "c1"})
            page = await anyio.to_thread.run_sync(http.get, f"/workflow?{query}")
            assert page.status == 200
            assert '<tr class="add">' in page.body
            form = {
                "csrf": page.csrf(),
                "id": "wf-inbox-approve",
                "call": "c1",
                "request_id": page.field("request_id"),
                "transaction": page.field("transaction"),
                "decision": "approve",
            }
            stale = {**form, "request_id": "wf-inbox-approve:99"}
            reply = await anyio.to_thread.run_sync(http.post, "/workflow/decide", stale)
            assert reply.status == 409
            assert (workspace / "a.txt").read_text() == "one\n"
            no_csrf = {k: v for k, v in form.items() if k != "csrf"}
            reply = await anyio.to_thread.run_sync(http.post, "/workflow/decide", no_csrf)
            assert reply.status == 403
            reply = await anyio.to_thread.run_sync(http.post, "/workflow/decide", form)
            assert reply.status == 303
            with anyio.fail_after(20):
                output = await handle.get_result()
    finally:
        inbox.close()
    assert output == "c1=committed"
    assert (workspace / "a.txt").read_text() == "one\nmore\n"


async def test_a_denial_from_the_page_reaches_the_workflow(dbos: str, tmp_path: Path) -> None:
    workspace, handle = await _start("deny", tmp_path)
    inbox = DbosInbox(dbos)
    try:
        with serving([], dbos=inbox) as (server, token):
            http = Http(server.url)
            http.login(token)
            query = urlencode({"id": "wf-inbox-deny", "call": "c1"})
            page = await anyio.to_thread.run_sync(http.get, f"/workflow?{query}")
            form = {
                "csrf": page.csrf(),
                "id": "wf-inbox-deny",
                "call": "c1",
                "request_id": page.field("request_id"),
                "transaction": page.field("transaction"),
                "decision": "deny",
                "reason": "not now",
            }
            reply = await anyio.to_thread.run_sync(http.post, "/workflow/decide", form)
            assert reply.status == 303
            with anyio.fail_after(20):
                output = await handle.get_result()
    finally:
        inbox.close()
    assert output == "c1=denied"
    assert (workspace / "a.txt").read_text() == "one\n"
