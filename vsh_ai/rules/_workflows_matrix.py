"""Which new values a matrix ``include`` entry may bring (test environments, hosted runners).

A new include entry widens testing when it only selects another test environment
(``tox: py313``, ``nox-session: tests-3.13``) or runs on another GitHub-hosted runner
(``os: macos-14``). Such a value is a plain name (no shell or expression syntax, so pasted
into a ``run:`` line it stays one word); tox and nox run only environments their own config
defines. A value that feeds the job's runner, container, services, deployment environment or
a called workflow (``runs-on: ${{ matrix.tox }}``) must be a hosted runner label, and no
new value may be one the job names outside its matrix (``if: matrix.tox == 'release'``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ("new_value_problem",)

_TEST_ENV_KEYS = frozenset(
    {"tox", "toxenv", "tox-env", "tox_env", "nox", "nox-session", "nox_session", "session"}
)
_RUNNER_KEYS = frozenset({"os", "runner", "runs-on", "runs_on", "platform"})
_ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
# GitHub-hosted runner labels (docs: "GitHub-hosted runners", standard and arm64 images).
HOSTED_RUNNERS = frozenset(
    {
        "ubuntu-latest",
        "ubuntu-24.04",
        "ubuntu-22.04",
        "ubuntu-20.04",
        "ubuntu-24.04-arm",
        "ubuntu-22.04-arm",
        "windows-latest",
        "windows-2025",
        "windows-2022",
        "windows-2019",
        "windows-11-arm",
        "macos-latest",
        "macos-15",
        "macos-14",
        "macos-13",
        "macos-12",
    }
)
# Job keys a matrix value can steer beyond the steps: where and as whom the job runs.
_STEERING = ("runs-on", "container", "services", "environment", "uses", "with", "secrets")


def _steers(key: str, job: Mapping[str, Any]) -> bool:
    """Whether ``matrix.<key>`` (or ``matrix['<key>']``) appears in a steering job key."""
    text = json.dumps([job.get(name) for name in _STEERING], default=str)
    named = re.escape(key)
    return (
        re.search(rf"matrix\s*(\.\s*{named}\b|\[\s*\\?['\"]{named}\\?['\"]\s*\])", text) is not None
    )


def _named_elsewhere(value: str, job: Mapping[str, Any]) -> bool:
    """Whether the job names ``value`` outside its matrix (``if: matrix.tox == 'release'``:
    a new entry with that value would switch on a step no entry ran before)."""
    rest = {name: part for name, part in job.items() if name != "strategy"}
    return value.lower() in json.dumps(rest, default=str).lower()


def new_value_problem(key: str, value: Any, known_key: bool, job: Mapping[str, Any]) -> str | None:
    """Why an include entry's ``key = value``, unused before, is not proven, or None."""
    if not known_key:
        return "a key no existing entry has"
    if isinstance(value, str) and _named_elsewhere(value, job):
        return "a value the job's steps or conditions name (it may switch a step on)"
    name = key.lower()
    if name in _RUNNER_KEYS and isinstance(value, str) and value in HOSTED_RUNNERS:
        return None
    if (
        name in _TEST_ENV_KEYS
        and isinstance(value, str)
        and _ENV_NAME.fullmatch(value)
        and not _steers(key, job)
    ):
        return None
    return "a value not used before"
