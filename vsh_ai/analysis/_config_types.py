"""The types every config module shares: formats, MISSING, the syntax error, key changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ("MISSING", "ConfigFormat", "ConfigSyntaxError", "KeyChange", "PathKeys", "line_of")

ConfigFormat = Literal["auto", "toml", "json", "yaml", "ini", "env", "properties"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""A key's value on a side where the key (or the whole file) does not exist."""


class ConfigSyntaxError(ValueError):
    """Config bytes that cannot be read safely: bad syntax, duplicate or ambiguous keys."""


@dataclass(frozen=True, slots=True)
class KeyChange:
    """One key path whose typed value differs; MISSING on the side where it is absent."""

    key: str
    before: Any
    after: Any


class PathKeys(dict[str, Any]):
    """A mapping whose keys are themselves key paths (flat formats, INI names)."""


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
