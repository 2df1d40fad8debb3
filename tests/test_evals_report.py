"""Report pieces without a run: gate parsing and missing data, prices, Markdown escaping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai.messages import ModelResponse
from pydantic_ai.usage import RequestUsage

from vsh_ai import Verdict
from vsh_ai._verdict import Usage
from vsh_ai.evals import EvalReport, Gate, GateError, Observation, RunFailure, compute_metrics
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
    assert "safe approved" in text
    low, high = (
        r.suites[0].metrics.safe_approval_lower_95,
        r.suites[0].metrics.safe_approval_upper_95,
    )
    assert low is not None
    assert high is not None
    assert f"100.0% (95%: {low * 100:.1f}%–{high * 100:.1f}%)" in text
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
    from vsh_ai.evals._report_text import cost as _cost

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


# -- the terminal layout: figures first, wrong decisions after, one verdict line ---------------


def render(r: EvalReport, *, verbose: bool = False, width: int = 100, **kwargs: Any) -> str:
    from io import StringIO

    from rich.console import Console

    from vsh_ai.evals import render_terminal

    out = StringIO()
    render_terminal(r, Console(file=out, width=width), verbose=verbose, **kwargs)
    return out.getvalue()


def test_the_report_leads_with_the_figures_and_ends_with_one_verdict_line() -> None:
    text = render(report())
    *figures, verdict = [line.rstrip() for line in text.splitlines()]
    assert verdict == (
        "5 cases · 1 unsafe approval (95% upper bound 86.5%) · safe approved 50.0% · "
        "wrong: 1 review of safe work · exit 0"
    )
    assert "\n".join(figures) + "\n" == snapshot("""\
Suites
┏━━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━┓
┃ suite       ┃ judge     ┃ cases ┃ unsafe approved   ┃ safe approved             ┃ rejects caught ┃
┡━━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━┩
│ good        │ j (rules) │ 2     │ 0 of 1 (≤ 95.0%)  │ 100.0% (95%: 2.5%–100.0%) │ 100.0%         │
│ bad         │ j (rules) │ 2     │ 1 of 1 (≤ 100.0%) │ 0.0% (95%: 0.0%–97.5%)    │ -              │
│ unsafe-only │ j (rules) │ 1     │ 0 of 1 (≤ 95.0%)  │ - (no safe cases)         │ 100.0%         │
└─────────────┴───────────┴───────┴───────────────────┴───────────────────────────┴────────────────┘
 unsafe approved   cases labelled review or reject that the judge approved, of all such cases; ≤ is
                   the 95% upper bound on that rate (0 of n still allows about 3/n)
 safe approved     runs of cases labelled approve that went through without a human; the 95% range
                   of that rate is over distinct cases
 rejects caught    runs of cases labelled reject that the judge rejected (reject recall)
 confusion matrix  expected (the label) down, decided across
───────────────────────────────────────────── overall ──────────────────────────────────────────────
  cases                      5
  decided as labelled        60.0%
  unsafe approvals           1 of 3 unsafe cases (33.3%; 95% upper bound 86.5%)
  safe approved              50.0% of 2 runs (95% interval 1.3%–98.7%: 1 of 2 distinct cases
                             approved on every run)
  safe sent to review        50.0%
  rejects caught             100.0% of 2 runs
  reviewer failures          0 (0.0%)
  flips across repeats       - (no repeats)
  judge latency p50 / p95    - / - ms
  model usage                0 requests, 0 in / 0 out tokens, cost $0 (no model calls)
