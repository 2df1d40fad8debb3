"""Rules stay linear on crafted input within the review budget (issue 18), on real VSH evidence.

The four inputs the issue measured (20,000 added ``.gitignore`` lines, a 400 KiB line of
``password=`` pairs, every 20th line of a large file edited, many small new
files), each decided by a rule set well inside a second, with the decision the rules made
before; and a rule set's one glob matcher decides exactly as the glob sets one by one.
"""

from __future__ import annotations

import contextlib
import time

import pytest
import vsh

from vsh_ai import Evidence
from vsh_ai._judge_files import load_judge
from vsh_ai._simulate import simulate
from vsh_ai.analysis import _globs
from vsh_ai.rules import AllowAddedLines, AllowPaths, NoSecrets, RuleSet, _base

pytestmark = pytest.mark.anyio

GITIGNORE = AllowAddedLines(
    id="ignore-rules", paths=(".gitignore",), pattern=r"[^!#\s][^\n]*|#[^\n]*|\s*", dedupe=True
)


def cpu(rules: RuleSet, evidence: Evidence) -> tuple[float, str, str]:
    """CPU seconds of one decision on a fresh copy, its decision and its reason (the
    claim's reason for an approval)."""
    copy = Evidence.model_validate_json(evidence.model_dump_json())  # no memo carried over
    started = time.process_time()
    verdict = rules.evaluate(copy)
    seconds = time.process_time() - started
    claims = verdict.details.get("claims") if verdict.decision == "approve" else None
    return seconds, verdict.decision, claims[0]["reason"] if claims else verdict.reason


async def test_many_added_ignore_rules(evidence_for) -> None:
    code = (
        "p = '/workspace/.gitignore'\n"
        "vsh_write(p, vsh_read(p) + ''.join(f'build{i}/\\n' for i in range(20000)))"
    )
    evidence = await evidence_for({".gitignore": "*.pyc\n"}, code)
    seconds, decision, reason = cpu(RuleSet([GITIGNORE]), evidence)
    assert decision == "approve"
    assert "only adds 20000 allowed line(s)" in reason
    assert seconds < 1.0
    bad = code.replace("f'build{i}/", "f'!keep{i}/")
    evidence = await evidence_for({".gitignore": "*.pyc\n"}, bad)
    seconds, decision, reason = cpu(RuleSet([GITIGNORE]), evidence)
    assert decision == "review"
    assert "added line 2 does not match" in reason
    assert seconds < 1.0


async def test_a_long_line_of_password_pairs(evidence_for) -> None:
    pairs = "''.join(f'password=S3cr{i:06d}x ' for i in range(19000))"
    code = f"p = '/workspace/notes.md'\nvsh_write(p, vsh_read(p) + {pairs})"
    evidence = await evidence_for({"notes.md": "# Notes\n"}, code)
    seconds, decision, reason = cpu(RuleSet([NoSecrets()]), evidence)
    assert decision == "reject"
    assert reason.startswith("notes.md (line 2) adds what looks like a password")
    assert seconds < 1.5


async def test_every_twentieth_line_of_a_large_file_edited(evidence_for) -> None:
    text = "".join(f"Paragraph {i}: the service handles requests well.\n" for i in range(8000))
    code = (
        "p = '/workspace/docs/notes.md'\n"
        "lines = vsh_read(p).split('\\n')\n"
        "for i in range(0, len(lines) - 1, 20):\n"
        "    lines[i] = lines[i] + ' (edited)'\n"
        "vsh_write(p, '\\n'.join(lines))"
    )
    evidence = await evidence_for({"docs/notes.md": text}, code)
    small = AllowPaths(paths=("docs/**",), kinds=("modify",), max_changed_lines=20)
    seconds, decision, reason = cpu(RuleSet([small]), evidence)
    assert decision == "review"
    assert "800 lines changed (at most 20 here)" in reason
    assert seconds < 1.0
    seconds, decision, _ = cpu(
        RuleSet([AllowPaths(paths=("docs/**",), kinds=("modify",))]), evidence
    )
    assert decision == "approve"  # an edit of 400 lines, not a gutted file
    assert seconds < 1.0


async def test_many_small_new_files(make_workspace) -> None:
    code = "for i in range(800):\n    vsh_write(f'/workspace/docs/n{i:04d}.md', f'# Note {i}\\n')"
    budget = vsh.ExecutionBudget(max_duration_ms=120_000, max_os_calls=200_000)  # loaded CI
    result = await simulate(
        make_workspace({"docs/.keep": ""}), code, policy="strict", budget=budget
    )
    evidence = result.evidence
    assert evidence is not None
    assert evidence.complete
    judge = load_judge("secrets-hygiene", skip_llm=True)
    assert isinstance(judge, RuleSet)
    seconds, decision, _ = cpu(judge, evidence)
    assert decision == "approve"
    assert seconds < 1.0


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
