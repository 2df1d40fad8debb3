"""The ``vsh-ai`` command: score judges offline against labelled VSH suites."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from .evals import EvalReport

from ._cli_parser import parser as _parser

# Everything heavy (rich, pydantic, Pydantic AI, VSH, the analysers) is imported by the
# command that needs it: `--version` and the listing commands start in a fraction of
# the time `eval` needs to import its runner.

__all__ = ("main",)


def _harvest(args: argparse.Namespace, console: Console) -> int:
    from pydantic import ValidationError
    from rich.text import Text

    from .evals._harvest import DEFAULT_AUTHORIZATION, harvest, suite_yaml

    if not args.workspace.is_dir():
        raise UsageError(f"WORKSPACE {args.workspace}: not a folder")
    if args.state_directory is not None and not args.state_directory.is_dir():
        raise UsageError(f"--state-directory {args.state_directory}: not a folder")
    _check_output(args.out, "--out")
    from .toolset._signing import approval_key_path

    if not approval_key_path().is_file():
        raise UsageError(
            f"no approval signing key at {approval_key_path()}: run harvest as the user (or "
            "with the VSH_AI_APPROVAL_KEY_FILE) that ran the agent, so records can be verified"
        )
    result = harvest(
        args.workspace,
        state_directory=args.state_directory,
        include_pending=args.include_pending,
    )
    console.print(Text(result.summary()), highlight=False, emoji=False)
    if not result.cases:
        raise UsageError("nothing to harvest: no resolved approval could become a case")
    try:
        text = suite_yaml(
            result.cases,
            scenario=args.scenario,
            authorization=args.authorization or DEFAULT_AUTHORIZATION,
            judge=args.judge,
        )
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in error.errors(include_url=False)
        )
        raise UsageError(f"invalid --scenario/--authorization/--judge: {problems}") from None
    _write(args.out, text, "--out")
    console.print(Text(f"wrote {args.out}"), highlight=False, emoji=False)
    return 0


class UsageError(ValueError):
    """Bad command-line input found before anything runs (exit 2)."""


def _check_output(path: Path | None, flag: str) -> None:
    """Refuse an output path that cannot be written, before a (possibly paid) run."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; name a file to write")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {parent} does not exist; create it first")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(parent, os.W_OK | os.X_OK)
    if not writable:
        raise UsageError(f"{flag} {path}: not writable; choose another path")


def _check_folder(folder: Path, flag: str) -> None:
    """A folder that exists or can be created, and can be written."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(
            f"{flag}: cannot write recordings to {folder} ({existing} is not a writable "
            "folder); pass --recordings DIR"
        )


def _write(path: Path, text: str, flag: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{flag} {path}: cannot write it ({error.strerror})") from None


def _eval(args: argparse.Namespace, console: Console) -> int:
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
    _check_output(args.json, "--json")
    _check_output(args.markdown, "--markdown")
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
            _check_folder(recordings_dir(suite, options), "--record")
    report = anyio.run(run_evals, suites, options)
    render_terminal(report, console, verbose=args.verbose)
    for recorder in options._recorders:
        console.print(f"recorded model traffic: {escape(str(recorder.path))}", emoji=False)
    if args.json:
        _write(args.json, report.model_dump_json(indent=2) + "\n", "--json")
    if args.markdown:
        _write(args.markdown, render_markdown(report), "--markdown")
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
    import tomllib

    from .evals._names import bundled_root

    folder = bundled_root() / "judges"
    for path in sorted(folder.glob("*.toml")):
        # A listing reads the header fields itself (compiling rules costs far more); a
        # file they are not plain in goes through the loader, which says what is wrong.
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            judge_id, description = data["id"], data["description"]
            if not isinstance(judge_id, str) or not isinstance(description, str):
                raise ValueError(path)
            has_llm = "llm" in data
        except (OSError, ValueError, KeyError):
            from ._judge_files import load_judge_file

            spec = load_judge_file(path)
            judge_id, description, has_llm = spec.id, spec.description, spec.llm is not None
        llm = "rules + LLM (needs --model)" if has_llm else "rules only"
        description = " ".join(description.split())
        console.print(f"[bold]{judge_id}[/]  {llm}  [dim]{path}[/]\n    {description}")
    return 0


def _check_paths(names: Sequence[str]) -> list[Path]:
    paths: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = sorted(
                p for p in path.iterdir() if p.suffix in (".toml", ".yaml", ".yml") and p.is_file()
            )
            paths += found or [path]
        else:
            paths.append(path)
    return paths


def _check_one(path: Path) -> str:
    """What ``path`` holds, once validated; raises the loader's located error."""
    from ._judge_files import JudgeFileError, load_judge_file
    from .evals import SuiteError, load_suite

    if path.is_dir():
        raise SuiteError(f"{path}: no judge files (.toml) or suites (.yaml) in this folder")
    if path.suffix == ".toml":
        spec = load_judge_file(path)
        rules = spec.rule_set()
        return (
            f"judge {spec.id!r}: {len(rules.allowances)} allowance"
            f"{'s' * (len(rules.allowances) != 1)}, {len(rules.denials)} denial"
            f"{'s' * (len(rules.denials) != 1)}, on_unproven {spec.rules.on_unproven}, "
            f"llm {'yes' if spec.llm else 'no'}"
        )
    if path.suffix in (".yaml", ".yml"):
        suite = load_suite(path)
        judge = suite.judge_path
        if judge is not None:
            if not judge.is_file():
                raise SuiteError(
                    f"{path}: field 'judge': judge file {suite.judge!r} not found (relative to "
                    "the suite's folder, its parent, or the bundled judges)"
                )
            try:
                load_judge_file(judge)
            except JudgeFileError as error:
                raise SuiteError(f"{path}: its judge file is invalid:\n{error}") from None
        unsafe = sum(case.unsafe for case in suite.cases)
        return (
            f"suite {suite.scenario!r}: {len(suite.cases)} cases ({unsafe} unsafe), "
            f"judge {judge if judge else 'none (pass --judge)'}"
        )
    raise SuiteError(f"{path}: not a judge file (.toml) or a suite (.yaml/.yml)")


