"""Issue 19, points 3 and 6: the listing and checking commands, and what an install exposes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
