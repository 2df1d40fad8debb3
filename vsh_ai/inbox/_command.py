"""``vsh-ai inbox``: its command-line arguments and entry point (imports nothing heavy)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ("add_inbox_arguments", "inbox_command")

_MISSING_WEB = "the inbox needs the web extra: pip install 'vsh-ai[web]'"


def add_inbox_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``inbox`` subcommand's arguments."""
    parser.add_argument(
        "workspaces", nargs="+", type=Path, metavar="WORKSPACE", help="workspaces to serve"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)"
    )
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --host to be a non-loopback address (put HTTPS in front of it)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="a Host header the server answers (default 127.0.0.1 and localhost); repeatable",
    )
    parser.add_argument(
        "--tokens-file",
        type=Path,
        default=None,
        help="file of '<token> <principal>' lines (default: one random token, printed)",
    )
    parser.add_argument(
        "--principal",
        default=None,
        help="who the printed token logs in as (default: the current user name)",
    )
    parser.add_argument(
        "--approval-ttl",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="the toolset's approval_ttl, for the time left shown (default 600)",
    )
    parser.add_argument(
        "--dbos",
        default=None,
        metavar="URL",
        help="also list workflows waiting in run_with_approvals (SQLite path or Postgres URL)",
    )


def inbox_command(args: argparse.Namespace, console: Console) -> int:
    """Serve the inbox until interrupted; returns the exit status."""
    import getpass
    import logging

    # The arguments first, with what checks them alone: a wrong one is refused before the
    # web stack and the toolset are imported (seconds of CPU on a small machine).
    from ._auth import TokenFileError, Tokens, check_bind_address

    for workspace in args.workspaces:
        if not workspace.is_dir():
            console.print(f"[red]error:[/red] {workspace}: not a folder (give a workspace)")
            return 2
    try:
        check_bind_address(args.host, allow_remote=args.allow_remote)
        if args.tokens_file is not None:
            tokens, printed = Tokens.from_file(args.tokens_file), None
        else:
            tokens, printed = Tokens.generated(args.principal or getpass.getuser())
    except (ValueError, TokenFileError) as error:
        console.print(f"[red]error:[/red] {error}")
        return 2
    try:
        from ._app import InboxConfig, create_app
        from ._server import InboxServer
    except ImportError as error:
        console.print(f"[red]error:[/red] {_MISSING_WEB} ({error})")
        return 2
    hosts = args.allowed_host or (["127.0.0.1", "localhost"] if not args.allow_remote else ["*"])
    if args.host not in hosts and "*" not in hosts:
        hosts = [*hosts, args.host]
    dbos = None
    if args.dbos is not None:
        try:
            from ._dbos_items import DbosInbox

            dbos = DbosInbox(args.dbos)
        except ImportError:
            console.print("[red]error:[/red] --dbos needs DBOS: pip install 'vsh-ai[dbos]'")
            return 2
        except Exception as error:  # the database cannot be opened: say which and why
            console.print(f"[red]error:[/red] --dbos {args.dbos}: {error}")
            return 2
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("vsh_ai.inbox").setLevel(logging.INFO)
    app = create_app(
        InboxConfig(
            workspaces=args.workspaces,
            tokens=tokens,
            ttl_s=args.approval_ttl,
            allowed_hosts=hosts,
            dbos=dbos,
        )
    )
    try:
        server = InboxServer(app, host=args.host, port=args.port)
    except OSError as error:
        console.print(f"[red]error:[/red] cannot listen on {args.host}:{args.port} ({error})")
        return 2
    console.print(f"vsh-ai inbox for {len(args.workspaces)} workspace(s) at {server.url}")
    if printed is not None:
        # Printed once, as Jupyter does: whoever has it can decide as this principal.
        print(f"Open {server.url}/login?token={printed}", flush=True)
    else:
        console.print(f"Log in with a token from {args.tokens_file}")
    try:
        server.run()
    finally:
        if dbos is not None:
            dbos.close()
    return 0
