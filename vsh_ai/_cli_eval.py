"""``vsh-ai eval`` and ``vsh-ai compare``: score judges, and compare two scored runs."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ._cli_io import UsageError, check_folder, check_output, write

if TYPE_CHECKING:
    from rich.console import Console

    from .evals import EvalReport

__all__ = ("compare_command", "eval_command")


def eval_command(args: argparse.Namespace, console: Console) -> int:
    if not args.logfire:
        # pydantic-evals opens spans per case and evaluator; with nothing to receive them,
        # Logfire's inspection of each span's call site (f-string magic) is pure cost:
        # about 1 s of CPU on the bundled suites. Read when Logfire is imported, below.
        os.environ.setdefault("LOGFIRE_INSPECT_ARGUMENTS", "false")
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
    from .evals._gates import exit_status

    gates = [Gate.parse(expression) for expression in args.fail_if]
    check_output(args.json, "--json")
    check_output(args.markdown, "--markdown")
    check_output(args.html, "--html")
    if args.html:
        from .evals._html import require_web

        require_web()  # before a run: without the web extra, say how to install it
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
        logfire=args.logfire,
    )
    options.validate()
    if options.record:
        for suite in suites:
            check_folder(recordings_dir(suite, options), "--record")
    heartbeat = None if options.progress or args.no_progress else _heartbeat(len(suites))
    report = anyio.run(_run_with, run_evals(suites, options), heartbeat)
    for recorder in options._recorders:
        console.print(f"recorded model traffic: {escape(str(recorder.path))}", emoji=False)
    status = exit_status(report, gates)  # once: the exit and the report's verdict line
    render_terminal(report, console, verbose=args.verbose, status=status)
    if args.json:
        write(args.json, report.model_dump_json(indent=2) + "\n", "--json")
    if args.markdown:
        write(args.markdown, render_markdown(report, status), "--markdown")
    if args.html:
        from .evals._html import render_html

        write(args.html, render_html(report), "--html")
    return status.code


def _heartbeat(
    suites: int, first: float = 5.0, every: float = 30.0
) -> Callable[[], Coroutine[None, None, None]]:
    """A few lines on stderr while a run without a progress bar (stdout is not a
    terminal, as in CI) takes long: after ``first`` seconds, then every ``every``;
    nothing for a short run."""

    async def beat() -> None:
        started = time.monotonic()
        await anyio.sleep(first)
        while True:
            elapsed = time.monotonic() - started
            print(
                f"vsh-ai eval: judging {suites} suite(s), {elapsed:.0f} s so far ...",
                file=sys.stderr,
                flush=True,
            )
            await anyio.sleep(every)

    return beat


async def _run_with(
    run: Coroutine[None, None, EvalReport], side: Callable[[], Coroutine[None, None, None]] | None
) -> EvalReport:
    """Await ``run`` with ``side`` running beside it until ``run`` is done; what ``run``
    raises is raised as it is (not wrapped in an exception group)."""
    if side is None:
        return await run
    error: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(side)
        try:
            report = await run
        except Exception as raised:
            error = raised
        group.cancel_scope.cancel()
    if error is not None:
        raise error
    return report


def compare_command(args: argparse.Namespace, console: Console) -> int:
    from .evals._compare import (
        compare_reports,
        load_report,
        render_comparison_markdown,
        render_comparison_terminal,
    )

    check_output(args.markdown, "--markdown")
    check_output(args.html, "--html")
    if args.html:
        from .evals._html import require_web

        require_web()  # before a run: without the web extra, say how to install it
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
