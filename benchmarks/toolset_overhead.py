"""Median wall time of one ``vsh_run`` write through our toolset vs raw VSH vs vsh.pydantic_ai.

Our toolset runs as an agent run calls it (a run id and tool call id, so every call goes
through the commit journal: one fsynced record before the commit, one after), with
``journal=False``, and as a replayed call (a journaled key seen again). With a rule judge
(strict policy, so every write is judged; the judge proves the edit of ``out.txt``), ours
is compared with ``vsh.pydantic_ai.VshCapability`` given the same judge as its hook
(``as_hook(rules)``, the same review budget): the ratio is the toolset's own cost, not the
judge's.

Then the cost of opening a toolset on a workspace (ours, the upstream integration's,
``vsh.Runtime.open``): a service may open one per request.

Run: ``.venv/bin/python benchmarks/toolset_overhead.py [iterations]``. Each variant gets
its own temporary workspace; iterations interleave the variants (in rotating order) so
drift and other processes' load hit all alike, and the figures are medians. Every program
writes different content (no duplicate transactions) and commits, so each call is a
preview + durable commit. How to compare: the ``ours / upstream`` lines are the figures
(1.00x = the upstream integration's cost); the raw line shows what VSH itself costs.

A committed call's ``done`` journal record is written by a background thread after the
call returns (vsh_ai/toolset/_journal.py says why that is safe). Left running, it would
land inside the next variant's timed call, so after every call the loop waits (untimed)
for those writes; the ``+ background write`` line times the call up to the moment its
record landed instead (what a caller making calls back to back would pay).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

import vsh
import vsh.pydantic_ai  # the comparison: imported here and nowhere else
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage

from vsh_ai import as_hook
from vsh_ai._simulate import DEFAULT_REVIEW_CONTENT_BYTES
from vsh_ai.rules import RuleSet
from vsh_ai.rules._allow import AllowPaths
from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._background import wait_for_folder


def program(i: int) -> tuple[str, str]:
    return f"vsh_write('/workspace/out.txt', 'content {i}\\n')\n'ok'", f"write iteration {i}"


def workspace(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir()
    (path / "out.txt").write_text("start\n")
    return path


async def tool_caller(
    toolset: AbstractToolset[Any], *, run_id: str | None = None, replay: bool = False
) -> Callable[[int], Awaitable[str]]:
    base = RunContext(deps=None, model=TestModel(), usage=RunUsage(), run_id=run_id)
    tools = await toolset.get_tools(base)
    tool = tools["vsh_run"]

    async def call(i: int) -> str:
        code, intent = program(i)
        ctx = replace(base, tool_call_id=f"call-{i}") if run_id else base
        args = {"code": code, "intent": intent}
        result = await toolset.call_tool("vsh_run", args, ctx, tool)
        if replay:  # the same call again, as an engine replaying the run would make it
            again = await toolset.call_tool("vsh_run", args, ctx, tool)
            assert again == result
        return str(result.state)

    return call


async def main(iterations: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw = vsh.Runtime.open(workspace(root, "raw"))

        async def raw_call(i: int) -> str:
            code, intent = program(i)
            request = vsh.RunRequest(code, intent=intent, mode=vsh.RunMode.AUTO)
            return raw.run(request).state

        upstream = vsh.pydantic_ai.VshCapability(workspace(root, "upstream")).get_toolset()
        assert isinstance(upstream, AbstractToolset)
        rules = RuleSet([AllowPaths(id="out", paths=("out.txt",), kinds=("modify",))])
        upstream_judged = vsh.pydantic_ai.VshCapability(
            workspace(root, "upstream-judged"),
            policy="strict",
            hook_handler=as_hook(rules),
            hook_id="bench",
            review_content_bytes=DEFAULT_REVIEW_CONTENT_BYTES,
        ).get_toolset()
        assert isinstance(upstream_judged, AbstractToolset)
        judged = VshToolset(workspace(root, "judged"), policy="strict", judge=rules)
        journaled = VshToolset(workspace(root, "ours"))
        variants: dict[str, Callable[[int], Awaitable[str]]] = {
            "raw vsh.Runtime.run": raw_call,
            "vsh_ai journaled": await tool_caller(journaled, run_id="bench"),
            "vsh_ai journal=False": await tool_caller(
                VshToolset(workspace(root, "plain"), journal=False), run_id="bench"
            ),
            "vsh_ai call + replay": await tool_caller(
                VshToolset(workspace(root, "replay")), run_id="bench", replay=True
            ),
            "vsh.pydantic_ai VshCapability": await tool_caller(upstream),
            "vsh_ai rule judge, journaled": await tool_caller(judged, run_id="bench"),
            "vsh.pydantic_ai + the same hook": await tool_caller(upstream_judged),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        landed: list[float] = []
        names = list(variants)
        folders = [t.journal.directory for t in (journaled, judged) if t.journal is not None]
        for i in range(-5, iterations):  # 5 warm-up rounds
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                started = time.perf_counter()
                state = await variants[name](i + 10)
                elapsed = time.perf_counter() - started
                for folder in folders:  # untimed: no write lands in the next variant's call
                    wait_for_folder(folder)
                assert state == "committed", (name, state)
                if i >= 0:
                    samples[name].append(elapsed)
                    if name == "vsh_ai journaled":
                        landed.append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["raw vsh.Runtime.run"]
    print(f"median wall time per committed vsh_run write, {iterations} iterations each")
    for name, value in medians.items():
        print(f"  {name:32s} {value * 1000:7.3f} ms   {value / base:5.3f}x raw")
    ours = medians["vsh_ai journaled"]
    theirs = medians["vsh.pydantic_ai VshCapability"]
    unjournaled = medians["vsh_ai journal=False"]
    replay = medians["vsh_ai call + replay"] - ours
    judged_ratio = (
        medians["vsh_ai rule judge, journaled"] / medians["vsh.pydantic_ai + the same hook"]
    )
    print(f"  ours / upstream (journal on):      {ours / theirs:5.3f}x")
    behind = statistics.median(landed)
    print(f"    + background write (landed):     {behind / theirs:5.3f}x")
    print(f"  ours / upstream (journal off):     {unjournaled / theirs:5.3f}x")
    print(f"  ours / upstream (rule judge):      {judged_ratio:5.3f}x")
    print(f"  journal cost per committed call: {(ours - unjournaled) * 1000:+.3f} ms")
    print(f"  a replayed call (recorded result returned): ~{replay * 1000:.3f} ms")
    construction(max(10, iterations // 2))


def construction(rounds: int) -> None:
    """Opening a toolset on a workspace (a service may make one per request): ours, the
    upstream integration's, and ``vsh.Runtime.open`` (what VSH itself costs), interleaved."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        makers: dict[str, Callable[[], object]] = {
            "vsh.Runtime.open": partial(vsh.Runtime.open, workspace(root, "raw")),
            "vsh.pydantic_ai VshCapability": lambda: vsh.pydantic_ai.VshCapability(
                root / "upstream"
            ).get_toolset(),
            "vsh_ai VshToolset": partial(VshToolset, workspace(root, "ours")),
        }
        workspace(root, "upstream")
        samples: dict[str, list[float]] = {name: [] for name in makers}
        names = list(makers)
        for i in range(-3, rounds):  # 3 warm-up rounds (the first builds tool schemas)
            for name in names[i % len(names) :] + names[: i % len(names)]:
                started = time.perf_counter()
                made = makers[name]()
                elapsed = time.perf_counter() - started
                del made
                if i >= 0:
                    samples[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["vsh.Runtime.open"]
    print(f"median wall time to open a toolset on a workspace, {rounds} rounds each")
    for name, value in medians.items():
        print(f"  {name:32s} {value * 1000:7.3f} ms   {value / base:5.3f}x raw")
    ours = medians["vsh_ai VshToolset"] / medians["vsh.pydantic_ai VshCapability"]
    print(f"  ours / upstream (open):            {ours:5.3f}x")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
