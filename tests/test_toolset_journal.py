"""The commit journal: a replayed tool call (same run, same call id, same arguments) returns
the recorded result and never commits twice; records are signed; keys are configurable.

Real VSH workspaces and real agents; a "replay" is the same agent run again with the same
``run_id`` and model responses, which is what a durable engine does after a crash. The
subprocess crash matrix (DBOS) lives in tests/test_durable_crash.py.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence, RuleSet, Verdict
from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._journal import CommitJournal

pytestmark = pytest.mark.anyio

APPEND = ToolCallPart(
    "vsh_write",
    {"path": "/workspace/log.txt", "content": "line 2\n", "append": True},
    tool_call_id="append-1",
)


def scripted(*calls: ToolCallPart) -> tuple[FunctionModel, list[Any]]:
    """A model that makes ``calls`` one per turn, then answers; it records tool returns."""
    seen: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                seen.append(part.content)
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        if turns < len(calls):
            return ModelResponse(parts=[calls[turns]])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond), seen


class Crash(BaseException):
    """Stands in for the process dying at that point (the subprocess matrix uses os._exit)."""


def crash_after_prepare(toolset: VshToolset) -> None:
    """The process "dies" right after the journal's durable record, before the commit."""
    assert toolset.journal is not None
    original = toolset.journal.prepare

    def prepare_then_crash(**kwargs: Any) -> Any:
        original(**kwargs)
        raise Crash

    toolset.journal.prepare = prepare_then_crash  # type: ignore[method-assign]


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "log.txt").write_text("line 1\n")
    return root


class CountingJudge:
    def __init__(self, decision: str = "approve") -> None:
        self.id = f"counting-{decision}"
        self.decision = decision
        self.calls = 0

    async def review(self, evidence: Evidence) -> Verdict:
        self.calls += 1
        return Verdict(decision=self.decision, reason="judged", judge=self.id)  # type: ignore[arg-type]


def dump(result: Any) -> Any:
    return json.loads(result.model_dump_json()) if hasattr(result, "model_dump_json") else result


@pytest.mark.parametrize("judged", [False, True], ids=["plain", "judged"])
async def test_a_replayed_run_commits_once_and_sees_the_same_result(
    tmp_path: Path, judged: bool
) -> None:
    root = workspace(tmp_path)
    judge = CountingJudge() if judged else None
    first_model, first_seen = scripted(APPEND)
    toolset = VshToolset(root, judge=judge)
    await Agent(first_model, toolsets=[toolset]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"

    # The engine replays the run (new toolset, same run id and model responses).
    replay_model, replay_seen = scripted(APPEND)
    again = VshToolset(root, judge=judge)
    await Agent(replay_model, toolsets=[again]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    assert [dump(r) for r in replay_seen] == [dump(r) for r in first_seen]
    assert dump(replay_seen[0])["state"] == "committed"
    if judge is not None:
        assert judge.calls == 1  # the replay did not ask the judge again

    # A new run (another run id) is new work: it appends again.
    other_model, _ = scripted(APPEND)
    await Agent(other_model, toolsets=[again]).run("append", run_id="run-2")
    assert (root / "log.txt").read_text() == "line 1\nline 2\nline 2\n"


async def test_without_the_journal_a_replay_commits_twice(tmp_path: Path) -> None:
    """The defect the journal exists for (the issue's reproduction, in process)."""
    root = workspace(tmp_path)
    for _ in range(2):
        model, _seen = scripted(APPEND)
        toolset = VshToolset(root, journal=False)
        await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\nline 2\n"


async def test_reads_and_refusals_replay_from_the_journal(tmp_path: Path) -> None:
    """A replay never re-reads (the host may have changed) nor re-asks a judge."""
    root = workspace(tmp_path)
    read = ToolCallPart("vsh_read", {"path": "/workspace/log.txt"}, tool_call_id="read-1")
    judge = CountingJudge("review")
    model, seen = scripted(read, APPEND)
    await Agent(model, toolsets=[VshToolset(root, judge=judge)]).run("go", run_id="r")
    (root / "log.txt").write_text("changed on the host\n")
    replay, replay_seen = scripted(read, APPEND)
    await Agent(replay, toolsets=[VshToolset(root, judge=judge)]).run("go", run_id="r")
    assert [dump(r) for r in replay_seen] == [dump(r) for r in seen]
    assert dump(replay_seen[0])["result"] == "line 1\n"
    assert dump(replay_seen[1])["state"] == "pending"
    assert judge.calls == 1
    assert (root / "log.txt").read_text() == "changed on the host\n"


async def test_a_prepared_record_whose_commit_never_happened_runs_again(tmp_path: Path) -> None:
    """A crash between the journal write and the commit: VSH says not committed, so the
    call runs again and commits once."""
    root = workspace(tmp_path)
    toolset = VshToolset(root)
    crash_after_prepare(toolset)
    model, _ = scripted(APPEND)
    with pytest.raises(Crash):
        await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\n"

    replay, seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root)]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    assert dump(seen[0])["state"] == "committed"


