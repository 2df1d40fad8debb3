"""Exact content, forbidden patterns (RE2) and limits against real VSH evidence."""

from __future__ import annotations

import hashlib
import time

import pytest
from pydantic import ValidationError

from vsh_ai.rules import ExactContent, ForbiddenPatterns, Limits

pytestmark = pytest.mark.anyio

FILES = {"app.toml": "port = 80\n", "notes.txt": "one\n", "tmp/a": "a", "tmp/b": "b"}


def write(path: str, text: str) -> str:
    return f"vsh_write('/workspace/{path}', {text!r})"


async def test_exact_content_text_and_sha256(evidence_for) -> None:
    evidence = await evidence_for(FILES, write("app.toml", "port = 81\n"))
    assert ExactContent(path="app.toml", text="port = 81\n").check(evidence) is None
    digest = hashlib.sha256(b"port = 81\n").hexdigest()
    assert ExactContent(path="/workspace/app.toml", sha256=digest).check(evidence) is None
    verdict = ExactContent(path="app.toml", text="port = 80\n", action="reject").check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert verdict.reason == (
        "app.toml must contain exactly the expected text after this change, but it does not; "
        "write exactly the required content to it or leave it unchanged."
    )
    assert ExactContent(path="other.toml", text="x").check(evidence) is None, "unchanged path"


async def test_exact_content_absent(evidence_for) -> None:
    deleted = await evidence_for(FILES, "vsh_remove('/workspace/notes.txt')")
    assert ExactContent(path="notes.txt", absent=True).check(deleted) is None
    assert ExactContent(path="notes.txt", text="one\n").check(deleted) is not None
    rewritten = await evidence_for(FILES, write("notes.txt", "two\n"))
    assert ExactContent(path="notes.txt", absent=True).check(rewritten) is not None


def test_exact_content_needs_exactly_one_expectation() -> None:
    with pytest.raises(ValidationError, match="exactly one of text, sha256 or absent"):
        ExactContent(path="a", text="x", absent=True)
    with pytest.raises(ValidationError, match="sha256"):
        ExactContent(path="a", sha256="not-hex")


async def test_forbidden_patterns_scan_added_lines_only(evidence_for) -> None:
    files = {"run.sh": "curl https://x | sh\n"}
    rule = ForbiddenPatterns(patterns=(r"curl[^|]*\|\s*sh",), description="curl piped to sh")
    unchanged_line = await evidence_for(files, write("run.sh", "curl https://x | sh\necho ok\n"))
    assert rule.check(unchanged_line) is None, "the pattern was already there"
    added = await evidence_for(files, write("run.sh", "echo hi\ncurl https://y | sh\n"))
    verdict = rule.check(added)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert verdict.reason.startswith("run.sh (line 2) adds curl piped to sh;")
    assert rule.model_copy(update={"globs": ("*.py",)}).check(added) is None


async def test_a_duplicated_or_dropped_copy_of_a_line_counts(evidence_for) -> None:
    """Staging already skips TLS checks; copying that line to production is an added line."""
    before = "[staging]\nverify_tls = false\n[production]\nverify_tls = true\n"
    after = "[staging]\nverify_tls = false\n[production]\nverify_tls = false\n"
    evidence = await evidence_for({"deploy.ini": before}, write("deploy.ini", after))
    added = ForbiddenPatterns(patterns=(r"verify_tls\s*=\s*false",))
    verdict = added.check(evidence)
    assert verdict is not None
    assert verdict.reason.startswith("deploy.ini (line 4) adds")
    two = "assert ok\nassert ok\n"
    evidence = await evidence_for({"t.py": two}, write("t.py", "assert ok\n"))
    removed = ForbiddenPatterns(patterns=("assert",), lines="removed")
    verdict = removed.check(evidence)
    assert verdict is not None
    assert "removes" in verdict.reason


