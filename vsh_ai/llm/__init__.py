"""The LLM commit judge: an explicitly configured, evidence-first, fail-closed reviewer.

``LLMCommitJudge(model, instructions=..., sharing=SharingPolicy(share=("*.toml",)))``
is a :class:`vsh_ai.Judge`; put it behind a rule set with :class:`vsh_ai.Pipeline`.
"""

from ._judge import BUILTIN_INSTRUCTIONS, LLMCommitJudge
from ._packet import Packet, PacketRefused, build_packet
from ._report import JudgeReport, inconsistency, report_feedback
from ._sharing import Redaction, SharingPolicy, redact_secrets

__all__ = (
    "BUILTIN_INSTRUCTIONS",
    "JudgeReport",
    "LLMCommitJudge",
    "Packet",
    "PacketRefused",
    "Redaction",
    "SharingPolicy",
    "build_packet",
    "inconsistency",
    "redact_secrets",
    "report_feedback",
)
