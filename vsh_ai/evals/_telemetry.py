"""Sending an eval's spans to Logfire (``vsh-ai eval --logfire``), content free.

vsh-ai's spans carry identities and decisions only: case, judge and rule ids, VSH states,
decisions, failure categories, counts and latencies; pydantic-ai is instrumented without
prompts or answers. Those ids are written by the suite's and judge's authors, and many of
them name what they guard (``secrets-hygiene``, ``labelled-credentials``), which Logfire's
default scrubber would redact; ``logfire_scrubbing`` keeps exactly those attribute values
and nothing else (a key that matches a pattern, or a Logfire token, is still redacted).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logfire

__all__ = ("IDENTIFIER_ATTRIBUTES", "LogfireSetupError", "configure_logfire", "logfire_scrubbing")

IDENTIFIER_ATTRIBUTES = frozenset(
    {
        # vsh-ai's judge spans and the eval's case outcome
        "judge_id",
        "decided_by",
        "verdict",
        "failure",
        "rules",
        "case_id",
        "state",
        "model",
        # pydantic-evals' experiment and case spans: suite, judge and case names
        "name",
        "task_name",
        "dataset_name",
        "case_name",
        "logfire.experiment.source_case_name",
        "category",
    }
)
"""Attributes (at any depth) whose string values are identifiers, never content."""

_IDENTIFIER = re.compile(r"[\w .:/+@~()\[\];,-]{1,300}")
_NEVER_KEPT = re.compile(r"pylf_v\d+_", re.IGNORECASE)


class LogfireSetupError(RuntimeError):
    """``--logfire`` has nowhere to send spans (no token, no OpenTelemetry endpoint)."""


def _keep_identifier(match: logfire.ScrubMatch) -> Any:
    """The scrubbing callback: keep an identifier value of a vsh-ai attribute."""
    value = match.value
    keys = [part for part in match.path if isinstance(part, str)]
    if (
        isinstance(value, str)
        and match.pattern_match.string is value  # the value matched, not the key
        and any(key in IDENTIFIER_ATTRIBUTES for key in keys[-2:])
        and _IDENTIFIER.fullmatch(value)
        and not _NEVER_KEPT.search(value)
    ):
        return value
    return None


def logfire_scrubbing() -> logfire.ScrubbingOptions:
    """Logfire's default scrubbing, keeping vsh-ai's identifier attributes readable.

    Pass it to your own ``logfire.configure(scrubbing=logfire_scrubbing())`` so that a
    decision by ``secrets-hygiene.rules`` is not shown as ``[Scrubbed due to 'secret']``.
    """
    import logfire

    return logfire.ScrubbingOptions(callback=_keep_identifier)


def _destination(config: Any) -> bool:
    """Whether configured Logfire exports anywhere: a token (environment or the
    project's ``.logfire`` credentials) or an OpenTelemetry endpoint."""
    otlp = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return bool(getattr(config, "token", None)) or any(os.environ.get(name) for name in otlp)


def configure_logfire(*, service_name: str = "vsh-ai-eval") -> None:
    """Configure Logfire to send this process's spans, and instrument Pydantic AI.

    Honours ``LOGFIRE_TOKEN`` and the project credentials that ``logfire projects use``
    writes (``.logfire/``), or any OpenTelemetry backend named by
    ``OTEL_EXPORTER_OTLP_ENDPOINT``. Never creates a project or prompts; with nowhere to
    send, raises ``LogfireSetupError`` saying what to set. Model requests are traced
    without their content (no prompts, evidence or answers).
    """
    import logfire

    logfire.configure(
        send_to_logfire="if-token-present",
        service_name=service_name,
        console=False,
        scrubbing=logfire_scrubbing(),
    )
    if not _destination(logfire.DEFAULT_LOGFIRE_INSTANCE.config):
        raise LogfireSetupError(
            "--logfire: no Logfire token found; set LOGFIRE_TOKEN to a write token of your "
            "Logfire project (Settings > Write tokens), or run `logfire auth` and `logfire "
            "projects use <project>` in this folder, or set OTEL_EXPORTER_OTLP_ENDPOINT to "
            "send to another OpenTelemetry backend"
        )
    logfire.instrument_pydantic_ai(include_content=False, include_binary_content=False)
