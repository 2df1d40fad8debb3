"""Every ``$ vsh-ai ...`` line in the offline-evals tutorial runs and exits as documented."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from vsh_ai._cli import main

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


def test_the_tutorial_has_commands_and_files() -> None:
    assert len(commands()) >= 8
    assert any("# file: my-suite.yaml" in block for block in blocks("yaml"))


@pytest.mark.slow  # every command of the tutorial, evals included: CI runs it (.ci/run)
def test_tutorial_commands_run_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("evals", "judges", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    for block in blocks("yaml"):
        first, _, body = block.partition("\n")
        if first.startswith("# file: "):
            (tmp_path / first.removeprefix("# file: ").strip()).write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    for argv, expected in commands():
        status = main([*argv, "--no-progress"] if argv[0] == "eval" else argv)
        output = capsys.readouterr().out
        assert status == expected, (argv, output[-2000:])
    assert (tmp_path / "report.json").is_file()
    assert (tmp_path / "report.md").is_file()
    # the exported schemas are the ones the committed files are generated from
    from vsh_ai._judge_files import schema
    from vsh_ai.evals import suite_json_schema

    assert (tmp_path / "suite.schema.json").read_text() == suite_json_schema()
    exported = json.loads((tmp_path / "judge.schema.json").read_text())
    assert exported == json.loads(json.dumps(schema()))
