"""Every ``$ vsh-ai ...`` line in the offline-evals tutorial runs and exits as documented."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from vsh_ai._cli import main
from vsh_ai.evals import suite_json_schema

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "tutorials" / "03_offline_evals.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", TUTORIAL.read_text(), re.DOTALL)


def commands() -> list[tuple[list[str], int]]:
    found = []
    for block in blocks("console"):
        for line in block.splitlines():
            if not line.startswith("$ vsh-ai "):
                continue
            command, _, comment = line[2:].partition("   # ")
            expected = int(m.group(1)) if (m := re.search(r"exits (\d)", comment)) else 0
            found.append((shlex.split(command)[1:], expected))
    return found


def write_files(folder: Path) -> list[str]:
    """The files the tutorial asks the reader to create (``# file: NAME`` blocks)."""
    names = []
    for language in ("yaml", "python"):
        for block in blocks(language):
            first, _, body = block.partition("\n")
            if first.startswith("# file: "):
                name = first.removeprefix("# file: ").strip()
                (folder / name).write_text(body)
                names.append(name)
    return names


def test_the_tutorial_has_commands_and_files() -> None:
    assert len(commands()) >= 8
    assert any("# file: my-suite.yaml" in block for block in blocks("yaml"))
    assert any("# file: my_judges.py" in block for block in blocks("python"))


def test_no_command_needs_the_repository() -> None:
    """Bundled suites and judges are named; every other file the commands use is one the
    tutorial creates, so they run from any folder (not only this checkout's root)."""
    created = {"my-suite.yaml", "my_judges.py"}
    for argv, _ in commands():
        for flag, word in zip(["", *argv], argv, strict=False):
            assert not word.startswith(("tests.", "tests/", "evals/", "benchmarks")), argv
            if flag == "--judge" and ":" in word:
                assert f"{word.split(':', 1)[0]}.py" in created, argv


def test_check_and_schema_commands_run_from_an_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fast part of the walk-through, from a folder that holds only the files the
    tutorial creates: listings, ``check`` (with a bundled judge) and the schemas."""
    write_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    ran = 0
    for argv, expected in commands():
        if argv[0] in ("check", "schema", "suites", "judges"):
            status = main(argv)
            output = capsys.readouterr()
            assert status == expected, (argv, output.out[-2000:], output.err[-2000:])
            ran += 1
    assert ran >= 4
    assert (tmp_path / "suite.schema.json").read_text() == suite_json_schema()


def test_the_documented_check_error_is_what_check_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_files(tmp_path)
    suite = tmp_path / "my-suite.yaml"
    text = suite.read_text()
    suite.write_text(text.replace("expected: reject", "expected: rejected"))
    (documented,) = [b for b in blocks("text") if "my-suite.yaml:" in b]
    assert main(["check", str(suite)]) == 2
    printed = " ".join(capsys.readouterr().err.split())
    assert " ".join(documented.split()) in printed.replace(str(tmp_path) + "/", "")


@pytest.mark.slow  # every command of the tutorial, evals included: CI runs it (.ci/run)
def test_tutorial_commands_run_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_files(tmp_path)  # nothing of this checkout: bundled names and the tutorial's files
    monkeypatch.chdir(tmp_path)
    for argv, expected in commands():
        status = main([*argv, "--no-progress"] if argv[0] == "eval" else argv)
        output = capsys.readouterr().out
        assert status == expected, (argv, output[-2000:])
    assert (tmp_path / "report.json").is_file()
    assert (tmp_path / "report.md").is_file()
    # the exported schemas are the ones the committed files are generated from
    from vsh_ai._judge_files import schema

    assert (tmp_path / "suite.schema.json").read_text() == suite_json_schema()
    exported = json.loads((tmp_path / "judge.schema.json").read_text())
    assert exported == json.loads(json.dumps(schema()))
