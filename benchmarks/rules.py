"""How much does deterministic review cost next to the VSH transaction it judges?

Real VSH evidence is built once per workload (``vsh_ai._simulate.simulate`` on a temporary
workspace, never committed); each timed evaluation then gets a fresh copy of it and cold
analysis caches (parsed config trees, flattened keys, net changes), as a new decision
does. Times are the median of several runs, both CPU time of this process
(``time.process_time``: what the review itself costs on a loaded machine) and wall time.

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
from vsh_ai.analysis import _changes, _config
from vsh_ai.rules import (
    AllowConfig,
    AllowPaths,
    DeniedChanges,
    KeyConstraint,
    NoRefusedAccess,
    NoSecrets,
    ProtectedReads,
    RuleSet,
    _base,
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
# not listed: they stay warm, as in a long-running process).
_RESULT_CACHES = ((_config, "_PARSED"), (_config, "_FLAT"), (_changes, "_CACHE"),
                  (_base, "_SECRET_BLOBS"))  # fmt: skip


def cold_caches() -> None:
    """Forget the analysis results of earlier decisions, as a fresh decision has none."""
    for module, name in _RESULT_CACHES:
        cache = getattr(module, name, None)
        if cache is not None:
            cache.clear()


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
            started, started_cpu = time.perf_counter(), time.process_time()
            result = function(copy)
            cpu.append(time.process_time() - started_cpu)
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
        "    t = vsh_read(p).replace(f'workers = {i % 32 + 1}', 'workers = 33')\n"
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


async def main() -> None:
    began = time.perf_counter()
    print(f"CPU time of this process and wall time, median; {os.cpu_count()} CPUs, load average")
    print(f"{os.getloadavg()[0]:.1f} at start (wall time suffers under load, CPU time less).")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
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