async def test_a_crash_after_commit_before_the_result_is_recorded(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    toolset = VshToolset(root)
    assert toolset.journal is not None

    def crash(**kwargs: Any) -> Any:
        raise Crash

    toolset.journal.finish = crash  # type: ignore[method-assign]
    model, _ = scripted(APPEND)
    with pytest.raises(Crash):
        await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"

    reference_root = tmp_path / "reference"
    reference_root.mkdir()
    (reference_root / "log.txt").write_text("line 1\n")
    reference_model, reference = scripted(APPEND)
    await Agent(reference_model, toolsets=[VshToolset(reference_root)]).run("append", run_id="x")

    replay, seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root)]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    expected = dump(reference[0])
    got = dump(seen[0])
    assert got["state"] == expected["state"] == "committed"
    assert {k: v for k, v in got.items() if k != "transaction"} == {
        k: v for k, v in expected.items() if k != "transaction"
    }


async def test_a_forged_or_corrupt_record_commits_and_reports_nothing(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    model, _ = scripted(APPEND)
    toolset = VshToolset(root, judge=CountingJudge("review"))
    await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert toolset.journal is not None
    [record] = list(toolset.journal.directory.glob("*.json"))
    data = json.loads(record.read_text())
    data["result"]["state"] = "committed"  # claim a commit that never happened
    record.write_text(json.dumps(data))
    replay, seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root)]).run("append", run_id="run-1")
    assert dump(seen[0])["state"] == "failed"
    assert "signature mismatch" in dump(seen[0])["feedback"]
    assert (root / "log.txt").read_text() == "line 1\n"

    record.write_text("{not json")
    replay, seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root)]).run("append", run_id="run-1")
    assert dump(seen[0])["state"] == "failed"
    assert "corrupt" in dump(seen[0])["feedback"]
    assert (root / "log.txt").read_text() == "line 1\n"


async def test_a_forged_decision_cannot_approve_a_transaction(tmp_path: Path) -> None:
    """A record re-signed with another key carrying decision=approve is refused."""
    root = workspace(tmp_path)
    judge = CountingJudge("review")
    model, _ = scripted(APPEND)
    toolset = VshToolset(root, judge=judge)
    await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert toolset.journal is not None
    [record] = list(toolset.journal.directory.glob("*.json"))
    entry = toolset.journal.load(
        json.dumps(["run-1", 1, "append-1"]), json.loads(record.read_text())["args_digest"]
    )
    assert entry is not None
    forged = CommitJournal(toolset.journal.directory, workspace_id=entry.workspace_id)
    forged._key = b"attacker" * 4
    record.unlink()  # the attacker replaces the record (both copies) with one signed by
    forged.mirror(record).unlink()  # another key
    forged.prepare(
        key=entry.key,
        tool_name=entry.tool_name,
        digest=entry.args_digest,
        transaction=entry.transaction or "",
        expected=entry.result.model_copy(update={"state": "committed"}),  # type: ignore[union-attr]
        decision="approve",
    )
    replay, seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root, judge=judge)]).run("append", run_id="run-1")
    assert dump(seen[0])["state"] == "failed"
    assert (root / "log.txt").read_text() == "line 1\n"


