"""Allowances on real VSH evidence: what AllowPaths, AllowAddedLines and AllowConfig prove."""

from __future__ import annotations

import pytest

from vsh_ai.rules import AllowAddedLines, AllowPaths, RuleSet

pytestmark = pytest.mark.anyio

FILES = {
    "tmp/a.txt": "scratch\n",
    "exports/r.csv": "m,r\n01,1\n",
    "exports/archive/old.csv": "m,r\n",
    "data/raw.csv": "id\n1\n",
    "scripts/run.sh": "#!/bin/sh\necho hi\n",
    "docs/guide.md": "# Guide\n\nOne.\nTwo.\nThree.\nFour.\nFive.\n",
    ".gitignore": ".env\n*.pem\n",
}


def decide(rule: AllowPaths | AllowAddedLines, evidence) -> tuple[str, list[str]]:
    verdict = RuleSet([rule]).evaluate(evidence)
    reasons = [u["reason"] for u in verdict.details.get("unproven", [])]
    return verdict.decision, reasons


async def test_kinds_and_paths_bound_what_is_claimed(evidence_for) -> None:
    rule = AllowPaths(paths=("tmp/**",), kinds=("delete",))
    delete = await evidence_for(FILES, "vsh_remove('/workspace/tmp/a.txt')")
    assert decide(rule, delete)[0] == "approve"
    edit = await evidence_for(FILES, "vsh_write('/workspace/tmp/a.txt', 'x\\n')")
    assert decide(rule, edit) == ("review", ["no allowance covers modify of tmp/a.txt"])
    create = await evidence_for(FILES, "vsh_write('/workspace/tmp/new.txt', 'x\\n')")
    assert decide(rule, create)[0] == "review", "a delete allowance never lets new files in"
    other = await evidence_for(FILES, "vsh_remove('/workspace/data/raw.csv')")
    assert decide(rule, other)[0] == "review"


async def test_one_segment_globs_are_root_anchored(evidence_for) -> None:
    files = {"a.tmp": "x", "logs/audit.tmp": "y"}
    rule = AllowPaths(paths=("*.tmp",), kinds=("delete",))
    root = await evidence_for(files, "vsh_remove('/workspace/a.tmp')")
    assert decide(rule, root)[0] == "approve"
    deep = await evidence_for(files, "vsh_remove('/workspace/logs/audit.tmp')")
    assert decide(rule, deep)[0] == "review"


async def test_allowances_match_case_exactly(evidence_for) -> None:
    files = {"TMP/a.txt": "x"}
    evidence = await evidence_for(files, "vsh_remove('/workspace/TMP/a.txt')")
    assert decide(AllowPaths(paths=("tmp/**",), kinds=("delete",)), evidence)[0] == "review"


async def test_a_rename_needs_both_ends(evidence_for) -> None:
    rule = AllowPaths(paths=("exports/*", "exports/archive/**"), kinds=("rename",))
    archive = await evidence_for(
        FILES, "vsh_move('/workspace/exports/r.csv', '/workspace/exports/archive/r.csv')"
    )
    decision, _ = decide(rule, archive)
    assert decision == "approve"
    claims = RuleSet([rule]).evaluate(archive).details["claims"]
    assert {c["kind"] for c in claims} == {"rename"}
    out = await evidence_for(FILES, "vsh_move('/workspace/exports/r.csv', '/workspace/r.csv')")
    decision, reasons = decide(rule, out)
    assert decision == "review"
    assert any("exports/r.csv is renamed from or to r.csv outside" in r for r in reasons)
    edited = await evidence_for(
        FILES,
        "vsh_move('/workspace/exports/r.csv', '/workspace/exports/archive/r.csv')\n"
        "vsh_write('/workspace/exports/archive/r.csv', 'tampered\\n')",
    )
    assert decide(rule, edited)[0] == "review", "a move then edit is a delete plus a create"
    gone = await evidence_for(
        FILES,
        "vsh_move('/workspace/exports/r.csv', '/workspace/exports/archive/r.csv')\n"
        "vsh_remove('/workspace/exports/archive/r.csv')",
    )
    assert decide(rule, gone) == ("review", ["no allowance covers delete of exports/r.csv"])


