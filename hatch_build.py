"""Hatchling build hook: the bundled suites and judge files ship inside the standard wheel.

They go in as ``vsh_ai/_bundled/{evals,judges}`` (found by
``vsh_ai.evals._names.bundled_root``) only in the standard wheel: an editable install
reads them from the checkout, and must not create a ``vsh_ai`` folder in site-packages
that would shadow the import hook exposing only ``vsh_ai`` (``dev-mode-exact``).
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class BundledFiles(BuildHookInterface):  # type: ignore[type-arg]
    """Add ``evals/`` and ``judges/`` to the standard wheel as package data."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "standard":
            build_data["force_include"]["evals"] = "vsh_ai/_bundled/evals"
            build_data["force_include"]["judges"] = "vsh_ai/_bundled/judges"
