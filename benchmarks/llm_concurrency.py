"""An LLM judge through the toolset: achieved throughput as a fraction of the concurrency ideal.

    .venv/bin/python benchmarks/llm_concurrency.py [decisions] [concurrency] [rounds]

``decisions`` (default 100) ``vsh_run`` calls, ``concurrency`` (default 16) at once, go
through one :class:`~vsh_ai.toolset.VshToolset` whose judge is an
:class:`~vsh_ai.llm.LLMCommitJudge` configured for ``concurrency`` and backed by a
FunctionModel that answers after 200 ms. Each call edits its own folder's file under the
strict policy (so every call is judged, and no two calls share a folder node, which
would make them stale), is approved and commits. The ideal wall time is
``ceil(decisions / concurrency) x 200 ms``: what the model's latency allows when nothing
else costs anything. Prints achieved / ideal per round and the median over ``rounds``
(default 3; each round on a fresh workspace), and the CPU time per decision.

The ideal ignores VSH's own cost. Each round also measures that floor: the same edits as
plain ``vsh.Runtime.run`` AUTO commits from ``concurrency`` threads, no hook, no judge
(VSH does about 28 fsyncs a commit; on a slow disk 100 commits take longer than the
model's ideal). The last line compares the toolset with ``max(ideal, floor)``: what is
reachable at all on this machine.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import vsh
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

from vsh_ai.llm import LLMCommitJudge, SharingPolicy
from vsh_ai.toolset import VshToolset

MODEL_LATENCY = 0.2
SHARE_ALL = SharingPolicy(share=("**",))
CONFIG = "[server]\nport = 443\nworkers = 4\nname = 'app'\n"


async def slow_reviewer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Approve after ``MODEL_LATENCY``, citing every ref the packet requires."""
    await anyio.sleep(MODEL_LATENCY)
    text = str(getattr(messages[0], "parts", [""])[-1].content)  # type: ignore[attr-defined]
    required = next(
        (line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("REQUIRED REFS")),
        "none",
    )
    cited = [] if required == "none" else required.split(", ")
    report = {"decision": "approve", "reason": "ok", "cited": cited}
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, report)])


def program(i: int) -> tuple[str, str]:
    path = f"/workspace/d{i:03d}/app.toml"
    return f"p = '{path}'\nvsh_write(p, vsh_read(p).replace('4\\n', '{i + 5}\\n'))", f"edit {i}"


def make_folders(root: Path, decisions: int) -> None:
    """One folder per decision, each with its own config file (no shared folder node)."""
    for i in range(decisions):
        folder = root / f"d{i:03d}"
        folder.mkdir(parents=True)
        (folder / "app.toml").write_text(CONFIG)


async def one_round(root: Path, decisions: int, concurrency: int) -> tuple[float, float, int]:
    make_folders(root, decisions)
    judge = LLMCommitJudge(
        FunctionModel(slow_reviewer),
        sharing=SHARE_ALL,
        max_concurrency=concurrency,
        capacity_wait=120,
        timeout=120,
    )
    toolset = VshToolset(root, policy="strict", judge=judge)
    callers = anyio.CapacityLimiter(concurrency)
    committed = 0

    async def call(i: int) -> None:
        nonlocal committed
        async with callers:
            result = await toolset.vsh_run(*program(i))
        committed += result.state == "committed"

    cpu = time.process_time()
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for i in range(decisions):
            group.start_soon(call, i)
    wall = time.perf_counter() - started
    return wall, time.process_time() - cpu, committed


def vsh_floor(root: Path, decisions: int, concurrency: int, *, serial: bool = False) -> float:
    """Wall time of the same edits as plain AUTO commits from ``concurrency`` threads.

    ``serial``: each a preview and a commit, every native call under one lock, as the
    toolset must run them (VSH 0.6.0 fails with recovery and snapshot errors when two
    threads preview and commit on one workspace at once: toolset/_driver.py)."""
    from concurrent.futures import ThreadPoolExecutor

    make_folders(root, decisions)
    runtime = vsh.Runtime.open(root)
    lock = threading.Lock()

    def commit(i: int) -> str:
        code, intent = program(i)
        if serial:
            with lock:
                receipt = runtime.preview(vsh.RunRequest(code, intent=intent))
            with lock:
                return runtime.commit(receipt.transaction, int(time.time() * 1000)).state
        for _ in range(10):  # another thread's commit can move a folder under a capture
            try:
                return runtime.run(vsh.RunRequest(code, intent=intent, mode=vsh.RunMode.AUTO)).state
            except vsh.VshRuntimeError as error:
                if not any(m in str(error) for m in ("host node changed", "capture node")):
                    raise
        raise RuntimeError(f"edit {i}: the capture kept failing")

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        states = list(pool.map(commit, range(decisions)))
    assert states.count("committed") == decisions, states
    return time.perf_counter() - started


async def main(decisions: int, concurrency: int, rounds: int) -> None:
    ideal = math.ceil(decisions / concurrency) * MODEL_LATENCY
    with tempfile.TemporaryDirectory() as tmp:
        await one_round(Path(tmp, "warmup"), concurrency, concurrency)
        ratios, reachable = [], []
        for r in range(rounds):
            wall, cpu, committed = await one_round(Path(tmp, f"r{r}"), decisions, concurrency)
            assert committed == decisions, f"only {committed} of {decisions} committed"
            floor = vsh_floor(Path(tmp, f"f{r}"), decisions, concurrency)
            serial = vsh_floor(Path(tmp, f"s{r}"), decisions, concurrency, serial=True)
            ratios.append(ideal / wall)
            reachable.append(max(ideal, floor) / wall)
            print(
                f"round {r}: {decisions} decisions, {concurrency} at once, model 200 ms: "
                f"{wall:5.2f} s (ideal {ideal:4.2f} s) -> {ideal / wall:5.1%} of ideal; "
                f"CPU {cpu / decisions * 1000:5.2f} ms per decision; raw VSH floor "
                f"{floor:4.2f} s, one native call at a time {serial:4.2f} s"
            )
    print(f"achieved / ideal (median of {rounds}): {statistics.median(ratios):5.1%}")
    print(f"achieved / max(ideal, raw VSH floor) (median): {statistics.median(reachable):5.1%}")
    print(
        "(each decision's VSH work is serialised per workspace; a round is bounded below by "
        "the serialised floor plus what the model's waits cannot hide)"
    )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    anyio.run(main, *(args + [100, 16, 3][len(args) :]))
