"""What durability costs: one agent turn that appends a line, plain vs under DBOS.

    .venv/bin/python benchmarks/durable.py [--runs 40]

Each turn is a FunctionModel agent calling ``vsh_run`` once (VSH policy auto-approves
the append) and answering. Variants:

- ``plain, journal off``: ``VshToolset(journal=False)``, no DBOS;
- ``plain, journal on``: the default toolset (the commit journal's fsynced record);
- ``DBOS workflow``: the default toolset with ``DBOSDurability`` inside a
  ``@DBOS.workflow`` (SQLite in a temporary folder, or ``VSH_AI_DBOS_DATABASE_URL``);
- ``DBOSAgent``: the same turn under the deprecated ``DBOSAgent`` wrapper (its own run
  workflow; the call key comes from the workflow id and the recorded model response).

Prints the median and p95 milliseconds per turn. Nothing is asserted: this is a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent, DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshToolset
from vsh_ai.dbos import dbos_config

PROGRAM = "p = '/workspace/log.txt'\nvsh_write(p, vsh_read(p) + 'line\\n')\n"


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    done = any(
        isinstance(part, ToolReturnPart)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )
    if done:
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("vsh_run", {"code": PROGRAM, "intent": "append"})])


def agent(workspace: Path, name: str, *, journal: bool, durable: bool) -> Agent[None, Any]:
    workspace.mkdir(parents=True)
    (workspace / "log.txt").write_text("")
    toolset = VshToolset(workspace, tools=["vsh_run"], journal=journal)
    capabilities = [DBOSDurability()] if durable else []
    return Agent(FunctionModel(respond), name=name, toolsets=[toolset], capabilities=capabilities)


AGENTS: dict[str, Agent[None, Any]] = {}


@DBOS.workflow(name="vsh-ai-benchmark-turn")
async def turn(name: str) -> str:
    result = await AGENTS[name].run("append a line")
    return str(result.output)


async def measure(label: str, runs: int, once: Any) -> None:
    await once()  # warm up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await once()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
    print(f"{label:<34} median {statistics.median(times):7.1f} ms   p95 {p95:7.1f} ms")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        plain_off = agent(root / "off", "plain_off", journal=False, durable=False)
        plain_on = agent(root / "on", "plain_on", journal=True, durable=False)
        AGENTS["durable"] = agent(root / "durable", "durable", journal=True, durable=True)
        with warnings.catch_warnings():  # deprecated, measured while it ships
            warnings.simplefilter("ignore")
            legacy = DBOSAgent(agent(root / "legacy", "legacy", journal=True, durable=False))
        config = dbos_config("vsh-ai-benchmark", log_level="WARNING", directory=root)
        if os.environ.get("VSH_AI_DBOS_DATABASE_URL"):
            config = dbos_config("vsh-ai-benchmark", log_level="WARNING")
        DBOS(config=config)
        DBOS.launch()
        try:
            url = str(config["system_database_url"])
            where = url if url.startswith("sqlite") else "$VSH_AI_DBOS_DATABASE_URL"
            print(f"{runs} turns each; DBOS system database: {where}")

            async def durable_turn() -> None:
                with SetWorkflowID(f"bench-{uuid.uuid4()}"):
                    await turn("durable")  # called directly: runs inline, no result polling

            await measure("plain agent, journal off", runs, lambda: plain_off.run("append"))
            await measure("plain agent, journal on", runs, lambda: plain_on.run("append"))

            async def legacy_turn() -> None:
                with SetWorkflowID(f"bench-legacy-{uuid.uuid4()}"):
                    await legacy.run("append")

            await measure("DBOS workflow, journal on", runs, durable_turn)
            await measure("DBOSAgent, journal on", runs, legacy_turn)
        finally:
            DBOS.destroy()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    asyncio.run(main(parser.parse_args().runs))
