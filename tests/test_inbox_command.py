"""``vsh-ai inbox`` refuses what it cannot serve safely, before listening anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vsh_ai._cli import main


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--host", "0.0.0.0"], "--allow-remote"),
        (["--host", "192.168.1.7"], "not a loopback address"),
        (["--principal", "al\u202eice"], "U+202E"),
    ],
)
def test_refused_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["inbox", str(tmp_path), *extra]) == 2
    assert message in capsys.readouterr().out.replace("\n", " ")


def test_a_bad_tokens_file_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# approvers\nshort alice\n")
    assert main(["inbox", str(tmp_path), "--tokens-file", str(tokens)]) == 2
    out = capsys.readouterr().out.replace("\n", "")
    assert f"{tokens}:2" in out


def test_a_missing_workspace_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inbox", str(tmp_path / "nope")]) == 2
    assert "not a folder" in capsys.readouterr().out


def test_the_parser_imports_nothing_heavy() -> None:
    """``vsh-ai --version`` builds the parser: the inbox's part must not pull in the web."""
    code = (
        "import sys; import vsh_ai.inbox._command as c; import argparse; "
        "c.add_inbox_arguments(argparse.ArgumentParser()); "
        "heavy = ('starlette', 'uvicorn', 'jinja2', 'pygments'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
