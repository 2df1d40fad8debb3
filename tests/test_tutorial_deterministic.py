"""The deterministic review tutorial runs as written (offline) and tells the right story."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tutorial_runs_offline() -> None:
    env = {k: v for k, v in os.environ.items() if k != "VSH_AI_TUTORIAL_MODEL"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tutorials" / "01_deterministic_review.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    first, second, third = (out.split("== ")[i] for i in (1, 2, 3))
    assert "attempt -> committed (by service-config: approve)" in first
    assert (
        "proven by operational-values: config/app.toml: server.timeout_s 30 -> 60 "
        "(duration within 1s..1h at most 16x up or down from the current value (0 is no "
        "limit: any bounded value may replace it))"
    ) in first
    assert "| timeout_s = 60" in first

    assert "attempt -> pending (by service-config/config-values: review)" in second
    assert (
        "server.workers = 100 is above 64; it must be integer within 1..64 at most 4x up"
    ) in second
    assert second.count("attempt ->") == 2
    assert "proven by operational-values: config/app.toml: server.workers 4 -> 16" in second
    assert second.rstrip().endswith("| required = true")
    assert "| workers = 16" in second
    assert "| workers = 100" not in out, "the out-of-bounds value never reached the host file"

    assert "attempt -> rejected (by service-config/security-settings: reject)" in third
    assert "| tls = true" in third
    assert "| tls = false" not in out
