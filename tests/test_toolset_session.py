"""Agent sessions through VshToolset: real Agent + FunctionModel + VSH; host checked each step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import snapshot_tree
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from vsh_ai.rules import ProtectedReads, RuleSet
from vsh_ai.toolset import VshCapability, VshToolset
from vsh_ai.toolset._result import VshResult, bound_text

pytestmark = pytest.mark.anyio

Step = Callable[[list[ToolReturnPart]], Sequence[Any]]


def script(
    *steps: Step | Sequence[Any], seen: list[list[ToolReturnPart]] | None = None
) -> FunctionModel:
    """A FunctionModel that plays ``steps`` in order; each sees the previous tool returns."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        index = sum(isinstance(m, ModelResponse) for m in messages)
        last = messages[-1]
        returns = [
            p
            for p in (last.parts if isinstance(last, ModelRequest) else [])
            if isinstance(p, ToolReturnPart)
        ]
        if seen is not None:
            seen.append(returns)
        step = steps[index]
        parts = step(returns) if callable(step) else step
        return ModelResponse(parts=list(parts))

    return FunctionModel(respond)


def call(tool: str, call_id: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool, args, tool_call_id=call_id)


def done(text: str = "done") -> list[TextPart]:
    return [TextPart(text)]


async def test_read_then_edit_session(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"app.toml": "port = 8080\nname = 'svc'\n"})
    toolset = VshToolset(workspace)
    results: list[VshResult] = []

    def edit(returns: list[ToolReturnPart]) -> list[ToolCallPart]:
        read = returns[0].content
        assert isinstance(read, VshResult)
        assert read.state == "read"
        assert read.result == "port = 8080\nname = 'svc'\n"
        assert snapshot_tree(workspace) == {"app.toml": b"port = 8080\nname = 'svc'\n"}
        return [call("vsh_patch", "c2", path="/workspace/app.toml", old="8080", new="9090")]

    def program(returns: list[ToolReturnPart]) -> list[ToolCallPart]:
        results.append(returns[0].content)
        assert snapshot_tree(workspace) == {"app.toml": b"port = 9090\nname = 'svc'\n"}
        code = (
            "import json\n"
            "text = vsh_read('/workspace/app.toml')\n"
            "vsh_write('/workspace/port.json', json.dumps({'lines': len(text.splitlines())}))\n"
            "print('wrote')\n"
            "'ok'"
        )
        return [call("vsh_run", "c3", code=code, intent="record the line count")]

    def finish(returns: list[ToolReturnPart]) -> list[TextPart]:
        results.append(returns[0].content)
        return done()

    agent = Agent(
        script([call("vsh_read", "c1", path="app.toml")], edit, program, finish),
        toolsets=[toolset],
    )
    result = await agent.run("bump the port")
    assert result.output == "done"
    patched, ran = results
    assert patched.state == "committed"
    assert [c.model_dump() for c in patched.changes] == [{"path": "app.toml", "kind": "modify"}]
    assert patched.next_step == snapshot(
        "Done: the changes are on the host; continue with the next step."
    )
    assert ran.state == "committed"
    assert (ran.result, ran.stdout) == ("ok", "wrote\n")
    assert [(c.path, c.kind) for c in ran.changes] == [("port.json", "create")]
    assert snapshot_tree(workspace) == {
        "app.toml": b"port = 9090\nname = 'svc'\n",
        "port.json": b'{"lines": 2}',
    }


async def test_guest_error_is_retried_and_corrected(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "one\n"})
    seen: list[list[ToolReturnPart]] = []
    model = script(
        [call("vsh_run", "c1", code="vsh_read('/workspace/missing.txt')", intent="read it")],
        [call("vsh_run", "c2", code="vsh_write('/workspace/a.txt', 'two\\n')", intent="fix a.txt")],
        done(),
        seen=seen,
    )
    agent = Agent(model, toolsets=[VshToolset(workspace)])
    await agent.run("edit")
    retry = seen[1][0]
    assert retry.outcome == "retried"
    assert "FileNotFoundError" in str(retry.content)
    assert "nothing was changed" in str(retry.content)
    assert seen[2][0].content.state == "committed"
    assert snapshot_tree(workspace) == {"a.txt": b"two\n"}


async def test_guest_errors_exhaust_retries_without_host_change(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "one\n"})
    bad = [call("vsh_run", "c", code="def (", intent="broken")]
    agent = Agent(script(bad, bad, bad), toolsets=[VshToolset(workspace, max_retries=1)])
    with pytest.raises(Exception, match="exceeded max retries"):
        await agent.run("edit")
    assert snapshot_tree(workspace) == {"a.txt": b"one\n"}


