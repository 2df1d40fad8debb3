"""The bounded-time line pairing that replaced difflib in the analysers (issue 18).

Properties: the opcodes are a valid pairing; small inputs pair exactly as difflib pairs
them; on random edit scripts over large files (the anchored path) the added and removed
line multisets are difflib's; crafted input stays fast and says when it is not exact.
"""

from __future__ import annotations

import difflib
import gc
import random
import time
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis._changes import destructive_edit
from vsh_ai.analysis._diff import EXACT_CELLS, LineOpcodes, line_opcodes

Opcodes = list[tuple[str, int, int, int, int]] | tuple[tuple[str, int, int, int, int], ...]


def valid(old: list[str], new: list[str], opcodes: Opcodes) -> None:
    i = j = 0
    for tag, i1, i2, j1, j2 in opcodes:
        assert (i1, j1) == (i, j)
        assert tag in ("equal", "replace", "delete", "insert")
        if tag == "equal":
            assert old[i1:i2] == new[j1:j2]
        i, j = i2, j2
    assert (i, j) == (len(old), len(new))


def multisets(old: list[str], new: list[str], opcodes: Opcodes) -> tuple[Counter, Counter]:
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag != "equal":
            removed.update(old[i1:i2])
            added.update(new[j1:j2])
    return added, removed


def difflib_opcodes(old: list[str], new: list[str]) -> Opcodes:
    return difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()


def trimmed_difflib(old: list[str], new: list[str]) -> Opcodes:
    """difflib on the middle, common head and tail paired first (what destructive_edit did)."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    middle = difflib.SequenceMatcher(
        None, old[head : len(old) - tail], new[head : len(new) - tail], autojunk=False
    )
    out: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
    out += [
        (tag, i1 + head, i2 + head, j1 + head, j2 + head)
        for tag, i1, i2, j1, j2 in middle.get_opcodes()
    ]
    if tail:
        out.append(("equal", len(old) - tail, len(old), len(new) - tail, len(new)))
    return out


small = st.lists(st.sampled_from(["a", "b", "x", "#", ""]), max_size=40)


@given(small, small)
def test_small_inputs_pair_exactly_as_difflib(old: list[str], new: list[str]) -> None:
    result = line_opcodes(old, new)
    valid(old, new, result.opcodes)
    cells = (len(old) - 0) * len(new)
    if cells <= EXACT_CELLS:
        assert result.exact
        assert multisets(old, new, result.opcodes) == multisets(old, new, trimmed_difflib(old, new))
        whole = line_opcodes(old, new, trim=False)
        assert list(whole.opcodes) == list(difflib_opcodes(old, new))


def edited(rng: random.Random, lines: list[str], edits: int) -> list[str]:
    out = list(lines)
    for _ in range(edits):
        where = rng.randrange(len(out) + 1)
        what = rng.choice("idr")
        if what == "i" or not out or where == len(out):
            out.insert(where, f"new line {rng.random()}")
        elif what == "d":
            del out[where]
        else:
            out[where] = f"replaced line {rng.random()}"
    return out


@given(st.integers(0, 2**32), st.integers(60, 600), st.integers(0, 40))
def test_random_edit_scripts_give_difflibs_added_and_removed_lines(
    seed: int, size: int, edits: int
) -> None:
    rng = random.Random(seed)
    old = [f"line {rng.randrange(10**9)}" for _ in range(size)]
    new = edited(rng, old, edits)
    result = line_opcodes(old, new)
    valid(old, new, result.opcodes)
    assert result.exact
    assert multisets(old, new, result.opcodes) == multisets(old, new, difflib_opcodes(old, new))
    changed = line_opcodes(old, new, trim=False).changed
    expected = sum(
        (i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in difflib_opcodes(old, new) if tag != "equal"
    )
    assert changed == expected


@given(
    st.lists(st.sampled_from(["x", "y", "z", "{", "}", ""]), min_size=60, max_size=400),
    st.lists(st.sampled_from(["x", "y", "z", "{", "}", ""]), min_size=60, max_size=400),
)
def test_repetitive_input_is_a_valid_pairing(old: list[str], new: list[str]) -> None:
    result = line_opcodes(old, new)
    valid(old, new, result.opcodes)
    assert isinstance(result, LineOpcodes)


def _crafted(n: int) -> dict[str, tuple[list[str], list[str]]]:
    distinct = [f"value_{i} = compute({i})" for i in range(n)]
    return {
        "every 20th of 20,000 edited": (
            distinct,
            [line + " # edited" if i % 20 == 0 else line for i, line in enumerate(distinct)],
        ),
        "20,000 repeated lines, every 20th changed": (
            ["x"] * n,
            ["y" if i % 20 == 0 else "x" for i in range(n)],
        ),
        "reversed": (distinct, distinct[::-1]),
        "pairs reversed": (
            [f"l{i // 2}" for i in range(n)],
            [f"l{i // 2}" for i in range(n)][::-1],
        ),
    }


def _cpu(old: list[str], new: list[str]) -> float:
    """CPU seconds of one ``line_opcodes`` (no collection of the test process inside)."""
    gc.disable()  # no collection inside (a full one costs ~0.3 s in a long test process)
    try:
        started = time.thread_time()
        line_opcodes(old, new)
        return time.thread_time() - started
    finally:
        gc.enable()


def test_crafted_input_stays_linear() -> None:
    """Each shape at 20,000 lines costs within 8x its cost at 5,000 (linear is 4x, the
    quadratic worst case of difflib 16x), plus 20 ms for the timer; the absolute times are
    the machine's (benchmarks/crafted.py prints them)."""
    small = _crafted(5_000)
    cases = _crafted(20_000)
    for label, (old, new) in cases.items():
        _cpu(*small[label])  # first-use costs are neither size's
        before = _cpu(*small[label])
        elapsed = _cpu(old, new)
        valid(old, new, line_opcodes(old, new).opcodes)
        assert elapsed <= 8 * before + 0.02, (label, before, elapsed)
    assert line_opcodes(*cases["every 20th of 20,000 edited"]).changed == 2000
    assert line_opcodes(*cases["every 20th of 20,000 edited"]).exact
    assert not line_opcodes(*cases["20,000 repeated lines, every 20th changed"]).exact


def test_an_edit_that_cannot_be_paired_is_not_shown_harmless() -> None:
    old = "\n".join(["x = 1"] * 5000) + "\n"
    new = "\n".join("y = 2" if i % 20 == 0 else "x = 1" for i in range(5000)) + "\n"
    started = time.process_time()
    verdict = destructive_edit(old, new)
    assert time.process_time() - started < 0.5
    assert verdict is not None
    assert "could not all be paired" in verdict
    # An ordinary edit of a large file pairs exactly and is not destructive.
    lines = [f"line {i} of the notes" for i in range(20_000)]
    changed = [f"{line} (edited)" if i % 20 == 0 else line for i, line in enumerate(lines)]
    assert destructive_edit("\n".join(lines), "\n".join(changed)) is None
