"""Self-contained HTML eval reports (``vsh-ai eval --html``, ``vsh-ai compare --html``).

One file, readable offline: the figures, inline SVG charts (``_html_charts``, pygal),
and every wrong decision as a ``<details>`` element that opens to the rule that decided,
the feedback and the diff (no JavaScript: the page has no script, and its Content
Security Policy forbids any). Jinja2 autoescapes everything from the report, whose case
ids, paths, diffs and feedback are untrusted text. Needs the ``web`` extra.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from ._html_data import Figure, diff_lines, figures, fmt, wrong_decisions

if TYPE_CHECKING:
    from jinja2 import Environment

    from ._compare import Comparison
    from ._metrics import Metrics
    from ._outcome import CaseOutcome
    from ._report import EvalReport
    from ._scoring import SuiteResult

__all__ = ("WEB_EXTRA_HINT", "render_comparison_html", "render_html", "require_web")

WEB_EXTRA_HINT = "--html needs the web extra: pip install 'vsh-ai[web]'"


def require_web() -> None:
    """Raise a usage error (exit 2, one line) when Jinja2 or pygal is not installed."""
    try:
        import jinja2  # noqa: F401
        import pygal  # type: ignore[import-untyped]  # noqa: F401
    except ImportError as error:
        from .._cli_io import UsageError

        raise UsageError(f"{WEB_EXTRA_HINT} ({error.name or 'a package'} is missing)") from None


@cache
def _environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    environment = Environment(
        loader=PackageLoader("vsh_ai.evals", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["fmt"] = fmt
    return environment


def _latency(report: EvalReport) -> list[tuple[str, list[float]]]:
    return [
        (s.scenario, [o.latency_s for o in s.observations if o.latency_s is not None])
        for s in report.suites
    ]


def render_html(report: EvalReport) -> str:
    """One HTML file with the report's figures and charts."""
    require_web()
    from ._html_charts import confusion_chart, latency_chart, mutant_chart, safety_chart

    suites = report.suites
    latency = _latency(report)
    context: dict[str, Any] = {
        "report": report,
        "overall": figures(report.overall),
        "suite_figures": {s.scenario: figures(s.metrics) for s in suites},
        "confusion": {s.scenario: confusion_chart(s.metrics, s.scenario) for s in suites},
        "overall_confusion": confusion_chart(report.overall, "all suites"),
        "safety": safety_chart(suites) if suites else None,
        "latency": latency_chart(latency) if any(values for _, values in latency) else None,
        "wrong": wrong_decisions(suites),
        "mutant_wrong": wrong_decisions(suites, mutants=True),
        "kinds": report.mutant_kinds,
        "mutant_chart": mutant_chart(report.mutant_kinds) if report.mutants else None,
        "mutant_figures": figures(report.mutants) if report.mutants else None,
        "tracebacks": _tracebacks(suites),
    }
    return _environment().get_template("report.html.j2").render(context)


def _tracebacks(suites: list[SuiteResult]) -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for suite in suites:
        outcomes = [*suite.outcomes, *(suite.mutants.outcomes if suite.mutants else [])]
        for outcome in outcomes:
            if outcome.traceback:
                found.setdefault(f"{suite.scenario}/{outcome.case_id}", outcome.traceback)
    return list(found.items())


def _outcome(suite: SuiteResult | None, case_id: str) -> CaseOutcome | None:
    if suite is None:
        return None
    return next((o for o in suite.outcomes if o.case_id == case_id and o.diff), None)


def render_comparison_html(comparison: Comparison) -> str:
    """One HTML file comparing two reports."""
    require_web()
    from ._html_charts import comparison_chart, confusion_chart

    c = comparison
    suites = {name: (left, right) for name, left, right in c.suites}
    disagreements = []
    for d in c.disagreements:
        left, right = suites.get(d.suite, (None, None))
        found = _outcome(left, d.case_id) or _outcome(right, d.case_id)
        disagreements.append(
            {
                "d": d,
                "lines": diff_lines(found.diff if found else None),
                "unsafe": d.rank == 0,
                "anchor": f"diff-{d.suite}-{d.case_id}",
            }
        )
    rows = [(name, a.metrics if a else None, b.metrics if b else None) for name, a, b in c.suites]
    rows.append(("overall", *c.overall))
    context: dict[str, Any] = {
        "c": c,
        "disagreements": disagreements,
        "rows": [(name, _side_by_side(a, b)) for name, a, b in rows],
        "chart": comparison_chart(rows),
        "confusion": (
            confusion_chart(c.overall[0], "A, all suites"),
            confusion_chart(c.overall[1], "B, all suites"),
        ),
        "judges": {name: (_judge(left), _judge(right)) for name, left, right in c.suites},
    }
    return _environment().get_template("compare.html.j2").render(context)


def _side_by_side(a: Metrics | None, b: Metrics | None) -> list[tuple[str, Figure, Figure]]:
    """Figures of A and B aligned by name (``-`` where one side has none)."""
    left = {f.name: f for f in figures(a)} if a else {}
    right = {f.name: f for f in figures(b)} if b else {}
    missing = Figure("", "-")
    names = list(dict.fromkeys([*left, *right]))
    return [(n, left.get(n, missing), right.get(n, missing)) for n in names]


def _judge(suite: SuiteResult | None) -> str:
    if suite is None:
        return "(not run)"
    digest = f" {suite.judge_digest[:12]}" if suite.judge_digest else ""
    return f"{suite.judge} ({suite.mode}){digest}"
