"""Evidence from real VSH events: shapes, helpers, completeness and JSON round trips."""

from __future__ import annotations

from typing import Any

import pytest
from inline_snapshot import snapshot

from vsh_ai import Evidence, EvidenceGap

pytestmark = pytest.mark.anyio

FILES = {"app.toml": "port = 80\nhost = 'a'\n", "notes.txt": "one\n", "empty.txt": ""}

OPERATIONS = {
    "create": ("vsh_write('/workspace/new.txt', 'fresh\\n')", "monty"),
    "modify": ("vsh_write('/workspace/app.toml', 'port = 81\\nhost = \\'a\\'\\n')", "monty"),
    "delete": ("vsh_remove('/workspace/notes.txt')", "monty"),
    "rename": ("vsh_move('/workspace/notes.txt', '/workspace/moved.txt')", "monty"),
    "mkdir": ("vsh_mkdir('/workspace/dir')", "monty"),
    "chmod": ("chmod +x notes.txt", "bash"),
    "read_only": ("vsh_read('/workspace/notes.txt')", "monty"),
    "overwrite": (
        "vsh_write('/workspace/notes.txt', 'draft\\n')\n"
        "vsh_write('/workspace/notes.txt', 'final\\n')",
        "monty",
    ),
    "identical": ("vsh_write('/workspace/notes.txt', 'one\\n')", "monty"),
}


def summary(evidence: Evidence) -> dict[str, Any]:
    """The run-independent shape of evidence (digests and stamps vary per run)."""
    return {
        "changes": [(c.path, c.kind) for c in evidence.changes],
        "effects": [(e.operation, *e.paths) for e in evidence.effects],
        "contents": sorted({c.path for c in evidence.contents}),
        "complete": evidence.complete,
        "gaps": list(evidence.gaps()),
    }


@pytest.mark.parametrize("policy", ["strict", "balanced"])
@pytest.mark.parametrize("budget", [1 << 20, 0])
@pytest.mark.parametrize("operation", OPERATIONS)
async def test_json_round_trip(evidence_for, operation: str, policy: str, budget: int) -> None:
    code, language = OPERATIONS[operation]
    evidence = await evidence_for(
        FILES, code, policy=policy, language=language, review_content_bytes=budget
    )
    again = Evidence.model_validate_json(evidence.model_dump_json())
    assert again == evidence
    assert again.digest == evidence.digest
    assert evidence.policy.profile == policy
    if budget == 0:
        assert evidence.contents == ()
        if evidence.written_versions:
            assert not evidence.complete, "uncaptured writes can never be complete evidence"


async def test_shapes_of_every_operation(evidence_for) -> None:
    shapes = {}
    for name, (code, language) in OPERATIONS.items():
        evidence = await evidence_for(FILES, code, language=language, policy="balanced")
        shapes[name] = summary(evidence)
    assert shapes == snapshot(
        {
            "create": {
                "changes": [("new.txt", "create")],
                "effects": [("create", "new.txt")],
                "contents": ["new.txt"],
                "complete": True,
                "gaps": [],
            },
            "modify": {
                "changes": [("app.toml", "modify")],
                "effects": [("modify_content", "app.toml")],
                "contents": ["app.toml"],
                "complete": True,
                "gaps": [],
            },
            "delete": {
                "changes": [("notes.txt", "delete")],
                "effects": [("metadata_read", "notes.txt"), ("delete", "notes.txt")],
                "contents": ["notes.txt"],
                "complete": True,
                "gaps": [],
            },
            "rename": {
                "changes": [("moved.txt", "create"), ("notes.txt", "delete")],
                "effects": [("metadata_read", "notes.txt"), ("rename", "notes.txt", "moved.txt")],
                "contents": ["moved.txt", "notes.txt"],
                "complete": True,
                "gaps": [],
            },
            "mkdir": {
                "changes": [("dir", "create")],
                "effects": [("metadata_read", "dir"), ("metadata_read", "."), ("create", "dir")],
                "contents": [],
                "complete": True,
                "gaps": [],
            },
            "chmod": {
                "changes": [("notes.txt", "metadata_change")],
                "effects": [
                    ("metadata_read", "notes.txt"),
                    ("metadata_read", "notes.txt"),
                    ("metadata_read", "notes.txt"),
                    ("modify_metadata", "notes.txt"),
                ],
                "contents": [],
                "complete": True,
                "gaps": [],
            },
            "read_only": {
                "changes": [],
                "effects": [("metadata_read", "notes.txt"), ("content_read", "notes.txt")],
                "contents": ["notes.txt"],
                "complete": True,
                "gaps": [],
            },
            "overwrite": {
                "changes": [("notes.txt", "modify")],
                "effects": [("modify_content", "notes.txt"), ("modify_content", "notes.txt")],
                "contents": ["notes.txt"],
                "complete": False,
                "gaps": [
                    "an intermediate write to notes.txt is not resolvable from captured content"
                ],
            },
            "identical": {
                "changes": [],
                "effects": [("modify_content", "notes.txt")],
                "contents": [],
                "complete": False,
                "gaps": [
                    "an intermediate write to notes.txt is not resolvable from captured content"
                ],
            },
        }
    )


