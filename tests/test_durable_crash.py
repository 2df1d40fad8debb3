"""Crash matrix: an agent under DBOS (SQLite) killed at each point commits exactly once.

Two engines: Pydantic AI's ``DBOSDurability`` capability inside our workflow, and the
deprecated ``DBOSAgent`` wrapper (its run id changes on every execution, so the call key
must come from what DBOS recorded: the workflow id and the model step's response). Case
names are ``PATH-POINT`` for the first and ``agent-PATH-POINT`` for the second.

Each case runs one agent turn that appends ``line 1`` to log.txt (a double commit
shows as ``line 1`` twice) in a child process that dies with ``os._exit`` at the
case's point (or is SIGKILLed while it waits for the human); a new process then
launches DBOS, which recovers the workflow, answers when it asks, and reports. After
recovery: the host bytes hold exactly one append (none when denied or timed out), the
tool results the agent saw (and its final answer) equal those of the same turn run
without a crash, and the judge was asked once across both processes. The child
processes are in tests/durable_worker.py; every case has its own workspace and DBOS
database. A few cases run again on a throwaway local Postgres cluster when its server
binaries are installed (the same code, only the database URL differs).

Paths: ``auto`` (VSH policy auto-approves; plain runtime), ``judged`` (a judge that
approves and counts its calls), ``deferred`` (strict policy, a person approves through
vsh_ai.dbos), ``denied`` (the person denies), ``timeout`` (nobody answers).

Points (the seams are the toolset's own methods, patched in the crashing child only):

- ``before_preview`` / ``after_preview``: before ``WorkspaceDriver.preview`` (judged,
  deferred) or ``WorkspaceDriver.run`` (auto) delegates, or after it returns. On the auto
  path ``run`` previews and commits in one native worker, so ``after_preview`` there is
  "after the commit, before the result is recorded";
- ``after_prepare``: after the first ``CommitJournal.prepare`` (the journal record),
  before the commit (deferred: before the pending resolution);
- ``before_finish``: before the first ``CommitJournal.finish``, after the commit;
- ``waiting``: SIGKILL while the workflow waits for the human (on the ``timeout`` path
  nobody answers and recovery starts after the first process's deadline: the recovered
  wait must end at once and deny, not wait its 4 s again);
- ``after_approved_prepare``: deferred, after the journal records the approved commit,
  before it happens; ``after_approved_commit``: after ``approve_and_commit`` returns;
- ``after_denial_recorded``: the person denied; after the toolset records the denial.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

pytestmark = pytest.mark.durable  # the crash matrix: child processes, about 30 s (+ Postgres)

WORKER = Path(__file__).with_name("durable_worker.py")
CRASH_CODE = 86  # durable_worker.CRASH_CODE (not imported: importing it registers DBOS workflows)
INITIAL, ONCE, TWICE = "start\n", "start\nline 1\n", "start\nline 1\nline 1\n"
PATHS = ("auto", "judged", "deferred", "denied", "timeout")
FINAL = {"auto": ONCE, "judged": ONCE, "deferred": ONCE, "denied": INITIAL, "timeout": INITIAL}
"""Host bytes after the turn: one append, or none when the person denies it."""
POINTS = [
    ("auto", "before_preview"),
    ("auto", "after_preview"),
    ("auto", "after_prepare"),
    ("auto", "before_finish"),
    ("judged", "before_preview"),
    ("judged", "after_preview"),
    ("judged", "after_prepare"),
    ("judged", "before_finish"),
    ("deferred", "before_preview"),
    ("deferred", "after_preview"),
    ("deferred", "waiting"),
    ("deferred", "after_prepare"),
    ("deferred", "after_approved_prepare"),
    ("deferred", "before_finish"),
    ("deferred", "after_approved_commit"),
    ("denied", "waiting"),
    ("denied", "after_denial_recorded"),
    ("timeout", "waiting"),
]
ENGINES = {"durability": "", "agent": "agent-"}
"""Engine -> case name prefix: DBOSDurability in our workflow, the deprecated DBOSAgent."""
CASES = [(engine, path, point) for engine in ENGINES for path, point in POINTS]
CONTROLS = [
    ("agent-runkey", "auto", "after_preview"),
    ("agent-runkey", "judged", "before_finish"),
]
"""DBOSAgent with the call key vsh-ai 0.1 used (run id, run step, tool call id): its run id
changes on every execution, so these crashes after the commit commit twice."""
RUN_ID_CASES = [("runid", "auto", "after_preview"), ("runid", "judged", "before_finish")]
"""DBOSDurability, our workflow passing a fresh ``run_id=`` each execution: the default key
names the call by the recorded model response instead."""


def case_name(engine: str, path: str, point: str) -> str:
    prefix = ENGINES.get(engine, f"{engine}-")
    return f"{prefix}{path}-{point}"


def _worker(phase: str, jobs: list[str], env: dict[str, str]) -> dict[str, int | None]:
    done = subprocess.run(
        [sys.executable, str(WORKER), phase, *jobs],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    codes: dict[str, int | None] = json.loads(done.stdout.strip().splitlines()[-1])
    return codes


def _run_matrix(
    root: Path, cases: list[tuple[str, str, str]], env: dict[str, str]
) -> dict[str, Any]:
    """Crash phase (with the uncrashed baselines) in parallel, then recovery."""
    env = {
        **env,
        "VSH_AI_APPROVAL_KEY_FILE": str(root / "approval.key"),
        "LOGFIRE_IGNORE_NO_CONFIG": "1",
    }
    named = {case_name(*case): case for case in cases}
    baselines = {(engine, path) for engine, path, _ in cases if engine in ENGINES}
    named.update({case_name(e, p, "baseline"): (e, p, "none") for e, p in baselines})
    jobs: dict[str, str] = {}
    for name, (engine, path, point) in named.items():
        case_dir = root / name
        (case_dir / "ws").mkdir(parents=True)
        (case_dir / "ws" / "log.txt").write_text(INITIAL)
        jobs[name] = f"{case_dir}:{engine}:{path}:{point}"
    started = time.monotonic()
    crashed_codes = _worker("start", list(jobs.values()), env)
    crashed = [job for name, job in jobs.items() if not name.endswith("-baseline")]
    after_crash = {name: (root / name / "ws" / "log.txt").read_text() for name in named}
    recovered = _worker("recover", crashed, env)
    return {
        "root": root,
        "started": crashed_codes,
        "after_crash": after_crash,
        "recovered": recovered,
        "seconds": time.monotonic() - started,
    }


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "VSH_AI_CRASH_DATABASE_URL"}
    cases = CASES + CONTROLS + RUN_ID_CASES
    return _run_matrix(tmp_path_factory.mktemp("crash"), cases, env)


def _report(case_dir: Path, phase: str) -> dict[str, Any]:
    path = case_dir / f"report-{phase}.json"
    if not path.exists():
        error = case_dir / f"error-{phase}.txt"
        detail = error.read_text()[-3000:] if error.exists() else "(no error file)"
        pytest.fail(f"{case_dir.name}: no {phase} report:\n{detail}")
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def _seen(report: dict[str, Any]) -> tuple[str, list[Any]]:
    """The agent's answer and the tool results it saw, without per-run identifiers."""
    returns: list[Any] = []
    for item in report["result"]["returns"]:
        if isinstance(item, dict):  # a VshResult; else the text of a denial
            item = {k: v for k, v in item.items() if k != "transaction"}
            if item.get("verdict"):
                item["verdict"] = {k: v for k, v in item["verdict"].items() if k != "latency_s"}
        returns.append(item)
    return report["result"]["output"], returns


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("path", PATHS)
def test_baseline_commits_once(matrix: dict[str, Any], engine: str, path: str) -> None:
    case_dir = matrix["root"] / case_name(engine, path, "baseline")
    assert matrix["started"][str(case_dir)] == 0, _report(case_dir, "start")
    report = _report(case_dir, "start")
    assert report["host"] == FINAL[path]
    output, returns = _seen(report)
    if path == "denied":
        assert output == "finished: denied"
        denial = 'Denied by a person (principal "alice"). Their note, quoted: "not now"'
        assert returns == [repr(denial)]
    elif path == "timeout":
        assert output == "finished: denied"
        assert returns[0].startswith("'No decision arrived within 4s")
    else:
        assert output == "finished: committed"
        assert [r["state"] for r in returns] == ["committed"]
    assert report["judge_calls"] == (1 if path == "judged" else 0)


