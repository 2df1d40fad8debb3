"""vsh_ai.dbos: config, approval messages, and durable approval waits under a real DBOS.

DBOS runs in this process on a temporary SQLite database (launched once for the module,
destroyed at the end); agents are real Pydantic AI agents with DBOSDurability, driven
by FunctionModels, over real VSH workspaces. Restarts and crashes are in
test_durable_crash.py and the tutorial test.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("dbos")

from dbos import DBOS, DBOSClient, SetWorkflowID
from durable_support import tool_returns
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshResult, VshToolset
from vsh_ai._dbos import _parse
from vsh_ai.dbos import (
    DATABASE_URL_ENV,
    PendingApprovals,
    dbos_config,
    pending_approvals,
    pending_approvals_async,
    run_with_approvals,
    send_approval,
    send_approval_async,
)

pytestmark = pytest.mark.anyio


# -- dbos_config --------------------------------------------------------------------------


def test_config_defaults_to_a_sqlite_file_in_the_directory(tmp_path: Path) -> None:
    config = dbos_config("my-app", directory=tmp_path)
    assert config["system_database_url"] == f"sqlite:///{tmp_path / 'my-app.sqlite'}"
    assert config["name"] == "my-app"
    assert config["application_version"] == "1"


def test_config_default_directory_is_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert dbos_config("app")["system_database_url"] == f"sqlite:///{tmp_path / 'app.sqlite'}"


def test_config_postgres_by_argument_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql://postgres@db.internal:5432/vsh"
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    assert dbos_config("app")["system_database_url"] == url
    explicit = "postgresql+psycopg://u:p@other:5432/x"
    assert dbos_config("app", database_url=explicit)["system_database_url"] == explicit
    with pytest.raises(ValueError, match="not both"):
        dbos_config("app", database_url=explicit, directory="/tmp")
    # The variable beats the SQLite default even where code names a directory.
    assert dbos_config("app", directory="/tmp")["system_database_url"] == url


def test_config_pins_version_and_passes_options(tmp_path: Path) -> None:
    config = dbos_config(
        "app", directory=tmp_path, application_version="2024-06", log_level="ERROR"
    )
    assert config["application_version"] == "2024-06"
    assert config["log_level"] == "ERROR"
    with pytest.raises(ValueError, match="application_version"):
        dbos_config("app", directory=tmp_path, application_version=" ")


@pytest.mark.parametrize("name", ["", "../up", "a/b", "x" * 200, "-flag", "sp ace"])
def test_config_refuses_names_that_are_not_file_names(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="application name"):
        dbos_config(name, directory=tmp_path)


# -- approval messages --------------------------------------------------------------------

GOOD = {"request_id": "wf:1", "principal": "alice", "decisions": {"c1": {"approve": True}}}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        True,
        "approve",
        ["c1"],
        {"c1": True},
        {**GOOD, "request_id": "wf:2"},  # another round
        {**GOOD, "decisions": {"c9": {"approve": True}}},  # not pending
        {**GOOD, "decisions": {"c1": {"approve": True}, "c9": {"approve": True}}},
        {**GOOD, "decisions": {"c1": {"approve": "true"}}},
        {**GOOD, "decisions": {"c1": {"approve": 1}}},
        {**GOOD, "decisions": {"c1": True}},
        {**GOOD, "decisions": {"c1": {"approve": True, "override_args": {"code": "x"}}}},
        {**GOOD, "decisions": {}},
        {**GOOD, "principal": ""},
        {**GOOD, "principal": "   "},
        {**GOOD, "principal": "alice\nbob"},
        {**GOOD, "admin": True},
        {k: v for k, v in GOOD.items() if k != "principal"},
    ],
)
def test_junk_is_never_an_approval(raw: object) -> None:
    assert _parse(raw, "wf:1", {"c1", "c2"}) is None


def test_a_valid_message_parses_with_its_principal() -> None:
    message = _parse({**GOOD, "principal": "  alice  "}, "wf:1", {"c1", "c2"})
    assert message is not None
    assert message.principal == "alice"
    assert message.decisions["c1"].approve is True


def test_send_refuses_contradictions_and_empty_decisions() -> None:
    with pytest.raises(ValueError, match="both approved and denied"):
        send_approval("wf", request_id="wf:1", principal="a", approve=["c1"], deny=["c1"])
    with pytest.raises(ValueError, match="decisions"):
        send_approval("wf", request_id="wf:1", principal="a")
    with pytest.raises(ValueError, match="principal"):
        send_approval("wf", request_id="wf:1", principal=" ", approve=["c1"])


# -- a real DBOS ---------------------------------------------------------------------------

AGENTS: dict[str, Agent[None, Any]] = {}
APPEND = "p = '/workspace/{name}'\nvsh_write(p, vsh_read(p) + 'more\\n')\n"


def _appender(*names: str) -> FunctionModel:
    """Appends to each named file (one tool call each, in one response), then reports."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = tool_returns(messages)
        if not returns:
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        "vsh_run",
                        {"code": APPEND.format(name=name), "intent": f"append to {name}"},
                        tool_call_id=f"call-{name}",
                    )
                    for name in names
                ]
            )
        seen = []
        for part in returns:
            content = part.content
            seen.append(
                f"{part.tool_call_id}={content.state}"
                if isinstance(content, VshResult)
                else f"{part.tool_call_id}={part.outcome}:{content}"
            )
        return ModelResponse(parts=[TextPart("; ".join(sorted(seen)))])

    return FunctionModel(respond)


