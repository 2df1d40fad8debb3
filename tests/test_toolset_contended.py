"""Two processes commit the very same VSH transaction at once (the same program and intent
on the same files): a durable engine's retry on another worker while the first attempt,
which was only frozen, goes on. VSH lets exactly one commit and refuses the other with
``VshStateError`` ("duplicate transaction", or "not reservable from Revalidating" when the
two overlap). The losing call must report what VSH's durable state says (committed, once),
never a failure that invites a second run.

Real processes, real VSH, real agents: the first process stops just before its commit
(after its preview), the second runs the whole call, then the first goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.durable  # three interpreters per case, about 10 s

CHILD = r"""
import asyncio, json, sys, time
from pathlib import Path
import vsh
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai import VshToolset
from vsh_ai.toolset import _records

workspace, journal, size = Path(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
go_commit, go_done = sys.argv[4], sys.argv[5]  # files to wait for ("-": do not wait)
CODE = (
    f"for i in range({size}):\n"
    "    vsh_write(f'/workspace/big{i}.txt', 'line 2\\n', append=True)\n"
    "vsh_write('/workspace/log.txt', 'line 2\\n', append=True)\n"
    "13"
)

def respond(messages, info):
    if sum(isinstance(m, ModelResponse) for m in messages) == 0:
        args = {"code": CODE, "intent": "append a line"}
        return ModelResponse(parts=[ToolCallPart("vsh_run", args, tool_call_id="c1")])
    [ret] = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if isinstance(ret.content, str):  # a retry prompt, not a VshResult
        return ModelResponse(parts=[TextPart(json.dumps({"state": "retry", "text": ret.content}))])
    return ModelResponse(parts=[TextPart(ret.content.model_dump_json())])

prepare, done = _records.CallRecords.prepare, _records.CallRecords.done

def held(self, *args, **kwargs):
    # In VSH's worker thread: the journal has recorded the call, the commit is next.
    promised = prepare(self, *args, **kwargs)
    print("prepared", flush=True)
    while go_commit != "-" and not Path(go_commit).exists():
        time.sleep(0.005)
    return promised

async def finishing(self, *args, **kwargs):
    # The commit step is over; the call's result is not recorded yet.
    print("finishing", flush=True)
    while go_done != "-" and not Path(go_done).exists():
        await asyncio.sleep(0.005)
    return await done(self, *args, **kwargs)

_records.CallRecords.prepare, _records.CallRecords.done = held, finishing

class Approve:
    id = "approve-all"

    async def review(self, evidence):
        from vsh_ai import Verdict
        return Verdict(decision="approve", reason="ok", judge=self.id)

big = dict(
    judge=Approve(),  # 36 MB of changes is review under VSH's balanced policy
    review_content_bytes=96 * 1024 * 1024,
    budget=vsh.ExecutionBudget(max_write_bytes=64 * 1024 * 1024, max_duration_ms=60_000),
)
toolset = VshToolset(workspace, journal=journal, **(big if size else {}))
result = asyncio.run(Agent(FunctionModel(respond), toolsets=[toolset]).run("go", run_id="run-1"))
print(result.output, flush=True)
"""


class _Child:
    """One process running the call; it waits at the seams it is given files for."""

    def __init__(self, root: Path, *, journal: bool, size: int, hold: Path | None = None) -> None:
        folder = hold or root.parent
        self.go_commit, self.go_done = folder / "commit", folder / "done"
        if hold:
            hold.mkdir()
        waits = [str(self.go_commit), str(self.go_done)] if hold else ["-", "-"]
        args = [sys.executable, "-c", CHILD, str(root), "1" if journal else "0", str(size)]
        self.process = subprocess.Popen(
            [*args, *waits], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def reaches(self, marker: str) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != marker:
            _, err = self.process.communicate(timeout=60)
            raise AssertionError(f"expected {marker!r}, got {line!r}\n{err[-3000:]}")

    def result(self) -> dict[str, object]:
        out, err = self.process.communicate(timeout=120)
        assert self.process.returncode == 0, err[-3000:]
        result: dict[str, object] = json.loads(out.splitlines()[-1])
        return result


def _workspace(tmp_path: Path, size: int) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "log.txt").write_text("line 1\n")
    for i in range(size):
        (root / f"big{i}.txt").write_text("x" * (3 * 1024 * 1024) + "\n")
    return root


def _same_but_feedback(first: dict[str, object], second: dict[str, object]) -> bool:
    return {k: v for k, v in first.items() if k != "feedback"} == {
        k: v for k, v in second.items() if k != "feedback"
    }


@pytest.mark.parametrize("journal", [True, False], ids=["journal", "no-journal"])
def test_the_call_that_loses_the_commit_and_finishes_first_reports_the_one_commit(
    tmp_path: Path, journal: bool
) -> None:
    """A and B both reach their commit; A commits and stops before recording its result;
    B's commit is refused by VSH and B finishes first (the order the CI run met, in which
    the loser's "failed" was the result the workflow recorded)."""
    root = _workspace(tmp_path, 0)
    a = _Child(root, journal=journal, size=0, hold=tmp_path / "a")
    a.reaches("prepared")
    b = _Child(root, journal=journal, size=0, hold=tmp_path / "b")
    b.reaches("prepared")
    a.go_commit.touch()
    a.reaches("finishing")  # A committed
    b.go_commit.touch()
    b.reaches("finishing")  # B's commit step is over
    b.go_done.touch()
    loser = b.result()
    a.go_done.touch()
    winner = a.result()
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"  # once
    assert (winner["state"], loser["state"]) == ("committed", "committed"), (winner, loser)
    if journal:
        # The same call (same run id, tool call id and arguments): what it promised.
        assert loser == winner
    else:
        # Two calls that happen to be identical: the loser is told the change is there once.
        assert "identical request" in str(loser["feedback"])
        assert _same_but_feedback(loser, winner)


@pytest.mark.parametrize("journal", [True, False], ids=["journal", "no-journal"])
def test_a_retry_that_commits_while_the_first_attempt_waits(tmp_path: Path, journal: bool) -> None:
    """A stops just before its commit; B (a retry, or an identical call) runs the whole call;
    then A goes on: VSH refuses A's commit, and A reports the one commit."""
    root = _workspace(tmp_path, 0)
    a = _Child(root, journal=journal, size=0, hold=tmp_path / "a")
    a.reaches("prepared")
    b = _Child(root, journal=journal, size=0)
    winner = b.result()
    a.go_commit.touch()
    a.go_done.touch()
    loser = a.result()
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"  # once
    assert (winner["state"], loser["state"]) == ("committed", "committed"), (winner, loser)
    assert loser["transaction"] == winner["transaction"]
    if journal:
        assert loser == winner
    else:
        assert "identical request" in str(loser["feedback"])
        assert _same_but_feedback(loser, winner)


def test_two_commits_of_one_judged_transaction_overlapping(tmp_path: Path) -> None:
    """Judged path, a long commit (12 x 3 MB): A waits after recording its approval; B,
    the retry, runs; A is let go while B may still be inside VSH's commit. Whichever one
    VSH lets commit, both calls report the one commit (the loser waits while VSH reports
    the transaction in flight)."""
    root = _workspace(tmp_path, 12)
    a = _Child(root, journal=True, size=12, hold=tmp_path / "a")
    a.reaches("prepared")
    b = _Child(root, journal=True, size=12)
    b.reaches("prepared")
    time.sleep(0.05)  # into B's commit (36 MB), give or take the machine
    a.go_commit.touch()
    a.go_done.touch()
    first, second = a.result(), b.result()
    assert (root / "log.txt").read_text() == "line 1\nline 2\n"
    assert all((root / f"big{i}.txt").read_text().endswith("\nline 2\n") for i in range(12))
    assert (first["state"], second["state"]) == ("committed", "committed"), json.dumps(
        [first, second]
    )
    assert first == second, json.dumps([first, second], indent=1)
