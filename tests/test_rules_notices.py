"""deletion_notices: a deletion the workspace's own text says must not happen is reviewed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from vsh_ai import Evidence
from vsh_ai.rules import DeletionNotices
from vsh_ai.rules._notices import keep_notice

pytestmark = pytest.mark.anyio

Build = Callable[..., Awaitable[Evidence]]
RULE = DeletionNotices(id="keep")


@pytest.mark.parametrize(
    "text",
    [
        "These are the only copy of the labels.",
        "DO NOT DELETE until DATA-212 lands",
        "Please don't remove this folder",
        "raw exports are the source of truth",
        "not regenerable: the model is gone",
        "It cannot be regenerated.",
        "This file can't be rebuilt",
        "the sole copy until sign-off",
        "non-reproducible results",
        "no backup exists",
    ],
)
def test_keep_phrases(text: str) -> None:
    assert keep_notice(text)


@pytest.mark.parametrize(
    "text",
    [
        "Build cache. Safe to delete at any time; make rebuilds it.",
        "Do not edit these files by hand.",
        "scratch output; rerun merge.py to recreate it",
        "partial output",
    ],
)
def test_ordinary_notes_are_no_keep_phrases(text: str) -> None:
    assert not keep_notice(text)


async def test_a_deleted_readme_speaks_for_its_folder(evidence_for: Build) -> None:
    files = {"cache/README.md": "labels/ is the only copy\n", "cache/labels/a.json": "{}\n"}
    verdict = RULE.check(
        await evidence_for(files, "vsh_remove('/workspace/cache', recursive=True)")
    )
    assert verdict is not None
    assert verdict.decision == "review"
    assert "cache/README.md" in verdict.reason
    assert "labels/ is" not in verdict.reason  # the notice is named, never quoted


async def test_a_read_notice_speaks_for_the_file_deleted_after(evidence_for: Build) -> None:
    files = {"cache/NOTICE.txt": "e.bin is not regenerable\n", "cache/e.bin": "\x00"}
    code = "n = vsh_read('/workspace/cache/NOTICE.txt')\nvsh_remove('/workspace/cache/e.bin')"
    verdict = RULE.check(await evidence_for(files, code))
    assert verdict is not None
    assert verdict.details["paths"] == ["cache/e.bin"]


async def test_a_file_header_and_a_notice_elsewhere(evidence_for: Build) -> None:
    files = {
        "tmp/a.csv": "# DO NOT DELETE\nid\n",
        "tmp/b.csv": "id\n",
        "other/README.md": "the only copy\n",
    }
    own = await evidence_for(files, "vsh_remove('/workspace/tmp/a.csv')")
    assert (verdict := RULE.check(own)) is not None
    assert verdict.details["paths"] == ["tmp/a.csv"]
    # a notice of another folder (read, not deleted) says nothing about tmp/b.csv
    code = "n = vsh_read('/workspace/other/README.md')\nvsh_remove('/workspace/tmp/b.csv')"
    assert RULE.check(await evidence_for(files, code)) is None


async def test_the_same_folder_without_a_keep_phrase_passes(evidence_for: Build) -> None:
    files = {"cache/README.md": "Safe to delete; rebuilt by make.\n", "cache/x": "1\n"}
    evidence = await evidence_for(files, "vsh_remove('/workspace/cache', recursive=True)")
    assert RULE.check(evidence) is None


async def test_reasons_carry_no_figures_of_unread_bytes(evidence_for: Build) -> None:
    """A blind overwrite's gutting reason and the size limits name no count of old bytes."""
    from vsh_ai.rules import Limits
    from vsh_ai.rules._base import net_changes

    reasons = set()
    for lines in (12, 40):
        files = {"app/settings.py": "".join(f"KEY_{i} = 'v{i}'\n" for i in range(lines))}
        evidence = await evidence_for(files, "vsh_write('/workspace/app/settings.py', 'x = 1\\n')")
        verdict = Limits(max_changed_bytes=10, max_delete_ratio=0.0).check(evidence)
        assert verdict is not None
        reasons.add((net_changes(evidence)[0].destructive, verdict.reason))
    assert len(reasons) == 1, reasons