KNOWN_TOOLSET_GAPS: dict[tuple[str, str], str] = {}
"""Cases that fail for reasons in the toolset (strict xfail: a fix shows up as XPASS and
the entry must go). Fixed so far: a replayed deferred call now asks again as it did the
first time (DBOS saw another step sequence and ended the workflow in ERROR), and a re-run
that meets its own pending transaction keeps the approved result's diff and output."""


def _case(engine: str, path: str, point: str) -> Any:
    gap = KNOWN_TOOLSET_GAPS.get((path, point))
    marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
    return pytest.param(engine, path, point, id=case_name(engine, path, point), marks=marks)


@pytest.mark.parametrize(("engine", "path", "point"), [_case(*case) for case in CASES])
def test_crash_then_recover_commits_once(
    matrix: dict[str, Any], engine: str, path: str, point: str
) -> None:
    _check_case(matrix, engine, path, point)


@pytest.mark.parametrize(("engine", "path", "point"), [_case(*case) for case in RUN_ID_CASES])
def test_a_run_id_drawn_anew_on_recovery_still_commits_once(
    matrix: dict[str, Any], engine: str, path: str, point: str
) -> None:
    _check_case(matrix, engine, path, point, baseline="durability")


@pytest.mark.parametrize(
    ("engine", "path", "point"), CONTROLS, ids=[case_name(*c) for c in CONTROLS]
)
def test_with_a_key_that_changes_on_recovery_dbos_agent_commits_twice(
    matrix: dict[str, Any], engine: str, path: str, point: str
) -> None:
    """The control: the crash points sit after the commit, DBOS does re-run the call, and
    under DBOSAgent a key built from the run id does not recognise it."""
    name = case_name(engine, path, point)
    case_dir = _crashed(matrix, name, point)
    assert matrix["after_crash"][name] == ONCE  # the crashed run had committed
    assert matrix["recovered"][str(case_dir)] == 0, _report(case_dir, "recover")
    assert _report(case_dir, "recover")["host"] == TWICE


