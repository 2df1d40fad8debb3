"""The ``vsh-ai`` command: score judges offline against labelled VSH suites."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from rich.console import Console

from . import _process
from ._cli_io import UsageError
from ._cli_parser import parser as _parser

# Everything heavy (rich, pydantic, Pydantic AI, VSH, the analysers) is imported by the
# command that needs it: `--version` and the listing commands start in a fraction of
# the time `eval` needs to import its runner.

__all__ = ("main", "script")


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


def _stdout_claimed(args: argparse.Namespace) -> bool:
    """An output option is ``-`` (standard output)."""
    return any(
        str(getattr(args, name, None)) == "-" for name in ("json", "markdown", "html", "out")
    )


def _run(args: argparse.Namespace, console: Console, errors: Console) -> int:
    """Run one command (each command's module is imported only when it runs)."""
    if args.command in ("eval", "compare"):
        from ._cli_eval import compare_command, eval_command

        return (eval_command if args.command == "eval" else compare_command)(args, console)
    if args.command == "harvest":
        from ._cli_harvest import harvest_command

        return harvest_command(args, console)
    if args.command == "inbox":
        from .inbox._command import inbox_command

        return inbox_command(args, console)
    from ._cli_files import check_command, judges_command, schema_command, suites_command

    if args.command == "check":
        return check_command(args, console, errors)
    if args.command == "schema":
        return schema_command(args, console)
    if args.command == "suites":
        return suites_command(args, console)
    return judges_command(args, console)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vsh-ai`` console script; returns the exit status.

    0 ok; 1 a gate tripped (a ``--fail-if``, or ``eval``'s implicit one on reviewer
    failures); 2 bad input, a configuration error or a run failure, reported as one
    ``error:`` line on stderr.
    """
    os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
    args = _parser().parse_args(argv)
    if args.command in _LIGHT:
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    console = Console() if sys.stdout.isatty() else Console(width=120)
    if _stdout_claimed(args):  # `--json -`: the data owns stdout, the report goes to stderr
        console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
    errors = Console(stderr=True, soft_wrap=True)
    try:
        return _run(args, console, errors)
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


def script() -> NoReturn:
    """The ``vsh-ai`` console script and ``python -m vsh_ai``: ``main()``, then exit.

    Garbage collection is tuned for a process of vsh-ai's own (:mod:`vsh_ai._process`):
    rarer full collections, and a frozen heap at exit. ``main`` itself changes nothing:
    code that calls it (tests included) goes on running.
    """
    _process.at_start()
    try:
        status = main()
    finally:  # also after argparse's own exits (``--version``, ``--help``, a usage error)
        _process.at_exit()
    raise SystemExit(status)


if __name__ == "__main__":
    script()
