"""Eval throughput: bundled suites with rule judges, the same with every mutant (one process
and two worker processes), and a slow (200 ms) model judge at 16-way.

Run: .venv/bin/python benchmarks/evals.py
Prints runs per second, and for the model judge the fraction of the ideal wall time
(model calls x 200 ms / 16 concurrent slots, plus the rules-only time for the VSH work).
The mutant target: bundled suites + mutants in under 60 s on a 2-core machine.
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai.evals import EvalOptions, find_suites, run_evals
from vsh_ai.evals._models import prompt_text, refs_in
from vsh_ai.llm import LLMCommitJudge, SharingPolicy

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
DELAY_S = 0.2
CONCURRENCY = 16


async def rules_only() -> tuple[int, float]:
    started = time.perf_counter()
    report = await run_evals(find_suites(), EvalOptions(concurrency=CONCURRENCY, workers=1))
    return report.overall.runs, time.perf_counter() - started


async def with_mutants(workers: int) -> tuple[int, int, int, float]:
    """(case runs, mutant runs scored, mutants skipped, seconds) for all bundled suites."""
    started = time.perf_counter()
    report = await run_evals(
        find_suites(), EvalOptions(concurrency=CONCURRENCY, mutants=True, workers=workers)
    )
    elapsed = time.perf_counter() - started
    assert report.mutants is not None
    return report.overall.runs, report.mutants.runs, report.mutant_skipped, elapsed


async def slow_model() -> tuple[int, int, float]:
    calls = 0

    async def respond(messages: list[Any], info: AgentInfo) -> Any:
        nonlocal calls
        calls += 1
        await anyio.sleep(DELAY_S)
        from pydantic_ai.messages import ModelResponse, ToolCallPart

        args = {
            "decision": "review",
            "reason": "benchmark",
            "cited": refs_in(prompt_text(messages)),
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    judge = LLMCommitJudge(
        FunctionModel(respond, model_name="sleepy"),
        sharing=SharingPolicy(share=("**",)),
        max_concurrency=CONCURRENCY,
    )
    started = time.perf_counter()
    report = await run_evals(find_suites(), EvalOptions(judge=judge, concurrency=CONCURRENCY))
    return report.overall.runs, calls, time.perf_counter() - started


async def main() -> None:
    await rules_only()  # warm up imports and caches
    runs, elapsed = await rules_only()
    print(f"rule judges: {runs} cases in {elapsed:.2f} s = {runs / elapsed:.0f} cases/s")
    for workers in (1, 2):
        cases, mutants, skipped, took = await with_mutants(workers)
        total = cases + mutants + skipped
        print(
            f"rule judges + mutants, {workers} process(es): {cases} cases + {mutants} mutants "
            f"scored ({skipped} skipped) in {took:.2f} s = {total / took:.0f} runs/s "
            f"({'under' if took < 60 else 'OVER'} the 60 s target; load avg "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
        )
    runs, calls, slow_elapsed = await slow_model()
    model_ideal = calls * DELAY_S / CONCURRENCY
    print(
        f"200 ms FunctionModel judge, concurrency {CONCURRENCY}: {runs} cases ({calls} model "
        f"calls) in {slow_elapsed:.2f} s = {runs / slow_elapsed:.1f} cases/s"
    )
    print(
        f"  ideal (model time only) {model_ideal:.2f} s -> "
        f"{model_ideal / slow_elapsed:.0%} of ideal; "
        f"ideal incl. rules-only VSH time {model_ideal + elapsed:.2f} s -> "
        f"{(model_ideal + elapsed) / slow_elapsed:.0%} of ideal"
    )


if __name__ == "__main__":
    anyio.run(main)
