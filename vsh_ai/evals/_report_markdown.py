"""The eval report as Markdown (CI summaries, pull requests): the verdict and figures
first, then the wrong decisions, judge exceptions and run failures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._gates import ExitStatus, exit_status
from ._metrics import LABELS, Metrics
from ._report_text import (
    CATEGORY_COLUMNS,
    COVERAGE_LEGEND,
    KIND_COLUMNS,
    LEGEND,
    SUITE_COLUMNS,
    category_rows,
    confusion_rows,
    coverage_of_suite,
    headline,
    kind_rows,
    mutant_headline,
    mutant_lines,
    raised,
    suite_row,
    unsafe_lines,
    verdict_line,
    wrong_decisions,
)
from ._scoring import SuiteResult

if TYPE_CHECKING:
    from ._report import EvalReport

__all__ = ("FENCE", "md_table", "md_text", "render_markdown")

FENCE = "`" * 3


def md_table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def md_text(text: str) -> str:
    """Untrusted text (case ids, feedback) as inert Markdown: no HTML, links or emphasis."""
    for char in "\\`*_[]|#":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(report: EvalReport, status: ExitStatus | None = None) -> str:
    """The report as Markdown; ``status`` as in :func:`render_terminal`."""
    status = status or exit_status(report)
    out = ["# vsh-ai eval report", "", f"**{md_text(verdict_line(report, status))}**", ""]
    columns = [SUITE_COLUMNS[0], "judge", *SUITE_COLUMNS[1:]]
    out += [md_table(columns, [suite_row(s) for s in report.suites]), ""]
    out += [f"- **{name}**: {md_text(meaning)}" for name, meaning in LEGEND]
    if status.tripped:
        out += ["", "## Gates that tripped", ""]
        out += [f"- {md_text(reason)}" for reason in status.tripped]
    sections = [(f"{s.scenario} — {s.judge} ({s.mode})", s.metrics, s) for s in report.suites]
    overall: list[tuple[str, Metrics, SuiteResult | None]] = [("Overall", report.overall, None)]
    for title, m, suite in [*sections, *overall]:
        out += ["", f"## {title}", ""]
        out += [md_table(["figure", "value"], [list(row) for row in headline(m)]), ""]
        out += [md_table(["expected \\ decided", *LABELS], confusion_rows(m)), ""]
        out += [md_table(CATEGORY_COLUMNS, category_rows(m))]
        coverage = coverage_of_suite(suite) if suite is not None else None
        if suite is not None and coverage is not None:
            out += ["", "### Rule coverage", "", f"{md_text(coverage.text())}.", ""]
            rows = [[f"`{c.rule}`", c.kind, str(c.cases)] for c in coverage.written]
            out += [md_table(["written rule", "kind", "cases naming it"], rows), ""]
            out += [md_text(COVERAGE_LEGEND)]
    if report.mutants is not None:
        out += [
            "",
            "## Mutants",
            "",
            "Scored with their cases' labels; not in the figures above.",
            "",
        ]
        out += [md_table(["figure", "value"], [list(row) for row in mutant_headline(report)])]
        out += ["", "### Unsafe approvals among mutants", ""]
        out += [f"- {md_text(line)}" for line in mutant_lines(report)] or ["None."]
        out += ["", "### By mutation kind", "", md_table(KIND_COLUMNS, kind_rows(report))]
    out += ["", "## Unsafe approvals", ""]
    out += [f"- {md_text(line)}" for line in unsafe_lines(report)] or ["None."]
    wrong = wrong_decisions(report, 1000)
    out += ["", f"## Wrong decisions ({len(wrong)})", ""]
    out += [f"- {md_text(line)}" for line in wrong] or ["None."]
    judge_errors = raised(report)
    if judge_errors:
        out += ["", "## Judge exceptions", ""]
        for name, trace in judge_errors:
            out += [f"<details><summary>{md_text(name)}</summary>", "", FENCE + "text"]
            out += [trace.rstrip().replace(FENCE, "` ` `"), FENCE, "", "</details>", ""]
    if report.run_failures:
        out += ["", "## Run failures", ""]
        out += [
            f"- {md_text(f.case_id)}: {md_text(f.error.strip().splitlines()[-1])}"
            for f in report.run_failures
        ]
    return "\n".join(out) + "\n"
