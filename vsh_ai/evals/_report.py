"""The eval report (also the ``--json`` format) and where its renderings live.

Gates and the exit status are in ``_gates``, the shared wording in ``_report_text``, the
terminal rendering in ``_report_terminal`` and the Markdown one in ``_report_markdown``;
their public names are re-exported here.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from ._gates import ExitStatus, Gate, GateError, exit_status
from ._gates import fmt as _fmt
from ._metrics import Metrics
from ._mutants import MUTATION_KINDS
from ._names import GATE_METRICS, versions
from ._outcome import RunFailure
from ._report_markdown import md_table as _md_table
from ._report_markdown import md_text as _md_text
from ._report_markdown import render_markdown
from ._report_terminal import render_terminal
from ._report_text import wrong_decisions
from ._scoring import MutantKindRow, SuiteResult

__all__ = (
    "GATE_METRICS",
    "REPORT_SCHEMA_VERSION",
    "EvalReport",
    "ExitStatus",
    "Gate",
    "GateError",
    "exit_status",
    "render_markdown",
    "render_terminal",
    "versions",
    "wrong_decisions",
)

_COMPAT = (_fmt, _md_table, _md_text)  # older imports of these helpers keep working

REPORT_SCHEMA_VERSION = 3
"""Version of the ``--json`` layout; 2 added versions, digests, expected, coverage; 3 the
safe-approval interval (``safe_cases``, ``safe_approved_cases``, ``safe_approval_*_95``)."""


_ZERO = dict.fromkeys(
    (
        "mutants",
        "skipped",
        "unsafe_cases",
        "unsafe_approvals",
        "safe_cases",
        "safe_approvals",
        "safe_drift",
    ),
    0,
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class EvalReport(BaseModel):
    """Every suite's result and the overall metrics (also the ``--json`` format)."""

    schema_version: int = Field(
        default=REPORT_SCHEMA_VERSION, description="Version of this report's layout."
    )
    created: str = Field(default_factory=_now, description="When the run ended (UTC, ISO 8601).")
    versions: dict[str, str] = Field(
        default_factory=versions, description="vsh-ai, VSH, Pydantic AI and Python versions."
    )
    suites: list[SuiteResult]
    overall: Metrics
    run_failures: list[RunFailure]
    mutants: Metrics | None = Field(
        default=None, description="All suites' mutants together (with --mutants)."
    )
    workers: int = Field(default=1, description="Processes that ran the cases.")

    @property
    def mutant_safe_drift(self) -> int:
        return sum(len(s.mutants.safe_drift_cases) for s in self.suites if s.mutants)

    @property
    def mutant_skipped(self) -> int:
        return sum(len(s.mutants.skipped) for s in self.suites if s.mutants)

    @property
    def mutant_kinds(self) -> list[MutantKindRow]:
        """Per mutation kind, summed over suites."""
        rows: dict[str, MutantKindRow] = {}
        for suite in self.suites:
            for row in suite.mutants.kinds if suite.mutants else []:
                total = rows.setdefault(
                    row.kind, MutantKindRow.model_validate({**row.model_dump(), **_ZERO})
                )
                for name in _ZERO:
                    setattr(total, name, getattr(total, name) + getattr(row, name))
        order = list(MUTATION_KINDS)
        return sorted(rows.values(), key=lambda r: order.index(r.kind) if r.kind in order else 99)

    def gate_failures(self, gates: list[Gate]) -> list[str]:
        """Why each ``--fail-if`` gate trips (see :func:`exit_status` for the implicit ones)."""
        return [reason for gate in gates if (reason := gate.check(self)) is not None]
