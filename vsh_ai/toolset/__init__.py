"""The VSH toolset for Pydantic AI, laid out as a transaction's path.

One tool call is one VSH transaction: ``_workspace`` (open and check the workspace),
``_driver`` (native preview, hook resolution and commit, off the event loop),
``_journal`` (exactly-once records), ``_bindings`` (signed approval bindings),
``_deferred`` (Pydantic AI's deferred-approval flow), ``_result`` (the model-facing
result type) and ``_facade`` (:class:`VshToolset`, a thin ``FunctionToolset``).
"""

from ._bindings import VshApprovalError
from ._call_key import CallKey, default_call_key
from ._facade import (
    ApprovalMode,
    JudgeScope,
    ToolName,
    ToolsetOptions,
    VshCapability,
    VshToolset,
)
from ._result import ChangedPath, OutputLimits, ToolState, VshResult

__all__ = (
    "ApprovalMode",
    "CallKey",
    "ChangedPath",
    "JudgeScope",
    "OutputLimits",
    "ToolName",
    "ToolState",
    "ToolsetOptions",
    "VshApprovalError",
    "VshCapability",
    "VshResult",
    "VshToolset",
    "default_call_key",
)