async def test_denied_env_read(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({".env": "TOKEN=secret\n", "a.txt": "x"})
    seen: list[list[ToolReturnPart]] = []
    catch = "try:\n    vsh_read('/workspace/.env')\nexcept PermissionError:\n    pass\n'tried'"
    model = script(
        [call("vsh_read", "c1", path="/workspace/.env")],
        [call("vsh_run", "c2", code=catch, intent="peek")],
        done(),
        seen=seen,
    )
    await Agent(model, toolsets=[VshToolset(workspace)]).run("read secrets")
    uncaught, caught = seen[1][0].content, seen[2][0].content
    assert uncaught.state == "denied"
    assert uncaught.deny_reason == "permission_denied"  # VSH's category, never guest text
    assert "secret" not in uncaught.model_dump_json()
    assert caught.state == "denied"
    assert caught.deny_reason == "protected_access_attempt"
    assert caught.next_step.startswith("NOT applied: policy denied it (protected_access_attempt)")
    assert snapshot_tree(workspace) == {".env": b"TOKEN=secret\n", "a.txt": b"x"}


async def test_bash_refused_unless_enabled(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "x\n"})
    seen: list[list[ToolReturnPart]] = []
    bash = [call("vsh_run", "c1", code="echo hi > /workspace/b.txt", intent="b", language="bash")]
    toolset = VshToolset(workspace)
    model = script(bash, done(), seen=seen)
    await Agent(model, toolsets=[toolset]).run("go")
    assert seen[1][0].outcome == "retried"
    assert "Bash is not enabled" in str(seen[1][0].content)
    assert snapshot_tree(workspace) == {"a.txt": b"x\n"}
    schema = toolset.tools["vsh_run"].function_schema.json_schema
    assert schema["properties"]["language"]["enum"] == ["monty"]

    enabled = VshToolset(workspace, bash=True)
    assert enabled.tools["vsh_run"].function_schema.json_schema["properties"]["language"][
        "enum"
    ] == [
        "monty",
        "bash",
    ]
    seen.clear()
    code = "cat /workspace/a.txt; echo hi > /workspace/b.txt"
    model = script(
        [call("vsh_run", "c1", code=code, intent="b", language="bash")], done(), seen=seen
    )
    await Agent(model, toolsets=[enabled]).run("go")
    ran = seen[1][0].content
    assert (ran.state, ran.stdout, ran.result) == ("committed", "x\n", "exit code 0")
    assert snapshot_tree(workspace) == {"a.txt": b"x\n", "b.txt": b"hi\n"}


async def test_pending_work_returns_feedback_not_completion(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "x\n", "b.txt": "y\n"})
    seen: list[list[ToolReturnPart]] = []
    model = script([call("vsh_remove", "c1", path="/workspace/b.txt")], done(), seen=seen)
    toolset = VshToolset(workspace)
    await Agent(model, toolsets=[toolset]).run("clean up")
    pending = seen[1][0].content
    assert pending.state == "pending"
    assert pending.feedback
    assert pending.feedback.startswith("needs approval")
    assert pending.risk_flags == ()  # computed by the program: the approver's view has them
    assert pending.approver_view()["risk_flags"] == ["deletion"]
    assert "NOT applied" in pending.next_step
    transaction = pending.approver_view()["transaction"]
    assert toolset.native.transaction_state(transaction) == "pending_approval"
    assert snapshot_tree(workspace) == {"a.txt": b"x\n", "b.txt": b"y\n"}

    # The same request again is recognised as the pending transaction, not a new one.
    seen.clear()
    model = script([call("vsh_remove", "c2", path="/workspace/b.txt")], done(), seen=seen)
    await Agent(model, toolsets=[toolset]).run("clean up again")
    again = seen[1][0].content
    assert again.state == "pending"
    assert again.approver_view()["transaction"] == transaction
    assert "identical request" in (again.feedback or "")


