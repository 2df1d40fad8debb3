"""Soak the toolset: several agents, a judge, deferred approvals resumed in new processes,
host edits and random cancellations on one real VSH workspace.

Prints transactions by outcome, ``agent.run`` errors (target 0) and host mismatches against
committed results (target 0), then how far a decision can outlive its judge timeout.

    .venv/bin/python benchmarks/soak.py [--agents 4] [--runs 520] [--processes 3] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from vsh_ai import Evidence, Verdict, as_hook
from vsh_ai._simulate import simulate
from vsh_ai.rules import Rule, RuleSet
from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._result import VshResult

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")


class SoakJudge:
    """Approves ordinary edits; sends anything marked REVIEW to a person."""

    id = "soak-judge"

    async def review(self, evidence: Evidence, /) -> Verdict:
        await asyncio.sleep(0)
        for path in evidence.changed_paths:
            if any("REVIEW" in line for line in evidence.added_lines(path)):
                return Verdict.review("A person approves marked changes.", judge=self.id)
        return Verdict.approve("ordinary edit", judge=self.id)


def one_call(part: ToolCallPart) -> FunctionModel:
    def respond(messages: list[Any], info: Any) -> ModelResponse:
        if sum(isinstance(m, ModelResponse) for m in messages) == 0:
            return ModelResponse(parts=[part])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


class Stats:
    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.mismatches: list[str] = []
        self.cancelled = 0
        self.deferred: list[dict[str, Any]] = []
        self.stale_reasons: Counter[str] = Counter()


def host_editor(workspace: Path, stop: threading.Event) -> None:
    """The outside world: edits a feed the agents read, and churns an unrelated folder."""
    n = 0
    while not stop.is_set():
        (workspace / "host" / "feed.txt").write_text(f"feed {n}\n")
        churn = workspace / "host" / "churn" / f"c{n % 7}.txt"
        churn.write_text("x") if n % 2 else churn.unlink(missing_ok=True)
        n += 1
        time.sleep(0.003)


async def agent_loop(
    workspace: Path, toolset: VshToolset, name: str, runs: int, stats: Stats, rng: random.Random
) -> None:
    own = f"agents/{name}.txt"
    expected = (workspace / own).read_text()
    for n in range(runs):
        roll = rng.random()
        content = f"{name} run {n}\n"
        if roll < 0.15:  # deferred: a new file a person must approve
            path = f"deferred/{name}-{n}/f.txt"  # one folder each: see "stale" in the README
            part = ToolCallPart(
                "vsh_write",
                {"path": path, "content": f"REVIEW {name} {n}\n"},
                tool_call_id=f"{name}-{n}",
            )
        elif roll < 0.45:  # read the feed (which the host keeps changing), then write
            code = (
                "feed = vsh_read('/workspace/host/feed.txt')\n"
                f"vsh_write('/workspace/{own}', {content!r})\nfeed"
            )
            part = ToolCallPart(
                "vsh_run", {"code": code, "intent": "sync"}, tool_call_id=f"{name}-{n}"
            )
        elif roll < 0.5:
            part = ToolCallPart("vsh_read", {"path": own}, tool_call_id=f"{name}-{n}")
        else:
            part = ToolCallPart(
                "vsh_write", {"path": own, "content": content}, tool_call_id=f"{name}-{n}"
            )
        agent = Agent(one_call(part), toolsets=[toolset], output_type=[str, DeferredToolRequests])
        cancel_after = rng.uniform(0, 0.015) if rng.random() < 0.05 else None
        run: Any = None
        try:
            if cancel_after is None:
                run = await agent.run("work")
            else:
                with anyio.move_on_after(cancel_after):
                    run = await agent.run("work")
        except Exception as error:  # an agent.run error is what the soak counts
            stats.errors[f"{type(error).__name__}: {str(error)[:120]}"] += 1
            continue
        if run is None:
            stats.cancelled += 1
            stats.outcomes["cancelled"] += 1
            if part.tool_name == "vsh_run" or (
                part.tool_name == "vsh_write" and part.args_as_dict()["path"] == own
            ):
                host = (workspace / own).read_text()
                if host not in (expected, content):
                    stats.mismatches.append(f"{own}: after a cancel, neither old nor new content")
                expected = host
            continue
        if isinstance(run.output, DeferredToolRequests):
            stats.outcomes["deferred"] += 1
            stats.deferred.append(
                {
                    "call_id": part.tool_call_id,
                    "path": part.args_as_dict()["path"],
                    "content": part.args_as_dict()["content"],
                    "history": ModelMessagesTypeAdapter.dump_json(run.all_messages()).decode(),
                }
            )
            continue
        results = [
            p.content
            for m in run.new_messages()
            for p in getattr(m, "parts", [])
            if isinstance(getattr(p, "content", None), VshResult)
        ]
        if not results:
            stats.outcomes["retry"] += 1
            continue
        result = results[0]
        stats.outcomes[result.state] += 1
        if result.state in ("stale", "failed"):
            stats.stale_reasons[f"{result.state}: {(result.feedback or '')[:70]}"] += 1
        if result.state == "committed" and part.tool_name != "vsh_read":
            expected = content
        host = (workspace / own).read_text()
        if host != expected:
            stats.mismatches.append(f"{own}: host {host!r} but last committed {expected!r}")
            expected = host


RESUME = """
import json, random, sys
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from vsh_ai.toolset import VshToolset

