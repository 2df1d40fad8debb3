"""Analyse once (issue 18): one analysis per evidence, secrets found once per content.

* the analysis memo lives on the evidence, survives a plain shallow copy, and is never
  used for a copy whose fields changed, a deep copy or a pickle; it changes nothing an
  evidence dumps, compares or digests;
* secret findings are remembered by content digest: every rule, the read rule,
  redaction and the LLM packet share one scan per text, across copies;
* the one-pass RE2 gate in front of the detector's patterns changes no finding.
"""

from __future__ import annotations

import contextlib
import copy
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_analysis_secrets import FRAGMENTS, NOT_SECRETS, PLAIN_LINES, SPELLINGS

from vsh_ai import Evidence
from vsh_ai._judge_files import load_judge
from vsh_ai.analysis import _decode, _secrets
from vsh_ai.analysis._changes import net_changes
from vsh_ai.analysis._memo import Analysis, analysis_of
from vsh_ai.llm import PacketRefused, SharingPolicy, build_packet
from vsh_ai.rules import NoSecrets, ProtectedReads, RuleSet, _config_checker
from vsh_ai.rules._base import secret_reads

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
GITHUB = "ghp_" + "R8xq2LmN4vT7yB1cK9dF3hJ6pW0sZ5aE8uGi"
FILES = {
    "app/settings.py": f"TOKEN = '{GITHUB}'\n",
    "docs/a.md": "# A\n\nText.\n",
    "docs/b.md": "# B\n\nMore text.\n",
}
CODE = (
    "vsh_read('/workspace/app/settings.py')\n"
    "for name in ('a', 'b'):\n"
    "    p = f'/workspace/docs/{name}.md'\n"
    "    vsh_write(p, vsh_read(p) + 'password = \"Zx9q7Lm2pQ\"\\n')"
)


def ungated(text: str) -> tuple[_secrets.SecretFinding, ...]:
    """The detector with every pattern run on its own (no gate, no remembered findings)."""
    saved = _decode._GATE_SET
    _decode._GATE_SET = None
    _decode._LAST_HITS = (b"", None)
    try:
        head = text[: _secrets.MAX_SCAN_CHARS]
        return _secrets._normalised(_secrets._scan(head, _secrets._DEPTH))
    finally:
        _decode._GATE_SET = saved
        _decode._LAST_HITS = (b"", None)


def gated(text: str) -> tuple[_secrets.SecretFinding, ...]:
    _secrets.clear_cache()
    return _secrets.find_secrets(text)


def corpus() -> Iterator[str]:
    yield from PLAIN_LINES
    yield from (text for text, _ in SPELLINGS)
    yield from NOT_SECRETS
    for path in sorted((ROOT / "evals").glob("*.yaml")) + sorted((ROOT / "judges").glob("*")):
        yield path.read_text(errors="replace")
    for path in sorted((ROOT / "vsh_ai" / "analysis").glob("*.py")):
        yield path.read_text()


def test_the_gate_changes_no_finding_on_the_corpus() -> None:
    assert _decode._GATE_SET is not None, "the gate is built"
    for text in corpus():
        assert gated(text) == ungated(text), text[:200]


@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=16)), max_size=16))
def test_the_gate_changes_no_finding(parts: list[str]) -> None:
    text = "".join(parts)
    assert gated(text) == ungated(text)


@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=16)), max_size=16))
def test_the_gate_sets_report_each_pattern_that_matches(parts: list[str]) -> None:
    """Issue 18: the gate's patterns are split over small RE2 sets (one set of all of them
    took seconds on high-entropy text); together they name exactly the patterns whose own
    search finds a match."""
    data = _decode._ascii_bytes("x " + "".join(parts))
    gate = _decode._GATE_SET
    expected = {i for i, regex in enumerate(_decode._GATE_PATTERNS) if regex.search(data)}
    for sets in (gate.one, gate.groups):  # the one set, and the sets of four
        found = sets.Match(data)
        assert found is not None
        assert set(found) == {*expected, _decode._ALWAYS}


