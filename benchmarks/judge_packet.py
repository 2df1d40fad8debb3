"""LLM judge costs: packet build time, and throughput under a concurrency limit.

    .venv/bin/python benchmarks/judge_packet.py

Prints the median packet build time for a 1-file change and for a 128 KiB evidence
set (8 files of 8 KiB, each edited: 64 KiB before + 64 KiB after captured), cold and
right after a rule set decided the same evidence (its secret findings, remembered by
content digest, serve the packet's redaction), then runs
100 concurrent decisions against a FunctionModel that sleeps 200 ms and reports the
throughput as a fraction of the ideal set by ``max_concurrency``
(ideal wall time = ceil(100 / limit) x 200 ms).
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence
from vsh_ai._judge_files import load_judge
from vsh_ai._simulate import simulate
from vsh_ai.analysis import _secrets
from vsh_ai.llm import LLMCommitJudge, SharingPolicy, build_packet
from vsh_ai.rules import RuleSet

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

SHARE_ALL = SharingPolicy(share=("**",))
DECISIONS = 100
MODEL_LATENCY = 0.2


def write_files(root: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = Path(root, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


async def evidence_for(files: dict[str, str], code: str) -> Evidence:
    with tempfile.TemporaryDirectory() as tmp:
        write_files(tmp, files)
        simulation = await simulate(tmp, code, intent="benchmark", policy="strict")
    assert simulation.evidence is not None
    return simulation.evidence


def median_ms(
    evidence: Evidence, max_bytes: int, repeat: int, *, after_rules: RuleSet | None = None
) -> tuple[float, int]:
    """Median ms of building the packet on a fresh copy of ``evidence`` (as each pipeline
    stage gets one), with no secret findings remembered; ``after_rules``: first decided by
    that rule set on its own copy, as in a rules-then-LLM pipeline (the packet's redaction
    then reuses the findings the rules made)."""
    times = []
    size = 0
    text = evidence.model_dump_json()
    for _ in range(repeat):
        _secrets.clear_cache()
        if after_rules is not None:
            after_rules.evaluate(Evidence.model_validate_json(text))
        copy = Evidence.model_validate_json(text)
        started = time.perf_counter()
        size = build_packet(copy, SHARE_ALL, max_bytes).size
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, size


async def slow_reviewer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    await anyio.sleep(MODEL_LATENCY)
    request = messages[0]
    assert isinstance(request, ModelRequest)
    report = {"decision": "approve", "reason": "ok", "cited": ["C1"]}
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, report)])


async def throughput(evidence: Evidence, limit: int) -> tuple[float, float, int]:
    judge = LLMCommitJudge(
        FunctionModel(slow_reviewer),
        sharing=SHARE_ALL,
        max_concurrency=limit,
        capacity_wait=120,
        timeout=120,
    )
    approved = 0

    async def decide() -> None:
        nonlocal approved
        verdict = await judge.review(evidence)
        approved += verdict.decision == "approve"

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(DECISIONS):
            group.start_soon(decide)
    wall = time.perf_counter() - started
    ideal = math.ceil(DECISIONS / limit) * MODEL_LATENCY
    return wall, ideal, approved


async def main() -> None:
    small = await evidence_for(
        {"app.toml": "[server]\nport = 443\nworkers = 4\n"},
        "p = '/workspace/app.toml'\nvsh_write(p, vsh_read(p).replace('4\\n', '8\\n'))",
    )
    lines = "\n".join(f"setting_{i:04d} = {i % 10}" for i in range(600))[: 8 * 1024 - 1] + "\n"
    files = {f"conf/part{i:02d}.toml": lines for i in range(8)}
    edit_all = (
        "for i in range(8):\n"
        "    p = f'/workspace/conf/part{i:02d}.toml'\n"
        "    vsh_write(p, vsh_read(p).replace('= 1', '= 7'))\n"
    )
    large = await evidence_for(files, edit_all)
    content = sum(len(c.data) for c in large.contents)
    rules = load_judge("secrets-hygiene", skip_llm=True)
    assert isinstance(rules, RuleSet)
    small_ms, small_size = median_ms(small, 65536, 200)
    large_ms, large_size = median_ms(large, 4 << 20, 20)
    small_shared, _ = median_ms(small, 65536, 200, after_rules=rules)
    large_shared, _ = median_ms(large, 4 << 20, 20, after_rules=rules)
    print(f"packet build, 1-file change:           {small_ms:7.3f} ms  ({small_size} B packet)")
    print(
        f"packet build, {content // 1024} KiB evidence set:      {large_ms:7.3f} ms  "
        f"({large_size // 1024} KiB packet, {len(large.changes)} changes)"
    )
    print(
        f"  after the rules decided (secret findings reused): {small_shared:7.3f} ms and "
        f"{large_shared:7.3f} ms"
    )
    for limit in (4, 16):
        wall, ideal, approved = await throughput(small, limit)
        print(
            f"{DECISIONS} concurrent decisions, limit {limit:2d}, model 200 ms: "
            f"{wall:5.2f} s (ideal {ideal:4.2f} s) -> {ideal / wall:5.1%} of ideal, "
            f"{DECISIONS / wall:5.1f} decisions/s, {approved} approved"
        )


if __name__ == "__main__":
    anyio.run(main)
