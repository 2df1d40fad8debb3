"""What a change means, shared by rules, redaction and the LLM evidence packet.

Detectors and parsers live here; the rules that decide with them live in
:mod:`vsh_ai.rules`. One analysis, many consumers: the secret a rule sees is the
secret redaction hides, and the key a config rule parses is the key the packet shows.
"""

__all__ = ()
