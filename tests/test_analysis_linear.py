"""No analyser superlinear in its input (issue 18): the structures that replaced scans.

Each replaced algorithm is checked against the one it replaced on random input, and the
crafted inputs that were quadratic are timed with generous bounds (a loaded 2-core CI
machine included: the bounds are several times what they take).
"""

from __future__ import annotations

import base64
import random
import time
from bisect import bisect_right

from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis import _decode, _secrets
from vsh_ai.analysis._secrets import SecretFinding, find_secrets

KINDS = ("password", "key", "token")


@given(
    st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(0, 60), st.integers(0, 20)), max_size=40
    ),
    st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(0, 70), st.integers(0, 30)), max_size=20
    ),
)
def test_spans_inside_is_the_scan_it_replaced(
    found: list[tuple[str, int, int]], queries: list[tuple[str, int, int]]
) -> None:
    findings = [SecretFinding(kind, start, start + size) for kind, start, size in found]
    spans = _secrets._Spans(findings)
    for kind, start, size in queries:
        end = start + size
        expected = any(
            f.kind == kind and start <= f.start and f.end <= end for f in findings
        )  # what _scan asked of every plain finding, one by one
        assert spans.inside(kind, start, end) is expected


def _reference_source_span(
    rewrite: _decode.Rewrite, start: int, end: int
) -> tuple[int, int, str | None]:
    """Rewrite.source_span as it was: the segment starts rebuilt on every call."""
    if not rewrite.segments:
        return start, end, None
    starts = [s[0] for s in rewrite.segments]
    first = max(bisect_right(starts, start) - 1, 0)
    last = max(bisect_right(starts, max(end - 1, start)) - 1, first)
    ns, _, os_, _, label = rewrite.segments[first]
    old_start = os_ + (start - ns) if label is None else os_
    ns, _, os_, oe, last_label = rewrite.segments[last]
    old_end = min(os_ + (end - ns), oe) if last_label is None else oe
    labels = [s[4] for s in rewrite.segments[first : last + 1] if s[4] is not None]
    return old_start, max(old_end, old_start), labels[0] if labels else None


@given(
    st.lists(
        st.sampled_from(["x ", "%41%42", "\\x41\\x42" * 4, "'ab' + 'cd'", "QUtJQQ=="]), max_size=12
    ),
    st.integers(0, 100),
    st.integers(0, 40),
)
def test_source_spans_are_unchanged(parts: list[str], start: int, size: int) -> None:
    text = "".join(parts)
    for rewrite in (
        _decode.percent_decode(text),
        _decode.join_pieces(text),
        _decode.decode_runs(text)[0],
    ):
        if rewrite is None:
            continue
        assert rewrite.starts == tuple(s[0] for s in rewrite.segments)
        begin = min(start, len(rewrite.text))
        finish = min(begin + size, len(rewrite.text))
        assert rewrite.source_span(begin, finish) == _reference_source_span(rewrite, begin, finish)


def _cpu(function: object, *args: object) -> float:
    started = time.process_time()
    function(*args)  # type: ignore[operator]
    return time.process_time() - started


def test_dense_decoded_secrets_are_found_in_linear_time() -> None:
    line = base64.b64encode(b"AKIAIOSFODNN7EXAMPLE ghp_" + b"a1B2c3D4e5" * 4).decode() + "\n"
    small, large = "# notes\n" + line * 400, "# notes\n" + line * 4000
    _secrets.clear_cache()
    assert find_secrets(small)
    small_time = _cpu(find_secrets, small + "\n")
    large_time = _cpu(find_secrets, large + "\n")
    assert len(find_secrets(large)) >= 4000
    assert large_time < 3.0
    assert large_time < 25 * max(small_time, 0.01)  # ten times the input, not a hundred


def test_a_line_dense_with_findings_is_linear() -> None:
    rng = random.Random(5)
    pairs = "".join(f"password=S3cr{rng.randrange(10**6):06d}x " for _ in range(15000))
    _secrets.clear_cache()
    assert _cpu(find_secrets, pairs) < 3.0
