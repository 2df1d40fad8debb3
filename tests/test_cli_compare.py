"""``vsh-ai compare``: two reports side by side, the cases they disagree on first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "vsh-ai"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli_workflow import JUDGES, SAFE, SUITE, UNSAFE  # noqa: E402


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two judges on the same suite: one approves everything in `alpha`, the other is the
    bundled service-config rule set (which proves neither change)."""
    folder = tmp_path_factory.mktemp("compare")
    body = SAFE.format(scenario="alpha") + UNSAFE.format(scenario="alpha")
    (folder / "alpha.yaml").write_text(SUITE.format(scenario="alpha", cases=body))
    (folder / "myjudges.py").write_text(JUDGES)
    commands = [
        ["eval", "alpha.yaml", "--judge", "myjudges:ApproveInAlpha", "--json", "a.json"],
        ["eval", "alpha.yaml", "--judge", "service-config", "--json", "b.json"],
    ]
    with ThreadPoolExecutor(len(commands)) as pool:  # both at once: each waits on imports
        for done in pool.map(lambda argv: run(*argv, cwd=folder), commands):
            assert done.returncode == 0, done.stderr
    return folder


def test_compare_lists_disagreements_first_with_both_decisions(reports: Path) -> None:
    done = run("compare", "a.json", "b.json", "--markdown", "cmp.md", cwd=reports)
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    b = json.loads((reports / "b.json").read_text())
    decided_b = {o["case_id"]: o for o in b["suites"][0]["outcomes"]}
    assert all(o["decided"] != "approve" for o in decided_b.values())
    assert "2 of 2 shared cases decided differently" in out
    # the unsafe approval comes first, with both sides' deciding rule and feedback
    first = out.index("alpha/alpha-unsafe (expected reject)")
    assert first < out.index("alpha/alpha-safe (expected approve)")
    assert "A: approve by alpha-only/allow: alpha is fine" in out
    unsafe_b = decided_b["alpha-unsafe"]
    assert f"B: {unsafe_b['decided']} by {unsafe_b['decided_by']}" in out
    assert "unsafe approvals" in out
    assert "1/1 → 0/1" in out
    # the figures first, the cases after, the count last
    assert out.index("figures, A → B") < first
    assert out.rstrip().endswith("2 of 2 shared cases decided differently")
    markdown = (reports / "cmp.md").read_text()
    assert markdown.startswith("# vsh-ai comparison")
    assert "## Disagreements (2 of 2)" in markdown
    assert "| expected \\ decided | A approve | A review | A reject |  | B approve |" in markdown
    assert "Correct decisions per category:" in markdown
    assert markdown.index("alpha/alpha-unsafe") < markdown.index("alpha/alpha-safe")


def test_a_report_compared_with_itself_has_no_disagreements(reports: Path) -> None:
    done = run("compare", "a.json", "a.json", cwd=reports)
    assert done.returncode == 0
    assert "0 of 2 shared cases decided differently" in done.stdout


def test_bad_reports_exit_2(reports: Path) -> None:
    (reports / "junk.json").write_text('{"suites": 3}')
    junk = run("compare", "a.json", "junk.json", cwd=reports)
    assert junk.returncode == 2
    assert "junk.json: not a vsh-ai eval --json report" in junk.stderr
    missing = run("compare", "a.json", "nope.json", cwd=reports)
    assert missing.returncode == 2
    assert "nope.json: cannot read the report" in missing.stderr