def _agent(key: str, workspace: Path, *names: str, ttl: float = 600) -> Agent[None, Any]:
    toolset = VshToolset(
        workspace, approval="deferred", policy="strict", tools=["vsh_run"], approval_ttl=ttl
    )
    agent: Agent[None, Any] = Agent(
        _appender(*names),
        name=f"agent_{key}",
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        capabilities=[DBOSDurability()],
    )
    AGENTS[key] = agent
    return agent


@DBOS.workflow(name="vsh-ai-test-approvals")
async def approvals_workflow(key: str, timeout_s: float) -> str:
    result = await run_with_approvals(AGENTS[key], "append", timeout_s=timeout_s)
    return str(result.output)


@pytest.fixture(scope="module")
def dbos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("dbos")
    config = dbos_config(
        "vsh-ai-tests",
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


def _workspace(tmp_path: Path, *names: str) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for name in names:
        (workspace / name).write_text("one\n")
    return workspace


async def _waiting(workflow_id: str, after: str = "") -> PendingApprovals:
    """The workflow's pending approvals once it waits (for a round other than ``after``)."""
    with anyio.fail_after(20):
        while True:
            pending = await pending_approvals_async(workflow_id, wait_s=0.1)
            if pending is not None and pending.state == "waiting" and pending.request_id != after:
                return pending
            await anyio.sleep(0.02)


async def _start(workflow_id: str, key: str, timeout_s: float = 30.0) -> Any:
    with SetWorkflowID(workflow_id):
        return await DBOS.start_workflow_async(approvals_workflow, key, timeout_s)


async def test_approval_after_junk_commits_exactly_the_pending_change(
    dbos: str, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path, "a.txt")
    _agent("junk", workspace, "a.txt")
    handle = await _start("wf-junk", "junk")
    pending = await _waiting("wf-junk")
    assert [call.tool_call_id for call in pending.calls] == ["call-a.txt"]
    view = pending.calls[0].metadata
    assert [c["path"] for c in view["changes"]] == ["a.txt"]
    assert "+more" in view["diff"]
    for junk in (
        None,
        "approve",
        {"request_id": pending.request_id, "principal": "x", "decisions": {"call-a.txt": 1}},
        {"request_id": "wf-junk:9", "principal": "x", "decisions": {"call-a.txt": True}},
    ):
        await DBOS.send_async("wf-junk", junk, "vsh-ai.approval")
    await anyio.sleep(0.5)
    assert (workspace / "a.txt").read_text() == "one\n", "junk must never commit"
    still = await pending_approvals_async("wf-junk")
    assert still is not None
    assert still.state == "waiting"
    await send_approval_async(
        "wf-junk", request_id=pending.request_id, principal="alice", approve=["call-a.txt"]
    )
    with anyio.fail_after(20):
        output = await handle.get_result()
    assert output == "call-a.txt=committed"
    assert (workspace / "a.txt").read_text() == "one\nmore\n"
    resolved = await pending_approvals_async("wf-junk")
    assert resolved is not None
    assert resolved.state == "resolved"
    assert resolved.outcome == {"call-a.txt": "approved"}


async def test_decisions_may_arrive_in_several_messages(dbos: str, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "a.txt", "b.txt")
    _agent("split", workspace, "a.txt", "b.txt")
    handle = await _start("wf-split", "split")
    pending = await _waiting("wf-split")
    assert {call.tool_call_id for call in pending.calls} == {"call-a.txt", "call-b.txt"}
    request = pending.request_id
    await send_approval_async(
        "wf-split", request_id=request, principal="alice", approve=["call-b.txt"]
    )
    await send_approval_async(  # a later denial wins over the approval
        "wf-split", request_id=request, principal="bob", deny={"call-b.txt": "not this file"}
    )
    await anyio.sleep(0.3)
    assert (workspace / "b.txt").read_text() == "one\n", "nothing resumes before all decide"
    await send_approval_async(  # ...and a later approval never undoes a denial
        "wf-split", request_id=request, principal="alice", approve=["call-a.txt", "call-b.txt"]
    )
    with anyio.fail_after(20):
        output = await handle.get_result()
    assert output == "call-a.txt=committed; call-b.txt=denied:Denied by bob: not this file"
    assert (workspace / "a.txt").read_text() == "one\nmore\n"
    assert (workspace / "b.txt").read_text() == "one\n"


async def test_timeout_denies_every_undecided_call(dbos: str, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "a.txt")
    agent = _agent("timeout", workspace, "a.txt")
    started = time.monotonic()
    handle = await _start("wf-timeout", "timeout", timeout_s=1.5)
    pending = await _waiting("wf-timeout")
    await DBOS.send_async("wf-timeout", None, "vsh-ai.approval")  # junk must not end the wait
    with anyio.fail_after(20):
        output = await handle.get_result()
    assert time.monotonic() - started >= 1.4
    assert output.startswith("call-a.txt=denied:No decision arrived within 1.5s")
    assert (workspace / "a.txt").read_text() == "one\n"
    resolved = await pending_approvals_async("wf-timeout")
    assert resolved is not None
    assert resolved.outcome == {"call-a.txt": "timed_out"}
    # The denial is durable in the toolset: a later approval of that call commits nothing.
    toolset = agent.toolsets[-1]
    assert isinstance(toolset, VshToolset)
    assert toolset.store is not None
    bindings = [b for b in toolset.store.all() if b.tool_call_id == "call-a.txt"]
    assert [b.end_state for b in bindings] == ["denied"]
    assert pending.request_id == "wf-timeout:1"


async def test_an_approval_older_than_the_ttl_commits_nothing(dbos: str, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "a.txt")
    _agent("ttl", workspace, "a.txt", ttl=0.5)
    handle = await _start("wf-ttl", "ttl")
    pending = await _waiting("wf-ttl")
    await anyio.sleep(1.0)  # the approver takes longer than approval_ttl
    await send_approval_async(
        "wf-ttl", request_id=pending.request_id, principal="alice", approve=["call-a.txt"]
    )
    with anyio.fail_after(20):
        output = await handle.get_result()
    assert output == "call-a.txt=stale"
    assert (workspace / "a.txt").read_text() == "one\n"


async def test_an_approver_needs_only_a_client_on_the_database(dbos: str, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "a.txt")
    _agent("client", workspace, "a.txt")
    handle = await _start("wf-client", "client")
    await _waiting("wf-client")

    def approver() -> None:  # e.g. a web app: no workflow code, no DBOS.launch()
        client = DBOSClient(system_database_url=dbos)
        try:
            pending = pending_approvals("wf-client", client=client)
            assert pending is not None
            assert pending.state == "waiting"
            send_approval(
                "wf-client",
                request_id=pending.request_id,
                principal="carol",
                approve=[call.tool_call_id for call in pending.calls],
                client=client,
            )
        finally:
            client.destroy()

    thread = threading.Thread(target=approver)
    thread.start()
    with anyio.fail_after(20):
        output = await handle.get_result()
    thread.join()
    assert output == "call-a.txt=committed"
    assert (workspace / "a.txt").read_text() == "one\nmore\n"


async def test_pending_is_none_before_any_request_and_loop_needs_a_workflow(
    dbos: str, tmp_path: Path
) -> None:
    assert await pending_approvals_async("no-such-workflow") is None
    agent = _agent("outside", _workspace(tmp_path, "a.txt"), "a.txt")
    with pytest.raises(RuntimeError, match=r"inside a @DBOS\.workflow"):
        await run_with_approvals(agent, "append")


def _two_rounds() -> FunctionModel:
    """Appends to a.txt; once that is back, appends to b.txt; then reports both."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = tool_returns(messages)
        if len(returns) < 2:
            name = "a.txt" if not returns else "b.txt"
            code = APPEND.format(name=name)
            call = ToolCallPart("vsh_run", {"code": code, "intent": name}, tool_call_id=name)
            return ModelResponse(parts=[call])
        states = [p.content.state for p in returns if isinstance(p.content, VshResult)]
        return ModelResponse(parts=[TextPart(",".join(states))])

    return FunctionModel(respond)


async def test_each_round_has_its_own_request_id(dbos: str, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "a.txt", "b.txt")
    toolset = VshToolset(workspace, approval="deferred", policy="strict", tools=["vsh_run"])
    AGENTS["rounds"] = Agent(
        _two_rounds(),
        name="agent_rounds",
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        capabilities=[DBOSDurability()],
    )
    handle = await _start("wf-rounds", "rounds")
    first = await _waiting("wf-rounds")
    await send_approval_async(
        "wf-rounds", request_id=first.request_id, principal="alice", approve=["a.txt"]
    )
    second = await _waiting("wf-rounds", after=first.request_id)
    assert [call.tool_call_id for call in second.calls] == ["b.txt"]
    # A message naming the first round (say, a retried send) never decides the second.
    await DBOS.send_async(
        "wf-rounds",
        {
            "request_id": first.request_id,
            "principal": "x",
            "decisions": {"b.txt": {"approve": True}},
        },
        "vsh-ai.approval",
    )
    await anyio.sleep(0.3)
    assert (workspace / "b.txt").read_text() == "one\n"
    await send_approval_async(
        "wf-rounds", request_id=second.request_id, principal="alice", approve=["b.txt"]
    )
    with anyio.fail_after(20):
        assert await handle.get_result() == "committed,committed"
    assert (workspace / "a.txt").read_text() == "one\nmore\n"
    assert (workspace / "b.txt").read_text() == "one\nmore\n"


def test_without_the_extra_the_import_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['dbos'] = None  # as if DBOS were not installed\n"
        "try:\n"
        "    import vsh_ai.dbos\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'vsh-ai[dbos]'" in done.stdout, done.stderr
