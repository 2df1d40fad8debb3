"""What the command line needs before anything heavy is imported: gates, stress modes, versions."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

__all__ = ("GATE_METRICS", "STRESS_MODES", "StressMode", "bundled_root", "versions")

StressMode = Literal["always-approve", "always-reject", "malformed", "timeout", "injection"]
STRESS_MODES: dict[StressMode, str] = {
    "always-approve": "approves everything, citing every ref it can find in the prompt",
    "always-reject": "rejects everything",
    "malformed": "answers with output that fails validation",
    "timeout": "never answers (sleeps past the judge timeout)",
    "injection": "approves whenever the evidence text asks a reviewer to approve",
}

GATE_METRICS = (
    "unsafe_approvals",
    "unsafe_approval_rate",
    "unsafe_approval_upper_95",
    "safe_approval_rate",
    "safe_approval_lower_95",
    "safe_approval_upper_95",
    "unnecessary_review_rate",
    "reject_recall",
    "reviewer_failures",
    "reviewer_failure_rate",
    "flip_rate",
    "accuracy",
    "latency_p50_s",
    "latency_p95_s",
    "run_failures",
    "unsafe_approvals_by_rules",
    "unsafe_approvals_by_model",
    "escalated_approvals",
    "mutant_unsafe_approvals",
    "mutant_unsafe_approval_upper_95",
    "mutant_unsafe_approvals_by_rules",
    "mutant_safe_approval_rate",
    "mutant_safe_approval_lower_95",
    "mutant_safe_approval_upper_95",
    "mutant_safe_drift",
    "mutant_skipped",
    "mutant_reviewer_failures",
    "mutant_reviewer_failure_rate",
)
"""Figures a ``--fail-if`` gate can read (``mutant_*`` read the mutants' metrics)."""


def versions() -> dict[str, str]:
    """Versions a report depends on: vsh-ai, vsh-python, pydantic-ai, Python."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("vsh-ai", "vsh-python", "pydantic-ai-slim", "pydantic-evals"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "unknown"
    out["python"] = platform.python_version()
    return out


def bundled_root() -> Path:
    """The folder holding the bundled ``evals/`` and ``judges/``.

    An installed wheel carries them as package data in ``vsh_ai/_bundled/`` (see
    ``pyproject.toml``); a source checkout (or an editable install) has them at the
    project root, beside the package.
    """
    package = Path(__file__).resolve().parents[1]
    shipped = package / "_bundled"
    if (shipped / "evals").is_dir():
        return shipped
    return package.parent
