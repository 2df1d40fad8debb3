"""vsh-ai: simulate agent file changes in VSH, judge the exact diff, commit approved work.

- :class:`VshToolset` / :class:`VshCapability`: let a Pydantic AI agent submit VSH programs.
- :class:`Evidence`, :class:`Verdict`, :class:`Judge`, :func:`as_hook`: judges as fail-closed
  VSH commit hooks; :mod:`vsh_ai.rules` (deterministic rules), :mod:`vsh_ai.llm` (the LLM
  commit judge), :func:`load_judge` (declarative judge files).
- :mod:`vsh_ai.analysis`: what a change means (secrets, globs, config, dependencies, code).
- :mod:`vsh_ai.evals`: score any judge offline against labelled VSH diffs.

Names are imported on first use (PEP 562): ``import vsh_ai`` alone does not import
Pydantic AI, VSH or the analysers (``vsh-ai --version`` stays fast).
"""

from __future__ import annotations

import typing as _typing

from ._lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from ._evidence import (
        Change,
        Content,
        Counters,
        Digests,
        Effect,
        Evidence,
        EvidenceGap,
        ExecutionInfo,
        Node,
        PolicyResult,
        WrittenVersion,
    )
    from ._hooks import Judge, JudgeHook, Pipeline, Quorum, as_hook, judge_digest
    from ._judge_files import JudgeFile, JudgeFileError, load_judge, load_judge_file
    from ._simulate import Simulation, simulate
    from ._verdict import Decision, FailureCategory, Usage, Verdict
    from .llm import LLMCommitJudge, SharingPolicy
    from .rules import Rule, RuleSet
    from .toolset import (
        ApprovalMode,
        CallKey,
        ChangedPath,
        InvalidPrincipal,
        JudgeScope,
        OutputLimits,
        ToolName,
        ToolsetOptions,
        ToolState,
        UnstableCallKey,
        VshApprovalError,
        VshCapability,
        VshResult,
        VshToolset,
        default_call_key,
        denial,
    )

_WHERE = {
    "._evidence": (
        "Change",
        "Content",
        "Counters",
        "Digests",
        "Effect",
        "Evidence",
        "EvidenceGap",
        "ExecutionInfo",
        "Node",
        "PolicyResult",
        "WrittenVersion",
    ),
    "._hooks": (
        "Judge",
        "JudgeHook",
        "Pipeline",
        "Quorum",
        "as_hook",
        "judge_digest",
    ),
    "._judge_files": (
        "JudgeFile",
        "JudgeFileError",
        "load_judge",
        "load_judge_file",
    ),
    "._simulate": (
        "Simulation",
        "simulate",
    ),
    "._verdict": (
        "Decision",
        "FailureCategory",
        "Usage",
        "Verdict",
    ),
    ".llm": (
        "LLMCommitJudge",
        "SharingPolicy",
    ),
    ".rules": (
        "Rule",
        "RuleSet",
    ),
    ".toolset": (
        "ApprovalMode",
        "CallKey",
        "ChangedPath",
        "InvalidPrincipal",
        "JudgeScope",
        "OutputLimits",
        "ToolName",
        "ToolsetOptions",
        "ToolState",
        "UnstableCallKey",
        "VshApprovalError",
        "VshCapability",
        "VshResult",
        "VshToolset",
        "default_call_key",
        "denial",
    ),
}

__all__ = (
    "ApprovalMode",
    "CallKey",
    "Change",
    "ChangedPath",
    "Content",
    "Counters",
    "Decision",
    "Digests",
    "Effect",
    "Evidence",
    "EvidenceGap",
    "ExecutionInfo",
    "FailureCategory",
    "InvalidPrincipal",
    "Judge",
    "JudgeFile",
    "JudgeFileError",
    "JudgeHook",
    "JudgeScope",
    "LLMCommitJudge",
    "Node",
    "OutputLimits",
    "Pipeline",
    "PolicyResult",
    "Quorum",
    "Rule",
    "RuleSet",
    "SharingPolicy",
    "Simulation",
    "ToolName",
    "ToolState",
    "ToolsetOptions",
    "UnstableCallKey",
    "Usage",
    "Verdict",
    "VshApprovalError",
    "VshCapability",
    "VshResult",
    "VshToolset",
    "WrittenVersion",
    "as_hook",
    "default_call_key",
    "denial",
    "judge_digest",
    "load_judge",
    "load_judge_file",
    "simulate",
)

__getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)
