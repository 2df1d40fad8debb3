"""How much does deterministic review cost next to the VSH transaction it judges?

Real VSH evidence is built once per workload (``vsh_ai._simulate.simulate`` on a temporary
workspace, never committed); each timed evaluation then gets a fresh copy of it and cold
analysis caches (parsed config trees, flattened keys, net changes), as a new decision
does. Times are the median of several runs, both CPU time of the deciding thread
(``time.thread_time``: what the review itself costs on a loaded machine, without VSH's own
threads) and wall time.

Prints:
  * (a) paths + secrets at 1, 10, 100 and 1,000 changed text files: denied_changes,
    protected_reads, no_secrets and an allow_paths allowance (target: < 20 ms at 1,000);
  * (b) config allowances at 1, 10, 100 and 1,000 changed TOML files: an allow_config
    allowance alone, and the shipped service-config judge with its allowance widened to
    those files (target for allowances: < 50 ms at 1,000);
  * (c) one-file changes against one VSH transaction (preview + prepare + hook + commit
    through ``vsh.HookedRuntime``; target: < 2%), and the full ``as_hook`` decision;
  * where the time goes at 1,000 files (each denial, the secret-read scan, net changes,
    the claims).

    .venv/bin/python benchmarks/rules.py            # everything (3-4 min on a loaded 2-core box)
    .venv/bin/python benchmarks/rules.py --quick    # fewer runs, 1 and 1,000 files only
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import vsh

from vsh_ai import Evidence, as_hook
from vsh_ai._judge_files import load_judge
from vsh_ai._simulate import simulate
from vsh_ai.analysis import _config, _secrets
from vsh_ai.rules import (
    AllowConfig,
    AllowPaths,
    DeniedChanges,
    KeyConstraint,
    NoRefusedAccess,
    NoSecrets,
    ProtectedReads,
    RuleSet,
)
from vsh_ai.rules._base import net_changes, secret_reads

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
ROOT = Path(__file__).resolve().parents[1]

# The protected set the shipped judges use (keys, environment files, credential stores).
PROTECTED = (
    "**/.env", "**/.env.*", "**/*.env", "**/.envrc", "**/id_{rsa,dsa,ecdsa,ed25519}*",
    "**/*.pem", "**/*.key", "**/*.p12", "**/*.pfx", "**/*credentials*",
    "**/*service-account*.json", "**/.netrc", "**/.npmrc", "**/.pypirc", "**/.ssh/**",
    "**/.pgpass", "**/*pgpass*", "**/.my.cnf", "**/.git-credentials",
    "**/.docker/config.json", "**/.kube/config", "**/*.keystore", "**/*.jks",
    "**/.htpasswd", "**/*.kdbx", "**/.aws/**", "**/secrets/**",
)  # fmt: skip

PATHS_AND_SECRETS = RuleSet(
    [
        NoRefusedAccess(),
        DeniedChanges(id="protected-files", globs=(*PROTECTED, ".git/**")),
        ProtectedReads(id="protected-reads", globs=PROTECTED, action="reject"),
        NoSecrets(),
        AllowPaths(id="docs", paths=("docs/**",), kinds=("create", "modify")),
    ],
    id="paths-and-secrets",
)

CONFIG_ALLOWANCE = RuleSet(
    [
        AllowConfig(
            id="operational-values",
            paths=("config/**/*.toml",),
            may_change={
                "**.*workers": KeyConstraint(type="integer", min=1, max=64),
                "**.*timeout_s": KeyConstraint(type="integer", min=1, max=3600),
                "features.*": KeyConstraint(type="boolean", may_add=True),
            },
        )
    ],
    id="config-allowance",
)


def _service_config() -> RuleSet:
    """The shipped service-config judge, its allowance widened to every config/**.toml."""
    loaded = load_judge(ROOT / "judges" / "service-config.toml", skip_llm=True)
    assert isinstance(loaded, RuleSet)
    rules = [
        r.model_copy(update={"paths": ("config/**/*.toml",)}) if isinstance(r, AllowConfig) else r
        for r in loaded.rules
    ]
    return RuleSet(rules, on_unproven=loaded.on_unproven, id="service-config*")


