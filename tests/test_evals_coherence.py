"""No decision depends on what was decided before it in the process.

The analysis keeps results between decisions, keyed by the bytes they came from: parsed
config trees, their flattened keys, secret findings, net changes, resolved YAML tags. They
are shared, so a rule that changed one in place, or a key that named two different inputs,
would let one change decide another: an agent could prepare the cache with a harmless
change, then submit the one it wants approved. Every bundled case is decided three times in
one process (after whatever ran before, again with everything cached, and with the suites
in reverse order), and every decision, reason and deciding rule must be the same.
"""

from __future__ import annotations

import pytest

from vsh_ai.analysis import _config, _secrets
from vsh_ai.evals import EvalOptions, EvalReport, find_suites, run_evals

pytestmark = pytest.mark.anyio

Decision = tuple[str, str, str, tuple[str, ...]]


def _decisions(report: EvalReport) -> dict[tuple[str, str], Decision]:
    return {
        (suite.scenario, outcome.case_id): (
            outcome.decided,
            outcome.decided_by,
            outcome.reason,
            tuple(outcome.rules),
        )
        for suite in report.suites
        for outcome in suite.outcomes
    }


def _forget() -> None:
    _config._PARSED.clear()
    _config._FLAT.clear()
    _secrets.clear_cache()


@pytest.mark.slow  # every bundled suite three times: CI runs it (.ci/run)
async def test_decisions_do_not_depend_on_earlier_decisions() -> None:
    suites = find_suites()
    _forget()
    first = _decisions(await run_evals(suites, EvalOptions(workers=1)))
    cached = _decisions(await run_evals(suites, EvalOptions(workers=1)))
    reversed_order = _decisions(await run_evals(suites[::-1], EvalOptions(workers=1)))
    assert len(first) > 600
    assert cached == first
    assert reversed_order == first