def _crashed(matrix: dict[str, Any], name: str, point: str) -> Path:
    case_dir: Path = matrix["root"] / name
    code = matrix["started"][str(case_dir)]
    expected_code = -signal.SIGKILL if point == "waiting" else CRASH_CODE
    marker = case_dir / "crashed_at"
    reached = code == expected_code and marker.exists()
    if not reached and (case_dir / "error-start.txt").exists():
        pytest.fail(f"{name}: {(case_dir / 'error-start.txt').read_text()[-3000:]}")
    assert reached, f"the crash point {point} was never reached (exit code {code})"
    assert marker.read_text() == point
    return case_dir


def _check_case(
    matrix: dict[str, Any], engine: str, path: str, point: str, *, baseline: str = ""
) -> None:
    root: Path = matrix["root"]
    case_dir = _crashed(matrix, case_name(engine, path, point), point)
    assert (case_dir / "ws" / "log.txt").read_text() in (INITIAL, FINAL[path])

    assert matrix["recovered"][str(case_dir)] == 0, _report(case_dir, "recover")
    report = _report(case_dir, "recover")
    assert report["host"] == FINAL[path], "committed more (or less) than once"
    assert (case_dir / "ws" / "log.txt").read_text() == FINAL[path]
    reference = root / case_name(baseline or engine, path, "baseline")
    assert _seen(report) == _seen(_report(reference, "start")), (
        "the agent saw a different result than without the crash"
    )
    if path == "judged":
        assert report["judge_calls"] == 1, "the judge was asked again on replay"
    if path == "timeout":
        # Recovered after the deadline: the 4 s wait did not start over. Load lengthens every
        # recovery alike, so the bound is this engine's recovery of a denied wait (measured in
        # the same matrix) plus 3 s; a wait that started over adds its 4 s to its own recovery.
        denied = _report(root / case_name(engine, "denied", "waiting"), "recover")["seconds"]
        assert report["seconds"] < denied + 3.0, (report["seconds"], denied)


# -- the same code on Postgres (a throwaway local cluster, when the binaries exist) ----------

POSTGRES_CASES = [("durability", "auto", "after_preview"), ("durability", "deferred", "waiting")]
"""A double commit after a crash and a durable wait: what depends on the database."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A fresh Postgres cluster on a free port (initdb refuses root: run it as nobody)."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    folder = Path(tempfile.mkdtemp(prefix="vsh-ai-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        su = shutil.which("su")
        if su is None:
            pytest.skip("running as root without su: initdb cannot run")
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            pytest.skip("running as root without a 'nobody' user: initdb cannot run")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        prefix = [su, "nobody", "-s", "/bin/sh", "-c"]
    port = _free_port()
    data = folder / "data"
    commands = [
        f"{initdb} -D {data} -U postgres -A trust",
        f"{pg_ctl} -D {data} -w -l {folder / 'server.log'} -o "
        f"'-p {port} -k {folder} -c listen_addresses=localhost' start",
    ]
    try:
        for command in commands:
            argv = [*prefix, command] if prefix else ["/bin/sh", "-c", command]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                pytest.skip(f"could not start a local PostgreSQL: {done.stderr[-500:]}")
        yield f"postgresql://postgres@localhost:{port}/postgres"
    finally:
        stop = f"{pg_ctl} -D {data} -m immediate stop"
        subprocess.run([*prefix, stop] if prefix else ["/bin/sh", "-c", stop], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_matrix(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {**os.environ, "VSH_AI_CRASH_DATABASE_URL": postgres_url}
    return _run_matrix(tmp_path_factory.mktemp("crash-pg"), POSTGRES_CASES, env)


@pytest.mark.parametrize(
    ("engine", "path", "point"), POSTGRES_CASES, ids=[case_name(*c) for c in POSTGRES_CASES]
)
def test_same_code_on_postgres(
    postgres_matrix: dict[str, Any], engine: str, path: str, point: str
) -> None:
    _check_case(postgres_matrix, engine, path, point)
