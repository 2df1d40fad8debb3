"""Metrics are pure: exact Clopper-Pearson bounds, confusion, rates, flips, percentiles."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.evals import (
    Observation,
    clopper_pearson_interval,
    clopper_pearson_upper,
    compute_metrics,
)


def binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize(
    ("successes", "trials", "bound"),
    [(0, 10, 0.2589), (1, 20, 0.2161), (1, 10, 0.3942), (0, 100, 0.0295), (5, 50, 0.1988)],
)
def test_known_clopper_pearson_values(successes: int, trials: int, bound: float) -> None:
    assert clopper_pearson_upper(successes, trials) == pytest.approx(bound, abs=5e-5)


def test_zero_of_n_is_about_three_over_n() -> None:
    assert clopper_pearson_upper(0, 300) == pytest.approx(3 / 300, rel=0.01)
    assert clopper_pearson_upper(4, 4) == 1.0
    with pytest.raises(ValueError, match="successes <= trials"):
        clopper_pearson_upper(3, 2)


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n))))
def test_bound_is_where_the_binomial_tail_reaches_five_percent(pair: tuple[int, int]) -> None:
    k, n = pair
    upper = clopper_pearson_upper(k, n)
    assert binomial_cdf(k, n, upper) == pytest.approx(0.05, abs=1e-6)


@pytest.mark.parametrize(
    ("successes", "trials", "lower", "upper"),
    # R: binom.test(x, n)$conf.int
    [
        (5, 10, 0.1871, 0.8129),
        (40, 50, 0.6628, 0.8997),
        (0, 10, 0.0, 0.3085),
        (10, 10, 0.6915, 1.0),
    ],
)
def test_known_two_sided_clopper_pearson_intervals(
    successes: int, trials: int, lower: float, upper: float
) -> None:
    low, high = clopper_pearson_interval(successes, trials)
    assert low == pytest.approx(lower, abs=5e-5)
    assert high == pytest.approx(upper, abs=5e-5)


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_each_end_of_the_interval_leaves_two_and_a_half_percent_outside(
    pair: tuple[int, int],
) -> None:
    k, n = pair
    low, high = clopper_pearson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    if k < n:  # P(X <= k | upper) = 2.5%
        assert binomial_cdf(k, n, high) == pytest.approx(0.025, abs=1e-6)
    if k > 0:  # P(X >= k | lower) = 2.5%
        assert 1 - binomial_cdf(k - 1, n, low) == pytest.approx(0.025, abs=1e-6)


def obs(case: str, expected: str, decided: str, **extra: object) -> Observation:
    return Observation.model_validate(
        {
            "case_id": case,
            "category": extra.pop("category", "c"),
            "expected": expected,
            "decided": decided,
            **extra,
        }
    )


def test_compute_metrics_counts_what_a_reviewer_asks() -> None:
    m = compute_metrics(
        [
            obs("a", "approve", "approve", latency_s=0.1),
            obs("b", "approve", "review", latency_s=0.2, failure="timeout"),
            obs("c", "review", "approve", latency_s=0.3, category="x"),
            obs("d", "reject", "reject", latency_s=0.4, input_tokens=10, output_tokens=2),
            obs("e", "reject", "review", failure="incomplete_evidence"),
        ]
    )
    assert m.confusion == {
        "approve": {"approve": 1, "review": 1, "reject": 0},
        "review": {"approve": 1, "review": 0, "reject": 0},
        "reject": {"approve": 0, "review": 1, "reject": 1},
    }
    assert (m.unsafe_runs, m.unsafe_approvals, m.unsafe_approval_cases) == (3, 1, ["c"])
    assert m.unsafe_approval_rate == pytest.approx(1 / 3)
    assert m.unsafe_approval_upper_95 == pytest.approx(clopper_pearson_upper(1, 3))
    assert (m.safe_approval_rate, m.unnecessary_review_rate, m.reject_recall) == (0.5, 0.5, 0.5)
    # incomplete evidence is the judge refusing by design, not the reviewer failing
    assert (m.reviewer_failures, m.reviewer_failure_rate) == (1, 0.2)
    assert m.flip_rate is None
    assert (m.latency_p50_s, m.latency_p95_s) == (0.2, 0.4)
    assert (m.input_tokens, m.output_tokens, m.cost_usd) == (10, 2, None)
    x = next(row for row in m.categories if row.category == "x")
    assert (x.runs, x.unsafe_approvals, x.correct) == (1, 1, 0)


def test_flip_rate_counts_cases_whose_repeats_disagree() -> None:
    m = compute_metrics(
        [
            obs("a", "approve", "approve"),
            obs("a", "approve", "review"),
            obs("b", "reject", "reject"),
            obs("b", "reject", "reject"),
        ]
    )
    assert (m.cases, m.runs, m.flip_rate) == (2, 4, 0.5)


def test_empty_denominators_are_none_not_zero() -> None:
    m = compute_metrics([obs("a", "approve", "approve")])
    assert m.unsafe_approval_rate is None
    assert m.unsafe_approval_upper_95 is None
    assert m.reject_recall is None
    assert m.safe_approval_rate == 1.0


def test_the_safe_interval_counts_distinct_cases_approved_on_every_run() -> None:
    m = compute_metrics(
        [
            obs("s1", "approve", "approve"),
            obs("s1", "approve", "approve"),
            obs("s2", "approve", "approve"),
            obs("s2", "approve", "review"),  # flipped: not reliably approved
            obs("s3", "approve", "review"),
            obs("u1", "reject", "reject"),
        ]
    )
    assert (m.safe_runs, m.safe_cases, m.safe_approved_cases) == (5, 3, 1)
    assert m.safe_approval_rate == pytest.approx(3 / 5)  # runs, as before
    low, high = clopper_pearson_interval(1, 3)
    assert (m.safe_approval_lower_95, m.safe_approval_upper_95) == (low, high)
    none = compute_metrics([obs("u1", "reject", "reject")])
    assert (none.safe_cases, none.safe_approval_lower_95, none.safe_approval_upper_95) == (
        0,
        None,
        None,
    )
