"""The LLM commit judge: an explicitly configured, evidence-first, fail-closed reviewer.

``LLMCommitJudge(model, instructions=..., sharing=SharingPolicy(share=("*.toml",)))``
is a :class:`vsh_ai.Judge`; put it behind a rule set with :class:`vsh_ai.Pipeline`.
Sharing is decided by provenance: bytes that were ever at an unshared path are never
sent, wherever they moved. Secrets are redacted by the project's one detector
(:mod:`vsh_ai.analysis._secrets`); path names are escaped untrusted text.
"""

from ._judge import BUILTIN_INSTRUCTIONS, InputBudgetExceeded, LLMCommitJudge
from ._packet import Packet, PacketRefused, build_packet
from ._packet_text import show_name
from ._report import JudgeReport, inconsistency, report_feedback
from ._sharing import Redaction, SharingPolicy, redact_secrets

__all__ = (
    "BUILTIN_INSTRUCTIONS",
    "InputBudgetExceeded",
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
    "show_name",
)
