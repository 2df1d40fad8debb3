"""Shared fixtures: real VSH on temporary workspaces, asyncio via anyio's pytest plugin."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import pytest
from hypothesis import settings

# Bytecode is cached as on any install, also where PYTHONDONTWRITEBYTECODE is set: the
# suite starts about a hundred Python processes (xdist workers, the CLI, tutorials,
# durable workers) that would each compile vsh-ai's modules again (2-3 s of CPU apiece).
# Set before vsh-ai is imported below; the variable is dropped so that child processes
# (all started after this) read and write the same cache.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from vsh_ai import Evidence  # noqa: E402
from vsh_ai._simulate import simulate  # noqa: E402

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

# Property tests check logic, not speed: hypothesis's default 200 ms per-example deadline
# only adds flakes on a loaded 2-core CI machine, where any example can stall that long.
settings.register_profile("vsh-ai", deadline=None)
settings.load_profile("vsh-ai")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the CPUs this process may use. Many tests wait
    (on a CLI subprocess, a server, a browser, a timer) and leave their CPU idle; a third
    worker on two cores fills it. Measured on 2 cores: 243 s with 2 workers, 206 s with 3,
    216 s with 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return cpus + 1


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once the tests are collected, what exists (pytest, every imported module, the
    test functions) lives until the end: frozen, full collections no longer walk it, and
    they are rarer, as in ``vsh-ai`` itself (``vsh_ai._process``). Objects a test makes are
    collected as before (a test that checks they are freed still sees it)."""
    from vsh_ai import _process

    gc.freeze()
    _process.at_start()


Files = Mapping[str, str | bytes]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_tree(root: Path, files: Files) -> Path:
    """Materialise ``{relative path: text or bytes}`` under ``root``."""
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    return root


def snapshot_tree(root: Path) -> dict[str, bytes]:
    """Every host file's bytes under ``root`` (VSH's own state directory excluded)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".vsh-runtime" not in p.parts
    }


@pytest.fixture
def make_workspace(tmp_path: Path) -> Callable[[Files], Path]:
    counter = iter(range(1_000_000))

    def make(files: Files) -> Path:
        root = tmp_path / f"ws{next(counter)}"
        root.mkdir(parents=True)
        return write_tree(root, files)

    return make


@pytest.fixture
def evidence_for(make_workspace: Callable[[Files], Path]) -> Callable[..., Awaitable[Evidence]]:
    """``await evidence_for(files, code, intent=..., policy=..., language=...)`` → real Evidence."""

    async def build(
        files: Files,
        code: str,
        *,
        intent: str = "test change",
        policy: str = "strict",
        language: str = "monty",
        review_content_bytes: int = 1 << 20,
    ) -> Evidence:
        workspace = make_workspace(files)
        before = snapshot_tree(workspace)
        result = await simulate(
            workspace,
            code,
            intent=intent,
            policy=policy,
            language=language,  # type: ignore[arg-type]
            review_content_bytes=review_content_bytes,
        )
        assert snapshot_tree(workspace) == before, "simulate() must never change host files"
        assert result.evidence is not None, f"VSH {result.state}: {result.deny_reason}"
        return result.evidence

    return build


def git_staged(workspace: Path) -> list[str]:
    """What ``git add -A`` stages in ``workspace`` (a fresh repository; skips without git)."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("needs the git binary")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run([git, "init", "-q", str(workspace)], check=True, env=env)
    subprocess.run([git, "-C", str(workspace), "add", "-A"], check=True, env=env)
    listed = subprocess.run(
        [git, "-C", str(workspace), "diff", "--cached", "--name-only"],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    return listed.stdout.split()
