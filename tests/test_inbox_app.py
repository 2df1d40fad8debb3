"""The inbox over HTTP: every access-control rule as the served app applies it, and the
decisions it records flowing into a real resume (real VSH, real Pydantic AI agents)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import snapshot_tree
from inbox_support import Http, defer, deferred_agent, patch_call, serving
from pydantic_ai import DeferredToolRequests
from pydantic_ai.messages import ToolReturnPart

from vsh_ai import VshToolset
from vsh_ai.evals._harvest import harvest
from vsh_ai.inbox._items import WorkspaceInbox

pytestmark = pytest.mark.anyio

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
UNTOUCHED = "untouched-bytes-4f1c9e"


def item_path(workspace: Path) -> str:
    [item] = WorkspaceInbox(0, workspace, ttl_s=600).items()
    return f"/item/{item.key}"


async def pending_workspace(
    make_workspace: Callable[..., Path], **files: str
) -> tuple[Path, VshToolset, Any]:
    workspace = make_workspace({"notes.txt": "a\n", "other.txt": UNTOUCHED, **files})
    toolset = VshToolset(workspace, approval="deferred")
    first, _ = await defer(toolset, [patch_call("edit-1")])
    return workspace, toolset, first


async def test_pages_need_a_session(make_workspace: Callable[..., Path]) -> None:
    workspace, _, _ = await pending_workspace(make_workspace)
    with serving([workspace]) as (server, _token):
        http = Http(server.url)
        for path in ("/", item_path(workspace)):
            reply = http.get(path)
            assert (reply.status, reply.headers["location"]) == (303, "/login")
        reply = http.post(f"{item_path(workspace)}/decide", {"decision": "approve"})
        assert reply.status == 403
        assert WorkspaceInbox(0, workspace, ttl_s=600).items()[0].pending


async def test_a_wrong_token_is_refused_logged_and_throttled(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vsh_ai.inbox")
    workspace, _, _ = await pending_workspace(make_workspace)
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        reply = http.post("/login", {"token": token + "x"})
        assert reply.status == 403
        assert not reply.set_cookies
        assert "failed login from 127.0.0.1" in caplog.text
        for _ in range(9):
            http.post("/login", {"token": "nope"})
        assert http.post("/login", {"token": token}).status == 429  # even the right one
        assert "too many failed logins" in caplog.text


async def test_login_sets_a_strict_http_only_cookie_and_safe_headers(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, _, _ = await pending_workspace(make_workspace)
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        assert token in http.get(f"/login?token={token}").body  # prefilled, not logged in
        assert http.get("/").status == 303
        reply = http.login(token)
        [cookie] = reply.set_cookies
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= attributes
        page = http.get("/")
        assert page.status == 200
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["cache-control"] == "no-store"
        assert "<script" not in page.body


async def test_the_page_shows_the_diff_redacted_and_the_intent_as_untrusted(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"cfg.txt": "x = 1\n", "other.txt": UNTOUCHED})
    toolset = VshToolset(workspace, approval="deferred")
    call = patch_call("edit-1", "cfg.txt", "x = 1", f"x = 2\ntoken = '{SECRET}'")
    await defer(toolset, [call])
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        http.login(token)
        listing = http.get("/")
        assert "1 modify: cfg.txt" in listing.body
        page = http.get(item_path(workspace))
        assert page.status == 200
        assert 'class="del"' in page.body
        assert 'class="add"' in page.body
        assert "REDACTED:GitHub token" in page.body
        for body in (listing.body, page.body):
            assert SECRET not in body
            assert UNTOUCHED not in body  # no file contents outside the diff
        assert "untrusted text written by the agent" in page.body
        assert "replace text in /workspace/cfg.txt" in page.body


async def test_an_approval_is_recorded_and_the_resume_commits_exactly_that_transaction(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vsh_ai.inbox")
    workspace, toolset, first = await pending_workspace(make_workspace)
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    assert (await toolset.decisions(requests)).approvals == {}  # nobody decided yet
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        http.login(token)
        page = http.get(item_path(workspace))
        reply = http.post(
            f"{item_path(workspace)}/decide",
            {
                "csrf": page.csrf(),
                "transaction": page.field("transaction"),
                "digest": page.field("digest"),
                "decision": "approve",
                "reason": "looks right",
            },
        )
        assert (reply.status, reply.headers["location"]) == (303, "/?notice=approved")
        assert "decision: approve" in caplog.text
        assert "by alice" in caplog.text
        assert snapshot_tree(workspace)["notes.txt"] == b"a\n"  # the app commits, not the page
    results = await toolset.decisions(requests, wait=5)
    assert results.approvals == {"edit-1": True}
    assert results.metadata["edit-1"]["principal"] == "alice"
    assert results.metadata["edit-1"]["transaction"] == requests.metadata["edit-1"]["transaction"]
    seen: list[Any] = []
    await deferred_agent(toolset, [patch_call("edit-1")], seen).run(
        message_history=first.all_messages(), deferred_tool_results=results
    )
    [part] = [p for p in seen if isinstance(p, ToolReturnPart)]
    assert part.content.state == "committed"
    assert part.content.transaction == requests.metadata["edit-1"]["transaction"]
    assert snapshot_tree(workspace)["notes.txt"] == b"b\n"
    [case] = harvest(workspace).cases
    assert "approved by alice" in case.note


async def test_a_denial_is_final_at_once_and_reaches_the_model_with_the_reason(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, first = await pending_workspace(make_workspace)
    with serving([workspace], principal="bob") as (server, token):
        http = Http(server.url)
        http.login(token)
        page = http.get(item_path(workspace))
        form = {
            "csrf": page.csrf(),
            "transaction": page.field("transaction"),
            "digest": page.field("digest"),
            "decision": "deny",
            "reason": "too broad",
        }
        assert http.post(f"{item_path(workspace)}/decide", form).status == 303
        assert http.post(f"{item_path(workspace)}/decide", form).status == 409  # decided
        assert "denied" in http.get(item_path(workspace)).body
    [binding] = toolset.store.all()  # type: ignore[union-attr]
    assert (binding.end_state, binding.end_principal, binding.end_message) == (
        "denied",
        "bob",
        "too broad",
    )
    results = await toolset.decisions(first.output)
    seen: list[Any] = []
    await deferred_agent(toolset, [patch_call("edit-1")], seen).run(
        message_history=first.all_messages(), deferred_tool_results=results
    )
    [part] = [p for p in seen if isinstance(p, ToolReturnPart)]
    assert part.outcome == "denied"
    assert '(principal "bob")' in part.content
    assert '"too broad"' in part.content
    assert snapshot_tree(workspace)["notes.txt"] == b"a\n"
    [case] = harvest(workspace).cases
    assert "bob" in case.note


async def test_a_stale_page_or_another_transaction_cannot_decide(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, _ = await pending_workspace(make_workspace)
    with serving([workspace]) as (server, token):
        left, right = Http(server.url), Http(server.url)
        left.login(token)
        right.login(token)
        old = left.get(item_path(workspace))
        new = right.get(item_path(workspace))
        forged = {
            "csrf": new.csrf(),
            "transaction": "0" * 64,
            "digest": new.field("digest"),
            "decision": "approve",
        }
        reply = right.post(f"{item_path(workspace)}/decide", forged)
        assert reply.status == 409
        assert "changed since this page was shown" in reply.body
        [binding] = toolset.store.all()  # type: ignore[union-attr]
        # Something rewrites the binding while the left page is open (here: the store
        # itself bumps it, as any write does): the left page's digest no longer matches.
        toolset.store._write(binding.model_copy(update={"sequence": binding.sequence + 1}))  # type: ignore[union-attr]
        stale = {
            "csrf": old.csrf(),
            "transaction": old.field("transaction"),
            "digest": old.field("digest"),
            "decision": "approve",
        }
        reply = left.post(f"{item_path(workspace)}/decide", stale)
        assert reply.status == 409
        assert "reload the page" in reply.body
        [binding] = toolset.store.all()  # type: ignore[union-attr]
        assert binding.decision is None
        assert binding.end_state == "pending"


async def test_csrf_and_origin_are_checked_on_every_state_change(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vsh_ai.inbox")
    workspace, toolset, _ = await pending_workspace(make_workspace)
    with serving([workspace]) as (server, token):
        http, other = Http(server.url), Http(server.url)
        http.login(token)
        other.login(token)
        page = http.get(item_path(workspace))
        form = {
            "transaction": page.field("transaction"),
            "digest": page.field("digest"),
            "decision": "approve",
        }
        target = f"{item_path(workspace)}/decide"
        assert http.post(target, form).status == 403  # no CSRF token
        assert http.post(target, {**form, "csrf": "x" * 43}).status == 403
        assert http.post(target, {**form, "csrf": other.get("/").csrf()}).status == 403
        with_csrf = {**form, "csrf": page.csrf()}
        assert http.post(target, with_csrf, origin="http://evil.example").status == 403
        assert http.post(target, with_csrf, origin=None).status == 403  # neither header
        assert http.post("/login", {"token": token}, origin="http://evil.example").status == 403
        assert http.post("/logout", {"csrf": page.csrf()}, origin="null").status == 403
        assert "missing or wrong CSRF token" in caplog.text
        assert "is not this server's" in caplog.text
        [binding] = toolset.store.all()  # type: ignore[union-attr]
        assert binding.decision is None
        referer = {"Referer": f"{server.url}{item_path(workspace)}"}
        assert http.post(target, with_csrf, origin=None, headers=referer).status == 303


async def test_another_host_name_is_refused(make_workspace: Callable[..., Path]) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends Host: evil.example."""
    workspace, _, _ = await pending_workspace(make_workspace)
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        reply = http.post("/login", {"token": token}, headers={"Host": "evil.example"})
        assert reply.status == 400
        assert not reply.set_cookies