async def test_call_key_override_and_unjournaled_calls(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    keys: list[str] = []

    def by_call_id(ctx: RunContext[Any]) -> str | None:
        keys.append(f"conversation:{ctx.tool_call_id}")
        return keys[-1]

    for run_id in ("a", "b"):  # another run id, same key: the same call by the host's rule
        model, _ = scripted(APPEND)
        await Agent(model, toolsets=[VshToolset(root, call_key=by_call_id)]).run(
            "append", run_id=run_id
        )
    assert keys == ["conversation:append-1"] * 2
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"

    def never(ctx: RunContext[Any]) -> str | None:
        return None

    for run_id in ("a", "a"):  # no key: not journaled, a replay runs again
        model, _ = scripted(APPEND)
        await Agent(model, toolsets=[VshToolset(root, call_key=never)]).run("append", run_id=run_id)
    assert (root / "log.txt").read_text() == "line 1\nline 2\nline 2\nline 2\n"


async def test_a_key_used_once_never_commits_again_under_other_arguments(
    tmp_path: Path,
) -> None:
    """Issue 16 item 7: a replay whose arguments differ by one character under the same
    call key used to run and commit again (records were keyed by key + arguments)."""
    root = workspace(tmp_path)
    other = ToolCallPart(
        "vsh_write",
        {"path": "/workspace/log.txt", "content": "line 3\n", "append": True},
        tool_call_id="append-1",
    )
    seen: list[Any] = []
    for call in (APPEND, other):
        model, returns = scripted(call)
        await Agent(model, toolsets=[VshToolset(root)]).run("append", run_id="run-1")
        seen.extend(returns)
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    first, second = (dump(r) for r in seen)
    assert first["state"] == "committed"
    assert second["state"] == "failed"
    assert "already made with other arguments" in second["feedback"]
    assert "append-1" in second["feedback"]


async def test_deferred_resume_replay_commits_once_with_the_same_result(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / "app.toml").write_text("port = 8080\n")
    patch = ToolCallPart(
        "vsh_patch",
        {"path": "/workspace/app.toml", "old": "8080", "new": "9090"},
        tool_call_id="patch-1",
    )
    judge = CountingJudge("review")
    model, _ = scripted(patch)
    agent = Agent(
        model,
        toolsets=[VshToolset(root, judge=judge, approval="deferred")],
        output_type=[str, DeferredToolRequests],
    )
    first = await agent.run("change the port")
    assert isinstance(first.output, DeferredToolRequests)
    approvals = DeferredToolResults(
        approvals={"patch-1": True}, metadata={"patch-1": {"principal": "alice"}}
    )
    results = []
    for _ in range(2):  # the resume, then its replay by an engine
        resume_model, seen = scripted(patch)
        resumed = Agent(
            resume_model,
            toolsets=[VshToolset(root, judge=judge, approval="deferred")],
            output_type=[str, DeferredToolRequests],
        )
        await resumed.run(
            message_history=first.all_messages(), deferred_tool_results=approvals, run_id="resume-1"
        )
        results.append(dump(seen[0]))
    assert results[0] == results[1]
    assert results[0]["state"] == "committed"
    assert (root / "app.toml").read_text() == "port = 9090\n"
    assert judge.calls == 1


async def test_toolset_pickles_as_its_configuration(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    toolset = VshToolset(root, judge=RuleSet([]), approval="deferred", approval_ttl=7 * 86400)
    clone = pickle.loads(pickle.dumps(toolset))
    assert clone is not toolset
    assert clone.runtime is not toolset.runtime
    assert clone.workspace == toolset.workspace
    assert clone.config.approval_ttl == 7 * 86400
    model, _seen = scripted(APPEND)
    result = await Agent(model, toolsets=[clone], output_type=[str, DeferredToolRequests]).run("x")
    assert isinstance(result.output, DeferredToolRequests)  # the rule set reviews: deferred

    import vsh

    with pytest.raises(TypeError, match="workspace path"):
        pickle.dumps(VshToolset(vsh.Runtime.open(root), state_directory=tmp_path / "state"))


async def test_a_model_cannot_reach_another_runs_record_through_its_call_id(
    tmp_path: Path,
) -> None:
    """Tool call ids are model output: run "r" + call id "x:read-1" must not be the call
    of run "r:x" with call id "read-1" (that run's read result would leak)."""
    root = workspace(tmp_path)
    (root / "secret-ish.txt").write_text("other run's data\n")
    read = ToolCallPart("vsh_read", {"path": "/workspace/secret-ish.txt"}, tool_call_id="read-1")
    model, _ = scripted(read)
    await Agent(model, toolsets=[VshToolset(root)]).run("read", run_id="r:x")
    (root / "secret-ish.txt").write_text("now\n")
    forged = ToolCallPart(
        "vsh_read", {"path": "/workspace/secret-ish.txt"}, tool_call_id="x:read-1"
    )
    model, seen = scripted(forged)
    await Agent(model, toolsets=[VshToolset(root)]).run("read", run_id="r")
    assert dump(seen[0])["result"] == "now\n"


@pytest.mark.parametrize("same_judge", [True, False], ids=["same-judge", "changed-judge"])
async def test_a_recorded_decision_is_reused_only_by_the_judge_that_made_it(
    tmp_path: Path, same_judge: bool
) -> None:
    """Crash after the journal recorded the judge's approval, before the commit: the
    replay commits without asking the same judge again; a changed judge decides anew."""
    root = workspace(tmp_path)
    first = CountingJudge("approve")
    toolset = VshToolset(root, judge=first)
    crash_after_prepare(toolset)
    model, _ = scripted(APPEND)
    with pytest.raises(Crash):
        await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert first.calls == 1
    assert (root / "log.txt").read_text() == "line 1\n"

    second = first if same_judge else CountingJudge("review")
    replay, seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root, judge=second)]).run("append", run_id="run-1")
    if same_judge:
        assert first.calls == 1
        assert dump(seen[0])["state"] == "committed"
        assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    else:
        assert second.calls == 1
        assert dump(seen[0])["state"] == "pending"
        assert (root / "log.txt").read_text() == "line 1\n"


