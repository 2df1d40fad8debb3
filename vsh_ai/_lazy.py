"""Lazy package namespaces (PEP 562): a public name is imported from its module on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ("lazy_names",)


def lazy_names(
    package: str, namespace: dict[str, Any], where: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``: ``where`` maps each module (relative
    to ``package``: ``"._run"``) to the names it defines; a name found is kept in the
    package's ``namespace``, so it is imported once."""
    module_of = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace["__all__"]})

    return __getattr__, __dir__