def _check(args: argparse.Namespace, console: Console, errors: Console) -> int:
    from rich.text import Text

    from ._judge_files import JudgeFileError
    from .evals import SuiteError

    failed = 0
    for path in _check_paths(args.files):
        try:
            summary = _check_one(path)
        except (JudgeFileError, SuiteError, ValueError) as error:
            failed += 1
            errors.print(Text("error: " + str(error), style="red"), emoji=False, highlight=False)
        else:
            console.print(
                Text(f"{path}: ok, {summary}"), emoji=False, highlight=False, soft_wrap=True
            )
    if failed:
        errors.print(Text(f"{failed} file(s) with errors", style="bold red"))
    return 2 if failed else 0


def _schema(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    if args.kind == "judge":
        from ._schema_cache import judge_schema_text

        text = judge_schema_text()
    else:
        from .evals._suite import suite_json_schema

        text = suite_json_schema()
    if args.out is not None:
        _check_output(args.out, "--out")
        _write(args.out, text, "--out")
        console.print(Text(f"wrote the {args.kind} schema to {args.out}"), emoji=False)
    else:
        sys.stdout.write(text)
    return 0


def _compare(args: argparse.Namespace, console: Console) -> int:
    from .evals._compare import (
        compare_reports,
        load_report,
        render_comparison_markdown,
        render_comparison_terminal,
    )

    _check_output(args.markdown, "--markdown")
    a, b = load_report(args.a), load_report(args.b)

    def label(path: Path, report: EvalReport) -> str:
        judges = ", ".join(dict.fromkeys(s.judge for s in report.suites)) or "no suites"
        return f"{path} ({judges}; {report.created})"

    comparison = compare_reports(a, b, label(args.a, a), label(args.b, b))
    render_comparison_terminal(comparison, console)
    if args.markdown:
        _write(args.markdown, render_comparison_markdown(comparison), "--markdown")
    return 0


_KNOWN_ERRORS = (
    ("vsh_ai._judge_files", "JudgeFileError"),
    ("vsh_ai.evals._suite", "SuiteError"),
    ("vsh_ai.evals._run", "EvalSetupError"),
    ("vsh_ai.evals._report", "GateError"),
    ("vsh_ai.evals._replay", "ReplayError"),
    ("vsh_ai.evals._pool", "WorkerError"),
    ("vsh_ai.evals._compare", "ReportError"),
)
"""Errors that are the user's input or configuration (one ``error:`` line, exit 2)."""

_LIGHT = frozenset({"suites", "judges", "schema"})
"""Commands that only read files: pydantic's plugins (Logfire's) need not load for them."""


def _known(error: Exception) -> bool:
    """A known error; its class can only be raised once its module was imported."""
    if isinstance(error, UsageError):
        return True
    for module_name, name in _KNOWN_ERRORS:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(error, getattr(module, name)):
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vsh-ai`` console script; returns the exit status.

    0 ok; 1 a ``--fail-if`` gate tripped (nothing else); 2 bad input, a configuration
    error or a run failure, reported as one ``error:`` line on stderr.
    """
    os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
    args = _parser().parse_args(argv)
    if args.command in _LIGHT:
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    console = Console() if sys.stdout.isatty() else Console(width=120)
    errors = Console(stderr=True, soft_wrap=True)
    try:
        if args.command == "eval":
            return _eval(args, console)
        if args.command == "check":
            return _check(args, console, errors)
        if args.command == "schema":
            return _schema(args, console)
        if args.command == "compare":
            return _compare(args, console)
        if args.command == "harvest":
            return _harvest(args, console)
        if args.command == "suites":
            return _suites(console)
        return _judges(console)
    except Exception as error:
        if _known(error):
            # Verbatim: a path or module:attr in the message is neither markup nor an emoji.
            errors.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, emoji=False)
            return 2
        # a bug or an environment problem: still not a gate (1)
        if getattr(args, "verbose", False):
            import traceback

            errors.print(Text(traceback.format_exc()), emoji=False, highlight=False)
        hint = "" if getattr(args, "verbose", False) else " (--verbose shows the traceback)"
        errors.print(
            Text(f"error: unexpected {type(error).__name__}: {error}{hint}", style="red"),
            emoji=False,
            highlight=False,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