@pytest.mark.parametrize(("days", "committed"), [(3, True), (8, False)])
async def test_an_approval_days_later_follows_approval_ttl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days: int, committed: bool
) -> None:
    """approval_ttl=7 days: an approval 3 days later commits; 8 days later it is expired,
    final, and commits nothing. The toolset's clock is shifted (VSH takes its timestamps
    from the caller), the runtime is real."""
    import sys

    import vsh_ai.toolset._driver as runtime_module

    root = workspace(tmp_path)
    week = 7 * 86400
    model, _ = scripted(APPEND)
    agent = Agent(
        model,
        toolsets=[VshToolset(root, approval="deferred", policy="strict", approval_ttl=week)],
        output_type=[str, DeferredToolRequests],
    )
    first = await agent.run("append")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals

    later = runtime_module.now_ms() + days * 86_400_000
    clock = runtime_module.now_ms
    for name, module in list(sys.modules.items()):  # every module's view of the clock
        if name.startswith("vsh_ai") and getattr(module, "now_ms", None) is clock:
            monkeypatch.setattr(module, "now_ms", lambda: later)
    approvals = DeferredToolResults(
        approvals={call.tool_call_id: True}, metadata={call.tool_call_id: {"principal": "bob"}}
    )
    resume_model, seen = scripted(APPEND)
    resumed = Agent(
        resume_model,
        toolsets=[VshToolset(root, approval="deferred", policy="strict", approval_ttl=week)],
        output_type=[str, DeferredToolRequests],
    )
    await resumed.run(message_history=first.all_messages(), deferred_tool_results=approvals)
    if committed:
        assert dump(seen[0])["state"] == "committed"
        assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    else:
        assert dump(seen[0])["state"] == "stale"
        assert "expired" in dump(seen[0])["feedback"]
        assert (root / "log.txt").read_text() == "line 1\n"


