"""Offline judge evals: labelled VSH suites, a pydantic-evals runner, metrics and reports.

``vsh-ai eval`` is the command line; ``run_evals(find_suites(), EvalOptions())`` is the
same thing from Python. ``EvalOptions(mutants=True)`` also scores every case's
meaning-preserving mutants (``suite_mutants``), reported apart by mutation kind.
"""

from ._compare import Comparison, Disagreement, ReportError, compare_reports, load_report
from ._harvest import HarvestResult, harvest, harvest_case, suite_yaml
from ._metrics import CategoryRow, Metrics, Observation, clopper_pearson_upper, compute_metrics
from ._models import STRESS_MODES, StressMode, stress_model
from ._mutants import MUTATION_KINDS, MutantCase, case_mutants, suite_mutants
from ._replay import RecordingModel, Recordings, ReplayError, ReplayModel, request_digest
from ._report import (
    GATE_METRICS,
    REPORT_SCHEMA_VERSION,
    EvalReport,
    Gate,
    GateError,
    render_markdown,
    render_terminal,
    wrong_decisions,
)
from ._run import EvalOptions, EvalSetupError, build_judge, recordings_dir, run_evals
from ._runner import (
    CURRENT_CASE,
    CaseOutcome,
    MutantKindRow,
    MutantResult,
    RuleCoverage,
    RunFailure,
    Skipped,
    SuiteResult,
    WorkspaceChanged,
    decided_from,
    evaluate_suite,
    run_case,
)
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
    "clopper_pearson_upper",
    "compare_reports",
    "compute_metrics",
    "decided_from",
    "evaluate_suite",
    "find_suites",
    "harvest",
    "harvest_case",
    "load_report",
    "load_suite",
    "recordings_dir",
    "render_markdown",
    "render_terminal",
    "request_digest",
    "run_case",
    "run_evals",
    "stress_model",
    "suite_json_schema",
    "suite_mutants",
    "suite_yaml",
    "wrong_decisions",
)
