"""Tutorial 5 runs as written: ``vsh-ai inbox`` served, a person approves over HTTP, and
the app's resume from ``toolset.decisions`` commits exactly the transaction shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tutorial_resumes_from_the_inbox_decision(tmp_path: Path) -> None:
    env = {**os.environ, "VSH_AI_TUTORIAL_DIR": str(tmp_path / "story")}
    env["VSH_AI_APPROVAL_KEY_FILE"] = str(tmp_path / "approval.key")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tutorials" / "05_inbox_approvals.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    asked, decided, resumed = out.split("\n== ")[0], out.split("\n== ")[1], out.split("\n== ")[2]
    assert "pending: ['raise-timeout']" in asked
    assert "/login?token=" in decided
    assert '- timeout = "5s"' in decided
    assert '+ timeout = "30s"' in decided
    assert "person pressed Approve: recorded" in decided
    assert "decided by: alice" in resumed
    assert "agent: the edit is committed" in resumed
    assert '| timeout = "30s"' in resumed
    assert "decision: approve" in done.stderr  # the inbox logged it, with the approver
    assert "by alice" in done.stderr
    service = (tmp_path / "story" / "workspace" / "service.toml").read_text()
    assert service == '[service]\nname = "api"\ntimeout = "30s"\n'
