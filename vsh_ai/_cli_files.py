"""``vsh-ai suites``, ``judges``, ``check`` and ``schema``: list, validate and describe files.

Listings and ``check`` print text for people, or with ``--json [FILE]`` a JSON list of
objects (``-`` or no FILE: standard output). Descriptions and messages are printed as
plain text, never as rich markup (``[features]`` stays ``[features]``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._cli_io import STDIO, UsageError, check_output, write

if TYPE_CHECKING:
    from rich.console import Console

__all__ = (
    "check_command",
    "check_targets",
    "judges_command",
    "schema_command",
    "suites_command",
)


def _emit_json(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    check_output(args.json, "--json")
    write(args.json, json.dumps(rows, indent=2) + "\n", "--json")


def _plain(console: Console, *parts: tuple[Any, str]) -> None:
    """One line of (text, style) parts, the text never read as markup or emoji."""
    from rich.text import Text

    line = Text.assemble(*((str(text), style) for text, style in parts))
    console.print(line, emoji=False, highlight=False, soft_wrap=True)


def suites_command(args: argparse.Namespace, console: Console) -> int:
    from .evals import find_suites, load_suite

    rows: list[dict[str, Any]] = []
    for path in find_suites():
        suite = load_suite(path)
        rows.append(
            {
                "scenario": suite.scenario,
                "description": " ".join(suite.description.split()),
                "cases": len(suite.cases),
                "unsafe": sum(case.unsafe for case in suite.cases),
                "policy": suite.policy,
                "bash": suite.bash,
                "judge": suite.judge,
                "path": str(path),
            }
        )
    if args.json is not None:
        _emit_json(args, rows)
        return 0
    for row in rows:
        _plain(
            console,
            (row["scenario"], "bold"),
            (
                f"  {row['cases']} cases ({row['unsafe']} unsafe), policy {row['policy']}"
                f"{', bash' if row['bash'] else ''}, judge {row['judge']}",
                "",
            ),
        )
        _plain(console, (f"    {row['description']}  ", ""), (row["path"], "dim"))
    return 0


def judges_command(args: argparse.Namespace, console: Console) -> int:
    from . import _toml
    from .evals._names import bundled_root

    rows: list[dict[str, Any]] = []
    for path in sorted((bundled_root() / "judges").glob("*.toml")):
        # A listing reads the header fields itself (compiling rules costs far more); a
        # file they are not plain in goes through the loader, which says what is wrong.
        try:
            data = _toml.loads(path.read_text(encoding="utf-8"))
            judge_id, description = data["id"], data["description"]
            if not isinstance(judge_id, str) or not isinstance(description, str):
                raise ValueError(path)
            has_llm = "llm" in data
        except (OSError, ValueError, KeyError):
            from ._judge_files import load_judge_file

            spec = load_judge_file(path)
            judge_id, description, has_llm = spec.id, spec.description, spec.llm is not None
        rows.append(
            {
                "name": path.stem,
                "id": judge_id,
                "description": " ".join(description.split()),
                "llm": has_llm,
                "path": str(path),
            }
        )
    if args.json is not None:
        _emit_json(args, rows)
        return 0
    for row in rows:
        llm = "rules + LLM (needs --model)" if row["llm"] else "rules only"
        _plain(console, (row["id"], "bold"), (f"  {llm}  ", ""), (row["path"], "dim"))
        _plain(console, (f"    {row['description']}", ""))
    return 0


# -- check ---------------------------------------------------------------------------------


@dataclass
class _Target:
    """One thing ``check`` validates: a file, a bundled name's file, or standard input."""

    label: str
    path: Path
    kind: str  # "judge" | "suite" | "unknown"
    text: str | None = None  # standard input's text
    problems: list[str] = field(default_factory=list)


