"""``vsh-ai eval`` and ``vsh-ai compare``: score judges, and compare two scored runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ._cli_io import UsageError, check_folder, check_output, write

if TYPE_CHECKING:
    from rich.console import Console

    from .evals import EvalReport

__all__ = ("compare_command", "eval_command")


def eval_command(args: argparse.Namespace, console: Console) -> int:
    import anyio
    from rich.markup import escape

    from .evals import (
        EvalOptions,
        Gate,
        GateError,
        find_suites,
        load_suite,
        recordings_dir,
        render_markdown,
        render_terminal,
        run_evals,
    )

    gates = [Gate.parse(expression) for expression in args.fail_if]
    check_output(args.json, "--json")
    check_output(args.markdown, "--markdown")
    check_output(args.html, "--html")
    if args.json and args.markdown and args.json.resolve() == args.markdown.resolve():
        raise UsageError("--json and --markdown name the same file; choose two paths")
    # Like `python -m`, pytest and uvicorn: `--judge mymodule:judge` imports from here.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    suites = [load_suite(path) for path in find_suites(args.suites)]
    names = [suite.scenario for suite in suites]
    for gate in gates:
        if gate.suite is not None and gate.suite not in names:
            raise GateError(
                f"--fail-if {gate.label}{gate.op}{gate.value:g}: suite {gate.suite!r} is not "
                f"in this run ({', '.join(names)})"
            )
    options = EvalOptions(
        judge=args.judge,
        model=args.model,
        stress=args.stress,
        record=args.record,
        replay=args.replay,
        repeat=args.repeat,
        concurrency=args.concurrency,
        progress=not args.no_progress and console.is_terminal,
        mutants=args.mutants,
        workers=args.workers,
        recordings=args.recordings,
    )
    options.validate()
    if options.record:
        for suite in suites:
            check_folder(recordings_dir(suite, options), "--record")
    report = anyio.run(run_evals, suites, options)
    render_terminal(report, console, verbose=args.verbose)
    for recorder in options._recorders:
        console.print(f"recorded model traffic: {escape(str(recorder.path))}", emoji=False)
    if args.json:
        write(args.json, report.model_dump_json(indent=2) + "\n", "--json")
    if args.markdown:
        write(args.markdown, render_markdown(report), "--markdown")
    if args.html:
        from .evals._html import render_html

        write(args.html, render_html(report), "--html")
    if report.run_failures:
        console.print(
            f"[bold red]error:[/] {len(report.run_failures)} case(s) could not be run; "
            "fix them before trusting these numbers"
        )
        return 2
    tripped = report.gate_failures(gates)
    for reason in tripped:
        console.print(f"[bold red]gate failed:[/] {reason}")
    return 1 if tripped else 0


def compare_command(args: argparse.Namespace, console: Console) -> int:
    from .evals._compare import (
        compare_reports,
        load_report,
        render_comparison_markdown,
        render_comparison_terminal,
    )

    check_output(args.markdown, "--markdown")
    check_output(args.html, "--html")
    a, b = load_report(args.a), load_report(args.b)

    def label(path: Path, report: EvalReport) -> str:
        judges = ", ".join(dict.fromkeys(s.judge for s in report.suites)) or "no suites"
        return f"{path} ({judges}; {report.created})"

    comparison = compare_reports(a, b, label(args.a, a), label(args.b, b))
    render_comparison_terminal(comparison, console)
    if args.markdown:
        write(args.markdown, render_comparison_markdown(comparison), "--markdown")
    if args.html:
        from .evals._html import render_comparison_html

        write(args.html, render_comparison_html(comparison), "--html")
    return 0
