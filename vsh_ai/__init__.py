"""vsh-ai: simulate agent file changes in VSH, judge the exact diff, commit approved work."""

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
from ._verdict import Decision, FailureCategory, Usage, Verdict

__all__ = (
    "Change",
    "Content",
    "Counters",
    "Decision",
    "Digests",
    "Effect",
    "Evidence",
    "EvidenceGap",
    "ExecutionInfo",
    "FailureCategory",
    "Judge",
    "JudgeHook",
    "Node",
    "Pipeline",
    "PolicyResult",
    "Quorum",
    "Usage",
    "Verdict",
    "WrittenVersion",
    "as_hook",
    "judge_digest",
)
