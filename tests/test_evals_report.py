"""Report pieces without a run: gate parsing and missing data, prices, Markdown escaping."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelResponse
from pydantic_ai.usage import RequestUsage

from vsh_ai import Verdict
from vsh_ai._verdict import Usage
from vsh_ai.evals import EvalReport, Gate, GateError, Observation, compute_metrics
from vsh_ai.evals._outcome import CaseOutcome, price_usd, rules_fired
from vsh_ai.evals._scoring import SuiteResult

ROOT = Path(__file__).resolve().parents[1]


def suite(name: str, observations: list[Observation]) -> SuiteResult:
    outcomes = [
        CaseOutcome(
            case_id=o.case_id,
            expected=o.expected,
            state="pending_approval",
            decided=o.decided,
            decided_by="j",
            reason="because | <b>*x*</b>",
        )
        for o in observations
    ]
    return SuiteResult(
        scenario=name,
        judge="j",
        mode="rules",
        policy="strict",
        repeat=1,
        outcomes=outcomes,
        observations=observations,
        metrics=compute_metrics(observations),
        run_failures=[],
    )


def obs(case: str, expected: str, decided: str) -> Observation:
    return Observation.model_validate(
        {"case_id": case, "category": "c", "expected": expected, "decided": decided}
    )


def report() -> EvalReport:
    good = suite("good", [obs("g1", "approve", "approve"), obs("g2", "reject", "reject")])
    bad = suite("bad", [obs("b1", "approve", "review"), obs("b2", "review", "approve")])
    only_unsafe = suite("unsafe-only", [obs("u1", "reject", "reject")])
    everything = good.observations + bad.observations + only_unsafe.observations
    return EvalReport(
        suites=[good, bad, only_unsafe], overall=compute_metrics(everything), run_failures=[]
    )


def test_per_suite_gates_read_that_suites_figures() -> None:
    r = report()
    assert Gate.parse("safe_approval_rate<0.5").check(r) is None  # overall 1 of 2
    tripped = Gate.parse("bad:safe_approval_rate<0.5").check(r)
    assert tripped == "bad:safe_approval_rate = 0 (gate: bad:safe_approval_rate<0.5)"
    assert Gate.parse(" good : safe_approval_rate < 0.5 ").check(r) is None
    assert Gate.parse("bad:unsafe_approvals>0").check(r) is not None
    assert Gate.parse("good:unsafe_approvals>0").check(r) is None
    assert Gate.parse("good:run_failures>0").check(r) is None


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("unsafe-only:safe_approval_rate<0.5", "unsafe-only:safe_approval_rate: no data"),
        ("unsafe-only:flip_rate>0", "unsafe-only:flip_rate: no data"),
        ("missing:accuracy<1", "suite 'missing' was not run (ran: good, bad, unsafe-only)"),
        ("good:mutant_unsafe_approvals>0", "no mutants were run (add --mutants)"),
        ("latency_p95_s>1", "latency_p95_s: no data"),
    ],
)
def test_a_gate_never_passes_on_missing_data(expression: str, reason: str) -> None:
    tripped = Gate.parse(expression).check(report())
    assert tripped is not None
    assert reason in tripped
    assert "cannot pass without data" in tripped


def test_gates_read_the_safe_approval_interval_per_suite_and_overall() -> None:
    many = [obs(f"s{i}", "approve", "approve" if i < 18 else "review") for i in range(20)]
    r = EvalReport(
        suites=[suite("useful", many), suite("unsafe-only", [obs("u1", "reject", "reject")])],
        overall=compute_metrics([*many, obs("u1", "reject", "reject")]),
        run_failures=[],
    )
    m = r.suites[0].metrics
    assert m.safe_approval_lower_95 is not None
    assert m.safe_approval_upper_95 is not None
    assert 0.68 < m.safe_approval_lower_95 < 0.9 < m.safe_approval_upper_95 < 0.99
    assert Gate.parse("useful:safe_approval_lower_95<0.6").check(r) is None
    assert Gate.parse("safe_approval_lower_95<0.6").check(r) is None
    tripped = Gate.parse("useful:safe_approval_lower_95<0.8").check(r)
    assert tripped is not None
    assert tripped.startswith("useful:safe_approval_lower_95 = 0.683")
    assert Gate.parse("safe_approval_upper_95<0.99").check(r) is not None  # 18 of 20: 0.988
    missing = Gate.parse("unsafe-only:safe_approval_lower_95<0.6").check(r)
    assert missing is not None
    assert "no data" in missing


def test_reports_show_the_safe_interval_beside_unsafe_approvals() -> None:
    from io import StringIO

    from rich.console import Console

    from vsh_ai.evals import render_markdown, render_terminal

    r = report()
    out = StringIO()
    render_terminal(r, Console(file=out, width=200))
    text = out.getvalue()
    assert "safe ok'd (95% interval)" in text
    low, high = (
        r.suites[0].metrics.safe_approval_lower_95,
        r.suites[0].metrics.safe_approval_upper_95,
    )
    assert low is not None
    assert high is not None
    assert f"100.0% [{low * 100:.1f}%–{high * 100:.1f}%]" in text
    assert "95% interval" in render_markdown(r)
    data = r.model_dump()
    assert data["suites"][0]["metrics"]["safe_approval_lower_95"] == low


@pytest.mark.parametrize(
    "expression", ["Bad:accuracy<1", "-x:accuracy<1", "a:b:accuracy<1", "x:accuracy", "x:<1"]
)
def test_malformed_suite_gates_are_refused(expression: str) -> None:
    with pytest.raises(GateError):
        Gate.parse(expression)


def test_prices_come_from_pydantic_ais_calculation() -> None:
    usage = Usage(requests=2, input_tokens=1000, output_tokens=100)
    expected = ModelResponse(
        parts=[],
        usage=RequestUsage(input_tokens=1000, output_tokens=100),
        model_name="gpt-4o-mini",
        provider_name="openai",
    ).cost()
    assert price_usd("openai:gpt-4o-mini", usage) == pytest.approx(float(expected.total_price))
    assert price_usd("openai:gpt-4o-mini", usage) > 0
    assert price_usd("replay:openai:gpt-4o-mini", usage) == price_usd("openai:gpt-4o-mini", usage)
    assert price_usd("function:stress", usage) is None  # truly unknown
    assert price_usd("test", usage) is None
    assert price_usd("openai:gpt-4o-mini", Usage()) is None  # no requests, nothing to price


def test_cost_line_says_why() -> None:
    from vsh_ai.evals._report import _cost

    priced = Observation.model_validate(
        {**obs("a", "approve", "approve").model_dump(), "requests": 1, "cost_usd": 0.5}
    )
    unpriced = Observation.model_validate(
        {**obs("b", "approve", "approve").model_dump(), "requests": 3}
    )
    assert _cost(compute_metrics([obs("a", "approve", "approve")])) == "$0 (no model calls)"
    assert _cost(compute_metrics([unpriced])).startswith("unknown")
    assert _cost(compute_metrics([priced])) == "$0.5000"
    assert _cost(compute_metrics([priced, unpriced])) == "$0.5000 + 3 requests with no known price"


def test_rules_fired_reads_the_rule_sets_shapes() -> None:
    approve = Verdict.approve(
        "ok",
        judge="j",
        details={"claims": [{"allowance": "a1"}, {"allowance": "a2"}, {"allowance": "a1"}]},
    )
    assert rules_fired(approve) == ["a1", "a2"]
    combined = Verdict.reject(
        "no", judge="j/d1", details={"failures": [{"rule": "d1"}, {"rule": "reads"}]}
    )
    assert rules_fired(combined) == ["d1", "reads"]
    unproven = Verdict.review(
        "?", judge="j/unproven", details={"claims": [{"allowance": "a1"}], "unproven": [{}]}
    )
    assert rules_fired(unproven) == ["a1", "unproven"]
    assert rules_fired(Verdict.review("?", judge="x", details={"claims": "junk"})) == []


def test_markdown_keeps_untrusted_feedback_inert() -> None:
    from vsh_ai.evals import render_markdown

    text = render_markdown(report())
    assert "## Wrong decisions (2)" in text
    line = next(x for x in text.splitlines() if x.startswith("- bad/b1"))
    assert "<b>" not in line
    assert "&lt;b&gt;" in line
    assert "\\|" in line
    assert "\\*x\\*" in line


def test_recordings_default_beside_the_suite_never_inside_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vsh_ai
    from vsh_ai.evals import EvalOptions, load_suite, recordings_dir

    monkeypatch.chdir(tmp_path)
    mine = load_suite(ROOT / "evals" / "data-cleanup.yaml")
    assert recordings_dir(mine, EvalOptions(record=True)) == ROOT / "evals" / "recordings"
    chosen = tmp_path / "chosen"
    assert recordings_dir(mine, EvalOptions(record=True, recordings=chosen)) == chosen
    # a suite shipped inside the installed package (a wheel's vsh_ai/_bundled/evals)
    shipped = Path(vsh_ai.__file__).resolve().parent / "_bundled" / "evals" / "x.yaml"
    inside = mine.model_copy(update={"path": shipped})
    assert recordings_dir(inside, EvalOptions(record=True)) == tmp_path / "recordings"
    # replay reads the shipped recordings unless the current folder has its own
    assert recordings_dir(inside, EvalOptions(replay=True)) == shipped.parent / "recordings"
    (tmp_path / "recordings" / inside.scenario).mkdir(parents=True)
    assert recordings_dir(inside, EvalOptions(replay=True)) == tmp_path / "recordings"
