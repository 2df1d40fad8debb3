"""SIGKILL inside VSH's own commit: VSH recovery rolls the commit back and marks the
transaction ``failed``; the replayed tool call must run again as a new attempt (VSH never
reuses a failed transaction) and commit exactly once.

A real process is killed at a real moment: the program appends to twelve 3 MB files (a
judge approves; VSH revalidates and commits ~36 MB), so the commit lasts long enough for a
kill to land inside it (here: killed 0.15 s after the journal write, VSH rolls back;
earlier, the transaction is still pending; later, it is committed). Where the kill lands
is up to the machine: the test tries a few delays and skips if none lands inside.
The DBOS crash matrix at the toolset's seams is tests/test_durable_crash.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.durable  # kills a real process mid-commit, 10-50 s

CHILD = r"""
import asyncio, json, sys
from pathlib import Path
import vsh
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai import VshToolset
import vsh_ai.toolset._journal as journal

workspace, announce = Path(sys.argv[1]), sys.argv[2] == "1"
CODE = (
    "for i in range(12):\n"
    "    vsh_write(f'/workspace/big{i}.txt', 'line 2\\n', append=True)\n"
    "vsh_write('/workspace/log.txt', 'line 2\\n', append=True)\n"
)

def respond(messages, info):
    if sum(isinstance(m, ModelResponse) for m in messages) == 0:
        args = {"code": CODE, "intent": "append a line"}
        return ModelResponse(parts=[ToolCallPart("vsh_run", args, tool_call_id="c1")])
    [ret] = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if isinstance(ret.content, str):  # a retry prompt, not a VshResult
        return ModelResponse(parts=[TextPart(json.dumps({"state": "retry", "text": ret.content}))])
    return ModelResponse(parts=[TextPart(ret.content.model_dump_json())])

if announce:  # say when the journal has recorded the call: the commit starts right after
    prepare = journal.CommitJournal.prepare
    def announced(self, **kwargs):
        entry = prepare(self, **kwargs)
        print(entry.transaction, flush=True)
        return entry
    journal.CommitJournal.prepare = announced

class Approve:  # 36 MB of changes is review under VSH's balanced policy: a judge approves
    id = "approve-all"

    async def review(self, evidence):
        from vsh_ai import Verdict
        return Verdict(decision="approve", reason="ok", judge=self.id)

budget = vsh.ExecutionBudget(max_write_bytes=64 * 1024 * 1024, max_duration_ms=60_000)
toolset = VshToolset(
    workspace, budget=budget, judge=Approve(), review_content_bytes=96 * 1024 * 1024
)
result = asyncio.run(Agent(FunctionModel(respond), toolsets=[toolset]).run("go", run_id="run-1"))
print(result.output, flush=True)
"""


PADDING = "x" * (3 * 1024 * 1024) + "\n"  # 12 such files: the commit lasts long enough


def _state(workspace: Path, transaction: str) -> str:
    code = (
        "import sys, vsh\n"
        "try:\n"
        f"    print(vsh.Runtime.open({str(workspace)!r}).transaction_state({transaction!r}))\n"
        "except Exception as error:\n"
        "    print('error:', error)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    ).stdout.strip()


def test_a_kill_inside_the_vsh_commit_reruns_and_commits_once(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for attempt, delay in enumerate((0.15, 0.12, 0.2, 0.1, 0.25)):
        workspace = tmp_path / f"ws{attempt}"
        workspace.mkdir()
        (workspace / "log.txt").write_text("line 1\n")
        for i in range(12):
            (workspace / f"big{i}.txt").write_text(PADDING)
        child = subprocess.Popen(
            [sys.executable, str(script), str(workspace), "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        transaction = child.stdout.readline().strip()
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        assert transaction, child.stderr.read() if child.stderr else ""
        if _state(workspace, transaction) == "failed":
            break
    else:
        pytest.skip("no kill landed inside VSH's commit on this machine")
    assert (workspace / "log.txt").read_text() == "line 1\n"  # rolled back

    replay = subprocess.run(
        [sys.executable, str(script), str(workspace), "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replay.returncode == 0, replay.stderr[-2000:]
    result = json.loads(replay.stdout.strip().splitlines()[-1])
    assert result["state"] == "committed"
    assert result["transaction"] != transaction  # a new attempt, not the failed one
    assert (workspace / "log.txt").read_text() == "line 1\nline 2\n"
    assert (workspace / "big0.txt").read_text() == PADDING + "line 2\n"
