"""Offline judge evals: labelled VSH suites, a pydantic-evals runner, metrics and reports.

``vsh-ai eval`` is the command line; ``run_evals_sync(find_suites(), EvalOptions())`` is
the same thing from Python (``await run_evals(...)`` inside an event loop).
``EvalOptions(mutants=True)`` also scores every case's meaning-preserving mutants
(``suite_mutants``), reported apart by mutation kind; ``EvalOptions(logfire=True)``
sends the experiment's spans (``configure_logfire``).

Names are imported on first use (PEP 562), so that reading a suite does not import
VSH, Pydantic AI or pydantic-evals.
"""

from __future__ import annotations

import typing as _typing

from .._lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from ._compare import Comparison, Disagreement, ReportError, compare_reports, load_report
    from ._harvest import HarvestResult, harvest, harvest_case, suite_yaml
    from ._metrics import (
        CategoryRow,
        Metrics,
        Observation,
        clopper_pearson_interval,
        clopper_pearson_upper,
        compute_metrics,
    )
    from ._models import stress_model
    from ._mutants import MUTATION_KINDS, MutantCase, case_mutants, suite_mutants
    from ._names import GATE_METRICS, STRESS_MODES, StressMode
    from ._outcome import (
        CURRENT_CASE,
        CaseOutcome,
        RunFailure,
        Skipped,
        WorkspaceChanged,
        decided_from,
    )
    from ._replay import RecordingModel, Recordings, ReplayError, ReplayModel, request_digest
    from ._report import (
        REPORT_SCHEMA_VERSION,
        EvalReport,
        ExitStatus,
        Gate,
        GateError,
        exit_status,
        render_markdown,
        render_terminal,
        wrong_decisions,
    )
    from ._run import (
        EvalOptions,
        EvalSetupError,
        build_judge,
        recordings_dir,
        run_evals,
        run_evals_sync,
    )
    from ._runner import run_case
    from ._scoring import MutantKindRow, MutantResult, RuleCoverage, SuiteResult, evaluate_suite
    from ._suite import (
        BinaryFile,
        EvalCase,
        Expected,
        Suite,
        SuiteError,
        SymlinkFile,
        TextFile,
        bundled_suites_dir,
        find_suites,
        load_suite,
        suite_json_schema,
    )
    from ._telemetry import configure_logfire, logfire_scrubbing

_WHERE = {
    "._compare": ("Comparison", "Disagreement", "ReportError", "compare_reports", "load_report"),
    "._harvest": ("HarvestResult", "harvest", "harvest_case", "suite_yaml"),
    "._metrics": (
        "CategoryRow",
        "Metrics",
        "Observation",
        "clopper_pearson_upper",
        "compute_metrics",
        "clopper_pearson_interval",
    ),
    "._models": ("stress_model",),
    "._mutants": ("MUTATION_KINDS", "MutantCase", "case_mutants", "suite_mutants"),
    "._names": ("GATE_METRICS", "STRESS_MODES", "StressMode"),
    "._outcome": (
        "CURRENT_CASE",
        "CaseOutcome",
        "RunFailure",
        "Skipped",
        "WorkspaceChanged",
        "decided_from",
    ),
    "._replay": ("RecordingModel", "Recordings", "ReplayError", "ReplayModel", "request_digest"),
    "._report": (
        "REPORT_SCHEMA_VERSION",
        "EvalReport",
        "ExitStatus",
        "Gate",
        "GateError",
        "exit_status",
        "render_markdown",
        "render_terminal",
        "wrong_decisions",
    ),
    "._run": (
        "EvalOptions",
        "EvalSetupError",
        "build_judge",
        "recordings_dir",
        "run_evals",
        "run_evals_sync",
    ),
    "._telemetry": ("configure_logfire", "logfire_scrubbing"),
    "._runner": ("run_case",),
    "._scoring": ("MutantKindRow", "MutantResult", "RuleCoverage", "SuiteResult", "evaluate_suite"),
    "._suite": (
        "BinaryFile",
        "EvalCase",
        "Expected",
        "Suite",
        "SuiteError",
        "SymlinkFile",
        "TextFile",
        "bundled_suites_dir",
        "find_suites",
        "load_suite",
        "suite_json_schema",
    ),
}

__all__ = (
    "CURRENT_CASE",
    "GATE_METRICS",
    "MUTATION_KINDS",
    "REPORT_SCHEMA_VERSION",
    "STRESS_MODES",
    "BinaryFile",
    "CaseOutcome",
    "CategoryRow",
    "Comparison",
    "Disagreement",
    "EvalCase",
    "EvalOptions",
    "EvalReport",
    "EvalSetupError",
    "ExitStatus",
    "Expected",
    "Gate",
    "GateError",
    "HarvestResult",
    "Metrics",
    "MutantCase",
    "MutantKindRow",
    "MutantResult",
    "Observation",
    "RecordingModel",
    "Recordings",
    "ReplayError",
    "ReplayModel",
    "ReportError",
    "RuleCoverage",
    "RunFailure",
    "Skipped",
    "StressMode",
    "Suite",
    "SuiteError",
    "SuiteResult",
    "SymlinkFile",
    "TextFile",
    "WorkspaceChanged",
    "build_judge",
    "bundled_suites_dir",
    "case_mutants",
    "clopper_pearson_interval",
    "clopper_pearson_upper",
    "compare_reports",
    "compute_metrics",
    "configure_logfire",
    "decided_from",
    "evaluate_suite",
    "exit_status",
    "find_suites",
    "harvest",
    "harvest_case",
    "load_report",
    "load_suite",
    "logfire_scrubbing",
    "recordings_dir",
    "render_markdown",
    "render_terminal",
    "request_digest",
    "run_case",
    "run_evals",
    "run_evals_sync",
    "stress_model",
    "suite_json_schema",
    "suite_mutants",
    "suite_yaml",
    "wrong_decisions",
)

__getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)
