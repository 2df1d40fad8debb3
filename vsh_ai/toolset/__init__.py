"""The VSH toolset for Pydantic AI, laid out as a transaction's path.

One tool call is one VSH transaction, one stage a module:

- ``_workspace``: check the workspace and the state directory; ``_hook``: open VSH with
  the reviewer (judge, hook or person) and answer its hook calls;
- ``_transaction``: preview, review, commit, and every outside failure, as an outcome;
- ``_records`` over ``_journal``: exactly-once records of each call; ``_deferred`` over
  ``_bindings``: Pydantic AI's deferred approval bound to exact transactions (``_harvest``:
  what a deferred call keeps for ``vsh-ai harvest``);
- ``_signing``: the signing key and the signed, mirrored records that bindings, journal
  and workspace identity are written as;
- ``_render``: the ONE renderer of what the worker, the spans and the approver see;
- ``_driver``: native VSH calls off the event loop; ``_quarantine``: stop after recovery
  errors; ``_config``, ``_call_key``, ``_principal``, ``_result``, ``_tools``,
  ``_instructions``: the pieces they share;
- ``_facade``: :class:`VshToolset`, a thin ``FunctionToolset`` over them, and
  :class:`VshCapability`.

Names are imported on first use (PEP 562), as in :mod:`vsh_ai`: importing one stage (the
inbox's principal check, the harvest's records) does not import Pydantic AI's agent.
"""

from __future__ import annotations

import typing as _typing

from .._lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from ._call_key import CallKey, UnstableCallKey, default_call_key
    from ._facade import (
        ApprovalMode,
        JudgeScope,
        ToolName,
        ToolsetOptions,
        VshCapability,
        VshToolset,
    )
    from ._principal import InvalidPrincipal, denial
    from ._result import ChangedPath, OutputLimits, ToolState, VshResult
    from ._signing import VshApprovalError

_WHERE = {
    "._call_key": ("CallKey", "UnstableCallKey", "default_call_key"),
    "._facade": (
        "ApprovalMode",
        "JudgeScope",
        "ToolName",
        "ToolsetOptions",
        "VshCapability",
        "VshToolset",
    ),
    "._principal": ("InvalidPrincipal", "denial"),
    "._result": ("ChangedPath", "OutputLimits", "ToolState", "VshResult"),
    "._signing": ("VshApprovalError",),
}

__all__ = (
    "ApprovalMode",
    "CallKey",
    "ChangedPath",
    "InvalidPrincipal",
    "JudgeScope",
    "OutputLimits",
    "ToolName",
    "ToolState",
    "ToolsetOptions",
    "UnstableCallKey",
    "VshApprovalError",
    "VshCapability",
    "VshResult",
    "VshToolset",
    "default_call_key",
    "denial",
)

__getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)