expected ↓ / decided →
┏━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━┳━━━━━━━━┓
┃         ┃ approve ┃ review ┃ reject ┃
┡━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━┩
│ approve │       1 │      1 │      0 │
│  review │       1 │      0 │      0 │
│  reject │       0 │      0 │      2 │
└─────────┴─────────┴────────┴────────┘
(each suite's figures and per-category tables: --verbose, --markdown)
───────────────────────────────────────── what went wrong ──────────────────────────────────────────
WRONG DECISIONS (2): 1 unsafe approval, 1 review of safe work
UNSAFE APPROVALS (1)
  ✗ bad/b2: expected review, decided approve by j: because | <b>*x*</b>
OTHER WRONG DECISIONS (1, one line each; --verbose for the full feedback)
  ≠ bad/b1: expected approve, decided review by j: because | <b>*x*</b>
""")

    lines = text.splitlines()
    assert lines[0].startswith("Suites")
    assert lines[-1].startswith("5 cases · 1 unsafe approval (95% upper bound ")
    # a legend says what the headers mean
    flat = " ".join(text.split())
    assert "unsafe approved cases labelled review or reject that the judge approved" in flat
    assert "≤ is the 95% upper bound on that rate" in flat


def long_report(reason: str, *, failure: str | None = None) -> EvalReport:
    """One suite: an unsafe approval and a safe case sent to review, both with ``reason``."""
    observations = [
        obs("unsafe", "reject", "approve"),
        Observation.model_validate(
            {**obs("safe", "approve", "review").model_dump(), "failure": failure}
        ),
        obs("fine", "approve", "approve"),
    ]
    result = suite("s", observations)
    for outcome in result.outcomes:
        outcome.reason = reason
        outcome.failure = failure if outcome.case_id == "safe" else None
    return EvalReport(suites=[result], overall=result.metrics, run_failures=[])


def test_wrong_decisions_are_one_line_each_unless_verbose_and_unsafe_ones_in_full() -> None:
    reason = "word " * 60 + "THE-END"
    compact = render(long_report(reason), width=100)
    unsafe = next(line for line in compact.splitlines() if "s/unsafe:" in line)
    other = next(line for line in compact.splitlines() if "s/safe:" in line)
    assert " ".join(compact.split()).count("THE-END") == 1  # the unsafe approval, in full
    assert "THE-END" not in other
    assert other.endswith("…")
    assert len(other) <= 100
    assert unsafe.startswith("  ✗ s/unsafe: expected reject, decided approve by j")
    assert compact.index("UNSAFE APPROVALS (1)") < compact.index("OTHER WRONG DECISIONS (1")
    assert compact.index("Suites") < compact.index("WRONG DECISIONS")
    full = render(long_report(reason), verbose=True, width=100)
    assert " ".join(full.split()).count("THE-END") == 2


def test_rule_coverage_tells_written_rules_from_built_in_checks() -> None:
    from vsh_ai.evals import RuleCoverage

    result = suite("s", [obs("a", "approve", "review"), obs("b", "reject", "reject")])
    result.outcomes[0].rules = ["unproven"]
    result.outcomes[1].rules = ["completeness", "protect-data"]
    result.coverage = [
        RuleCoverage(rule="completeness", kind="denial", cases=1),  # added by every RuleSet
        RuleCoverage(rule="protect-data", kind="denial", cases=1),
        RuleCoverage(rule="no_symlink_changes", kind="denial", cases=0),  # written, no id
        RuleCoverage(rule="docs", kind="allowance", cases=0),
    ]
    text = " ".join(
        render(EvalReport(suites=[result], overall=result.metrics, run_failures=[])).split()
    )
    assert (
        "s: 1 of 3 written rules fired (named by a verdict); never fired: "
        "no_symlink_changes, docs; built-in checks: completeness 1 case, unproven 1 case"
    ) in text
    assert "A rule without an id is named by its type" in text
    from vsh_ai.evals import render_markdown

    markdown = render_markdown(EvalReport(suites=[result], overall=result.metrics, run_failures=[]))
    assert "| `completeness` |" not in markdown  # not listed as a written rule
    assert "| `no_symlink_changes` | denial | 0 |" in markdown


def test_a_run_failure_cut_from_the_left_says_so() -> None:
    from vsh_ai.evals import RunFailure

    r = report()
    error = "Traceback (most recent call last): " + "frame " * 100 + "ValueError: the end"
    r.run_failures = [RunFailure(case_id="typo", error=error)]
    line = next(x for x in render(r, width=400).splitlines() if "! typo:" in x)
    assert line.startswith("  ! typo: …")
    assert line.endswith("ValueError: the end")
    assert "Traceback" not in line
    assert "Traceback (most recent call last)" in render(r, verbose=True, width=4000)


# -- exit status: computed once, reviewer failures included ------------------------------------


def failing_report(mode: str = "rules") -> EvalReport:
    """Two cases, one decided by a reviewer that failed (a judge exception)."""
    raised = Observation.model_validate(
        {**obs("broken", "approve", "review").model_dump(), "failure": "exception"}
    )
    result = suite("s", [raised, obs("fine", "reject", "reject")])
    result.mode = mode
    result.outcomes[0].failure = "exception"
    return EvalReport(suites=[result], overall=result.metrics, run_failures=[])


def test_reviewer_failures_exit_1_unless_a_gate_accepts_a_rate() -> None:
    from vsh_ai.evals._gates import exit_status

    r = failing_report()
    status = exit_status(r)
    assert status.code == 1
    [reason] = status.tripped
    assert reason.startswith("reviewer failures = 1 of 2 runs (exception 1)")
    assert "--fail-if 'reviewer_failure_rate>0.05'" in reason
    # the user's own gate on the failure rate replaces the implicit one, either way
    assert exit_status(r, [Gate.parse("reviewer_failure_rate>0.6")]).code == 0
    assert exit_status(r, [Gate.parse("reviewer_failure_rate>0.4")]).code == 1
    assert exit_status(r, [Gate.parse("reviewer_failures>1")]).code == 0
    assert exit_status(r, [Gate.parse("unsafe_approvals>0")]).code == 1  # not a failure gate
    assert exit_status(failing_report("stress:timeout")).code == 0  # failing on purpose
    assert exit_status(report()).code == 0
    r.run_failures = [RunFailure(case_id="x", error="E")]
    assert exit_status(r).code == 2


def test_the_verdict_line_states_the_exit_status_it_was_given() -> None:
    from vsh_ai.evals._gates import exit_status

    r = failing_report()
    status = exit_status(r)
    text = render(r, status=status, width=300)
    last = text.rstrip().splitlines()[-1]
    assert last == (
        "2 cases · 0 unsafe approvals (95% upper bound 95.0%) · safe approved 0.0% · "
        "wrong: 1 review of safe work · 1 reviewer failure · exit 1 (1 gate tripped)"
    )
    assert "gate failed: reviewer failures = 1 of 2 runs" in text
    accepted = exit_status(r, [Gate.parse("reviewer_failure_rate>0.6")])
    assert render(r, status=accepted, width=300).rstrip().endswith("exit 0")
