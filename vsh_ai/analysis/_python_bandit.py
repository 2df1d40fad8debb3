"""Bandit (PyCQA's maintained Python security linter) as a second opinion on new code.

Bandit's checks (weak hashes, disabled certificate checks, ``shell=True``, unsafe
temp files, XML and YAML loaders, ...) are run in process over source text that a
proof is about to approve as *new* code (the test functions of
:func:`vsh_ai.analysis._python_proofs.test_additions`), never over whole modules: its
cost grows with the text it reads, and only new code can bring a new risk. ``# nosec``
comments are ignored (the agent writes them). Findings name Bandit's test id and
name, never its message (which may quote a string from the code). A Bandit failure is
reported as a finding: fail closed.
"""

from __future__ import annotations

import io
import logging
import threading
import warnings
from functools import lru_cache
from typing import Any

__all__ = ("bandit_findings",)

# Checks that say nothing about a test's risk: asserts (tests are asserts), pseudo-random
# numbers, importing subprocess, hard-coded "passwords" (the secret rules decide those,
# and Bandit's message would quote them), subprocess without a shell.
_IGNORED = frozenset({"B101", "B105", "B106", "B107", "B311", "B404", "B603", "B607"})
_RANK = {"LOW": 0, "MEDIUM": 1, "HIGH": 2}
_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _manager() -> Any:
    logging.getLogger("bandit").setLevel(logging.CRITICAL)
    with warnings.catch_warnings():  # stevedore's deprecation notice while loading plugins
        warnings.simplefilter("ignore", DeprecationWarning)
        from bandit.core import config, manager  # type: ignore[import-untyped]

        return manager.BanditManager(config.BanditConfig(), "file", ignore_nosec=True, quiet=True)


def bandit_findings(source: str) -> tuple[tuple[str, str, int], ...]:
    """``(test id, test name, line)`` of medium-or-worse findings Bandit is sure of."""
    try:
        with _LOCK:
            manager = _manager()
            manager.results = []
            manager.skipped = []
            manager._parse_file("<new code>.py", io.BytesIO(source.encode("utf-8")), [])
            issues = list(manager.results)
            failed = bool(manager.skipped)
    except Exception as error:  # fail closed: an analyser that breaks is a finding
        return (("error", f"bandit failed ({type(error).__name__})", 0),)
    if failed:
        return (("error", "bandit could not read the code", 0),)
    return tuple(
        (issue.test_id, issue.test, issue.lineno)
        for issue in issues
        if issue.test_id not in _IGNORED
        and _RANK.get(str(issue.severity), 2) >= 1
        and _RANK.get(str(issue.confidence), 2) >= 1
    )
