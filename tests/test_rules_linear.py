"""Rules stay linear on crafted input within the review budget (issue 18), on real VSH evidence.

The four inputs the issue measured (20,000 added ``.gitignore`` lines, a 400 KiB line of
``password=`` pairs, every 20th line of a large file edited, many small new files), each
decided as the rules decided before, at a CPU cost that grows linearly: the same shape at
a quarter of the size, measured in the same test, costs at least an eighth as much (a
quadratic rule would cost a sixteenth). Absolute times depend on the machine and its load:
``benchmarks/crafted.py`` prints them (target: every decision under a second). And a rule
set's one glob matcher decides exactly as the glob sets one by one.
"""

from __future__ import annotations

import contextlib
import gc
import time

import pytest
import vsh

from vsh_ai import Evidence
from vsh_ai._judge_files import load_judge
from vsh_ai._simulate import simulate
from vsh_ai.analysis import _globs, _secrets
from vsh_ai.rules import AllowAddedLines, AllowPaths, NoSecrets, RuleSet, _base

pytestmark = pytest.mark.anyio

GITIGNORE = AllowAddedLines(
    id="ignore-rules", paths=(".gitignore",), pattern=r"[^!#\s][^\n]*|#[^\n]*|\s*", dedupe=True
)


def cpu(rules: RuleSet, evidence: Evidence) -> tuple[float, str, str]:
    """CPU seconds of one decision on a fresh copy (this thread's: the rules run here),
    its decision and its reason (the claim's reason for an approval)."""
    copy = Evidence.model_validate_json(evidence.model_dump_json())  # no memo carried over
    _secrets.clear_cache()  # findings are remembered by content: each decision scans afresh
    gc.disable()  # a collection of the whole test process is not the rules' cost
    try:
        started = time.thread_time()
        verdict = rules.evaluate(copy)
        seconds = time.thread_time() - started
    finally:
        gc.enable()
    claims = verdict.details.get("claims") if verdict.decision == "approve" else None
    return seconds, verdict.decision, claims[0]["reason"] if claims else verdict.reason


def linear(rules: RuleSet, small: Evidence, large: Evidence) -> tuple[float, str, str]:
    """:func:`cpu` of the decision on ``large`` (4x the input of ``small``, the same shape),
    after checking it costs within 8x the decision on ``small`` plus 20 ms for the timer:
    linear is 4x, quadratic 16x. ``small`` is decided once untimed first, so first-use
    costs (compiled patterns, lazy imports) count for neither."""
    cpu(rules, small)
    before = cpu(rules, small)[0]
    seconds, decision, reason = cpu(rules, large)
    assert seconds <= 8 * before + 0.02, f"4x the input took {seconds / before:.1f}x the CPU"
    return seconds, decision, reason


def _ignore_rules(count: int, line: str = "build{i}/") -> str:
    return (
        "p = '/workspace/.gitignore'\n"
        f"vsh_write(p, vsh_read(p) + ''.join(f'{line}\\n' for i in range({count})))"
    )


async def test_many_added_ignore_rules(evidence_for) -> None:
    small = await evidence_for({".gitignore": "*.pyc\n"}, _ignore_rules(5000))
    evidence = await evidence_for({".gitignore": "*.pyc\n"}, _ignore_rules(20000))
    _, decision, reason = linear(RuleSet([GITIGNORE]), small, evidence)
    assert decision == "approve"
    assert "only adds 20000 allowed line(s)" in reason
    bad = await evidence_for({".gitignore": "*.pyc\n"}, _ignore_rules(20000, "!keep{i}/"))
    _, decision, reason = cpu(RuleSet([GITIGNORE]), bad)
    assert decision == "review"
    assert "added line 2 does not match" in reason


def _password_pairs(count: int) -> str:
    pairs = f"''.join(f'password=S3cr{{i:06d}}x ' for i in range({count}))"
    return f"p = '/workspace/notes.md'\nvsh_write(p, vsh_read(p) + {pairs})"


async def test_a_long_line_of_password_pairs(evidence_for) -> None:
    small = await evidence_for({"notes.md": "# Notes\n"}, _password_pairs(4750))
    evidence = await evidence_for({"notes.md": "# Notes\n"}, _password_pairs(19000))
    _, decision, reason = linear(RuleSet([NoSecrets()]), small, evidence)
    assert decision == "reject"
    assert reason.startswith("notes.md (line 2) adds what looks like a password")


