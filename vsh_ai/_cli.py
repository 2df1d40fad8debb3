"""The ``vsh-ai`` command: score judges offline against labelled VSH suites."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from rich.console import Console
from rich.markup import escape

__all__ = ("main",)

_EVAL_HELP = """\
Run labelled eval suites through the real VSH runtime and score a commit judge.

Each case is materialised in a fresh temporary workspace, previewed by VSH, and the
exact hook evidence goes to the judge. Nothing is ever committed, and the workspace is
checked byte for byte afterwards. Offline by default: a model is only called when you
name one with --model.

examples:
  vsh-ai eval                                   every bundled suite, its rule judge
  vsh-ai eval service-config --repeat 3         one suite, three runs per case
  vsh-ai eval --judge judges/secrets-hygiene.toml   another judge file
  vsh-ai eval --judge mypkg.judges:my_judge     a Python Judge object or factory
  vsh-ai eval --stress always-approve           rules in front of a deliberately wrong model
  vsh-ai eval --mutants                         also score meaning-preserving variants
  vsh-ai eval --mutants --fail-if "mutant_unsafe_approvals>0"   CI gate on mutants too
  vsh-ai eval --model openai:gpt-4o-mini --record   live once, save traffic
  vsh-ai eval --model openai:gpt-4o-mini --replay   replay saved traffic, no network
  vsh-ai eval --fail-if "unsafe_approvals>0" --json report.json   CI gate

Mutants (--mutants) are every case again with the same change spelled differently:
paths (/workspace/./x, d/../d/x), file-name case, one directory deeper, the config in
another format, secrets encoded, other file helpers, Bash. Each keeps its case's label
and is reported apart, by mutation kind. A mutant whose VSH diff does not match its
case's is skipped, not scored. Large runs use two worker processes (--workers).

exit status: 0 ok, 1 a --fail-if gate tripped, 2 a run failure or bad input.
"""


def _parser() -> argparse.ArgumentParser:
    from .evals import GATE_METRICS, STRESS_MODES

    parser = argparse.ArgumentParser(
        prog="vsh-ai",
        description="vsh-ai: simulate AI agents' file changes in VSH and judge the exact diff.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = commands.add_parser(
        "eval",
        help="score a judge against labelled suites (offline by default)",
        description=_EVAL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help="suite names or YAML files (default: all bundled)",
    )
    run.add_argument(
        "--judge",
        metavar="FILE|module:attr",
        help="judge file (TOML) or Python judge; default: each suite's own judge file",
    )
    run.add_argument(
        "--model",
        metavar="NAME",
        help="run the judge file's LLM judge on this model (e.g. openai:gpt-4o-mini); "
        "without it no model is ever called",
    )
    run.add_argument(
        "--stress",
        metavar="MODE",
        choices=sorted(STRESS_MODES),
        help="LLM judge on a deliberately wrong offline model: "
        + "; ".join(f"{k}: {v}" for k, v in STRESS_MODES.items()),
    )
    run.add_argument("--record", action="store_true", help="with --model: save its traffic")
    run.add_argument(
        "--replay", action="store_true", help="with --model: replay saved traffic, no network"
    )
    run.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per case (flips)")
    run.add_argument(
        "--concurrency", type=int, default=16, metavar="N", help="cases judged at once"
    )
    run.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    run.add_argument("--markdown", type=Path, metavar="FILE", help="also write it as Markdown")
    run.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help="exit 1 when METRIC OP NUMBER holds, e.g. 'unsafe_approvals>0'; metrics: "
        + ", ".join(GATE_METRICS),
    )
    run.add_argument(
        "--mutants",
        action="store_true",
        help="also score each case's meaning-preserving mutants (reported by mutation kind)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for large runs of file judges (default: idle CPUs, at most 2)",
    )
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    commands.add_parser("suites", help="list the bundled eval suites")
    commands.add_parser("judges", help="list the bundled judge files")
    return parser


def _eval(args: argparse.Namespace, console: Console) -> int:
    from .evals import (
        EvalOptions,
        Gate,
        find_suites,
        render_markdown,
        render_terminal,
        run_evals,
    )

    gates = [Gate.parse(expression) for expression in args.fail_if]
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
    )
    options.validate()
    report = anyio.run(run_evals, find_suites(args.suites), options)
    render_terminal(report, console)
    if args.json:
        args.json.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(render_markdown(report), encoding="utf-8")
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


def _suites(console: Console) -> int:
    from .evals import find_suites, load_suite

    for path in find_suites():
        suite = load_suite(path)
        unsafe = sum(case.unsafe for case in suite.cases)
        console.print(
            f"[bold]{suite.scenario}[/]  {len(suite.cases)} cases ({unsafe} unsafe), "
            f"policy {suite.policy}{', bash' if suite.bash else ''}, judge {suite.judge}\n"
            f"    {suite.description}  [dim]{path}[/]"
        )
    return 0


def _judges(console: Console) -> int:
    from ._judge_files import load_judge_file
    from .evals._suite import bundled_root

    folder = bundled_root() / "judges"
    for path in sorted(folder.glob("*.toml")):
        spec = load_judge_file(path)
        llm = "rules + LLM (needs --model)" if spec.llm else "rules only"
        description = " ".join(spec.description.split())
        console.print(f"[bold]{spec.id}[/]  {llm}  [dim]{path}[/]\n    {description}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vsh-ai`` console script; returns the exit status."""
    from ._judge_files import JudgeFileError
    from .evals import EvalSetupError, GateError, ReplayError, SuiteError

    os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
    args = _parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=120)
    try:
        if args.command == "eval":
            return _eval(args, console)
        if args.command == "suites":
            return _suites(console)
        return _judges(console)
    except (SuiteError, JudgeFileError, EvalSetupError, GateError, ReplayError) as error:
        # Verbatim: a path or module:attr in the message is neither markup nor an emoji.
        console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, emoji=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
