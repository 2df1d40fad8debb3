"""Config shapes that hide keys in values: compose ``environment:`` lists as mappings.

Docker Compose takes a service's environment as a mapping or as a list of ``KEY=value``
strings (``- LOG_LEVEL=info``); both mean the same. Read as a list, every variable is a
list item whose *value* holds its name, so no key rule can see ``LOG_LEVEL`` or
``TLS_VERIFY``. :func:`environment_mappings` rewrites such a list, under a key named
``environment``, into the mapping it means (``KEY`` alone, taken from the host, is
``None``), so ``services.web.environment.LOG_LEVEL`` is the key either way. A list with
an item that is not ``KEY=value`` or ``KEY`` stays a list; a name given twice is refused
(Compose keeps one of them: which one could hide a change).
"""

from __future__ import annotations

import re
from typing import Any

from ._config_types import ConfigSyntaxError

__all__ = ("environment_mappings",)

_ITEM = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)(?:=(.*))?", re.S)


def _as_mapping(items: list[Any]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for item in items:
        match = _ITEM.fullmatch(item) if isinstance(item, str) else None
        if match is None:
            return None
        name, value = match[1], match[2]
        if name in out:
            raise ConfigSyntaxError(f"environment variable {name!r} is listed twice")
        out[name] = value
    return out


def environment_mappings(tree: Any) -> Any:
    """``tree`` with every ``environment:`` list of ``KEY=value`` strings as a mapping
    (a new tree when anything changed; parsed trees are shared, never modified)."""
    if isinstance(tree, dict):
        out: dict[Any, Any] | None = None
        for key, value in tree.items():
            new = environment_mappings(value)
            if key == "environment" and isinstance(new, list) and new:
                new = _as_mapping(new) or new
            if new is not value:
                out = dict(tree) if out is None else out
                out[key] = new
        return tree if out is None else out
    if isinstance(tree, list):
        items = [environment_mappings(v) for v in tree]
        return tree if all(a is b for a, b in zip(items, tree, strict=True)) else items
    return tree
