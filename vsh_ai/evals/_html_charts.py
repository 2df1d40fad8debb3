"""The HTML report's charts as inline SVG, drawn by pygal.

Why pygal: it is a maintained charting library written in pure Python that renders plain
SVG on the server, so the report stays one offline file with no JavaScript library,
font or stylesheet fetched when it is opened (matplotlib would work too, but is a large
native dependency for four charts; JavaScript libraries such as Vega or Chart.js need a
script in the page). pygal adds a ``<script>`` holding its tooltip configuration, which
would carry labels taken from the suites; every chart here removes it, so the SVG has
no script at all, and shows its numbers as printed values instead of tooltips. All text
reaches the SVG through ElementTree, which escapes it.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from ._metrics import LABELS, Metrics

if TYPE_CHECKING:
    from ._scoring import MutantKindRow, SuiteResult

__all__ = (
    "comparison_chart",
    "confusion_chart",
    "latency_bins",
    "latency_chart",
    "mutant_chart",
    "safety_chart",
)

_RED, _GREEN, _GREY, _AMBER, _BLUE, _LIGHT = (
    "#c62828",
    "#2e7d32",
    "#9e9e9e",
    "#ef8f00",
    "#1565c0",
    "#d6d6d6",
)
_SUITE_COLOURS = (
    "#1565c0",
    "#6a1b9a",
    "#00838f",
    "#ad1457",
    "#4e342e",
    "#558b2f",
    "#37474f",
    "#ef6c00",
)


def _pygal() -> Any:
    """pygal, imported when a chart is drawn (it ships no type information)."""
    import pygal  # type: ignore[import-untyped]

    return pygal


def _style(colours: Sequence[str]) -> Any:
    from pygal.style import Style  # type: ignore[import-untyped]

    return Style(
        background="white",
        plot_background="white",
        colors=tuple(colours),
        font_family="system-ui, sans-serif",
        title_font_size=15,
        label_font_size=12,
        major_label_font_size=12,
        value_font_size=12,
        value_label_font_size=11,
        legend_font_size=12,
    )


def _config(colours: Sequence[str], **options: Any) -> dict[str, Any]:
    return {
        "style": _style(colours),
        "js": [],
        "disable_xml_declaration": True,
        "explicit_size": False,
        "legend_at_bottom": True,
        "truncate_legend": -1,
        "truncate_label": -1,
        **options,
    }


def _svg(chart: Any, label: str) -> Markup:
    """The chart as an ``<svg>`` element with no script, named for screen readers."""
    root = chart.render_tree()
    for parent in list(root.iter()):
        for child in list(parent):
            if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    root.set("role", "img")
    root.set("aria-label", label)
    return Markup(ET.tostring(root, encoding="unicode"))  # built by ElementTree: text escaped


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def confusion_chart(m: Metrics, title: str) -> Markup:
    """The 3x3 confusion matrix as a dot chart: one row per expected label, a dot per
    decided label sized by its count (the diagonal is right)."""
    chart = _pygal().Dot(
        **_config(
            (_GREEN, _AMBER, _RED),
            title=title,
            x_title="decided",
            y_title="expected",
            print_values=True,
            show_legend=False,
            height=320,
            width=460,
        )
    )
    chart.x_labels = list(LABELS)
    for expected in LABELS:
        chart.add(expected, [m.confusion[expected][decided] for decided in LABELS])
    return _svg(chart, f"{title}: confusion matrix, expected by decided")


def safety_chart(suites: Sequence[SuiteResult]) -> Markup:
    """Per suite: the unsafe-approval rate with a bar up to its exact 95% upper bound
    (vertical), against the safe-approval rate with its 95% interval (horizontal)."""
    uppers = [s.metrics.unsafe_approval_upper_95 or 0.0 for s in suites]
    lowers = [s.metrics.safe_approval_lower_95 for s in suites]
    left = min([0.9, *(v for v in lowers if v is not None)])
    chart = _pygal().XY(
        **_config(
            _SUITE_COLOURS,
            title="Safety against usefulness, per suite",
            x_title="safe approval rate (line: its 95% interval)",
            y_title="unsafe approval rate (line: to the 95% bound)",
            allow_interruptions=True,
            stroke=True,
            dots_size=2,
            range=(0, max([0.05, *uppers]) * 1.15),
            xrange=(math.floor(left * 10) / 10, 1),
            value_formatter=_percent,
            x_value_formatter=_percent,
            height=460,
        )
    )
    for suite in suites:
        m = suite.metrics
        safe, unsafe = m.safe_approval_rate, m.unsafe_approval_rate
        if safe is None or unsafe is None:
            continue  # a suite without both safe and unsafe cases has no point here
        points: list[Any] = [
            {"value": (safe, unsafe), "node": {"r": 7}, "label": suite.scenario},
            (safe, m.unsafe_approval_upper_95),
        ]
        if m.safe_approval_lower_95 is not None and m.safe_approval_upper_95 is not None:
            points += [None, (m.safe_approval_lower_95, unsafe), (m.safe_approval_upper_95, unsafe)]
        chart.add(suite.scenario, points)
    return _svg(chart, "per suite: unsafe approval rate and its upper bound by safe approval rate")


def mutant_chart(rows: Sequence[MutantKindRow]) -> Markup:
    """Mutants by kind: unsafe ones approved (red) or held, safe ones approved, reviewed or
    rejected, and skipped (they did not preserve their case's change)."""
    chart = _pygal().HorizontalStackedBar(
        **_config(
            (_RED, _GREY, _GREEN, _AMBER, _LIGHT),
            title="Mutants by kind",
            x_title="mutants",
            print_values=True,
            print_zeroes=False,
            height=max(320, 60 + 34 * len(rows)),
        )
    )
    chart.x_labels = [row.kind for row in rows]
    chart.add("unsafe, approved", [row.unsafe_approvals for row in rows])
    chart.add("unsafe, held", [row.unsafe_cases - row.unsafe_approvals for row in rows])
    chart.add("safe, approved", [row.safe_approvals for row in rows])
    chart.add("safe, not approved", [row.safe_cases - row.safe_approvals for row in rows])
    chart.add("skipped", [row.skipped for row in rows])
    return _svg(chart, "mutants by kind: approved and held, safe and unsafe, skipped")


def latency_bins(values: Iterable[float]) -> list[float]:
    """Edges in seconds on a 1-2-5 scale: the last at or below the fastest value, up to
    the first above the slowest (empty without values)."""
    data = [v for v in values if v > 0]
    if not data:
        return []
    low, high = min(data), max(data)
    exponent = math.floor(math.log10(low))
    edges: list[float] = []
    while not edges or edges[-1] <= high:
        for step in (1, 2, 5):
            edge = step * 10.0**exponent
            if edge <= low:
                edges = [edge]
            elif edges and edges[-1] <= high:
                edges.append(edge)
        exponent += 1
    return edges


def _ms(seconds: float) -> str:
    value = seconds * 1000
    return f"{value:g} ms" if value < 1000 else f"{value / 1000:g} s"


def latency_chart(series: Sequence[tuple[str, Sequence[float]]]) -> Markup:
    """How long the judge took per run: a stacked histogram on 1-2-5 bins, one colour
    per suite."""
    edges = latency_bins(v for _, values in series for v in values)
    chart = _pygal().StackedBar(
        **_config(
            _SUITE_COLOURS,
            title="Judge latency per run",
            x_title="latency",
            y_title="runs",
            print_values=False,
            x_label_rotation=30,
            height=420,
        )
    )
    chart.x_labels = [f"{_ms(a)}–{_ms(b)}" for a, b in pairwise(edges)]
    for name, values in series:
        counts = [0] * max(0, len(edges) - 1)
        for value in values:
            for index in range(len(counts)):
                if value < edges[index + 1] or index == len(counts) - 1:
                    counts[index] += 1
                    break
        chart.add(name, counts)
    return _svg(chart, "judge latency per run, histogram")


def comparison_chart(rows: Sequence[tuple[str, Metrics | None, Metrics | None]]) -> Markup:
    """Per suite, A against B: the unsafe-approval upper bound (lower is safer) and the
    safe-approval rate (higher is more useful)."""
    chart = _pygal().Bar(
        **_config(
            ("#ef9a9a", _RED, "#a5d6a7", _GREEN),
            title="A against B, per suite",
            y_title="rate",
            print_values=True,
            value_formatter=_percent,
            range=(0, 1),
            x_label_rotation=20,
            height=440,
        )
    )
    chart.x_labels = [name for name, _, _ in rows]

    def values(side: int, field: str) -> list[float | None]:
        return [
            getattr(pair[side], field) if pair[side] else None for pair in [r[1:] for r in rows]
        ]

    chart.add("A: unsafe approval, 95% upper bound", values(0, "unsafe_approval_upper_95"))
    chart.add("B: unsafe approval, 95% upper bound", values(1, "unsafe_approval_upper_95"))
    chart.add("A: safe approval rate", values(0, "safe_approval_rate"))
    chart.add("B: safe approval rate", values(1, "safe_approval_rate"))
    return _svg(chart, "A against B per suite: unsafe approval bound and safe approval rate")
