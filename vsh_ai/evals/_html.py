"""Self-contained HTML eval reports (``vsh-ai eval --html``, ``vsh-ai compare --html``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._compare import Comparison
    from ._report import EvalReport

__all__ = ("render_comparison_html", "render_html")


def render_html(report: EvalReport) -> str:
    """One HTML file with the report's figures and charts."""
    raise NotImplementedError("the HTML report is not built yet")


def render_comparison_html(comparison: Comparison) -> str:
    """One HTML file comparing two reports."""
    raise NotImplementedError("the HTML comparison is not built yet")