def test_the_gate_moves_to_small_sets_while_the_one_set_is_slow() -> None:
    """High-entropy text makes one RE2 set of every pattern build DFA states without end:
    a long text goes to sets of four at once, and after a slow window of short texts the
    next MiB does too, with the same answers."""
    import random
    import string

    gate = _decode._Gate([regex.pattern for regex in _decode._GATE_PATTERNS])
    rng = random.Random(7)
    chars = string.ascii_letters + string.digits

    def noise(size: int) -> bytes:
        return "".join(rng.choices(chars, k=size)).encode()

    long = noise(_decode._LARGE_BYTES)
    assert set(gate.Match(long) or ()) == set(gate.groups.Match(long) or ())
    assert gate.window == (0, 0)  # a long text never ran the one set
    shorts = [noise(1024) for _ in range(8)]  # about ten times over the limit when cold
    answers = [gate.Match(short) for short in shorts]
    assert gate.grouped_left > 0
    for short, answer in zip(shorts, answers, strict=True):
        assert answer is not None
        grouped, one = gate.groups.Match(short), gate.one.Match(short)
        assert set(answer) == set(grouped or ()) == set(one or ())


def test_a_gate_that_cannot_finish_runs_every_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    class Failing:
        def Match(self, data: bytes) -> None:
            return None  # what RE2 reports when its DFA runs out of memory

    monkeypatch.setattr(_decode, "_GATE_SET", Failing())
    _decode._LAST_HITS = (b"", None)
    _secrets.clear_cache()
    assert _secrets.find_secrets(f"token = {GITHUB}")
    _decode._LAST_HITS = (b"", None)


def test_findings_are_remembered_by_content(monkeypatch: pytest.MonkeyPatch) -> None:
    _secrets.clear_cache()
    scans: list[str] = []
    scan = _secrets._scan
    monkeypatch.setattr(
        _secrets, "_scan", lambda text, depth: scans.append(text) or scan(text, depth)
    )
    text = f"token = {GITHUB}\n"
    first = _secrets.find_secrets(text)
    again = _secrets.find_secrets("".join(["token = ", GITHUB, "\n"]))  # another str object
    assert first == again
    assert len(scans) == 1
    monkeypatch.setattr(_secrets, "MAX_SCAN_CHARS", 10)  # the scan limit is part of the key
    assert _secrets.find_secrets(text)[-1].kind == _secrets.UNSCANNED
    assert len(scans) == 2


def test_the_findings_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    _secrets.clear_cache()
    monkeypatch.setattr(_secrets, "_FOUND_ENTRIES", 5)
    monkeypatch.setattr(_secrets, "_FOUND_FINDINGS", 3)
    for i in range(20):
        _secrets.find_secrets(f"note {i}")
        _secrets.find_secrets(f"token = {GITHUB[:-2]}{i:02d}")
    assert len(_secrets._FOUND) <= 5
    assert sum(len(found) for found in _secrets._FOUND.values()) <= 3
    assert _secrets._found_held == sum(len(found) for found in _secrets._FOUND.values())
    _secrets.clear_cache()


async def test_the_memo_belongs_to_one_evidence_object(evidence_for) -> None:
    evidence = await evidence_for(FILES, CODE)
    memo = analysis_of(evidence)
    assert analysis_of(evidence) is memo
    changes = net_changes(evidence)
    assert net_changes(evidence) is changes
    updated = evidence.model_copy(update={"changes": evidence.changes[:1]})
    assert analysis_of(updated) is not memo  # carried in the copied __dict__, never used
    assert len(net_changes(updated)) == 1
    assert net_changes(evidence) is changes
    for other in (
        evidence.model_copy(),
        copy.deepcopy(evidence),
        pickle.loads(pickle.dumps(evidence)),
        Evidence.model_validate_json(evidence.model_dump_json()),
        Evidence.model_validate(evidence.model_dump()),  # what each pipeline stage gets
    ):
        assert analysis_of(other) is not memo
        assert net_changes(other) == changes
    # Never part of what an evidence is: its dump, equality and digest.
    assert Evidence.model_validate_json(evidence.model_dump_json()) == evidence
    assert "_vsh_ai_analysis" not in evidence.model_dump()
    assert evidence.digest == Evidence.model_validate_json(evidence.model_dump_json()).digest
    assert isinstance(memo, Analysis)
    assert memo.fits(evidence)
    assert not memo.fits(updated)
    # No reference cycle: an evidence is freed as soon as it is dropped.
    import gc
    import weakref

    gc.disable()
    try:
        probe = Evidence.model_validate_json(evidence.model_dump_json())
        net_changes(probe)
        alive = weakref.ref(probe)
        del probe
        assert alive() is None
    finally:
        gc.enable()


