"""A missing or wrong workspace path fails with the path and the fix, before VSH opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from vsh_ai import VshToolset


def test_a_missing_workspace_names_the_path_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as raised:
        VshToolset("no/such/workspace")
    message = str(raised.value)
    assert "VshToolset workspace no/such/workspace" in message
    assert str(tmp_path / "no/such/workspace") in message  # where it looked
    assert "create the folder first" in message
    assert "canonicalize" not in message
    assert not (tmp_path / "no").exists()  # nothing was created on the way


def test_a_file_is_not_a_workspace(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("x")
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        VshToolset(file)


def test_an_existing_folder_still_opens(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    toolset = VshToolset(tmp_path)
    assert toolset.workspace == tmp_path.resolve()
