"""Construction options: raw hooks, existing runtimes, hook scope, deferred with a judge."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import vsh
from conftest import snapshot_tree
from inline_snapshot import snapshot
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence, Verdict
from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._bindings import ApprovalStore
from vsh_ai.toolset._instructions import instructions_for
from vsh_ai.toolset._signing import VshApprovalError

pytestmark = pytest.mark.anyio


class Judge:
    def __init__(self, decision: str) -> None:
        self.id = f"judge-{decision}"
        self.decision = decision
        self.reads: list[tuple[str, ...]] = []

    async def review(self, evidence: Evidence) -> Verdict:
        self.reads.append(evidence.read_paths)
        return Verdict(decision=self.decision, reason=f"{self.decision} it", judge=self.id)  # type: ignore[arg-type]


async def test_raw_hook_handler_decision_becomes_the_verdict(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "a"})
    events: list[str] = []

    def hook(event: vsh.RequestEvent) -> vsh.HookDecision:
        events.append(event.transaction)
        return vsh.HookDecision.reject("no writes to a.txt")

    toolset = VshToolset(workspace, policy="strict", hook_handler=hook, hook_id="my-hook")
    result = await toolset.vsh_write("a.txt", "b")
    assert result.state == "rejected"
    assert result.verdict is not None
    assert (result.verdict.decision, result.verdict.reason) == (
        "reject",
        "no writes to [names withheld]",
    )
    assert result.feedback == "no writes to [names withheld]"  # touched names are masked
    assert result.approver_view()["verdict"]["reason"] == "no writes to a.txt"
    assert (result.diff, result.transaction) == (None, None)  # refused: no program output
    transaction = result.approver_view()["transaction"]
    assert events == [transaction]
    assert toolset.native.transaction_state(transaction) == "rejected"
    assert snapshot_tree(workspace) == {"a.txt": b"a"}


async def test_existing_runtimes_are_used_as_given(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "a"})
    plain = VshToolset(vsh.Runtime.open(workspace))
    assert (await plain.vsh_write("a.txt", "b")).state == "committed"
    hooked_runtime = vsh.HookedRuntime.open(
        workspace,
        policy="strict",
        hook_handler=lambda event: vsh.HookDecision.review("a person decides"),
    )
    hooked = VshToolset(hooked_runtime)
    result = await hooked.vsh_write("a.txt", "c")
    assert (result.state, result.feedback) == ("pending", "a person decides")
    assert snapshot_tree(workspace) == {"a.txt": b"b"}
    with pytest.raises(ValueError, match="apply only when the toolset opens the runtime"):
        VshToolset(vsh.Runtime.open(workspace), judge=Judge("approve"))
    with pytest.raises(ValueError, match="needs state_directory"):
        VshToolset(vsh.Runtime.open(workspace), approval="deferred")


async def test_all_requests_scope_sends_reads_to_the_judge(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "alpha"})
    judge = Judge("reject")
    toolset = VshToolset(workspace, judge=judge, judge_scope="all")
    result = await toolset.vsh_read("a.txt")
    assert (result.state, judge.reads) == ("rejected", [("a.txt",)])
    approving = Judge("approve")
    toolset = VshToolset(workspace, judge=approving, judge_scope="all")
    read = await toolset.vsh_read("/workspace/a.txt")
    assert (read.state, read.result, len(approving.reads)) == ("read", "alpha", 1)
    # Under the default scope, reads never reach the judge ...
    quiet = Judge("reject")
    toolset = VshToolset(workspace, judge=quiet)
    assert (await toolset.vsh_read("a.txt")).state == "read"
    assert quiet.reads == []
    # ... but every mutation does, even one the balanced policy would auto-approve.
    refused = await toolset.vsh_write("a.txt", "beta")
    assert (refused.state, len(quiet.reads)) == ("rejected", 1)
    assert snapshot_tree(workspace) == {"a.txt": b"alpha"}
    # Letting VSH auto-approve unjudged is an explicit choice.
    opted_out = Judge("reject")
    toolset = VshToolset(workspace, judge=opted_out, judge_scope="policy_pending")
    written = await toolset.vsh_write("a.txt", "beta")
    assert (written.state, written.verdict, opted_out.reads) == ("committed", None, [])
    assert snapshot_tree(workspace) == {"a.txt": b"beta"}


async def test_bash_error_is_a_retry_with_diagnostics(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "a"})
    toolset = VshToolset(workspace, bash=True)
    with pytest.raises(ModelRetry, match="unsupported command: nosuchcmd"):
        await toolset.vsh_run("nosuchcmd", "try", language="bash")
    assert snapshot_tree(workspace) == {"a.txt": b"a"}


def script_patch(seen: list[ToolReturnPart]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            args = {"path": "a.txt", "content": "b"}
            return ModelResponse(parts=[ToolCallPart("vsh_write", args, tool_call_id="w1")])
        seen.extend(p for p in messages[-1].parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart("ok")])

    return FunctionModel(respond)


async def test_deferred_with_judge_review_then_idempotent_approval(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "a"})

    def agent(seen: list[ToolReturnPart]) -> Agent[None, str | DeferredToolRequests]:
        toolset = VshToolset(workspace, policy="strict", judge=Judge("review"), approval="deferred")
        return Agent(
            script_patch(seen), toolsets=[toolset], output_type=[str, DeferredToolRequests]
        )

    first = await agent([]).run("write")
    assert isinstance(first.output, DeferredToolRequests)
    meta = first.output.metadata["w1"]
    assert (meta["verdict"]["decision"], meta["feedback"]) == ("review", "review it")
    assert snapshot_tree(workspace) == {"a.txt": b"a"}
    results = DeferredToolResults(approvals={"w1": True}, metadata={"w1": {"principal": "bob"}})
    seen: list[ToolReturnPart] = []
    await agent(seen).run(message_history=first.all_messages(), deferred_tool_results=results)
    assert seen[0].content.state == "committed"
    assert snapshot_tree(workspace) == {"a.txt": b"b"}
    # Replaying the same approval (e.g. a retried request) does not commit twice.
    seen.clear()
    await agent(seen).run(message_history=first.all_messages(), deferred_tool_results=results)
    assert seen[0].content.state == "committed"
    assert snapshot_tree(workspace) == {"a.txt": b"b"}


def test_corrupt_binding_is_refused(tmp_path: Path) -> None:
    store = ApprovalStore(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    store.path_for("call-1", "d" * 64).write_text('{"tool_call_id": "call-1"}')
    with pytest.raises(VshApprovalError, match="approval binding is corrupt"):
        store.load("call-1", "d" * 64)
    assert store.load("call-2", "d" * 64) is None


def test_instructions_follow_the_options() -> None:
    text = instructions_for(["vsh_read", "vsh_run"], bash=False, deferred=True)
    assert text.splitlines()[:5] == snapshot(
        [
            "Workspace files live under /workspace (e.g. /workspace/app.toml); use those paths.",
            "Available tools: vsh_read, vsh_run.",
            "vsh_run runs a program as one transaction: use it for dependent multi-step work.",
            "With language='monty' (Python subset with json and re; no tomllib, no open()), call",
            "only these functions: vsh_read(path), vsh_write(path, text, append=False),",
        ]
    )
    assert "bash' runs bounded shell" in instructions_for(["vsh_run"], bash=True, deferred=False)
    assert "vsh_run runs" not in instructions_for(["vsh_read"], bash=False, deferred=False)


async def test_budget_overrun_is_a_retry(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"a.txt": "a"})
    toolset = VshToolset(workspace, budget=vsh.ExecutionBudget(max_duration_ms=20))
    slow = "x = 0\nfor i in range(3000000):\n    x += i\nvsh_write('/workspace/a.txt', 'b')"
    with pytest.raises(ModelRetry, match="time limit exceeded"):
        await toolset.vsh_run(slow, "slow")
    assert snapshot_tree(workspace) == {"a.txt": b"a"}


async def test_duplicate_of_unfinished_preview_asks_for_a_different_program(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"a.txt": "a"})
    toolset = VshToolset(workspace)
    code, intent = "vsh_write('/workspace/a.txt', 'b')", "write b"
    # Another caller previewed the identical request and has not committed it yet.
    toolset.native.preview(
        vsh.RunRequest(code, intent=intent, mode=vsh.RunMode.AUTO, detail=vsh.ReceiptDetail.FULL)
    )
    with pytest.raises(
        ModelRetry, match="already submitted on the current workspace and was not committed"
    ):
        await toolset.vsh_run(code, intent)
    assert snapshot_tree(workspace) == {"a.txt": b"a"}


async def test_file_helpers_each_run_one_transaction(make_workspace: Callable[..., Path]) -> None:
    workspace = make_workspace({"src/a.py": "print('x')\n", "b.txt": "hello\n"})
    toolset = VshToolset(workspace)
    listing = await toolset.vsh_list()
    assert (listing.state, listing.result) == ("read", '["/workspace/b.txt", "/workspace/src"]')
    assert (await toolset.vsh_glob("**/*.py")).result == '["/workspace/src/a.py"]'
    found = await toolset.vsh_search("print", path="src")
    assert found.result == snapshot(
        '[{"path": "/workspace/src/a.py", "line": 1, "column": 1, "text": "print(\'x\')"}]'
    )
    copied = await toolset.vsh_copy("b.txt", "c.txt")
    assert [(c.path, c.kind) for c in copied.changes] == [("c.txt", "create")]
    moved = await toolset.vsh_move("c.txt", "d.txt")  # a rename goes to review (balanced)
    assert moved.state == "pending"
    assert moved.changes == ()  # refused work: the approver sees the changes
    assert moved.approver_view()["changes"] == [
        {"path": "c.txt", "kind": "delete"},
        {"path": "d.txt", "kind": "create"},
    ]
    with pytest.raises(ModelRetry, match="could not find the requested text"):
        await toolset.vsh_patch("b.txt", "nothere", "x")
    assert snapshot_tree(workspace) == {
        "b.txt": b"hello\n",
        "c.txt": b"hello\n",
        "src/a.py": b"print('x')\n",
    }
