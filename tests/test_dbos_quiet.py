"""vsh-ai's DBOS config is quiet by default: a launch, a workflow and a shutdown print no
INFO lines (DBOS's default prints ~75), and a ``log_level`` the user passes still wins.

Each run is a fresh process on a temporary SQLite database: DBOS is a process-wide
singleton whose console handler writes to the stderr it found at launch.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from vsh_ai.dbos import dbos_config

PROGRAM = textwrap.dedent(
    """
    import json, sys
    from dbos import DBOS
    from vsh_ai.dbos import dbos_config

    @DBOS.workflow()
    def add_one(x: int) -> int:
        return x + 1

    options = json.loads(sys.argv[2])
    DBOS(config=dbos_config("vsh-ai-quiet", directory=sys.argv[1], **options))
    DBOS.launch()
    print("result", add_one(1))
    DBOS.destroy()
    """
)


def _launch(folder: Path, options: str) -> subprocess.CompletedProcess[str]:
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(folder), options],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "result 2"
    return done


def _info_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "[    INFO]" in line]


def test_the_default_config_sets_warning_and_respects_a_given_level(tmp_path: Path) -> None:
    assert dbos_config("app", directory=tmp_path)["log_level"] == "WARNING"
    assert dbos_config("app", directory=tmp_path, log_level="DEBUG")["log_level"] == "DEBUG"


@pytest.mark.slow  # launches DBOS twice, each in a new process (~10 s): CI runs it (.ci/run)
def test_a_default_launch_prints_no_info_lines(tmp_path: Path) -> None:
    quiet = _launch(tmp_path / "quiet", "{}")
    assert _info_lines(quiet.stdout + quiet.stderr) == []
    # The control: the same program at the level the user asks for is as chatty as DBOS.
    chatty = _launch(tmp_path / "chatty", '{"log_level": "INFO"}')
    assert len(_info_lines(chatty.stderr)) > 10
