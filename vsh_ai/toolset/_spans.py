"""Logfire spans for the toolset: ids, states and counts only, never contents."""

from __future__ import annotations

from typing import Any

import logfire

from ._result import VshResult, safe_deny_reason

__all__ = ("open_span", "span_attributes")


class _NoSpan:
    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        return None


def open_span(name: str, **attributes: Any) -> Any:
    """A Logfire span; nothing at all when Logfire is unconfigured (it would drop the span).

    Skipping it saves its cost on every transaction; if Logfire's internals change, the
    ``getattr`` default keeps spans on.
    """
    if not getattr(logfire.DEFAULT_LOGFIRE_INSTANCE.config, "_initialized", True):
        return _NoSpan()
    return logfire.span(name, **attributes)


def span_attributes(result: VshResult) -> dict[str, Any]:
    """Ids, state and counts only: never contents, intent or guest output."""
    attributes: dict[str, Any] = {
        "transaction": result.transaction or "",
        "state": result.state,
        "changed_paths": len(result.changes),
    }
    if result.verdict is not None:
        attributes["verdict"] = result.verdict.decision
        attributes["decided_by"] = result.verdict.judge
    if result.deny_reason:
        attributes["deny_reason"] = safe_deny_reason(result.deny_reason)
    if result.verdict is not None and result.verdict.failure:
        attributes["failure"] = result.verdict.failure
    return attributes
