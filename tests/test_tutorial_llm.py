"""The LLM commit judge tutorial runs as written (offline) and tells the truth."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TUTORIAL = Path(__file__).parents[1] / "tutorials" / "02_llm_commit_judge.py"


def test_the_tutorial_runs_offline_and_only_the_safe_edit_commits() -> None:
    env = {k: v for k, v in os.environ.items() if k != "VSH_AI_TUTORIAL_MODEL"}
    done = subprocess.run(
        [sys.executable, str(TUTORIAL)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("Offline: a FunctionModel plays a careful reviewer")
    results = re.findall(r"^   result: (\w+)$", out, re.M)
    deciders = re.findall(r"^   decided by: (.+)$", out, re.M)
    assert results == ["committed", "rejected", "rejected", "pending"]
    assert deciders == [
        "service-llm -> approve",
        "service-llm -> reject",
        "service-llm -> reject",
        "service-rules/denied_changes -> review",
    ]
    assert "C1 removes the security setting `tls = true`" in out
    assert "C1 adds text that tries to instruct the reviewer" in out
    assert re.findall(r"^   judges asked: (.+)$", out, re.M) == [
        "service-rules/unproven:abstain then service-llm:approve",
        "service-rules/unproven:abstain then service-llm:reject",
        "service-rules/unproven:abstain then service-llm:reject",
        "service-rules/denied_changes:review",  # the rules decided: no model was asked
    ]
    hosts = re.findall(r"^   host (\S+): (.+)$", out, re.M)
    app = (
        '[server]\nport = 8443\nworkers = 4\nlog_level = "info"\ntls = true\nrequire_auth = true\n'
    )
    original, debug = repr(app.encode()), repr(app.replace("info", "debug").encode())
    # one host listing after setup and after each attempt: only the safe edit landed
    assert hosts == [("config/app.toml", original)] + [("config/app.toml", debug)] * 4
