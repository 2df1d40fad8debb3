"""The instructions that teach a model how to use the VSH tools and read their results."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

__all__ = ("instructions_for",)

_GUEST_FUNCTIONS = (
    "vsh_read(path), vsh_write(path, text, append=False), vsh_patch(path, old, new, count=1), "
    "vsh_list(path), vsh_glob(pattern, path='/workspace'), vsh_search(query, path='/workspace'), "
    "vsh_mkdir(path, parents=True, exist_ok=True), vsh_remove(path, recursive=False), "
    "vsh_move(src, dst), vsh_copy(src, dst, recursive=False, overwrite=False)"
)

_STATES = """\
Every tool call is one atomic VSH transaction on a virtual snapshot; host files change
only when the result says state="committed". Result states:
- committed: the changes are on the host.
- read: nothing needed changing (read-only work); use `result`/`stdout`.
- pending: NOT applied yet; it waits for approval. If the feedback asks for a different
  change, submit a corrected one; otherwise report the transaction and the feedback to
  the user. Never claim pending work is done, and do not resubmit it unchanged.
- rejected: NOT applied; the reviewer refused. Read `feedback`; do not resubmit as is.
- denied: NOT applied; policy refused (see `deny_reason`), e.g. protected files such as
  .env. Do not try to reach them another way.
- stale: NOT applied; files changed underneath. Re-read them and submit again.
Only committed or read work shows what the program did (`result`, `stdout`, changes,
diff); other states show the decision and the reviewer's feedback only. Always follow
the result's `next_step`. A failed program (exception, syntax error, missing file,
budget exceeded) changes nothing and comes back as an error to fix."""


def instructions_for(
    tools: Sequence[str], *, bash: bool, deferred: bool, reviewed: bool = False
) -> str:
    """Instructions for exactly the exposed tools and enabled languages."""
    lines = [
        "Workspace files live under /workspace (e.g. /workspace/app.toml); use those paths.",
        f"Available tools: {', '.join(tools)}.",
    ]
    if "vsh_run" in tools:
        lines.append(
            "vsh_run runs a program as one transaction: use it for dependent multi-step "
            "work. With language='monty' (Python subset with json and re; no tomllib, no "
            f"open()), call only these functions: {_GUEST_FUNCTIONS}. Names such as "
            "read_file do not exist. The last expression is returned as `result`."
        )
        lines.append(
            "language='bash' runs bounded shell at /workspace (no host programs, no network)."
            if bash
            else "Only language='monty' is enabled; Bash is not available."
        )
    if reviewed and "vsh_run" in tools:
        lines.append(
            "A reviewer checks this workspace's changes, so when a vsh_run program fails its "
            "error details are withheld (syntax errors excepted): catch exceptions inside "
            "the program and return a description as its last expression instead."
        )
    if deferred:
        lines.append(
            "Pending changes are sent to a person for approval; the run pauses until they decide."
        )
    wrapped = [textwrap.fill(line, width=84, break_on_hyphens=False) for line in lines]
    return "\n".join([*wrapped, _STATES])
