"""``vsh-ai inbox``: its command-line arguments and entry point (imports nothing heavy)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ("add_inbox_arguments", "inbox_command")


def add_inbox_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``inbox`` subcommand's arguments."""
    parser.add_argument(
        "workspaces", nargs="+", type=Path, metavar="WORKSPACE", help="workspaces to serve"
    )


def inbox_command(args: argparse.Namespace, console: Console) -> int:
    """Serve the inbox until interrupted; returns the exit status."""
    raise NotImplementedError("vsh-ai inbox is not built yet")
