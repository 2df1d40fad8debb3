"""The eval report in a terminal (rich): figures first, then what went wrong, then one
verdict line with the exit status."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

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
    judged_by,
    kind_rows,
    mutant_headline,
    mutant_lines,
    one_line,
    raised,
    suite_row,
    verdict_line,
    wrong_split,
    wrong_summary,
)

if TYPE_CHECKING:
    from ._report import EvalReport

__all__ = ("render_terminal",)

_SHOWN = 50
"""Wrong decisions listed without ``--verbose`` (unsafe approvals are always all listed)."""
_ERROR_CHARS = 300


def _say(console: Console, text: str, style: str = "") -> None:
    """Untrusted or literal text: never markup, emoji or highlighting; wrapped."""
    console.print(Text(text, style=style), emoji=False, highlight=False, soft_wrap=True)


def _tail(text: str, limit: int) -> str:
    """The end of ``text`` on one line; ``…`` marks what was cut from its start."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…" + flat[-(limit - 1) :]


def render_terminal(
    report: EvalReport,
    console: Console | None = None,
    *,
    verbose: bool = False,
    status: ExitStatus | None = None,
) -> None:
    """Print the report: the figures, then the wrong decisions, then one verdict line.

    ``status`` is the exit status the command returns (default: the report's own, with no
    ``--fail-if`` gates). ``verbose`` adds every suite's own figures and per-category
    table, lists every wrong decision with its full feedback and prints the traceback of
    every judge that raised.
    """
    console = console or Console()
    status = status or exit_status(report)
    _print_suites(console, report)
    single = len(report.suites) == 1
    for suite in report.suites if single or verbose else []:
        title = f"{suite.scenario}: judge {suite.judge}, {suite.mode}"
        _print_metrics(console, title, suite.metrics, with_categories=True)
    if not single:
        _print_metrics(console, "overall", report.overall, with_categories=verbose)
        if not verbose:
            _say(console, "(each suite's figures and per-category tables: --verbose, --markdown)")
    _print_coverage(console, report)
    if report.mutants is not None:
        _print_mutants(console, report)
    console.rule("[bold]what went wrong")
    _print_wrong(console, report, verbose)
    _print_failures(console, report, verbose)
    for reason in status.tripped:
        console.print(Text("gate failed: ", style="bold red") + Text(reason), soft_wrap=True)
    if status.code == 2:
        console.print(
            f"[bold red]error:[/] {status.run_failures} case(s) could not be run; "
            "fix them before trusting these numbers"
        )
    style = "bold green" if status.code == 0 else "bold red"
    _say(console, verdict_line(report, status), style)


def _print_suites(console: Console, report: EvalReport) -> None:
    common = judged_by(report)
    table = Table(title="Suites" + (f": {common}" if common else ""), title_justify="left")
    columns = list(SUITE_COLUMNS)
    if common is None:
        columns.insert(1, "judge")
    if report.mutants is not None:
        columns.append("mutants: unsafe approved")
    for column in columns:
        table.add_column(column)
    for suite in report.suites:
        row = suite_row(suite, with_judge=common is None)
        if report.mutants is not None:
            mm = suite.mutants.metrics if suite.mutants else None
            row.append(f"{mm.unsafe_approvals} of {mm.unsafe_cases}" if mm else "-")
        table.add_row(*row)
    console.print(table)
    legend = Table(show_header=False, box=None, padding=(0, 1), style="dim")
    for name, meaning in LEGEND:
        legend.add_row(name, meaning)
    console.print(legend)


def _print_metrics(console: Console, title: str, m: Metrics, *, with_categories: bool) -> None:
    figures = Table(show_header=False, box=None, padding=(0, 2))
    for name, value in headline(m):
        figures.add_row(name, value)
    confusion = Table(title="expected ↓ / decided →", title_justify="left")
    for column in ("", *LABELS):
        confusion.add_column(column, justify="right")
    for row in confusion_rows(m):
        confusion.add_row(*row)
    shown: list[Table] = [figures, confusion]
    if with_categories:  # built only when printed
        categories = Table(title="per category", title_justify="left")
        for column in CATEGORY_COLUMNS:
            categories.add_column(column)
        for row in category_rows(m):
            categories.add_row(*row)
        shown.append(categories)
    console.rule(Text(title, style="bold"))
    console.print(Group(*shown))


def _print_coverage(console: Console, report: EvalReport) -> None:
    found = [(s.scenario, c) for s in report.suites if (c := coverage_of_suite(s)) is not None]
    if not found:
        return
    console.rule("[bold]rule coverage")
    for scenario, coverage in found:
        _say(console, f"{scenario}: {coverage.text()}")
    _say(console, COVERAGE_LEGEND, "dim")


def _print_wrong(console: Console, report: EvalReport, verbose: bool) -> None:
    unsafe, other = wrong_split(report, None)
    if unsafe or other:
        summary = wrong_summary(unsafe, report.overall)
        _say(console, f"WRONG DECISIONS ({len(unsafe) + len(other)}): {summary}", "bold yellow")
    if unsafe:
        _say(console, f"UNSAFE APPROVALS ({len(unsafe)})", "bold red")
        for line in unsafe:  # always in full
            _say(console, "  ✗ " + line, "red")
    else:
        _say(console, "No unsafe approvals.", "bold green")
    if not other:
        return
    shown = other if verbose else other[:_SHOWN]
    how = "in full" if verbose else "one line each; --verbose for the full feedback"
    _say(console, f"OTHER WRONG DECISIONS ({len(other)}, {how})", "bold yellow")
    width = max(console.width - 4, 40)
    for line in shown:
        _say(console, "  ≠ " + (line if verbose else one_line(line, width)))
    if len(shown) < len(other):
        _say(console, f"  ... and {len(other) - len(shown)} more (--verbose, --markdown)")


def _print_failures(console: Console, report: EvalReport, verbose: bool) -> None:
    judge_errors = raised(report)
    if judge_errors:
        _say(console, f"JUDGE EXCEPTIONS ({len(judge_errors)})", "bold red")
        for name, trace in judge_errors:
            last = trace.strip().splitlines()[-1] if trace.strip() else "?"
            _say(console, f"  ! {name}: {last}")
            if verbose:
                _say(console, trace.rstrip())
        if not verbose:
            _say(console, "  (tracebacks: --verbose, or `traceback` in the --json outcomes)")
    if report.run_failures:
        _say(console, f"RUN FAILURES ({len(report.run_failures)})", "bold red")
        for failure in report.run_failures:
            error = failure.error.strip() if verbose else _tail(failure.error, _ERROR_CHARS)
            _say(console, f"  ! {failure.case_id}: {error}")  # guest text: never markup


def _print_mutants(console: Console, report: EvalReport) -> None:
    console.rule("[bold]MUTANTS (scored with their cases' labels; not in the figures above)")
    figures = Table(show_header=False, box=None, padding=(0, 2))
    for name, value in mutant_headline(report):
        figures.add_row(name, value)
    kinds = Table(title="by mutation kind", title_justify="left")
    for column in KIND_COLUMNS:
        kinds.add_column(column)
    for row in kind_rows(report):
        kinds.add_row(*row)
    console.print(Group(figures, kinds))
    lines = mutant_lines(report)
    if lines:
        _say(console, f"UNSAFE APPROVALS AMONG MUTANTS ({len(lines)})", "bold red")
        for line in lines[:_SHOWN]:
            _say(console, "  ✗ " + line, "red")
        if len(lines) > _SHOWN:
            _say(console, f"  ... and {len(lines) - _SHOWN} more (see --json)")
    else:
        _say(console, "No unsafe approvals among mutants.", "bold green")