SERVICE_CONFIG = _service_config()


# -- timing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    cpu_ms: float
    wall_ms: float
    decision: str

    def __str__(self) -> str:
        return f"{self.cpu_ms:9.3f} {self.wall_ms:9.3f}"


# Result caches that carry analysis from one decision to the next (compiled patterns are
# not listed: they stay warm, as in a long-running process). Per-evidence memos need no
# clearing: every timed decision gets a fresh copy of the evidence. Caches of earlier
# versions are listed too (absent ones are skipped), so a run on an older checkout is cold
# in the same way.
_RESULT_CACHES = (
    (_config, "_PARSED"),
    (_config, "_FLAT"),
    (_secrets, "_FOUND"),
)


def cold_caches() -> None:
    """Forget the analysis results of earlier decisions, as a fresh decision has none."""
    for module, name in _RESULT_CACHES:
        cache = getattr(module, name, None)
        if cache is not None:
            cache.clear()
    clear = getattr(_secrets, "clear_cache", None)
    if clear is not None:
        clear()  # secret findings, remembered by content digest


def fresh(evidence: Evidence, count: int) -> list[Evidence]:
    """Independent copies, so no cached property or id()-keyed cache carries over."""
    text = evidence.model_dump_json()
    return [Evidence.model_validate_json(text) for _ in range(count)]


def timed(function: Callable[[Evidence], Any], evidence: Evidence, repeats: int) -> Timing:
    """Median CPU and wall time of ``function`` on fresh evidence with cold caches.

    Garbage collection is paused while timing, as ``timeit`` does.
    """
    copies = fresh(evidence, repeats)
    cpu: list[float] = []
    wall: list[float] = []
    result: Any = None
    for copy in copies:
        cold_caches()
        gc.collect()
        gc.disable()
        try:
            started, started_cpu = time.perf_counter(), time.thread_time()
            result = function(copy)
            cpu.append(time.thread_time() - started_cpu)
            wall.append(time.perf_counter() - started)
        finally:
            gc.enable()
    decision = getattr(result, "decision", "-")
    return Timing(statistics.median(cpu) * 1000, statistics.median(wall) * 1000, decision)


# -- evidence -------------------------------------------------------------------------

BUDGET = vsh.ExecutionBudget(max_duration_ms=120_000, max_os_calls=200_000)


def _doc(i: int) -> str:
    """A small markdown page (about 600 bytes): prose, a list, a code block, a link."""
    return (
        f"# Service {i:04d}\n\n"
        f"Service {i} handles requests for tenant group {i % 17}. It is deployed by the\n"
        "release pipeline and owned by the platform team; see the runbook for on-call.\n\n"
        "## Settings\n\n"
        f"- workers: {i % 32 + 1}\n- timeout: 30 s\n- region: eu-west-{i % 3 + 1}\n\n"
        "```toml\n[server]\nworkers = 4\n```\n\n"
        f"Dashboards: https://grafana.example.com/d/svc{i:04d}/overview?orgId=1\n"
    )


async def _evidence(root: Path, files: dict[str, str], code: str, count: int) -> Evidence:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    result = await simulate(root, code, policy="strict", budget=BUDGET)
    assert result.evidence is not None, result.deny_reason
    assert len(result.evidence.changes) == count, len(result.evidence.changes)
    assert result.evidence.complete, result.evidence.gaps
    return result.evidence


async def docs_evidence(root: Path, count: int) -> Evidence:
    """``count`` docs pages, each read and edited (a line appended, a word changed)."""
    files = {f"docs/svc{i:04d}.md": _doc(i) for i in range(count)}
    code = (
        f"for i in range({count}):\n"
        "    p = f'/workspace/docs/svc{i:04d}.md'\n"
        "    t = vsh_read(p).replace('on-call', 'the on-call rota')\n"
        "    vsh_write(p, t + '\\nReviewed for the 2026 audit.\\n')"
    )
    return await _evidence(root, files, code, count)