workspace, batch_file, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("ok")]))
toolset = VshToolset(workspace, approval="deferred", judge=None)
for item in json.load(open(batch_file)):
    call_id = item["call_id"]
    approve = rng.random() < 0.8
    results = DeferredToolResults(
        approvals={call_id: True if approve else ToolDenied("no")},
        metadata={call_id: {"principal": "soak"}},
    )
    agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    try:
        run = agent.run_sync(
            message_history=ModelMessagesTypeAdapter.validate_json(item["history"]),
            deferred_tool_results=results,
        )
        part = run.new_messages()[0].parts[0]
        state = part.content.state if approve else "denied"
    except Exception as error:
        state = "error: " + type(error).__name__ + ": " + str(error)[:100]
    print(json.dumps({"call_id": call_id, "state": state}), flush=True)
"""


def resume_in_processes(
    workspace: Path, deferred: list[dict[str, Any]], processes: int
) -> list[dict[str, str]]:
    """Resume every deferred approval from fresh processes (each item twice: a duplicate
    resume from another process must report committed/stale, never crash)."""
    items = deferred + deferred[: len(deferred) // 4]  # some approvals resumed twice
    batches = [items[i::processes] for i in range(processes)]
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, batch in enumerate(batches):
            batch_file = Path(tmp) / f"batch{index}.json"
            batch_file.write_text(json.dumps(batch))
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", RESUME, str(workspace), str(batch_file), str(index)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outcomes: list[dict[str, str]] = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=1800)
            if proc.returncode != 0:
                outcomes.append(
                    {
                        "call_id": "?",
                        "state": f"error: process exit {proc.returncode}: {stderr[-300:]}",
                    }
                )
            outcomes.extend(
                json.loads(line) for line in stdout.splitlines() if line.startswith("{")
            )
    return outcomes


class Computes:
    def __init__(self, seconds: float) -> None:
        self.id, self.seconds = "computes", seconds

    async def review(self, evidence: Evidence, /) -> Verdict:
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            pass
        return Verdict.approve("late", judge=self.id)


class SlowRule(Rule):
    type: Literal["slow_soak"] = "slow_soak"
    seconds: float = 2.0

    def check(self, evidence: Evidence, /) -> Verdict | None:
        time.sleep(self.seconds)
        return None


async def timeout_margins(workspace: Path) -> list[str]:
    """How long after its timeout a decision arrives, for judges that misbehave."""
    simulation = await simulate(workspace, "vsh_write('/workspace/agents/margin.txt', 'x')")
    assert simulation.evidence is not None
    lines = []
    for label, judge, timeout in (
        ("async judge computing 3 s without yielding, timeout 1 s", Computes(3.0), 1.0),
        ("rule set with a 2 s synchronous rule, timeout 0.5 s", RuleSet([SlowRule()]), 0.5),
    ):
        hook = as_hook(judge, timeout=timeout)
        started = time.monotonic()
        verdict = await hook.decide(simulation.evidence)
        elapsed = time.monotonic() - started
        lines.append(
            f"  {label}: {verdict.decision}/{verdict.failure} after {elapsed:.3f} s "
            f"(outlived the timeout by {elapsed - timeout:+.3f} s)"
        )
    return lines


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        for sub in ("agents", "deferred", "host/churn"):
            (workspace / sub).mkdir(parents=True)
        (workspace / "host" / "feed.txt").write_text("feed\n")
        names = [f"agent{i}" for i in range(args.agents)]
        for name in names:
            (workspace / "agents" / f"{name}.txt").write_text("start\n")
            for n in range(args.runs):
                (workspace / "deferred" / f"{name}-{n}").mkdir()
        toolset = VshToolset(workspace, judge=SoakJudge(), approval="deferred")
        stats = Stats()
        stop = threading.Event()
        editor = threading.Thread(target=host_editor, args=(workspace, stop), daemon=True)
        started = time.perf_counter()
        editor.start()
        try:
            async with anyio.create_task_group() as group:
                for name in names:
                    group.start_soon(
                        agent_loop,
                        workspace,
                        toolset,
                        name,
                        args.runs,
                        stats,
                        random.Random(rng.random()),
                    )
        finally:
            stop.set()
            editor.join()
        in_process = time.perf_counter() - started
        resumed = resume_in_processes(workspace, stats.deferred, args.processes)
        total = time.perf_counter() - started
        resume_states: Counter[str] = Counter()
        final: dict[str, str] = {}
        for outcome in resumed:
            state = outcome["state"]
            if state.startswith("error"):
                stats.errors[state] += 1
                continue
            resume_states[state] += 1
            if state == "committed" or outcome["call_id"] not in final:
                final[outcome["call_id"]] = state
        for item in stats.deferred:
            path = workspace / item["path"]
            committed = final.get(item["call_id"]) == "committed"
            if committed and (not path.exists() or path.read_text() != item["content"]):
                stats.mismatches.append(f"{item['path']}: reported committed but not on the host")
            if not committed and path.exists():
                stats.mismatches.append(f"{item['path']}: on the host but never reported committed")
        transactions = sum(stats.outcomes.values()) + sum(resume_states.values())
        print(
            f"workspace transactions: {transactions} in {total:.1f} s "
            f"({in_process:.1f} s in-process agents, {args.agents} agents x {args.runs} runs, "
            f"{args.processes} resume processes)"
        )
        print("in-process tool calls by outcome:", dict(sorted(stats.outcomes.items())))
        print("resumed approvals by outcome (new processes):", dict(sorted(resume_states.items())))
        print("stale/failed reasons:", dict(stats.stale_reasons.most_common(6)))
        print(f"agent.run errors: {sum(stats.errors.values())}", dict(stats.errors) or "")
        print(f"host mismatches against committed results: {len(stats.mismatches)}")
        for line in stats.mismatches[:10]:
            print("  ", line)
        print("decision latency past the judge timeout:")
        for line in await timeout_margins(workspace):
            print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--runs", type=int, default=520)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    anyio.run(main, parser.parse_args())