async def test_prune_journal_removes_only_old_records(tmp_path: Path) -> None:
    import os
    import time

    root = workspace(tmp_path)
    toolset = VshToolset(root)
    for run_id in ("old", "new"):
        model, _ = scripted(APPEND)
        await Agent(model, toolsets=[toolset]).run("append", run_id=run_id)
    assert toolset.journal is not None
    records = sorted(toolset.journal.directory.glob("*.json"), key=lambda p: p.stat().st_mtime)
    assert len(records) == 2
    week_ago = time.time() - 7 * 86400
    os.utime(records[0], (week_ago, week_ago))
    assert toolset.prune_journal(86400) == 1
    assert [p.exists() for p in records] == [False, True]
    with pytest.raises(ValueError, match="older_than_s"):
        toolset.prune_journal(float("nan"))


@pytest.mark.parametrize("judged", [False, True], ids=["plain", "judged"])
async def test_an_unwritable_journal_commits_nothing_and_does_not_crash_the_run(
    tmp_path: Path, judged: bool
) -> None:
    root = workspace(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal").write_text("a file where the journal folder should be")
    model, seen = scripted(APPEND)
    toolset = VshToolset(root, state_directory=state, judge=CountingJudge() if judged else None)
    result = await Agent(model, toolsets=[toolset]).run("append", run_id="r")
    assert result.output == "done"
    assert dump(seen[0])["state"] == "failed"
    assert "commit journal" in dump(seen[0])["feedback"]
    assert (root / "log.txt").read_text() == "line 1\n"


async def test_a_journal_that_fails_only_after_the_commit_keeps_the_true_result(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    toolset = VshToolset(root)
    assert toolset.journal is not None
    journal = toolset.journal

    def full_disk(**kwargs: Any) -> Any:
        from vsh_ai.toolset._journal import JournalUnavailable

        raise JournalUnavailable("cannot write the commit journal (No space left on device)")

    journal.finish = full_disk  # type: ignore[method-assign]
    model, seen = scripted(APPEND)
    await Agent(model, toolsets=[toolset]).run("append", run_id="r")
    assert dump(seen[0])["state"] == "committed"
    replay, replay_seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root)]).run("append", run_id="r")
    assert dump(replay_seen[0]) == dump(seen[0])
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"


async def test_a_replay_is_traced_without_contents(tmp_path: Path, capfire: Any) -> None:
    root = workspace(tmp_path)
    for _ in range(2):
        model, _seen = scripted(APPEND)
        await Agent(model, toolsets=[VshToolset(root)]).run("append", run_id="r")
    spans = capfire.exporter.exported_spans_as_dict()
    replays = [s for s in spans if s["name"] == "vsh-ai replay"]
    assert len(replays) == 1
    assert replays[0]["attributes"]["state"] == "committed"
    assert replays[0]["attributes"]["tool"] == "vsh_write"
    assert "line 2" not in repr([s for s in spans if s["name"].startswith("vsh-ai")])


async def test_a_model_that_reuses_a_call_id_across_turns_still_gets_two_calls(
    tmp_path: Path,
) -> None:
    """Some models name every call ``call_0``: two identical appends in two turns of one
    run are two calls (the run step tells them apart), not a replay."""
    root = workspace(tmp_path)
    model, seen = scripted(APPEND, APPEND)
    await Agent(model, toolsets=[VshToolset(root)]).run("append twice", run_id="r")
    assert (root / "log.txt").read_text() == "line 1\nline 2\nline 2\n"
    assert [dump(r)["state"] for r in seen] == ["committed", "committed"]
    assert dump(seen[0])["transaction"] != dump(seen[1])["transaction"]