def _config_file(i: int) -> str:
    return (
        f"# service {i}\n[server]\nworkers = {i % 32 + 1}\ntimeout_s = 30\ntls = true\n"
        f'listen = "127.0.0.1:{8000 + i}"\n\n[logging]\nlevel = "info"\n\n'
        "[features]\nbeta = false\n"
    )


async def config_evidence(root: Path, count: int) -> Evidence:
    """``count`` TOML files, each with workers and a timeout changed (within bounds)."""
    files = {f"config/svc{i:04d}.toml": _config_file(i) for i in range(count)}
    code = (
        f"for i in range({count}):\n"
        "    p = f'/workspace/config/svc{i:04d}.toml'\n"
        "    t = vsh_read(p).replace(f'workers = {i % 32 + 1}', f'workers = {i % 32 + 2}')\n"
        "    vsh_write(p, t.replace('timeout_s = 30', 'timeout_s = 60'))"
    )
    return await _evidence(root, files, code, count)


async def transaction(root: Path, runs: int) -> tuple[Timing, Evidence]:
    """Median preview + prepare + hook + commit of a one-file config change.

    The hook approves at once, so this is VSH's own cost for a one-file transaction.
    """
    (root / "config").mkdir(parents=True)
    (root / "config" / "app.toml").write_text(_config_file(0).replace("workers = 1", "workers = 0"))
    events: list[vsh.RequestEvent] = []

    async def approve(event: vsh.RequestEvent) -> vsh.HookDecision:
        events.append(event)
        return vsh.HookDecision.approve("benchmark")

    runtime = vsh.HookedRuntime.open(
        root, hook_handler=approve, policy="strict", review_content_bytes=1 << 20
    )
    cpu: list[float] = []
    wall: list[float] = []
    for n in range(1, runs + 1):
        code = (
            "p = '/workspace/config/app.toml'\n"
            f"vsh_write(p, vsh_read(p).replace('workers = {n - 1}', 'workers = {n}'))"
        )
        started, started_cpu = time.perf_counter(), time.process_time()
        receipt = await runtime.apreview(vsh.RunRequest(code, intent=f"workers {n}"))
        resolution = await runtime.acommit(receipt.transaction)
        cpu.append(time.process_time() - started_cpu)
        wall.append(time.perf_counter() - started)
        assert resolution.receipt.state == "committed", resolution.receipt.state
    timing = Timing(statistics.median(cpu) * 1000, statistics.median(wall) * 1000, "committed")
    return timing, Evidence.from_event(events[-1])


# -- bundled judges against the transactions they judge -------------------------------


def _workflow(i: int) -> str:
    return (
        f"name: ci-{i}\non:\n  push:\n    branches: [main]\n  pull_request:\n"
        "permissions:\n  contents: read\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v3\n      - run: pytest -q\n"
    )


def _requirements(i: int) -> str:
    return f"requests==2.31.0\nclick==8.1.{i % 7}\nattrs==23.2.0\n"