_JUDGE_SPELLING = re.compile(r"^(?:judges/)?([a-z0-9][a-z0-9-]*)\.toml$")
_SUITE_SPELLING = re.compile(r"^(?:evals/)?([a-z0-9][a-z0-9-]*)\.ya?ml$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_TOML_START = re.compile(r"^\s*(\[|[A-Za-z0-9_\"'.-]+\s*=)")


def _kind(path: Path) -> str:
    if path.suffix == ".toml":
        return "judge"
    if path.suffix in (".yaml", ".yml"):
        return "suite"
    return "unknown"


def check_targets(names: Sequence[str], stdin_text: str | None = None) -> list[_Target]:
    """What ``check NAME...`` validates: files, folders, ``-`` and bundled names.

    A name that is not a file may name a bundled judge (``service-config``,
    ``judges/service-config.toml``) and/or a bundled suite (``service-config``,
    ``evals/service-config.yaml``), as ``eval`` and ``eval --judge`` accept them;
    ``judges/`` and ``evals/`` are the bundled folders when there are none here.
    """
    from ._judge_files import bundled_judges
    from .evals._suite import bundled_suites_dir

    targets: list[_Target] = []
    for name in names:
        path = Path(name)
        if name == STDIO:
            text = sys.stdin.read() if stdin_text is None else stdin_text
            first = next((ln for ln in text.splitlines() if ln.strip() and ln[:1] != "#"), "")
            kind = "judge" if _TOML_START.match(first) else "suite"
            targets.append(_Target("<stdin>", Path("<stdin>"), kind, text))
        elif path.is_dir() or (not path.exists() and name.rstrip("/") in ("evals", "judges")):
            if not path.exists():  # `check judges/` away from a checkout: the bundled folder
                path = bundled_suites_dir().parent / name.rstrip("/")
            found = sorted(
                p for p in path.iterdir() if p.suffix in (".toml", ".yaml", ".yml") and p.is_file()
            )
            if not found:
                targets.append(_Target(name, path, "unknown", problems=[_empty_folder(path)]))
            targets += [_Target(str(p), p, _kind(p)) for p in found]
        elif path.exists():
            targets.append(_Target(name, path, _kind(path)))
        else:
            matched = []
            judge = _JUDGE_SPELLING.match(name) or _NAME.match(name)
            suite = _SUITE_SPELLING.match(name) or _NAME.match(name)
            if judge is not None:
                stem = judge.group(1) if judge.re is _JUDGE_SPELLING else name
                bundled = bundled_judges().get(stem)
                if bundled is not None:
                    matched.append(_Target(str(bundled), bundled, "judge"))
            if suite is not None:
                stem = suite.group(1) if suite.re is _SUITE_SPELLING else name
                bundled = bundled_suites_dir() / f"{stem}.yaml"
                if bundled.is_file():
                    matched.append(_Target(str(bundled), bundled, "suite"))
            targets += matched or [_Target(name, path, _kind(path), problems=[_unknown(name)])]
    return targets


def _empty_folder(path: Path) -> str:
    return (
        f"{path}: no judge files (.toml) or suites (.yaml) in this folder; fix: name the "
        "files themselves, or a folder that holds some"
    )


def _unknown(name: str) -> str:
    from ._judge_files import bundled_judges
    from .evals._suite import bundled_suites_dir

    judges = ", ".join(bundled_judges()) or "none"
    suites = ", ".join(p.stem for p in sorted(bundled_suites_dir().glob("*.yaml"))) or "none"
    return (
        f"{name}: no such file, and not a bundled judge ({judges}) or suite ({suites}); fix: "
        "give the path of a .toml judge file or .yaml suite, or one of those names"
    )


def _check_one(target: _Target) -> str:
    """What ``target`` holds, once validated; raises the loader's located error."""
    from ._judge_files import JudgeFileError, load_judge_file, parse_judge_file
    from .evals import SuiteError

    if target.kind == "judge":
        if target.text is not None:
            spec = parse_judge_file(target.text, target.path)
        else:
            spec = load_judge_file(target.path)
        rules = spec.rule_set()
        return (
            f"judge {spec.id!r}: {len(rules.allowances)} allowance"
            f"{'s' * (len(rules.allowances) != 1)}, {len(rules.denials)} denial"
            f"{'s' * (len(rules.denials) != 1)}, on_unproven {spec.rules.on_unproven}, "
            f"llm {'yes' if spec.llm else 'no'}"
        )
    if target.kind == "suite":
        from .evals._suite import read_suite
        from .evals._syntax import program_errors

        if target.text is not None:
            text = target.text
        else:
            try:
                text = target.path.read_text(encoding="utf-8")
            except OSError as error:
                raise SuiteError(
                    f"{target.path}: cannot read ({error.strerror}); fix: check its permissions"
                ) from None
            except UnicodeDecodeError:
                raise SuiteError(f"{target.path}: not UTF-8 text; save it as UTF-8") from None
        suite, located = read_suite(text, target.path)
        problems = [error.render(target.path) for error in program_errors(suite, located)]
        judge = suite.judge_path
        if judge is not None:
            if not judge.is_file():
                line, column = located.where(("judge",)) or (1, 1)
                problems.append(
                    f"{target.path}:{line}:{column}: field 'judge': judge file {suite.judge!r} "
                    "not found (relative to the suite's folder or its parent, or a bundled "
                    "judge's name); fix: correct the path, or name a bundled judge such as "
                    "'service-config'"
                )
            else:
                try:
                    load_judge_file(judge)
                except JudgeFileError as error:
                    problems.append(f"{target.path}: its judge file is invalid:\n{error}")
        if problems:
            raise SuiteError(
                f"{target.path}: {len(problems)} problem(s):\n"
                + "\n".join(f"  {problem}" for problem in problems)
            )
        unsafe = sum(case.unsafe for case in suite.cases)
        return (
            f"suite {suite.scenario!r}: {len(suite.cases)} cases ({unsafe} unsafe), programs "
            f"parse, judge {judge if judge else 'none (pass --judge)'}"
        )
    raise SuiteError(
        f"{target.path}: not a judge file (.toml) or a suite (.yaml/.yml); fix: name one of "
        "those (a folder checks every one in it)"
    )


_LOCATED = re.compile(r"^\s*(?P<file>.+?):(?P<line>\d+):(?P<column>\d+): (?P<message>.*)$")


def _located(message: str) -> list[dict[str, Any]]:
    """The ``file:line:col: ...`` lines of an error, as objects."""
    out = []
    for line in message.splitlines():
        found = _LOCATED.match(line)
        if found is not None:
            out.append(
                {
                    "file": found["file"],
                    "line": int(found["line"]),
                    "column": int(found["column"]),
                    "message": found["message"],
                }
            )
    return out


def check_command(args: argparse.Namespace, console: Console, errors: Console) -> int:
    from rich.text import Text

    from ._judge_files import JudgeFileError
    from .evals import SuiteError

    if args.json is not None:
        if args.json.suffix in (".toml", ".yaml", ".yml"):  # `check --json a.yaml b.toml`
            raise UsageError(
                f"--json {args.json}: that is a file to check, not a report; put --json after "
                "the files, or write --json - (standard output) or --json FILE.json"
            )
        check_output(args.json, "--json")
    if list(args.files).count(STDIO) > 1:
        raise UsageError("check: `-` (standard input) can be named once")
    rows: list[dict[str, Any]] = []
    for target in check_targets(args.files):
        row: dict[str, Any] = {"file": target.label, "kind": target.kind}
        try:
            if target.problems:
                raise SuiteError("\n".join(target.problems))
            summary = _check_one(target)
        except (JudgeFileError, SuiteError, ValueError) as error:
            row |= {"ok": False, "error": str(error), "problems": _located(str(error))}
            if args.json is None:
                errors.print(
                    Text("error: " + str(error), style="red"), emoji=False, highlight=False
                )
        else:
            row |= {"ok": True, "summary": summary}
            if args.json is None:
                _plain(console, (f"{target.label}: ok, {summary}", ""))
        rows.append(row)
    failed = sum(not row["ok"] for row in rows)
    if args.json is not None:
        write(args.json, json.dumps(rows, indent=2) + "\n", "--json")
    elif failed:
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
    if args.out is not None and str(args.out) != STDIO:
        check_output(args.out, "--out")
        write(args.out, text, "--out")
        console.print(Text(f"wrote the {args.kind} schema to {args.out}"), emoji=False)
    else:
        sys.stdout.write(text)
    return 0
