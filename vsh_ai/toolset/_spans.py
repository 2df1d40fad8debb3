"""Logfire spans for the toolset (their attributes come from the renderer)."""

from __future__ import annotations

from typing import Any

import logfire

__all__ = ("open_span",)


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