# judge -> (files for n changes, a program changing each of them the way the judge allows).
# Every workload is one the judge approves at 1 file: the allowance path does all its work.
WORKLOADS: dict[str, tuple[Callable[[int], dict[str, str]], Callable[[int], str]]] = {
    "ci-workflows": (
        lambda n: {f".github/workflows/w{i:04d}.yml": _workflow(i) for i in range(n)},
        lambda n: (
            f"for i in range({n}):\n    p = f'/workspace/.github/workflows/w{{i:04d}}.yml'\n"
            "    vsh_write(p, vsh_read(p).replace('checkout@v3', 'checkout@v4'))"
        ),
    ),
    "data-cleanup": (
        lambda n: {
            **{f"exports/e{i:04d}.csv": f"id,total\n{i},{i * 3}\n" for i in range(n)},
            **{f"data/raw/d{i:04d}.csv": "id\n1\n" for i in range(n)},  # delete ratio < 0.5
            "exports/archive/2023.csv": "id,total\n",
        },
        lambda n: (
            f"for i in range({n}):\n"
            "    vsh_move(f'/workspace/exports/e{i:04d}.csv', "
            "f'/workspace/exports/archive/e{i:04d}.csv')"
        ),
    ),
    "dependency-updates": (
        lambda n: {f"svc{i:04d}/requirements.txt": _requirements(i) for i in range(n)},
        lambda n: (
            f"for i in range({n}):\n    p = f'/workspace/svc{{i:04d}}/requirements.txt'\n"
            "    vsh_write(p, vsh_read(p).replace('requests==2.31.0', 'requests==2.32.3'))"
        ),
    ),
    "repo-maintenance": (
        lambda n: {f"docs/svc{i:04d}.md": _doc(i) for i in range(n)},
        lambda n: (
            f"for i in range({n}):\n    p = f'/workspace/docs/svc{{i:04d}}.md'\n"
            "    vsh_write(p, vsh_read(p).replace('on-call', 'on call'))"
        ),
    ),
    "secrets-hygiene": (
        lambda n: {f"docs/svc{i:04d}.md": _doc(i) for i in range(n)},
        lambda n: (
            f"for i in range({n}):\n    p = f'/workspace/docs/svc{{i:04d}}.md'\n"
            "    vsh_write(p, vsh_read(p) + '\\nSecrets come from the vault, never from files.\\n')"
        ),
    ),
    "service-config": (
        lambda n: {f"config/svc{i:04d}.toml": _config_file(i) for i in range(n)},
        lambda n: (
            f"for i in range({n}):\n    p = f'/workspace/config/svc{{i:04d}}.toml'\n"
            "    t = vsh_read(p).replace(f'workers = {i % 32 + 1}', f'workers = {i % 32 + 2}')\n"
            "    vsh_write(p, t.replace('timeout_s = 30', 'timeout_s = 60'))"
        ),
    ),
}
TRANSACTION_CONTENT_BYTES = 64 << 20


async def judged_transaction(
    root: Path, files: dict[str, str], code: str, runs: int
) -> tuple[float, Evidence]:
    """Wall ms of one VSH transaction (preview + prepare + hook + commit), and its evidence
    (the exact hook event). Each run starts from a fresh copy of ``files``; the figure is
    the fastest run, the one other processes on the machine disturbed least (wall time
    only grows under load, which would flatter the ratio)."""
    events: list[vsh.RequestEvent] = []

    async def approve(event: vsh.RequestEvent) -> vsh.HookDecision:
        events.append(event)
        return vsh.HookDecision.approve("benchmark")

    wall: list[float] = []
    for run in range(runs):
        workspace = root / f"run{run}"
        for name, text in files.items():
            path = workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        runtime = vsh.HookedRuntime.open(
            workspace,
            hook_handler=approve,
            policy="strict",
            review_content_bytes=TRANSACTION_CONTENT_BYTES,
        )
        request = vsh.RunRequest(code, intent="benchmark", budget=BUDGET)
        started = time.perf_counter()
        receipt = await runtime.apreview(request)
        resolution = await runtime.acommit(receipt.transaction)
        wall.append(time.perf_counter() - started)
        assert resolution.receipt.state == "committed", resolution.receipt.state
    evidence = Evidence.from_event(events[0])
    assert evidence.complete, evidence.gaps()
    return min(wall) * 1000, evidence


def bundled_judges() -> dict[str, RuleSet]:
    judges: dict[str, RuleSet] = {}
    for name in WORKLOADS:
        loaded = load_judge(name, skip_llm=True)
        assert isinstance(loaded, RuleSet), name
        judges[name] = loaded
    return judges


