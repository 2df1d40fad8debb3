"""Workspace and state-directory checks for VshToolset, and the quarantine marker file."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import vsh

__all__ = (
    "check_state_directory",
    "check_workspace",
    "probe_state_directory",
    "read_quarantine",
)


def check_workspace(workspace: Path) -> None:
    """A missing workspace is the caller's mistake: say which path and what to do, rather
    than VSH's ``canonicalize workspace capability`` error."""
    if workspace.is_dir():
        return
    where = f"{workspace}" + (f" ({workspace.absolute()})" if not workspace.is_absolute() else "")
    if workspace.exists():
        raise NotADirectoryError(
            f"VshToolset workspace {where} is not a folder; pass the folder the agent may change"
        )
    raise FileNotFoundError(
        f"VshToolset workspace {where} does not exist; create the folder first "
        "(Path(...).mkdir(parents=True)) or pass an existing folder the agent may change"
    )


def check_state_directory(workspace: Path, state_directory: Path) -> None:
    """Approval bindings must live where agent programs cannot write (VSH guards its own
    ``.vsh-runtime``): a forged binding would choose what an approval commits."""
    root, state = workspace.resolve(), state_directory.resolve()
    if state.is_relative_to(root) and not state.is_relative_to(root / ".vsh-runtime"):
        raise ValueError(
            f"state_directory {state_directory} is inside the workspace, where agent programs "
            "can write; put it outside the workspace or under its .vsh-runtime directory"
        )


def read_quarantine(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return f"This workspace is quarantined ({path} exists but is unreadable)."
    message = data.get("message") if isinstance(data, dict) else None
    return str(message) if message else f"This workspace is quarantined ({path})."


def probe_state_directory(native: vsh.Runtime, state_directory: Path) -> None:
    """Refuse a binding directory a guest program of ``native`` can reach.

    An existing runtime does not reveal its workspace, so ask it: drop a marker with a
    random name in ``state_directory`` and preview a program that tries every place the
    marker could appear under /workspace. Only VSH's own guarded state (reads there are
    denied) or a directory outside the workspace passes.
    """
    state = state_directory.resolve()
    state.mkdir(parents=True, exist_ok=True)
    marker = state / f".vsh-ai-probe-{secrets.token_hex(8)}"
    marker.write_text("probe")
    try:
        candidates = [
            "/workspace/" + str(marker.relative_to(ancestor))
            for ancestor in (state, *state.parents)
        ]
        code = (
            "found = []\n"
            f"for p in {candidates!r}:\n"
            "    try:\n"
            "        vsh_read(p)\n"
            "        found.append(p)\n"
            "    except Exception:\n"
            "        pass\n"
            "found\n"
        )
        request = vsh.RunRequest(code, intent="vsh-ai: check the approval state directory")
        try:
            receipt = native.preview(request)
        except vsh.VshExecutionError:
            return  # reads of VSH's own state are refused outright
        try:
            reachable = receipt.state != "denied" and bool(receipt.result)
        finally:
            native.discard_preview(receipt.transaction)
        if reachable:
            raise ValueError(
                f"state_directory {state_directory} is inside the runtime's workspace, where "
                "agent programs can write; put it outside the workspace or under its "
                ".vsh-runtime directory"
            )
    finally:
        marker.unlink(missing_ok=True)
