"""``vsh-ai harvest``: resolved deferred approvals of a workspace become a labelled suite."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._cli_io import UsageError, check_output, is_stdio, write

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ("harvest_command",)


def harvest_command(args: argparse.Namespace, console: Console) -> int:
    from pydantic import ValidationError
    from rich.text import Text

    if not args.workspace.is_dir():
        raise UsageError(f"WORKSPACE {args.workspace}: not a folder")
    if args.state_directory is not None and not args.state_directory.is_dir():
        raise UsageError(f"--state-directory {args.state_directory}: not a folder")
    check_output(args.out, "--out")
    from .toolset._signing import approval_key_path

    if not approval_key_path().is_file():
        raise UsageError(
            f"no approval signing key at {approval_key_path()}: run harvest as the user (or "
            "with the VSH_AI_APPROVAL_KEY_FILE) that ran the agent, so records can be verified"
        )
    # After the arguments are checked: a usage error costs no import of the analysers.
    from .evals._harvest import DEFAULT_AUTHORIZATION, harvest, suite_yaml

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
    write(args.out, text, "--out")  # `--out -`: the suite on stdout, the summary on stderr
    if not is_stdio(args.out):
        console.print(Text(f"wrote {args.out}"), highlight=False, emoji=False)
    return 0