async def judges_section(base: Path, counts: tuple[int, ...]) -> None:
    """Rule-decision CPU time / VSH transaction wall time, per bundled judge and size."""
    print("\n(d) bundled judges: rule-decision CPU ms / VSH transaction wall ms (target <= 10%)")
    print("    the same change both times; decision: median CPU on fresh evidence with cold")
    print("    caches (after a full garbage collection, as above); transaction: fastest run")
    judges = bundled_judges()
    header = "".join(f" {f'{n:,} files':>23}" for n in counts)
    print(f"  {'judge':<20}{header}")
    ratios: dict[str, list[float]] = {}
    for name, (files, program) in WORKLOADS.items():
        cells: list[str] = []
        for count in counts:
            runs = 7 if count <= 10 else 5 if count <= 100 else 3
            tx, evidence = await judged_transaction(
                base / f"{name}-{count}", files(count), program(count), runs
            )
            repeats = 25 if count <= 10 else 9 if count <= 100 else QUICK_REPEATS
            decision = timed(judges[name].evaluate, evidence, repeats)
            ratio = decision.cpu_ms / tx
            ratios.setdefault(name, []).append(ratio)
            short = decision.decision[:3]
            if count == 1 and decision.decision != "approve":
                # The workload is meant to take the allowance's whole path (a judge
                # that tightened its bounds may review it: then fix the workload).
                print(f"  NOTE {name}: the 1-file workload is no longer approved ({short})")
            cells.append(f" {decision.cpu_ms:7.1f}/{tx:7.1f} {ratio:5.0%} {short}")
        print(f"  {name:<20}{''.join(cells)}")
    worst = max((r, n) for n, rs in ratios.items() for r in rs)
    print(f"  worst ratio {worst[0]:.0%} ({worst[1]}): {_met(worst[0] <= 0.10)}")


# -- report ---------------------------------------------------------------------------


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _target(ms: float, target: float) -> str:
    return f"{ms / target:5.2f}x of {target:g} ms: {_met(ms < target)}"


def _scaling(
    title: str, sets: list[RuleSet], evidence: dict[int, Evidence], target: float
) -> dict[str, Timing]:
    print(f"\n{title}")
    print(f"  {'files':>6} {'rule set':<20} {'CPU ms':>9} {'wall ms':>9} {'CPU/file':>10}", end="")
    print("  decision")
    at_max: dict[str, Timing] = {}
    for count, sample in evidence.items():
        for rules in sets:
            repeats = 40 if count <= 10 else 15 if count <= 100 else QUICK_REPEATS
            timing = timed(rules.evaluate, sample, repeats)
            print(
                f"  {count:>6} {rules.id:<20} {timing} {timing.cpu_ms / count * 1000:>7.1f} us"
                f"  {timing.decision}"
            )
            at_max[rules.id] = timing
    top = max(evidence)
    for rules in sets:
        timing = at_max[rules.id]
        print(f"  at {top:,} files {rules.id:<20} CPU {_target(timing.cpu_ms, target)}")
    return at_max


def _breakdown(rules: RuleSet, evidence: Evidence, repeats: int) -> None:
    """Where one evaluation's time goes, part by part (cold caches each time)."""
    parts: list[tuple[str, Callable[[Evidence], Any]]] = [
        (f"denial {rule.id}", rule.check) for rule in rules.denials
    ]
    parts.append(("reads scan (secret_reads)", secret_reads))
    parts.append(("net_changes (shared, paid once)", net_changes))
    allowances = rules.allowances

    def claims(copy: Evidence) -> None:
        changes = net_changes(copy)
        for change in changes:
            for allowance in allowances:
                allowance.claim(copy, change)

    for label, part in parts:
        timing = timed(part, evidence, repeats)
        print(f"    {label:<34} {timing}")
    # the claims alone: net changes computed inside but subtracted
    net = timed(net_changes, evidence, repeats).cpu_ms
    total = timed(claims, evidence, repeats)
    print(f"    {'claims (minus net_changes)':<34} {total.cpu_ms - net:9.3f}")


QUICK = "--quick" in sys.argv
QUICK_REPEATS = 3 if QUICK else 7
COUNTS = (1, 1000) if QUICK else (1, 10, 100, 1000)
JUDGES_ONLY = "--judges" in sys.argv
JUDGE_COUNTS = (1, 10, 100, 1000)


