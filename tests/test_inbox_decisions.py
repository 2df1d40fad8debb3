"""Recording a person's decision in the signed binding store and reading it back as the
resume's ``DeferredToolResults`` (``ApprovalStore.decide``, ``VshToolset.decisions``),
and the diff layout the page draws (``_diff_view``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from conftest import snapshot_tree
from inbox_support import defer, deferred_agent, patch_call
from pydantic_ai import DeferredToolRequests, ToolDenied
from pydantic_ai.messages import ToolReturnPart

from vsh_ai import VshToolset
from vsh_ai.inbox._diff_view import PAGE_ROWS, diff_page, diff_rows
from vsh_ai.toolset._bindings import ApprovalBinding, DecisionRefused, shown_digest

pytestmark = pytest.mark.anyio


async def pending(
    make_workspace: Callable[..., Path], **options: float
) -> tuple[VshToolset, DeferredToolRequests, ApprovalBinding]:
    workspace = make_workspace({"notes.txt": "a\n"})
    toolset = VshToolset(workspace, approval="deferred", **options)  # type: ignore[arg-type]
    first, _ = await defer(toolset, [patch_call("edit-1")])
    assert isinstance(first.output, DeferredToolRequests)
    [binding] = toolset.store.all()  # type: ignore[union-attr]
    return toolset, first.output, binding


def decide(
    toolset: VshToolset, binding: ApprovalBinding, decision: str = "approve", **kw: str
) -> ApprovalBinding:
    fields = {"transaction": binding.transaction, "digest": shown_digest(binding), **kw}
    return toolset.store.decide(binding, decision, "alice", "ok", **fields)  # type: ignore[union-attr,arg-type]


async def test_a_decision_is_signed_and_binds_the_digest_shown(
    make_workspace: Callable[..., Path],
) -> None:
    toolset, _, binding = await pending(make_workspace)
    with pytest.raises(DecisionRefused, match="changed since"):
        decide(toolset, binding, digest="0" * 32)
    with pytest.raises(DecisionRefused, match="changed since"):
        decide(toolset, binding, transaction="f" * 64)
    with pytest.raises(DecisionRefused, match="U\\+0007"):
        toolset.store.decide(  # type: ignore[union-attr]
            binding,
            "approve",
            "al\x07ice",
            transaction=binding.transaction,
            digest=shown_digest(binding),
        )
    decided = decide(toolset, binding)
    assert shown_digest(decided) != shown_digest(binding)
    [stored] = toolset.store.all()  # type: ignore[union-attr]  # re-read: the signature verifies
    assert (stored.decision, stored.decision_principal, stored.end_state) == (
        "approve",
        "alice",
        "pending",
    )
    with pytest.raises(DecisionRefused, match="already decided"):
        decide(toolset, decided)


async def test_a_denial_ends_the_binding_at_once(make_workspace: Callable[..., Path]) -> None:
    toolset, requests, binding = await pending(make_workspace)
    denied = decide(toolset, binding, "deny")
    assert (denied.end_state, denied.end_principal, denied.end_message) == ("denied", "alice", "ok")
    with pytest.raises(DecisionRefused, match="already ended"):
        decide(toolset, denied)
    results = await toolset.decisions(requests)
    answer = results.approvals["edit-1"]
    assert isinstance(answer, ToolDenied)
    assert '(principal "alice")' in answer.message


async def test_undecided_calls_are_left_out_and_waited_for_until_the_time_is_up(
    make_workspace: Callable[..., Path],
) -> None:
    toolset, requests, _ = await pending(make_workspace)
    started = time.monotonic()
    results = await toolset.decisions(requests, wait=0.3)
    assert results.approvals == {}
    assert time.monotonic() - started >= 0.3


async def test_calls_of_another_store_are_ignored_not_waited_for(
    make_workspace: Callable[..., Path],
) -> None:
    mine, _, _ = await pending(make_workspace)
    _, theirs, _ = await pending(make_workspace)
    started = time.monotonic()
    results = await mine.decisions(theirs, wait=math.inf)  # returns: nothing of mine waits
    assert results.approvals == {}
    assert time.monotonic() - started < 5


async def test_an_expired_request_is_answered_and_its_resume_commits_nothing(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"notes.txt": "a\n"})
    toolset = VshToolset(workspace, approval="deferred", approval_ttl=0.05)
    first, _ = await defer(toolset, [patch_call("edit-1")])
    assert isinstance(first.output, DeferredToolRequests)
    await anyio.sleep(0.1)
    results = await toolset.decisions(first.output)
    assert results.approvals == {"edit-1": True}
    assert "ended before a decision" in results.metadata["edit-1"]["principal"]
    seen: list[object] = []
    await deferred_agent(toolset, [patch_call("edit-1")], seen).run(
        message_history=first.all_messages(), deferred_tool_results=results
    )
    [part] = [p for p in seen if isinstance(p, ToolReturnPart)]
    assert part.content.state == "stale"
    assert snapshot_tree(workspace) == {"notes.txt": b"a\n"}


def test_diff_rows_follow_the_hunk_counts() -> None:
    diff = (
        "--- a/x.sql\n+++ b/x.sql\n@@ -1,2 +1,2 @@\n--- old comment\n+++ new comment\n"
        " keep\nBinary create: y.bin\n"
    )
    rows = diff_rows(diff)
    assert [(r.kind, r.text, r.old, r.new) for r in rows] == [
        ("file", "a/x.sql → b/x.sql", None, None),
        ("hunk", "@@ -1,2 +1,2 @@", None, None),
        ("del", "-- old comment", 1, None),
        ("add", "++ new comment", None, 1),
        ("ctx", "keep", 2, 2),
        ("note", "Binary create: y.bin", None, None),
    ]


def test_diff_text_is_escaped_and_pages_are_bounded() -> None:
    lines = "".join(f"+<script>alert({i})</script>\n" for i in range(PAGE_ROWS * 2))
    diff = f"--- a/p.html\n+++ b/p.html\n@@ -0,0 +1,{PAGE_ROWS * 2} @@\n{lines}"
    first = diff_page(diff, 1)
    assert (first.number, first.pages, len(first.rows)) == (1, 3, PAGE_ROWS)
    html = "".join(str(markup) for _, markup in first.rows)
    assert "<script>" not in html
    assert "&lt;" in html
    last = diff_page(diff, 99)
    assert last.number == 3
    assert len(last.rows) == 2