async def test_tools_selection_and_instructions(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "x"})
    toolset = VshToolset(workspace, tools=["vsh_read", "vsh_list"])
    assert sorted(toolset.tools) == ["vsh_list", "vsh_read"]
    with pytest.raises(ValueError, match="unknown tools \\['read_file'\\]"):
        VshToolset(workspace, tools=["read_file"])
    capability = VshCapability(workspace)
    text = capability.toolset.instructions_text
    for needle in ("/workspace", "vsh_patch(path, old, new", "pending: NOT applied", "stale"):
        assert needle in text
    prompts: list[str] = []
    tool_names: list[list[str]] = []

    def capture(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = messages[-1]
        assert isinstance(request, ModelRequest)
        prompts.append(request.instructions or "")
        tool_names.append(sorted(t.name for t in info.function_tools))
        return ModelResponse(parts=done())

    await Agent(FunctionModel(capture), capabilities=[capability]).run("hi")
    assert prompts[0].count("Result states:") == 1
    assert tool_names == [sorted(capability.toolset.tool_names)]
    assert len(tool_names[0]) == 11


@pytest.mark.parametrize("tools", [None, ["vsh_read", "vsh_write"]])
def test_every_toolset_gets_the_tools_pydantic_ai_would_make(
    make_workspace: Callable[..., Path], tools: list[str] | None
) -> None:
    """Issue 18: each tool's schema is generated once per process and copied into every
    toolset (generating it cost 23 ms per toolset). Each toolset's tools are what
    ``add_function`` makes, call its own methods, and one toolset's edit (the languages
    Bash adds) does not reach another's."""
    workspace = make_workspace({"a.txt": "x\n"})
    made = [
        (bash, VshToolset(workspace, bash=bash, tools=tools, max_retries=3))
        for bash in (False, True, False, True)
    ]
    for bash, toolset in made:  # checked once all are made: none changed another
        reference = FunctionToolset[Any](sequential=True, max_retries=3)
        for name in toolset.tool_names:
            reference.add_function(getattr(toolset.files, name), takes_ctx=False, name=name)
        if "vsh_run" in reference.tools:
            schema = reference.tools["vsh_run"].function_schema.json_schema
            schema["properties"]["language"]["enum"] = ["monty", "bash"] if bash else ["monty"]
        assert list(toolset.tools) == list(reference.tools)
        for name, tool in toolset.tools.items():
            assert tool.tool_def == reference.tools[name].tool_def, name
            assert tool.max_retries == 3
            assert tool.function_schema.function == getattr(toolset.files, name)
            assert tool.function_schema.function.__self__ is toolset.files  # type: ignore[attr-defined]


async def test_call_tool_directly_and_bounded_output(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "x"})
    toolset = VshToolset(workspace)
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    tools = await toolset.get_tools(ctx)
    result = await toolset.call_tool(
        "vsh_run",
        {"code": "print('z' * 10000)\n'y' * 20000", "intent": "big"},
        ctx,
        tools["vsh_run"],
    )
    assert result.state == "read"
    assert result.stdout.endswith("…[truncated 5905 bytes]")
    assert result.result.endswith("…[truncated 3616 bytes]")
    assert len(result.result.encode()) < 16_384 + 40


def test_bound_text_markers() -> None:
    assert bound_text("short", 64) == "short"
    assert bound_text("é" * 100, 65) == "é" * 32 + "…[truncated 136 bytes]"
    assert (
        bound_text("a" * 70 + "END", 64, keep="tail") == "…[truncated 9 bytes]" + "a" * 61 + "END"
    )


async def test_refused_work_never_releases_its_output_to_the_model(
    make_workspace: Callable[..., Path],
) -> None:
    """A judge that refuses a read (ALL_REQUESTS scope) keeps what was read from the model."""
    secret = "token-7f3c-never-shown"
    workspace = make_workspace({"notes.txt": "hello\n", "vault.txt": secret})
    judge = RuleSet([ProtectedReads(globs=("vault.txt",), action="reject")])
    toolset = VshToolset(workspace, judge=judge, judge_scope="all")
    seen: list[list[ToolReturnPart]] = []
    model = script(
        [call("vsh_read", "r1", path="/workspace/notes.txt")],
        [call("vsh_run", "r2", code="print(vsh_read('/workspace/vault.txt'))", intent="peek")],
        done(),
        seen=seen,
    )
    await Agent(model, toolsets=[toolset]).run("read both")

    allowed, refused = seen[1][0].content, seen[2][0].content
    assert isinstance(allowed, VshResult)
    assert isinstance(refused, VshResult)
    assert (allowed.state, allowed.result, allowed.output_withheld) == ("read", "hello\n", False)
    assert (refused.state, refused.result, refused.stdout) == ("rejected", None, "")
    assert refused.output_withheld
    assert secret not in refused.model_dump_json()
    assert snapshot_tree(workspace) == {"notes.txt": b"hello\n", "vault.txt": secret.encode()}
