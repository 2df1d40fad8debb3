"""What ``vsh-ai harvest`` keeps of a deferred call: its program and before-state.

:func:`harvest_capture` is taken when a call is deferred and stored in its approval
binding (:attr:`~vsh_ai.toolset._bindings.ApprovalBinding.harvest`); it fails closed
(bounded, secret-free, or a ``skip_reason`` and no bytes). :func:`denied_by` is how a
harvested denial names who denied.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from .._evidence import Evidence
    from .._verdict import Verdict

__all__ = (
    "HARVEST_FILE_BYTES",
    "HARVEST_TOTAL_BYTES",
    "UNRECORDED_DENIER",
    "HarvestCapture",
    "denied_by",
    "harvest_capture",
)

HARVEST_FILE_BYTES = 64 * 1024
HARVEST_TOTAL_BYTES = 256 * 1024
UNRECORDED_DENIER = (
    "who denied was not recorded (Pydantic AI passes no metadata with a denied call; deny "
    "with vsh_ai.denial(principal, note) to record it)"
)


def denied_by(principal: str) -> tuple[str, str]:
    """``(" by <principal>", "")`` for a denial that recorded who denied, else
    ``("", "; <why nobody is named>")``.

    The principal of a denial comes only from the ``ToolDenied`` message
    :func:`~vsh_ai.toolset.denial` writes (the binding's ``end_principal``): Pydantic AI
    drops ``DeferredToolResults.metadata`` for denied calls, so a plain ``ToolDenied``
    names no one, and the harvested case says so rather than guessing.
    """
    return (f" by {principal}", "") if principal else ("", f"; {UNRECORDED_DENIER}")


class HarvestCapture(BaseModel):
    """What ``vsh-ai harvest`` needs to turn a resolved approval into a suite case.

    ``files`` maps each path the transaction read or changed to its base64 before-bytes
    (bounded, secret-free); when the record cannot be harvested, ``skip_reason`` says why
    and no bytes are kept.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    language: Literal["monty", "bash"] = "monty"
    program: str = ""
    intent: str = ""
    files: dict[str, str] = {}
    modes: dict[str, int] = {}
    skip_reason: str = ""


def harvest_capture(
    *,
    tool: str,
    program: str,
    intent: str,
    language: Literal["monty", "bash"],
    evidence: Evidence | None,
    verdict: Verdict | None = None,
) -> HarvestCapture:
    """The before-state and program of a deferred call, or why it cannot become a case.

    Fails closed: missing or incomplete evidence, denied (protected) accesses, paths a
    judge named, files over the bounds and anything holding a detected secret all give a
    capture with ``skip_reason`` and no bytes.
    """
    from ..analysis._secrets import find_secrets, redact_text
    from ._result import _named

    def skipped(reason: str) -> HarvestCapture:
        return HarvestCapture(tool=tool, language=language, skip_reason=reason)

    if evidence is None:
        return skipped("no evidence was captured for this transaction")
    if evidence.counters.denied_accesses:
        return skipped("the program touched protected paths (VSH denied an access)")
    if find_secrets(program):
        return skipped("the program holds a detected secret")
    intent = redact_text(intent)[0]  # untrusted text: keep what it says, not a secret in it
    changed = {c.path: c for c in evidence.changes}
    paths = list(dict.fromkeys([*evidence.read_paths, *changed]))
    if _named(verdict, paths):
        return skipped("the judge named a path this program touched (possibly protected)")
    observed: dict[str, str | None] = {}
    for effect in evidence.effects:
        if effect.operation == "content_read":
            for path in effect.paths:
                observed.setdefault(path, effect.observed_content)
    files: dict[str, str] = {}
    modes: dict[str, int] = {}
    total = 0
    for path in paths:
        change = changed.get(path)
        if change is not None:
            node = change.before
            if node is None or node.kind in ("directory", "dir"):
                continue  # created by the program, or a folder its files recreate
            if node.kind != "file":
                return skipped(f"{path}: before-state is a {node.kind}, not a regular file")
            data = evidence.blob_bytes(node.blob)
            modes[path] = node.mode & 0o777
        else:
            data = evidence.blob_bytes(observed.get(path))
        if data is None:
            return skipped(f"{path}: before bytes were not captured")
        if len(data) > HARVEST_FILE_BYTES:
            return skipped(f"too large to harvest: {path} has {len(data)} bytes")
        total += len(data)
        if total > HARVEST_TOTAL_BYTES:
            return skipped(f"too large to harvest: before-state over {HARVEST_TOTAL_BYTES} bytes")
        if find_secrets(data.decode("utf-8", errors="replace")):
            return skipped(f"{path}: before-state holds a detected secret")
        files[path] = base64.b64encode(data).decode()
    return HarvestCapture(
        tool=tool, language=language, program=program, intent=intent, files=files, modes=modes
    )