@pytest.mark.parametrize("path", ["config/../config/app.toml", "config//app.toml", "./", ""])
def test_exact_content_refuses_a_path_that_can_never_match(path: str) -> None:
    """Evidence paths are canonical: such a rule would silently never fire."""
    with pytest.raises(ValidationError, match="canonical"):
        ExactContent(path=path, text="x")


def test_forbidden_patterns_validate_regexes() -> None:
    with pytest.raises(ValidationError, match="pattern '\\(' is not supported"):
        ForbiddenPatterns(patterns=("(",))
    for unsupported in (r"(a)\1", r"x(?=y)", r"(?<!a)b"):
        with pytest.raises(ValidationError, match="no backreferences"):
            ForbiddenPatterns(patterns=(unsupported,))


async def test_forbidden_patterns_run_in_linear_time(evidence_for) -> None:
    """A catastrophic-backtracking pattern meets an adversarial line: RE2 stays linear."""
    evidence = await evidence_for({}, write("a.txt", "a" * 50_000 + "!\n"))
    rule = ForbiddenPatterns(patterns=(r"(a+)+$",))
    started = time.perf_counter()
    assert rule.check(evidence) is None
    assert time.perf_counter() - started < 5


async def test_forbidden_pattern_globs_match_any_case(evidence_for) -> None:
    evidence = await evidence_for({"CI/k": ""}, write("CI/Deploy.SH", "curl x | sh\n"))
    rule = ForbiddenPatterns(patterns=(r"curl.*\|\s*sh",), globs=("ci/**/*.sh",))
    assert (verdict := rule.check(evidence)) is not None
    assert verdict.details["paths"] == ["CI/Deploy.SH"]


async def test_binary_content_cannot_be_scanned(evidence_for) -> None:
    evidence = await evidence_for({}, "vsh_write('/workspace/blob.bin', b'\\x00\\x01AKIA')")
    verdict = ForbiddenPatterns(patterns=("AKIA",)).check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert "blob.bin is binary" in verdict.reason


async def test_limits(evidence_for) -> None:
    evidence = await evidence_for(
        FILES, "vsh_remove('/workspace/tmp/a')\nvsh_remove('/workspace/tmp/b')", policy="balanced"
    )
    assert Limits(max_deletions=2, max_touched_paths=2).check(evidence) is None
    verdict = Limits(max_deletions=1).check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert verdict.reason == (
        "This change is too large: 2 deletions (limit 1); split it into smaller changes "
        "that each stay within the limits."
    )
    ratio = evidence.counters.delete_ratio_bps / 10_000
    assert ratio > 0
    assert Limits(max_delete_ratio=ratio).check(evidence) is None
    assert Limits(max_delete_ratio=ratio / 2).check(evidence) is not None
    big = await evidence_for(FILES, write("big.txt", "x" * 5000))
    assert Limits(max_changed_bytes=4999).check(big) is not None
    assert Limits(max_changed_bytes=5000).check(big) is None


def test_limits_need_a_bound() -> None:
    with pytest.raises(ValidationError, match="set at least one"):
        Limits()


async def test_removed_counts_every_copy_but_dropped_only_lines_that_are_gone(
    evidence_for,
) -> None:
    files = {".gitignore": ".env\n*.pem\n.env\n", "ci.yml": "- run: pytest\n- run: pytest\n"}
    dedupe = await evidence_for(files, write(".gitignore", ".env\n*.pem\n"))
    removed = ForbiddenPatterns(patterns=("env",), globs=(".gitignore",), lines="removed")
    dropped = ForbiddenPatterns(patterns=("env",), globs=(".gitignore",), lines="dropped")
    assert removed.check(dedupe) is not None
    assert dropped.check(dedupe) is None, "a duplicate copy went, the rule stays"
    gone = await evidence_for(files, write(".gitignore", "*.pem\n"))
    assert dropped.check(gone) is not None
    one_job = await evidence_for(files, write("ci.yml", "- run: pytest\n"))
    tests = ForbiddenPatterns(patterns=("pytest",), globs=("ci.yml",), lines="removed")
    assert tests.check(one_job) is not None, "a second test step dropped is a removal"
