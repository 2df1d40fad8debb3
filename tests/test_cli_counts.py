"""`vsh-ai check` counts in English: "1 allowance, 1 denial", "2 allowances"."""

from __future__ import annotations

from pathlib import Path

import pytest

from vsh_ai._cli import main

ONE = 'id = "one"\ndescription = "x"\n'
ALLOW = '[[rules.rule]]\nid = "{id}"\ntype = "allow_paths"\npaths = ["{glob}"]\n'
ALLOW += 'kinds = ["modify"]\n'


def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["check", str(path)]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_one_allowance_and_one_denial_are_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judge = tmp_path / "one.toml"
    judge.write_text(ONE + ALLOW.format(id="docs", glob="docs/*.md"))
    out = _check(judge, capsys)
    assert "judge 'one': 1 allowance, 1 denial, on_unproven review" in out


def test_two_allowances_are_plural(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    judge = tmp_path / "two.toml"
    judge.write_text(
        ONE + ALLOW.format(id="docs", glob="docs/*.md") + ALLOW.format(id="notes", glob="n/*.md")
    )
    assert "2 allowances, 1 denial," in _check(judge, capsys)