EDIT_EVERY_20TH = (
    "p = '/workspace/docs/notes.md'\n"
    "lines = vsh_read(p).split('\\n')\n"
    "for i in range(0, len(lines) - 1, 20):\n"
    "    lines[i] = lines[i] + ' (edited)'\n"
    "vsh_write(p, '\\n'.join(lines))"
)


def _paragraphs(count: int) -> dict[str, str]:
    text = "".join(f"Paragraph {i}: the service handles requests well.\n" for i in range(count))
    return {"docs/notes.md": text}


async def test_every_twentieth_line_of_a_large_file_edited(evidence_for) -> None:
    evidence = await evidence_for(_paragraphs(8000), EDIT_EVERY_20TH)
    small = await evidence_for(_paragraphs(2000), EDIT_EVERY_20TH)
    bounded = RuleSet([AllowPaths(paths=("docs/**",), kinds=("modify",), max_changed_lines=20)])
    _, decision, reason = linear(bounded, small, evidence)
    assert decision == "review"
    assert "800 lines changed (at most 20 here)" in reason
    any_size = RuleSet([AllowPaths(paths=("docs/**",), kinds=("modify",))])
    _, decision, _ = linear(any_size, small, evidence)
    assert decision == "approve"  # an edit of 400 lines, not a gutted file


async def _new_files(make_workspace, count: int) -> Evidence:
    code = (
        f"for i in range({count}):\n"
        "    vsh_write(f'/workspace/docs/n{i:04d}.md', f'# Note {i}\\n')"
    )
    budget = vsh.ExecutionBudget(max_duration_ms=120_000, max_os_calls=200_000)  # loaded CI
    result = await simulate(
        make_workspace({"docs/.keep": ""}), code, policy="strict", budget=budget
    )
    evidence = result.evidence
    assert evidence is not None
    assert evidence.complete
    return evidence


async def test_many_small_new_files(make_workspace) -> None:
    judge = load_judge("secrets-hygiene", skip_llm=True)
    assert isinstance(judge, RuleSet)
    small, large = await _new_files(make_workspace, 200), await _new_files(make_workspace, 800)
    _, decision, _ = linear(judge, small, large)
    assert decision == "approve"


async def test_one_matcher_decides_as_the_glob_sets_one_by_one(evidence_for, monkeypatch) -> None:
    files = {
        "config/app.toml": "[server]\nworkers = 4\n",
        "docs/a.md": "# A\n",
        "config/db.toml": 'password = "Zx9q7Lm2pQw"\n',
        "src/pkg/mod.py": "x = 1\n",
        "tmp/t.tmp": "x\n",
    }
    programs = [
        "p = '/workspace/config/app.toml'\nvsh_write(p, vsh_read(p).replace('4', '8'))",
        "vsh_write('/workspace/docs/a.md', '# A\\n\\nMore.\\n')\n"
        "vsh_remove('/workspace/tmp/t.tmp')",
        "vsh_read('/workspace/config/db.toml')\nvsh_write('/workspace/docs/B.md', 'x\\n')",
        "vsh_write('/workspace/src/pkg/mod.py', 'import os\\nos.system(\"x\")\\n')",
        "vsh_write('/workspace/src/pkg/.ENV', 'y\\n')",
    ]
    judges = ["ci-workflows", "data-cleanup", "dependency-updates", "repo-maintenance",
              "secrets-hygiene", "service-config"]  # fmt: skip
    rows: list[_globs._Build] = []
    real_row = _globs._Build.row

    def counted(self: _globs._Build, path: str) -> tuple[str | None, ...]:
        rows.append(self)
        return real_row(self, path)

    for code in programs:
        evidence = await evidence_for(files, code)
        for name in judges:
            judge = load_judge(name, skip_llm=True)
            assert isinstance(judge, RuleSet)
            with monkeypatch.context() as patched:
                patched.setattr(_globs._Build, "row", counted)
                rows.clear()
                table = judge.evaluate(evidence)
                paths = {c.path for c in evidence.changes} | set(evidence.inspected_paths)
                judge_rows = [b for b in rows if b is judge._globs._built]
                assert len(judge_rows) <= len(paths)  # each path matched once for every set
            with monkeypatch.context() as plain:
                plain.setattr(_base, "matching_with", lambda table: contextlib.nullcontext())
                assert judge.evaluate(evidence) == table
