"""Kill -9 at random moments: do DBOS-recovered agent runs still commit exactly once?

The seams of tests/test_durable_crash.py are the places we thought of; this kills the
process wherever it happens to be (inside VSH's commit, half-way through a journal write,
in DBOS's own bookkeeping). Each job is a DBOS workflow (SQLite system database, fixed
workflow id) running an agent whose one tool call appends ``job <i>`` to ``log.txt``.
A child process launches DBOS (recovering what the last one left), starts every job in
order (idempotent by workflow id) and waits for each; the parent SIGKILLs it after a
random delay, and starts another, until a child finishes them all. Then: every job must
have succeeded, its line must be in the host file exactly once, and the workflow's
output must name the same transaction the toolset reported.

Run: ``.venv/bin/python benchmarks/durable_soak.py [jobs] [--no-journal] [--seed N]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import asyncio, json, os, sys
from pathlib import Path
from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai import VshToolset
from vsh_ai.dbos import dbos_config

folder, jobs = Path(sys.argv[1]), int(sys.argv[2])
journal, judged = sys.argv[3] == "1", sys.argv[4] == "1"


class CountingJudge:
    # Approves, and counts its calls in a file (across processes).

    id = "soak-judge"

    async def review(self, evidence):
        from vsh_ai import Verdict
        with open(folder / "judge-calls", "a") as handle:
            handle.write("x")
        return Verdict(decision="approve", reason="ok", judge=self.id)

def respond(messages, info):
    prompt = messages[0].parts[-1].content
    if sum(isinstance(m, ModelResponse) for m in messages) == 0:
        args = {"path": "/workspace/log.txt", "content": f"{prompt}\n", "append": True}
        return ModelResponse(parts=[ToolCallPart("vsh_write", args)])
    [ret] = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    result = ret.content
    answer = [result.state, result.transaction, (result.feedback or "")[:160]]
    return ModelResponse(parts=[TextPart(json.dumps(answer))])

agent = Agent(FunctionModel(respond), name="soak", capabilities=[DBOSDurability()],
              toolsets=[VshToolset(folder / "ws", journal=journal,
                                   judge=CountingJudge() if judged else None)])

@DBOS.workflow()
async def job(i: int) -> str:
    return str((await agent.run(f"job {i}")).output)

DBOS(config=dbos_config("soak", directory=folder))
DBOS.launch()
print("ready", flush=True)

async def main():
    for i in range(jobs):
        with SetWorkflowID(f"job-{i}"):
            handle = await DBOS.start_workflow_async(job, i)
        await handle.get_result()

asyncio.run(main())
DBOS.destroy()
os._exit(0)
"""


def run(
    jobs: int, journal: bool, seed: int, max_delay_s: float, judged: bool = False
) -> dict[str, object]:
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="vsh-ai-soak-"))
    if True:  # kept when a child fails, for a post-mortem
        (folder / "ws").mkdir()
        (folder / "ws" / "log.txt").write_text("")
        script = folder / "child.py"
        script.write_text(CHILD)
        kills = children = 0
        started = time.monotonic()
        while True:
            children += 1
            child = subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    str(folder),
                    str(jobs),
                    "1" if journal else "0",
                    "1" if judged else "0",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "LOGFIRE_IGNORE_NO_CONFIG": "1"},
            )
            assert child.stdout is not None
            child.stdout.readline()  # "ready": DBOS launched (and recovering); now the clock
            try:
                child.wait(timeout=rng.uniform(0.0, max_delay_s))
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGKILL)
                child.wait()
                kills += 1
                continue
            if child.returncode != 0:
                error = child.stderr.read().decode()[-2000:] if child.stderr else ""
                raise SystemExit(
                    f"child failed ({child.returncode}); state kept in {folder}:\n{error}"
                )
            break
        elapsed = time.monotonic() - started
        lines = (folder / "ws" / "log.txt").read_text().splitlines()
        outputs = _outputs(folder, jobs)
        calls = folder / "judge-calls"
        judge_calls = len(calls.read_text()) if calls.exists() else 0
    counts = collections.Counter(lines)
    if all(counts[f"job {i}"] == 1 for i in range(jobs)):
        shutil.rmtree(folder)
    else:
        print(f"state kept in {folder}", file=sys.stderr)
    expected = [f"job {i}" for i in range(jobs)]
    return {
        "jobs": jobs,
        "journal": journal,
        "judged": judged,
        "judge_calls": judge_calls,
        "children": children,
        "kills": kills,
        "seconds": round(elapsed, 1),
        "succeeded": sum(1 for state, _ in outputs.values() if state == "SUCCESS"),
        "committed_twice": sum(1 for line in expected if counts[line] > 1),
        "missing": sum(1 for line in expected if counts[line] == 0),
        "reported_not_committed": sum(
            1 for _, output in outputs.values() if output and '"committed"' not in output
        ),
        "failures": collections.Counter(
            output for _, output in outputs.values() if output and '"committed"' not in output
        ).most_common(3),
    }


def _outputs(folder: Path, jobs: int) -> dict[str, tuple[str, str]]:
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=f"sqlite:///{folder / 'soak.sqlite'}")
    try:
        workflows = client.list_workflows()
    finally:
        client.destroy()
    return {
        w.workflow_id: (w.status, str(w.output or ""))
        for w in workflows
        if w.workflow_id.startswith("job-")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int, nargs="?", default=40)
    parser.add_argument("--no-journal", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--judged", action="store_true", help="a judge approves each change")
    parser.add_argument("--max-delay", type=float, default=3.0, help="seconds before a kill")
    args = parser.parse_args()
    result = run(args.jobs, not args.no_journal, args.seed, args.max_delay, args.judged)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