async def test_text_helpers(evidence_for) -> None:
    evidence = await evidence_for(
        FILES,
        "vsh_write('/workspace/app.toml', 'port = 81\\nhost = \\'a\\'\\nnew = 1\\n')\n"
        "vsh_write('/workspace/new.txt', '')\n"
        "vsh_remove('/workspace/notes.txt')",
    )
    assert evidence.before_text("app.toml") == "port = 80\nhost = 'a'\n"
    assert evidence.after_text("/workspace/app.toml") == "port = 81\nhost = 'a'\nnew = 1\n"
    assert evidence.added_lines("app.toml") == ("port = 81", "new = 1")
    assert evidence.removed_lines("app.toml") == ("port = 80",)
    assert evidence.before_text("new.txt") is None, "absent is None"
    assert evidence.after_text("new.txt") == "", "empty is not absent"
    assert evidence.after_bytes("notes.txt") is None
    assert evidence.deleted_paths == ("notes.txt",)
    assert set(evidence.written_paths) == {"app.toml", "new.txt"}
    assert evidence.unified_diff("app.toml") == snapshot("""\
--- a/app.toml
+++ b/app.toml
@@ -1,2 +1,3 @@
-port = 80
+port = 81
 host = 'a'
+new = 1
""")
    with pytest.raises(EvidenceGap, match="not changed"):
        evidence.after_text("empty.txt")


async def test_binary_and_uncaptured_content(evidence_for) -> None:
    binary = await evidence_for({}, "vsh_write('/workspace/b.bin', b'\\x00\\xff')")
    assert binary.is_binary("b.bin")
    with pytest.raises(EvidenceGap, match="binary"):
        binary.after_text("b.bin")
    uncaptured = await evidence_for(
        FILES, "vsh_write('/workspace/notes.txt', 'x\\n')", review_content_bytes=0
    )
    with pytest.raises(EvidenceGap, match="not captured"):
        uncaptured.after_bytes("notes.txt")
    assert not uncaptured.complete


async def test_reads_and_renames(evidence_for) -> None:
    evidence = await evidence_for(
        FILES,
        "vsh_read('/workspace/app.toml')\nvsh_list('/workspace')\n"
        "vsh_move('/workspace/notes.txt', '/workspace/n2.txt')",
    )
    assert evidence.read_paths == ("app.toml",)
    assert {"app.toml", "."} <= set(evidence.inspected_paths)
    assert evidence.renames == (("notes.txt", "n2.txt"),)
    assert set(evidence.changed_paths) == {"n2.txt", "notes.txt"}


async def test_intermediate_write_gap(evidence_for) -> None:
    code, _ = OPERATIONS["overwrite"]
    evidence = await evidence_for(FILES, code)
    assert evidence.content_complete, "VSH itself reports complete content here"
    assert not evidence.complete
    [gap] = evidence.unresolved_writes
    assert gap.path == "notes.txt"
    assert gap.sequence >= 0
    assert evidence.gaps() == (
        "an intermediate write to notes.txt is not resolvable from captured content",
    )


async def test_json_form_of_a_create(evidence_for) -> None:
    evidence = await evidence_for({}, "vsh_write('/workspace/a.txt', 'hi\\n')", intent="add a.txt")
    data = evidence.model_dump(mode="json", exclude={"digests": True, "execution": {"evidence"}})
    assert data == snapshot(
        {
            "schema_version": 2,
            "intent": "add a.txt",
            "policy": {
                "profile": "strict",
                "baseline": "review_required",
                "state": "pending_approval",
                "risk_flags": ["mutation"],
                "thresholds": {
                    "delete_ratio_minimum_paths": 25,
                    "deny_changed_bytes": 268435456,
                    "deny_delete_ratio_bps": 5000,
                    "deny_deleted_paths": 2000,
                    "deny_touched_paths": 10000,
                    "escalate_changed_bytes": 8388608,
                    "escalate_touched_paths": 100,
                },
            },
            "counters": {
                "touched_paths": 1,
                "created_paths": 1,
                "modified_paths": 0,
                "deleted_paths": 0,
                "renamed_paths": 0,
                "changed_bytes": 3,
                "delete_ratio_bps": 0,
                "executable_changes": 0,
                "symlink_changes": 0,
                "os_calls": 1,
                "read_bytes": 0,
                "write_bytes": 3,
                "directory_entries": 0,
                "output_bytes": 0,
                "denied_accesses": 0,
                "result_bytes": 72,
            },
            "changes": [
                {
                    "path": "a.txt",
                    "kind": "create",
                    "before": None,
                    "after": {
                        "kind": "file",
                        "size": 3,
                        "mode": 420,
                        "content": "0b8b60248fad7ac6dfac221b7e01a8b91c772421a15b387dd1fb2d6a94aee438",  # noqa: E501
                    },
                }
            ],
            "effects": [
                {
                    "sequence": 0,
                    "origin": "monty_tool_call",
                    "operation": "create",
                    "paths": ["a.txt"],
                    "before": None,
                    "after": {
                        "kind": "file",
                        "size": 3,
                        "mode": 420,
                        "content": "0b8b60248fad7ac6dfac221b7e01a8b91c772421a15b387dd1fb2d6a94aee438",  # noqa: E501
                    },
                    "observed_content": None,
                }
            ],
            "contents": [
                {
                    "path": "a.txt",
                    "blob": "0b8b60248fad7ac6dfac221b7e01a8b91c772421a15b387dd1fb2d6a94aee438",
                    "data": "aGkK",
                }
            ],
            "execution": {
                "language": "monty",
                "profile": None,
                "exit_code": None,
                "complete": True,
                "stdout_bytes": 0,
                "stderr_bytes": 0,
            },
            "content_complete": True,
            "evidence_complete": True,
            "evidence_truncated": False,
            "folder_notices": {},
        }
    )
    assert Evidence.model_validate(evidence.model_dump(mode="json")) == evidence