async def test_destructive_edits_need_opt_in(evidence_for) -> None:
    rule = AllowPaths(paths=("docs/**",), kinds=("modify",))
    typo = await evidence_for(
        FILES,
        "vsh_write('/workspace/docs/guide.md', "
        "'# Guide\\n\\nOne.\\nTwo.\\nThree.\\nFour.\\nFive!\\n')",
    )
    assert decide(rule, typo)[0] == "approve"
    emptied = await evidence_for(FILES, "vsh_write('/workspace/docs/guide.md', '')")
    decision, reasons = decide(rule, emptied)
    assert decision == "review"
    assert "emptying or gutting a file is not allowed here" in reasons[0]
    commented = await evidence_for(
        FILES,
        "vsh_write('/workspace/docs/guide.md', "
        "'# Guide\\n\\n<!-- One.\\nTwo.\\nThree.\\nFour. -->\\nFive.\\n')",
    )
    assert decide(rule, commented)[0] == "review"
    opted_in = AllowPaths(paths=("docs/**",), kinds=("modify",), destructive=True)
    assert decide(opted_in, emptied)[0] == "approve"


async def test_size_text_and_line_limits(evidence_for) -> None:
    big = await evidence_for(FILES, "vsh_write('/workspace/tmp/a.txt', 'x' * 5000)")
    assert decide(AllowPaths(paths=("tmp/**",), kinds=("modify",), max_bytes=100), big) == (
        "review",
        ["allow_paths: tmp/a.txt would be 5000 bytes (at most 100)"],
    )
    binary = await evidence_for(FILES, "vsh_write('/workspace/tmp/a.txt', b'\\x00\\x01\\x02')")
    text_only = AllowPaths(paths=("tmp/**",), kinds=("modify",))
    assert "is binary" in decide(text_only, binary)[1][0]
    any_bytes = AllowPaths(paths=("tmp/**",), kinds=("modify",), text_only=False)
    assert decide(any_bytes, binary)[0] == "approve"
    sweeping = await evidence_for(
        FILES, "vsh_write('/workspace/docs/guide.md', '# Guide\\n\\n' + 'new\\n' * 30)"
    )
    small = AllowPaths(paths=("docs/**",), kinds=("modify",), max_changed_lines=20)
    assert "lines changed (at most 20 here)" in decide(small, sweeping)[1][0]


async def test_copies_from_outside_are_not_claimed(evidence_for) -> None:
    rule = AllowPaths(paths=("exports/**",), kinds=("create",))
    copy = await evidence_for(
        FILES, "vsh_write('/workspace/exports/x.csv', vsh_read('/workspace/data/raw.csv'))"
    )
    decision, reasons = decide(rule, copy)
    assert decision == "review"
    assert "copies the contents of data/raw.csv" in reasons[0]
    fresh = await evidence_for(FILES, "vsh_write('/workspace/exports/x.csv', 'm,r\\n')")
    assert decide(rule, fresh)[0] == "approve"


async def test_mode_changes_only_add_exec_bits(evidence_for) -> None:
    rule = AllowPaths(paths=("scripts/**",), kinds=("metadata_change",))
    chmod = await evidence_for(FILES, "chmod +x scripts/run.sh", language="bash")
    assert decide(rule, chmod)[0] == "approve"
    writable = await evidence_for(FILES, "chmod 666 scripts/run.sh", language="bash")
    decision, reasons = decide(rule, writable)
    assert decision == "review"
    assert "changes more than adding exec bits" in reasons[0]
    anything = AllowPaths(paths=("scripts/**",), kinds=("metadata_change",), mode_change="any")
    assert decide(anything, writable)[0] == "approve"


def test_allow_paths_validates() -> None:
    with pytest.raises(ValueError, match="at least one kind"):
        AllowPaths(paths=("a/**",), kinds=())
    with pytest.raises(ValueError, match="at least one glob"):
        AllowPaths(paths=(), kinds=("create",))
    with pytest.raises(ValueError, match="whole segment"):
        AllowPaths(paths=("docs/**.md",), kinds=("create",))


async def test_added_lines_only(evidence_for) -> None:
    rule = AllowAddedLines(paths=(".gitignore",), pattern=r"[^!#\s][^\n]*|#[^\n]*|\s*")
    added = await evidence_for(
        FILES, "vsh_write('/workspace/.gitignore', '.env\\n*.pem\\n# caches\\n*.tmp\\n')"
    )
    assert decide(rule, added)[0] == "approve"
    negated = await evidence_for(
        FILES, "vsh_write('/workspace/.gitignore', '.env\\n*.pem\\n!prod.pem\\n')"
    )
    decision, reasons = decide(rule, negated)
    assert decision == "review"
    assert "added line 3 does not match" in reasons[0]
    removed = await evidence_for(FILES, "vsh_write('/workspace/.gitignore', '.env\\n*.tmp\\n')")
    assert "1 existing line(s) removed or changed" in decide(rule, removed)[1][0]
    with pytest.raises(ValueError, match="not supported"):
        AllowAddedLines(paths=(".gitignore",), pattern="(?!x)")