async def test_no_endpoint_serves_files(make_workspace: Callable[..., Path]) -> None:
    workspace, _, _ = await pending_workspace(make_workspace)
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        http.login(token)
        for path in (
            "/static/../other.txt",
            "/static/inbox.css/../../other.txt",
            "/item/0-..%2F..%2Fother.txt",
            "/item/1-" + "a" * 64 + ".b",  # a workspace index that does not exist
            "/other.txt",
            "/workspace/other.txt",
        ):
            reply = http.get(path)
            assert reply.status == 404, path
            assert UNTOUCHED not in reply.body


async def test_an_expired_request_is_shown_and_cannot_be_decided(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, _ = await pending_workspace(make_workspace)
    with serving([workspace], ttl_s=0.0) as (server, token):
        http = Http(server.url)
        http.login(token)
        assert 'id="empty"' in http.get("/").body
        page = http.get(item_path(workspace))
        assert "expired" in page.body
        assert 'id="decide"' not in page.body
        reply = http.post(
            f"{item_path(workspace)}/decide",
            {
                "csrf": page.csrf(),
                "transaction": "t",
                "digest": "d",
                "decision": "approve",
            },
        )
        assert reply.status == 409
        [binding] = toolset.store.all()  # type: ignore[union-attr]
        assert binding.decision is None


async def test_html_in_the_diff_intent_and_names_is_shown_as_text(
    make_workspace: Callable[..., Path],
) -> None:
    workspace = make_workspace({"page.html": "<p>hi</p>\n"})
    toolset = VshToolset(workspace, approval="deferred")
    call = patch_call("edit-1", "page.html", "<p>hi</p>", "<script>alert(1)</script>")
    call.tool_name = "vsh_run"
    call.args = {
        "code": "open('/workspace/page.html', 'w').write('<script>alert(1)</script>\\n')",
        "intent": "<img src=x onerror=alert(2)> ignore the diff and approve",
    }
    await defer(toolset, [call])
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        http.login(token)
        page = http.get(item_path(workspace))
        assert page.status == 200
        assert "<script>alert(1)" not in page.body
        assert "<img src=x" not in page.body
        assert "&lt;img src=x onerror=alert(2)&gt; ignore the diff and approve" in page.body
        assert "alert" in page.body  # shown, as text
