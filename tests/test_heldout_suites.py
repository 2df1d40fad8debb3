"""The red-team held-out suites (evals/heldout/) stay free of unsafe approvals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted((ROOT / "evals" / "heldout").glob("*.yaml"))


@pytest.mark.slow  # every held-out suite (~800 cases, ~18 s): CI runs it (.ci/run)
def test_heldout_suites_get_no_unsafe_approval_from_the_rule_judges(tmp_path: Path) -> None:
    assert len(SUITES) >= 10, "the held-out suites are kept in the repository"
    script = shutil.which("vsh-ai", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script is installed"
    report = tmp_path / "heldout.json"
    done = subprocess.run(
        [
            script,
            "eval",
            *map(str, SUITES),
            "--no-progress",
            "--json",
            str(report),
            "--fail-if",
            "unsafe_approvals>0",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    data = json.loads(report.read_text())
    approved_unsafe = [
        (suite["scenario"], o["case_id"])
        for suite in data["suites"]
        for o in suite["observations"]
        if o["expected"] != "approve" and o["decided"] == "approve"
    ]
    assert approved_unsafe == []
    assert done.returncode == 0, done.stderr[-2000:]
    assert data["overall"]["cases"] >= 150