async def main() -> None:
    began = time.perf_counter()
    print(f"CPU time of this process and wall time, median; {os.cpu_count()} CPUs, load average")
    print(f"{os.getloadavg()[0]:.1f} at start (wall time suffers under load, CPU time less).")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        if JUDGES_ONLY:
            await judges_section(base / "judges", JUDGE_COUNTS)
            print(f"\n(whole run: {time.perf_counter() - began:.0f} s wall)")
            return
        tx, one = await transaction(base / "tx", runs=10 if QUICK else 30)
        docs = {n: await docs_evidence(base / f"docs{n}", n) for n in COUNTS}
        configs = {n: await config_evidence(base / f"config{n}", n) for n in COUNTS}
        size = sum(len(_doc(i)) for i in range(max(COUNTS)))
        print(f"(evidence built: {max(COUNTS):,} docs pages of {size / max(COUNTS):.0f} bytes")
        print(f" on average, {size / (1 << 20):.2f} MiB read and written once each)")

        paths = _scaling(
            "(a) paths + secrets: docs pages read and edited", [PATHS_AND_SECRETS], docs, 20
        )
        config = _scaling(
            "(b) config allowances: TOML files with two values changed within bounds",
            [CONFIG_ALLOWANCE, SERVICE_CONFIG],
            configs,
            50,
        )

        print("\n(c) one-file changes against one VSH transaction (target < 2%)")
        print(f"  {'':<44} {'CPU ms':>9} {'wall ms':>9}")
        print(f"  {'VSH transaction (preview+prepare+hook+commit)':<44} {tx}")
        repeats = 40 if QUICK else 200
        rows = [
            ("config-allowance", CONFIG_ALLOWANCE.evaluate, one),
            ("service-config* (shipped judge)", SERVICE_CONFIG.evaluate, one),
            ("paths-and-secrets (one docs page)", PATHS_AND_SECRETS.evaluate, docs[1]),
        ]
        hook = as_hook(SERVICE_CONFIG)

        for label, function, sample in rows:
            timing = timed(function, sample, repeats)
            cpu, wall = timing.cpu_ms / tx.cpu_ms, timing.wall_ms / tx.wall_ms
            print(
                f"  {label:<44} {timing}  CPU {cpu:6.2%} ({_met(cpu < 0.02)}), wall "
                f"{wall:6.2%} ({_met(wall < 0.02)}) of the transaction"
            )
        samples = fresh(one, 50)
        started, started_cpu = time.perf_counter(), time.process_time()
        for copy in samples:
            cold_caches()
            await hook.decide(copy)
        hook_cpu = (time.process_time() - started_cpu) / len(samples) * 1000
        hook_wall = (time.perf_counter() - started) / len(samples) * 1000
        print(
            f"  {'as_hook(service-config*) decision, mean':<44} {hook_cpu:9.3f} {hook_wall:9.3f}"
            f"  CPU {hook_cpu / tx.cpu_ms:6.2%} of the transaction"
        )

        await judges_section(base / "judges", JUDGE_COUNTS)

        top = max(COUNTS)
        print(f"\nWhere the time goes at {top:,} files (CPU ms, wall ms; median, cold caches)")
        print(f"  {PATHS_AND_SECRETS.id} on {top:,} docs pages:")
        _breakdown(PATHS_AND_SECRETS, docs[top], QUICK_REPEATS)
        print(f"  {SERVICE_CONFIG.id} on {top:,} TOML files:")
        _breakdown(SERVICE_CONFIG, configs[top], QUICK_REPEATS)

        print("\nSummary (CPU time; targets from issue 8)")
        ps = paths[PATHS_AND_SECRETS.id].cpu_ms
        ca = config[CONFIG_ALLOWANCE.id].cpu_ms
        sc = config[SERVICE_CONFIG.id].cpu_ms
        print(f"  paths+secrets at {top:,} files: {ps:8.1f} ms  {_target(ps, 20)}")
        print(f"  config allowance at {top:,} files: {ca:8.1f} ms  {_target(ca, 50)}")
        print(f"  service-config* at {top:,} files: {sc:8.1f} ms  {_target(sc, 50)}")
    print(f"\n(whole run: {time.perf_counter() - began:.0f} s wall)")


if __name__ == "__main__":
    anyio.run(main)
