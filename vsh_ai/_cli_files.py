"""``vsh-ai suites``, ``judges``, ``check`` and ``schema``: list, validate and describe files."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._cli_io import check_output, write

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ("check_command", "judges_command", "schema_command", "suites_command")


def suites_command(console: Console) -> int:
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


def judges_command(console: Console) -> int:
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


def check_command(args: argparse.Namespace, console: Console, errors: Console) -> int:
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


def schema_command(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    if args.kind == "judge":
        from ._schema_cache import judge_schema_text

        text = judge_schema_text()
    else:
        from .evals._suite import suite_json_schema

        text = suite_json_schema()
    if args.out is not None:
        check_output(args.out, "--out")
        write(args.out, text, "--out")
        console.print(Text(f"wrote the {args.kind} schema to {args.out}"), emoji=False)
    else:
        sys.stdout.write(text)
    return 0