async def test_a_workspace_vsh_cannot_reopen_after_a_kill_is_quarantined_not_a_crash(
    tmp_path: Path,
) -> None:
    """SIGKILL right after VSH 0.6.0 creates a transaction folder (before its commit plan
    exists) leaves a workspace ``Runtime.open`` refuses for good ("open durable commit
    plan: No such file or directory"; found by benchmarks/durable_soak.py and reproduced by
    killing a large commit ~30 ms in). The same folder state is made here directly: the
    toolset must still build (a durable worker imports it at startup), commit nothing,
    and say how to recover."""
    import vsh

    from vsh_ai.toolset._quarantine import clear_process_quarantine

    root = workspace(tmp_path)
    vsh.Runtime.open(root).run(
        vsh.RunRequest("vsh_read('/workspace/log.txt')", intent="warm up", mode=vsh.RunMode.AUTO)
    )
    (root / ".vsh-runtime" / "transactions" / ("ab" * 32)).mkdir(parents=True)
    with pytest.raises(vsh.VshRuntimeError, match="durable commit plan"):
        vsh.Runtime.open(root)
    try:
        toolset = VshToolset(root)
        assert toolset.quarantine is not None
        model, seen = scripted(APPEND)
        await Agent(model, toolsets=[toolset]).run("append", run_id="r")
        assert dump(seen[0])["state"] == "failed"
        assert "quarantined" in dump(seen[0])["feedback"]
        assert seen[0].approver_view()["detail"].startswith("VSH could not recover")
        message = toolset.quarantine
        assert ".vsh-runtime/transactions" in message
        assert "move the folder out" in message
        assert "no plan, no journal, stage/ 0 file(s), quarantine/ 0 file(s)" in message
        assert (root / "log.txt").read_text() == "line 1\n"
        assert (root / ".vsh-runtime" / "vsh-ai" / "QUARANTINED.json").exists()
    finally:
        clear_process_quarantine()


OTHER_WORKER = r"""
import asyncio, sys
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai import VshToolset

call = ToolCallPart("vsh_write", {"path": "/workspace/log.txt", "content": "line 2\n",
                    "append": True}, tool_call_id="append-1")

def respond(messages, info):
    done = sum(isinstance(m, ModelResponse) for m in messages)
    return ModelResponse(parts=[call] if done == 0 else [TextPart("done")])

asyncio.run(Agent(FunctionModel(respond), toolsets=[VshToolset(sys.argv[1])]).run(
    "append", run_id="run-1"))
"""


async def test_a_stalled_worker_never_commits_a_call_another_worker_finished(
    tmp_path: Path,
) -> None:
    """A durable engine gives a stalled worker's call to another worker, which commits
    and records it; when the first one wakes up it must report that result, not commit."""
    import subprocess
    import sys

    root = workspace(tmp_path)
    script = tmp_path / "other.py"
    script.write_text(OTHER_WORKER)
    toolset = VshToolset(root)
    assert toolset.journal is not None
    original = toolset.journal.prepare

    def stall_then_prepare(**kwargs: Any) -> Any:
        # While this worker is stalled, the other one runs the same call to the end.
        subprocess.run([sys.executable, str(script), str(root)], check=True, timeout=120)
        return original(**kwargs)

    toolset.journal.prepare = stall_then_prepare  # type: ignore[method-assign]
    model, seen = scripted(APPEND)
    await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    replay, replay_seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root)]).run("append", run_id="run-1")
    assert dump(seen[0])["state"] == "committed"
    assert dump(seen[0]) == dump(replay_seen[0])  # the other worker's recorded result


async def test_a_crash_while_the_judge_decides_asks_the_judge_again(tmp_path: Path) -> None:
    """VSH keeps a transaction pending when the run dies during the hook, and the same
    runtime refuses to preview it again ("pending artifact already exists"). No decision
    was recorded, so the replay must ask the judge, not report "already waiting for
    approval". (A new process previews it afresh: tests/test_durable_crash.py.)"""
    import vsh

    root = workspace(tmp_path)
    calls: list[str] = []

    def hook(event: vsh.RequestEvent) -> vsh.HookDecision:
        calls.append(event.transaction)
        if len(calls) == 1:
            # The run stopping inside the hook (any other exception there is a review).
            raise asyncio.CancelledError
        return vsh.HookDecision.approve("fine")

    toolset = VshToolset(root, hook_handler=hook)  # a durable engine resuming in process
    model, _ = scripted(APPEND)
    with pytest.raises(asyncio.CancelledError):
        await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\n"
    replay, seen = scripted(APPEND)
    await Agent(replay, toolsets=[toolset]).run("append", run_id="run-1")
    assert len(calls) == 2
    assert calls[0] == calls[1]  # the same transaction, judged again
    assert dump(seen[0])["state"] == "committed"
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"


