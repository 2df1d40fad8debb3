"""How much does deterministic review cost next to the VSH transaction it judges?

Prints, from one run:
  * the median VSH transaction time for a one-file change (preview + hooked commit),
    and the median rule-set evaluation time on that change's evidence (target: < 2%);
  * rule-set evaluation time for 1, 10, 100 and 1,000 changed files (target: linear,
    under 20 ms at 1,000).

    .venv/bin/python benchmarks/rules.py
"""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import vsh

from vsh_ai import Evidence, as_hook
from vsh_ai._judge_files import load_judge
from vsh_ai._simulate import simulate
from vsh_ai.rules import AllowedChanges, Completeness, DeniedChanges, Limits, NoSecrets, RuleSet

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
ROOT = Path(__file__).resolve().parents[1]
_LOADED = load_judge(ROOT / "judges" / "service-config.toml", skip_llm=True)
assert isinstance(_LOADED, RuleSet)
SERVICE: RuleSet = _LOADED
PATHS_ONLY = RuleSet(
    [
        Completeness(),
        AllowedChanges(globs=("config/**",)),
        DeniedChanges(globs=("config/secrets/**",)),
        NoSecrets(),
        Limits(max_touched_paths=5000),
    ],
    id="paths-and-secrets",
)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def evaluate_ms(rules: RuleSet, evidence: Evidence, repeats: int) -> float:
    """Median time of one evaluation on fresh evidence (no cached helpers carried over).

    Garbage collection is paused while timing, as ``timeit`` does.
    """
    copies = [Evidence.model_validate(evidence.model_dump()) for _ in range(repeats)]
    samples = []
    gc.collect()
    gc.disable()
    try:
        for copy in copies:
            started = time.perf_counter()
            verdict = rules.evaluate(copy)
            samples.append(time.perf_counter() - started)
    finally:
        gc.enable()
    assert verdict.decision in ("approve", "review", "reject"), verdict
    return median_ms(samples)


async def transaction_ms(root: Path, runs: int) -> tuple[float, Evidence]:
    """Median preview + hooked commit of a one-file config change (a trivial approving hook)."""
    (root / "config").mkdir(parents=True)
    (root / "config" / "app.toml").write_text("[server]\nworkers = 0\ntls = true\n")
    events: list[vsh.RequestEvent] = []

    async def approve(event: vsh.RequestEvent) -> vsh.HookDecision:
        events.append(event)
        return vsh.HookDecision.approve("benchmark")

    runtime = vsh.HookedRuntime.open(
        root, hook_handler=approve, policy="strict", review_content_bytes=1 << 20
    )
    samples = []
    for n in range(1, runs + 1):
        code = (
            "p = '/workspace/config/app.toml'\n"
            f"vsh_write(p, vsh_read(p).replace('workers = {n - 1}', 'workers = {n}'))"
        )
        started = time.perf_counter()
        receipt = await runtime.apreview(vsh.RunRequest(code, intent=f"workers {n}"))
        resolution = await runtime.acommit(receipt.transaction)
        samples.append(time.perf_counter() - started)
        assert resolution.receipt.state == "committed"
    return median_ms(samples), Evidence.from_event(events[-1])


async def many_files(root: Path, count: int) -> Evidence:
    for i in range(count):
        path = root / "config" / f"svc{i:04d}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"[server]\nworkers = {i}\ntls = true\n")
    code = (
        f"for i in range({count}):\n"
        "    p = f'/workspace/config/svc{i:04d}.toml'\n"
        "    vsh_write(p, vsh_read(p).replace('workers', 'max_workers'))"
    )
    budget = vsh.ExecutionBudget(max_duration_ms=60_000, max_os_calls=100_000)
    result = await simulate(root, code, policy="strict", budget=budget)
    assert result.evidence is not None, result.deny_reason
    assert len(result.evidence.changes) == count
    return result.evidence


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tx_ms, evidence = await transaction_ms(Path(tmp) / "one", runs=40)
        hook = as_hook(SERVICE)
        copies = [Evidence.model_validate(evidence.model_dump()) for _ in range(200)]
        started = time.perf_counter()
        for copy in copies:
            await hook.decide(copy)
        hook_ms = (time.perf_counter() - started) / len(copies) * 1000
        print("One-file config change (strict policy, content captured)")
        print(f"  VSH transaction (preview + hooked commit), median: {tx_ms:8.3f} ms")
        for rules in (SERVICE, PATHS_ONLY):
            ms = evaluate_ms(rules, evidence, 300)
            print(
                f"  rule set {rules.id:<18} ({len(rules.rules):2d} rules), median: {ms:8.3f} ms"
                f"  = {ms / tx_ms:6.2%} of the transaction (target < 2%)"
            )
        print(f"  full hook decision (as_hook: span, checks, rules), mean: {hook_ms:6.3f} ms")

        print("\nScaling with changed files (median evaluation time)")
        print(
            f"  {'files':>6} {SERVICE.id:>16} {'per file':>10} {PATHS_ONLY.id:>18} {'per file':>10}"
        )
        for count in (1, 10, 100, 1000):
            evidence = await many_files(Path(tmp) / f"n{count}", count)
            repeats = 50 if count < 1000 else 15
            full = evaluate_ms(SERVICE, evidence, repeats)
            light = evaluate_ms(PATHS_ONLY, evidence, repeats)
            print(
                f"  {count:>6} {full:>13.3f} ms {full / count * 1000:>7.1f} us"
                f" {light:>15.3f} ms {light / count * 1000:>7.1f} us"
            )
        print("  (targets: linear growth, under 20 ms at 1,000 files)")


if __name__ == "__main__":
    anyio.run(main)
