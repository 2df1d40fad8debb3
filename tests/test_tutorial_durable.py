"""Tutorial 4 runs as written (offline, SQLite): approved across a restart, committed once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos")

pytestmark = pytest.mark.durable  # kills a real DBOS worker and recovers it, about 15 s

ROOT = Path(__file__).resolve().parents[1]
AFTER = "# Changelog\n\n## 1.4.1\n- Fix request timeout handling\n\n## 1.4.0\n- Faster startup\n"


def test_tutorial_commits_once_after_a_killed_worker(tmp_path: Path) -> None:
    skip = ("VSH_AI_TUTORIAL_MODEL", "VSH_AI_DBOS_DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env["VSH_AI_TUTORIAL_DIR"] = str(tmp_path / "story")
    env["VSH_AI_APPROVAL_KEY_FILE"] = str(tmp_path / "approval.key")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tutorials" / "04_durable_agent.py")],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    killed, approved, recovered, again = (out.split("\n== ")[i] for i in (1, 2, 3, 4))

    assert "waits for approval of 1 change(s)" in killed
    assert "worker killed (exit -9)" in killed
    assert "| ## 1.4.1" not in killed, "nothing commits before the approval"

    assert "| +## 1.4.1" in approved, "the approver saw the exact diff"
    assert "alice approved" in approved

    assert "workflow release-notes-1.4.1: SUCCESS" in recovered
    assert "agent: The release note change is committed." in recovered
    assert "agent: The release note change is committed." in again
    assert out.rstrip().endswith("1 time(s): approved once, committed once.")

    workspace = tmp_path / "story" / "workspace"
    assert (workspace / "CHANGELOG.md").read_bytes() == AFTER.encode()
    assert sorted(p.name for p in workspace.iterdir() if p.name != ".vsh-runtime") == [
        "CHANGELOG.md"
    ]
    assert (tmp_path / "story" / "vsh-ai-tutorial.sqlite").exists(), "SQLite by default"
