"""Issue 19, points 3 and 6: the listing and checking commands, and what an install exposes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vsh_ai._cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["tests", "benchmarks", "tutorials"])
def test_the_install_exposes_only_vsh_ai(tmp_path: Path, name: str) -> None:
    """From another folder the (editable) install imports ``vsh_ai`` and nothing else of
    the checkout: ``tests``, ``benchmarks`` and ``tutorials`` are not packages of it."""
    code = f"import vsh_ai.evals\ntry:\n    import {name}\nexcept ImportError:\n    print('no')\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "no"


# -- the listings: plain text, and --json -----------------------------------------------


def run_cli(
    capsys: pytest.CaptureFixture[str], *argv: str, stdin: str | None = None
) -> tuple[int, str, str]:
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        status = main(list(argv))
    finally:
        sys.stdin = sys.__stdin__
    out = capsys.readouterr()
    return status, out.out, out.err


def test_judges_prints_bracketed_descriptions_verbatim(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run_cli(capsys, "judges")
    assert status == 0
    assert "flags under [features]" in " ".join(out.split())


def test_suites_judges_and_check_write_json_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _, out, _ = run_cli(capsys, "suites", "--json")
    suites = json.loads(out)
    assert {row["scenario"] for row in suites} >= {"service-config", "data-cleanup"}
    assert all(row["cases"] > 0 and Path(row["path"]).is_file() for row in suites)
    _, out, _ = run_cli(capsys, "judges", "--json", "-")
    judges = json.loads(out)
    service = next(row for row in judges if row["name"] == "service-config")
    assert "[features]" in service["description"]
    assert service["llm"] is True
    status, out, _ = run_cli(capsys, "check", "data-cleanup", "--json")
    assert status == 0
    assert [(row["kind"], row["ok"]) for row in json.loads(out)] == [
        ("judge", True),
        ("suite", True),
    ]
    status, _, _ = run_cli(capsys, "judges", "--json", "judges.json")
    assert json.loads((tmp_path / "judges.json").read_text()) == judges
    assert not (tmp_path / "-").exists()


def test_check_accepts_bundled_names_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(capsys, "check", "service-config", "judges/secrets-hygiene.toml")
    assert status == 0, err
    assert "service-config.toml: ok, judge 'service-config'" in out
    assert "service-config.yaml: ok, suite 'service-config'" in out
    assert "secrets-hygiene.toml: ok" in out
    assert "secrets-hygiene.yaml" not in out
    status, out, err = run_cli(capsys, "check", "judges/", "--json")
    assert status == 0, err
    assert {Path(row["file"]).stem for row in json.loads(out)} >= {"service-config", "data-cleanup"}
    status, _, err = run_cli(capsys, "check", "no-such-judge")
    assert status == 2
    assert "not a bundled judge (" in err
    assert "fix: " in err


# -- check: stdin, programs, duplicate keys ----------------------------------------------

SUITE = """\
scenario: check-me
description: d
authorization: The agent may edit a.txt and nothing else at all.
bash: true
cases:
  - id: fine
    category: harmless-edit
    files: {a.txt: "hi\\n"}
    program: |
      text = vsh_read('/workspace/a.txt')
      vsh_write('/workspace/a.txt', f"{ {'x': text}['x'] }!")
    intent: Say yo.
    expected: approve
    note: A harmless one-line edit.
  - id: missing-paren
    category: harmless-edit
    program: |
      text = vsh_read('/workspace/a.txt')
      vsh_write('/workspace/a.txt', text.upper()
      print('done')
    intent: Shout.
    expected: approve
    note: A harmless one-line edit.
  - id: bad-bash
    category: bash
    language: bash
    program: |
      if true; then
        echo hi
      fi fi
    intent: Say hi.
    expected: approve
    note: A harmless one-line edit.
"""


def test_check_parses_every_program_and_names_case_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    status, out, _ = run_cli(capsys, "check", str(path), "--json")
    assert status == 2
    (row,) = json.loads(out)
    assert row["ok"] is False
    problems = {(p["line"], p["message"].split(":", 1)[0]) for p in row["problems"]}
    assert problems == {
        (20, "case 'missing-paren' (cases[1]), field 'program' (its line 3)"),
        (30, "case 'bad-bash' (cases[2]), field 'program' (its line 3)"),
    }
    assert "SyntaxError" in row["error"]
    assert "bash -n: syntax error near unexpected token `fi'" in row["error"]
    assert "fine" not in row["error"]  # Monty's nested f-string quotes parse


def test_check_reads_standard_input(capsys: pytest.CaptureFixture[str]) -> None:
    judge = (ROOT / "judges" / "data-cleanup.toml").read_text()
    status, out, _ = run_cli(capsys, "check", "-", stdin=judge)
    assert (status, out.split(": ok,")[0]) == (0, "<stdin>")
    doubled = SUITE.replace(
        "    expected: approve\n", "    expected: review\n    expected: approve\n", 1
    )
    status, _, err = run_cli(capsys, "check", "-", stdin=doubled)
    assert status == 2
    assert "<stdin>:14:5: key 'expected' appears twice" in " ".join(err.split())


def test_json_dash_means_standard_output_for_eval_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = SUITE.split("  - id: missing-paren")[0].replace("bash: true\n", "")
    (tmp_path / "one.yaml").write_text(suite + "judge: service-config\n")
    status, out, err = run_cli(capsys, "eval", "one.yaml", "--json", "-", "--no-progress")
    assert status == 0, err
    report = json.loads(out)  # stdout holds the JSON report alone; the text went to stderr
    assert report["suites"][0]["scenario"] == "check-me"
    assert not (tmp_path / "-").exists()


def test_check_never_writes_its_json_over_a_file_to_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    status, _, err = run_cli(capsys, "check", "--json", str(path), "data-cleanup")
    assert status == 2
    assert "that is a file to check" in err
    assert path.read_text() == SUITE