async def test_a_quarantined_workspace_still_replays_finished_calls(tmp_path: Path) -> None:
    """Quarantine stops new work; a replay of a call that finished before it keeps its
    recorded result (a durable engine's replay must not change), and nothing runs."""
    import vsh

    from vsh_ai.toolset._quarantine import clear_process_quarantine

    root = workspace(tmp_path)
    model, seen = scripted(APPEND)
    await Agent(model, toolsets=[VshToolset(root)]).run("append", run_id="r")
    toolset = VshToolset(root)
    try:
        toolset.quarantine_state.enter(vsh.VshRecoveryError("install committed file: File exists"))
        replay, replay_seen = scripted(APPEND)
        await Agent(replay, toolsets=[toolset]).run("append", run_id="r")
        assert dump(replay_seen[0]) == dump(seen[0])
        other, other_seen = scripted(APPEND)
        await Agent(other, toolsets=[toolset]).run("append", run_id="new")
        assert dump(other_seen[0])["state"] == "failed"
        assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    finally:
        clear_process_quarantine()


async def test_a_committed_calls_result_record_is_written_behind_and_reads_wait_for_it(
    tmp_path: Path,
) -> None:
    """The done record of a commit the prepared record already promised is written by a
    background thread; a read of the key in this process waits for it, and the record
    on disk then holds the result the agent saw."""
    from vsh_ai.toolset._bindings import args_digest

    root = workspace(tmp_path)
    toolset = VshToolset(root)
    model, seen = scripted(APPEND)
    await Agent(model, toolsets=[toolset]).run("append", run_id="r")
    assert toolset.journal is not None
    key = json.dumps(["r", 1, "append-1"])
    entry = toolset.journal.load(key, args_digest("vsh_write", APPEND.args_as_dict()))
    assert entry is not None
    assert entry.phase == "done"
    assert dump(entry.result) == dump(seen[0])
    on_disk = json.loads(toolset.journal.path_for(key).read_text())
    assert on_disk["phase"] == "done"
    assert on_disk["sequence"] == 2


DYING_WORKER = r"""
import asyncio, os, sys
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai import VshToolset
from vsh_ai.toolset import _journal

call = ToolCallPart("vsh_write", {"path": "/workspace/log.txt", "content": "line 2\n",
                    "append": True}, tool_call_id="append-1")

def respond(messages, info):
    done = sum(isinstance(m, ModelResponse) for m in messages)
    return ModelResponse(parts=[call] if done == 0 else [TextPart("done")])

def die(self, **kwargs):
    os._exit(3)  # committed, its result never recorded

_journal.CommitJournal.finish = die
asyncio.run(Agent(FunctionModel(respond), toolsets=[VshToolset(sys.argv[1])]).run(
    "append", run_id="run-1"))
"""


async def test_a_stalled_worker_never_commits_a_call_another_worker_committed_then_died(
    tmp_path: Path,
) -> None:
    """The other worker commits the call and dies before recording its result (only its
    prepared record is on disk): the stalled worker, previewing after that commit (another
    transaction), must find the commit through VSH's state and report it, not commit."""
    import sys

    import anyio

    root = workspace(tmp_path)
    script = tmp_path / "dying.py"
    script.write_text(DYING_WORKER)
    toolset = VshToolset(root)
    driver = toolset.transactions.driver if toolset.transactions is not None else None
    assert driver is not None
    original = driver.run

    async def stall_then_run(*args: Any, **kwargs: Any) -> Any:
        done = await anyio.run_process([sys.executable, str(script), str(root)], check=False)
        assert done.returncode == 3
        assert (root / "log.txt").read_text() == "line 1\nline 2\n"
        return await original(*args, **kwargs)

    driver.run = stall_then_run  # type: ignore[method-assign]
    model, seen = scripted(APPEND)
    await Agent(model, toolsets=[toolset]).run("append", run_id="run-1")
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    assert dump(seen[0])["state"] == "committed"
    replay, replay_seen = scripted(APPEND)
    await Agent(replay, toolsets=[VshToolset(root)]).run("append", run_id="run-1")
    assert dump(replay_seen[0]) == dump(seen[0])
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
