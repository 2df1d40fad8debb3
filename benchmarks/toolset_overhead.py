"""Median wall time of one ``vsh_run`` write through our toolset vs raw VSH vs vsh.pydantic_ai.

Run: ``.venv/bin/python benchmarks/toolset_overhead.py [iterations]``. Each variant gets
its own temporary workspace; iterations interleave the variants (in rotating order) so
drift hits all alike. Every program writes different content (no duplicate transactions)
and auto-approves under the balanced policy, so each call is preview + durable commit.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

import vsh
import vsh.pydantic_ai  # the comparison: imported here and nowhere else
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage

from vsh_ai._toolset import VshToolset


def program(i: int) -> tuple[str, str]:
    return f"vsh_write('/workspace/out.txt', 'content {i}\\n')\n'ok'", f"write iteration {i}"


def workspace(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir()
    (path / "out.txt").write_text("start\n")
    return path


async def tool_caller(toolset: AbstractToolset[Any]) -> Callable[[int], Awaitable[str]]:
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    tools = await toolset.get_tools(ctx)
    tool = tools["vsh_run"]

    async def call(i: int) -> str:
        code, intent = program(i)
        result = await toolset.call_tool("vsh_run", {"code": code, "intent": intent}, ctx, tool)
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
        variants: dict[str, Callable[[int], Awaitable[str]]] = {
            "raw vsh.Runtime.run": raw_call,
            "vsh_ai VshToolset.call_tool": await tool_caller(VshToolset(workspace(root, "ours"))),
            "vsh.pydantic_ai VshCapability": await tool_caller(upstream),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for i in range(-5, iterations):  # 5 warm-up rounds
            order = names[i % 3 :] + names[: i % 3]
            for name in order:
                started = time.perf_counter()
                state = await variants[name](i + 10)
                elapsed = time.perf_counter() - started
                assert state == "committed", (name, state)
                if i >= 0:
                    samples[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["raw vsh.Runtime.run"]
    print(f"median wall time per committed vsh_run write, {iterations} iterations each")
    for name, value in medians.items():
        print(f"  {name:32s} {value * 1000:7.3f} ms   {value / base:5.3f}x raw")
    ours = medians["vsh_ai VshToolset.call_tool"]
    theirs = medians["vsh.pydantic_ai VshCapability"]
    print(f"  ours / upstream: {ours / theirs:5.3f}x")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