async def test_one_scan_per_content_per_decision(evidence_for, monkeypatch) -> None:
    evidence = await evidence_for(FILES, CODE)
    _secrets.clear_cache()
    scans: list[str] = []
    scan = _secrets._scan
    monkeypatch.setattr(
        _secrets, "_scan", lambda text, depth: scans.append(text) or scan(text, depth)
    )
    rules = RuleSet([NoSecrets(), ProtectedReads(content=True)], id="memo")
    first = rules.evaluate(evidence)
    count = len(scans)
    assert first.decision == "reject"
    # Every text was scanned once: the read, both docs (before and after), the names.
    assert len(set(scans)) == len(scans)
    # Another decision, a copy of the evidence, the read rule again, the packet: no rescan
    # of any text already scanned (only redacted text, new by construction, is new).
    assert rules.evaluate(Evidence.model_validate_json(evidence.model_dump_json())) == first
    assert secret_reads(evidence) == ["app/settings.py"]
    assert len(scans) == count
    with contextlib.suppress(PacketRefused):  # refused (an unshared read): scans counted
        build_packet(evidence, SharingPolicy(share=("docs/**",)))
    assert all(text not in scans[:count] for text in scans[count:])


async def test_line_numbers_by_bisect_match_a_recount(evidence_for) -> None:
    lines = [f"x{i} = {i}" for i in range(50)] + ['password = "Zx9q7Lm2pQ"'] * 3
    text = "\n".join(lines) + "\n"
    evidence = await evidence_for({"a.txt": ""}, f"vsh_write('/workspace/a.txt', {text!r})")
    memo = analysis_of(evidence)
    data = evidence.after_bytes("a.txt")
    assert data is not None
    for offset in (0, 1, 5, len(text) // 2, len(text) - 1, len(text)):
        assert memo.line_of(data, offset) == text.count("\n", 0, offset) + 1
    verdict = NoSecrets().check(evidence)
    assert verdict is not None
    assert "a.txt (line 51, line 52, line 53)" in verdict.reason


async def test_remember_for_keys_by_the_objects_themselves(evidence_for) -> None:
    memo = analysis_of(await evidence_for(FILES, CODE))
    a, b = {"k": 1}, {"k": 1}  # equal, yet two parses
    calls: list[object] = []

    def compute(x: object) -> object:
        calls.append(x)
        return object()

    first = memo.remember_for("t", a, b, lambda: compute(a))
    assert memo.remember_for("t", a, b, lambda: compute(a)) is first
    assert memo.remember_for("t", b, a, lambda: compute(b)) is not first
    assert memo.remember_for("other", a, b, lambda: compute(a)) is not first
    assert len(calls) == 3


async def test_config_rules_compare_each_file_once_per_decision(evidence_for, monkeypatch) -> None:
    """The keep, allowance and value rules of service-config share one key comparison of
    a file's two parses; the decision is what it was without sharing."""
    files = {
        f"config/s{i}.toml": f"[server]\nworkers = {4 + i}\ntimeout_s = 30\n" for i in range(3)
    }
    code = (
        "for i in range(3):\n    p = f'/workspace/config/s{i}.toml'\n"
        "    vsh_write(p, vsh_read(p).replace('timeout_s = 30', 'timeout_s = 40'))"
    )
    evidence = await evidence_for(files, code)
    judge = load_judge("service-config", skip_llm=True)
    assert isinstance(judge, RuleSet)
    compared: list[tuple[object, object]] = []
    original = _config_checker.config_changes

    def counted(before: object, after: object) -> object:
        compared.append((before, after))
        return original(before, after)

    unshared = judge.evaluate(Evidence.model_validate_json(evidence.model_dump_json()))
    monkeypatch.setattr(_config_checker, "config_changes", counted)
    verdict = judge.evaluate(evidence)
    assert verdict.decision == unshared.decision == "approve", verdict.reason
    assert verdict.reason == unshared.reason
    assert len(compared) == 3, compared  # one per file, not one per rule
