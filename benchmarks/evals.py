"""Eval throughput, whole process: `vsh-ai eval` on the bundled suites (cases/s), the same
with mutants in one and two worker processes (runs/s), the start-up of the light commands,
and, in process, a slow (200 ms) model judge at 16-way.

Run: .venv/bin/python benchmarks/evals.py [--baseline DIR] [--tree DIR] [--rounds N] [--no-model]
Every command runs as its own `python -m vsh_ai` process (imports included), `--rounds`
times (default 3), the median reported with its CPU time (user + system, children
included), after one warm-up run that is not counted (bytecode, the schema cache).
`--baseline DIR` runs each command from another checkout too (`PYTHONPATH=DIR`,
e.g. `git worktree add /tmp/old HEAD~5`), interleaved round by round, and prints the ratio
new / old: on a busy machine wall times move together, the ratio much less. Targets:
`eval` >= 100 cases/s, `eval --mutants` >= 200 runs/s, `--version` <= 0.3 s, `suites`,
`judges`, `schema` < 0.5 s. The load average is printed: above the CPU count, wall times
measure the machine, not vsh-ai.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DELAY_S = 0.2
CONCURRENCY = 16

LIGHT: list[tuple[str, list[str], float]] = [
    ("--version", ["--version"], 0.3),
    ("suites", ["suites"], 0.5),
    ("judges", ["judges"], 0.5),
    ("schema suite", ["schema", "suite"], 0.5),
    ("schema judge", ["schema", "judge"], 0.5),
]


def run_cli(argv: list[str], tree: Path) -> tuple[float, float, dict[str, Any] | None]:
    """(wall s, CPU s, the --json report if one was asked for) of one `python -m vsh_ai`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "LOGFIRE_IGNORE_NO_CONFIG": "1"}
    # bytecode is cached as on any install (with it off, every edited module recompiles)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "r.json"
        args = [*argv, "--json", str(report)] if argv[0] == "eval" else argv
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "vsh_ai", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            cwd=folder,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        data = json.loads(report.read_text()) if report.is_file() else None
    return wall, cpu, data


def runs_of(report: dict[str, Any] | None) -> int:
    if report is None:
        return 0
    mutants = report.get("mutants") or {}
    skipped = sum(len((s.get("mutants") or {}).get("skipped", [])) for s in report["suites"])
    return int(report["overall"]["runs"]) + int(mutants.get("runs", 0)) + skipped


def measure(argv: list[str], trees: list[Path], rounds: int) -> list[tuple[float, float, int]]:
    """Per tree: median wall, median CPU, runs; trees interleaved round by round."""
    walls: list[list[float]] = [[] for _ in trees]
    cpus: list[list[float]] = [[] for _ in trees]
    runs = [0 for _ in trees]
    for tree in trees:  # warm-up, not counted: bytecode and the schema cache get written
        run_cli(argv, tree)
    for _ in range(rounds):
        for index, tree in enumerate(trees):
            wall, cpu, report = run_cli(argv, tree)
            walls[index].append(wall)
            cpus[index].append(cpu)
            runs[index] = runs_of(report)
    return [
        (statistics.median(w), statistics.median(c), n)
        for w, c, n in zip(walls, cpus, runs, strict=True)
    ]


def line(name: str, figures: list[tuple[float, float, int]], unit: str, target: float) -> str:
    wall, cpu, runs = figures[0]
    if unit == "s":
        text = f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU (target <= {target:g} s)"
    else:
        rate = runs / wall if wall else 0.0
        text = (
            f"{name}: {runs} runs in {wall:.2f} s wall = {rate:.0f} {unit}, {cpu:.2f} s CPU "
            f"= {runs / cpu if cpu else 0:.0f} {unit.split('/')[0]}/CPU-s "
            f"(target >= {target:g} {unit}: {rate / target:.2f}x)"
        )
    if len(figures) > 1:
        old_wall, old_cpu, old_runs = figures[1]
        text += (
            f"; baseline {old_wall:.2f} s wall, {old_cpu:.2f} s CPU"
            + (f", {old_runs} runs" if unit != "s" else "")
            + f" -> new/old wall {wall / old_wall:.2f}, CPU {cpu / old_cpu:.2f}"
        )
    return text


async def slow_model() -> tuple[int, int, float, float]:
    """(cases, model calls, seconds, rules-only seconds) for a 200 ms model at 16-way."""
    import anyio
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from vsh_ai.evals import EvalOptions, find_suites, run_evals
    from vsh_ai.evals._models import prompt_text, refs_in
    from vsh_ai.llm import LLMCommitJudge, SharingPolicy

    calls = 0

    async def respond(messages: list[Any], info: AgentInfo) -> Any:
        nonlocal calls
        calls += 1
        await anyio.sleep(DELAY_S)
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
    rules = await run_evals(find_suites(), EvalOptions(concurrency=CONCURRENCY, workers=1))
    rules_s = time.perf_counter() - started
    started = time.perf_counter()
    report = await run_evals(find_suites(), EvalOptions(judge=judge, concurrency=CONCURRENCY))
    del rules
    return report.overall.runs, calls, time.perf_counter() - started, rules_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-model", action="store_true", help="skip the slow-model run")
    args = parser.parse_args()
    trees = [args.tree.resolve(), *([args.baseline.resolve()] if args.baseline else [])]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, argv, target in LIGHT:
        print(line(f"vsh-ai {name}", measure(argv, trees, args.rounds), "s", target))
    print(line("vsh-ai eval", measure(["eval"], trees, args.rounds), "cases/s", 100))
    for workers in (1, 2):
        argv = ["eval", "--mutants", "--workers", str(workers)]
        figures = measure(argv, trees, max(1, args.rounds - 1))
        print(line(f"vsh-ai eval --mutants --workers {workers}", figures, "runs/s", 200))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if not args.no_model:
        import anyio

        cases, calls, took, rules_s = anyio.run(slow_model)
        ideal = calls * DELAY_S / CONCURRENCY
        print(
            f"200 ms FunctionModel judge, concurrency {CONCURRENCY}: {cases} cases ({calls} "
            f"model calls) in {took:.2f} s; ideal (model time only) {ideal:.2f} s -> "
            f"{ideal / took:.0%}; incl. the rules-only run's {rules_s:.2f} s -> "
            f"{(ideal + rules_s) / took:.0%} of ideal"
        )


if __name__ == "__main__":
    main()
