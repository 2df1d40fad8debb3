"""The inbox attacked from outside (black box): only HTTP, the CLI and what the README
promises. Each attack asserts the safe outcome, that nothing was recorded that a resume
could commit, and that no host byte changed (real VSH, real Pydantic AI agents)."""

from __future__ import annotations

import html
import http.client as http_client
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import anyio
import pytest
from conftest import snapshot_tree
from inbox_support import Http, Reply, defer, deferred_agent, patch_call, serving
from pydantic_ai import DeferredToolRequests
from pydantic_ai.messages import ToolCallPart

from vsh_ai import VshToolset

pytestmark = pytest.mark.anyio

UNTOUCHED = "untouched-bytes-7d2a61"
AWS_KEY = "AKIA" + "Q3EGRTYUIOPLKJHG"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzEXAMPLEKEY9"
GITHUB = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
PEM_BODY = "MIIEowIBAAKCAQEA" + "q7Bn2Xc1Vd9Lp0Ks8Jh3Gf4Dd5Ss6Aa7Zz8Xx9Cc0Vv1Bb2Nn3Mm4"
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"
LINK = re.compile(r'href="(/item/[^"]+)"')
SECURITY_HEADERS = ("content-security-policy", "x-frame-options", "cache-control")


@pytest.fixture(autouse=True)
def approval_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSH_AI_APPROVAL_KEY_FILE", str(tmp_path / "approval.key"))


async def pending(
    make_workspace: Callable[..., Path],
    calls: list[ToolCallPart] | None = None,
    **files: str,
) -> tuple[Path, VshToolset, DeferredToolRequests]:
    workspace = make_workspace({"notes.txt": "a\n", "other.txt": UNTOUCHED, **files})
    toolset = VshToolset(workspace, approval="deferred")
    first, _ = await defer(toolset, calls or [patch_call("edit-1")])
    assert isinstance(first.output, DeferredToolRequests)
    return workspace, toolset, first.output


def logged_in(url: str, token: str) -> Http:
    http = Http(url)
    http.login(token)
    return http


def links(http: Http) -> list[str]:
    listing = http.get("/")
    assert listing.status == 200, listing.body
    return LINK.findall(listing.body)


def decide_form(page: Reply, decision: str = "approve") -> dict[str, str]:
    fields = {name: page.field(name) for name in ("csrf", "transaction", "digest")}
    return {**fields, "decision": decision, "reason": "looks fine"}


async def nothing_recorded(toolset: VshToolset, requests: DeferredToolRequests) -> None:
    results = await toolset.decisions(requests)
    assert results.approvals == {}, results


def raw_post(http: Http, path: str, body: str, content_type: str) -> int:
    """POST ``body`` as ``content_type`` from the inbox's own origin, with the session."""
    parts = urlsplit(http.base)
    connection = http_client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    cookie = "; ".join(f"{k}={v}" for k, v in http.cookies.items())
    headers = {"Content-Type": content_type, "Origin": http.base, "Cookie": cookie}
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def text(reply: Reply) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", reply.body))


# --- logging in ------------------------------------------------------------------------


async def test_wrong_token_variants_are_refused_and_logged(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    before = snapshot_tree(workspace)
    caplog.set_level(logging.INFO)
    with serving([workspace]) as (server, token):
        variants = ["", " ", token[:-1], token + "x", f" {token}", f"{token}\n", token.upper()]
        variants += [token.lower(), token[1:] + token[0], "\x00" + token]
        for variant in variants:
            http = Http(server.url)
            reply = http.post("/login", {"token": variant})
            assert reply.status in (403, 429), (variant, reply.status)
            assert not reply.set_cookies, variant
            assert not http.cookies, variant
            assert http.get("/").status == 303
    failed = [r for r in caplog.records if "failed login" in r.getMessage()]
    assert len(failed) >= len(variants) - 1
    assert not any(token in r.getMessage() for r in caplog.records)
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before


async def test_failed_logins_are_throttled_even_for_the_right_token(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        codes = [Http(server.url).post("/login", {"token": f"guess-{n}"}).status for n in range(12)]
        assert codes == [403] * 10 + [429, 429], codes
        right = Http(server.url)
        assert right.post("/login", {"token": token}).status == 429
        assert not right.cookies


async def test_a_forwarded_for_header_does_not_reset_the_throttle(
    make_workspace: Callable[..., Path],
) -> None:
    """Every client on loopback may write X-Forwarded-For: trusting it would let a
    guesser present a new address per try."""
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, _token):
        for n in range(10):
            Http(server.url).post("/login", {"token": f"guess-{n}"})
        codes = [
            Http(server.url)
            .post("/login", {"token": f"more-{n}"}, headers={"X-Forwarded-For": f"10.0.0.{n}"})
            .status
            for n in range(5)
        ]
        assert codes == [429] * 5, codes


async def test_cross_origin_login_posts_cannot_lock_the_approver_out(
    make_workspace: Callable[..., Path],
) -> None:
    """A web page can make the browser POST wrong tokens to the inbox; those are refused
    for their origin and must not count towards the throttle of the real login."""
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        for n in range(15):
            reply = Http(server.url).post("/login", {"token": f"x{n}"}, origin="http://evil.test")
            assert reply.status == 403
        logged_in(server.url, token)


async def test_login_link_in_a_get_sets_no_session_and_leaks_no_token(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace, _, _ = await pending(make_workspace)
    caplog.set_level(logging.DEBUG)
    with serving([workspace]) as (server, token):
        http = Http(server.url)
        page = http.get(f"/login?token={token}")
        assert page.status == 200
        assert not page.set_cookies
        assert http.get("/").status == 303
        # the page may carry the token into its form, but never to another origin
        assert page.headers["referrer-policy"] in ("same-origin", "no-referrer")
        assert not re.search(r'(src|href)="https?://', page.body)
    assert not any(token in r.getMessage() for r in caplog.records)


async def test_a_session_cookie_planted_before_login_is_not_adopted(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    planted = "attacker-chosen-session-0123456789abcdef"
    with serving([workspace]) as (server, token):
        victim = Http(server.url, cookies={"vsh_inbox_session": planted})
        victim.login(token)
        assert victim.cookies["vsh_inbox_session"] != planted
        attacker = Http(server.url, cookies={"vsh_inbox_session": planted})
        assert attacker.get("/").status == 303
        [link] = links(victim)
        assert attacker.get(link).status == 303
    await nothing_recorded(toolset, requests)


async def test_a_logged_out_cookie_and_its_csrf_token_are_dead(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        old = dict(http.cookies)
        assert http.post("/logout", {"csrf": page.csrf()}).status == 303
        ghost = Http(server.url, cookies=old)
        assert ghost.get("/").status == 303
        reply = ghost.post(f"{link}/decide", decide_form(page))
        assert reply.status in (303, 403), reply.status
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before


async def test_session_cookie_flags(make_workspace: Callable[..., Path]) -> None:
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        reply = Http(server.url).login(token)
        [cookie] = reply.set_cookies
        flags = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= flags, cookie
        value = cookie.split(";", 1)[0].partition("=")[2]
        assert len(value) >= 32
        assert token not in cookie


# --- CSRF and request forgery ----------------------------------------------------------


def forged(page: Reply, url: str) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """(label, form, request options) of decide requests that must all be refused."""
    good = decide_form(page)
    no_csrf = {k: v for k, v in good.items() if k != "csrf"}
    port = url.rsplit(":", 1)[1]
    return [
        ("no csrf", no_csrf, {}),
        ("empty csrf", {**good, "csrf": ""}, {}),
        ("wrong csrf", {**good, "csrf": good["csrf"][:-2] + "xx"}, {}),
        ("origin null", good, {"origin": "null"}),
        ("other port", good, {"origin": "http://127.0.0.1:1"}),
        ("other site", good, {"origin": "http://evil.test"}),
        ("origin suffix", good, {"origin": f"{url}.evil.test"}),
        ("origin userinfo", good, {"origin": f"http://127.0.0.1:{port}@evil.test"}),
        ("https origin", good, {"origin": url.replace("http://", "https://")}),
        ("no origin, no referer", good, {"origin": None}),
        ("foreign referer", good, {"origin": None, "headers": {"Referer": "http://evil.test/"}}),
        (
            "referer suffix",
            good,
            {"origin": None, "headers": {"Referer": f"{url}.evil.test/item"}},
        ),
        ("evil host", good, {"headers": {"Host": "evil.test"}}),
    ]


async def test_forged_decisions_are_refused(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    before = snapshot_tree(workspace)
    caplog.set_level(logging.INFO)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        for label, form, options in forged(page, server.url):
            reply = http.post(f"{link}/decide", form, **options)
            assert reply.status in (400, 403), (label, reply.status)
            await nothing_recorded(toolset, requests)
    refused = [r for r in caplog.records if r.getMessage().startswith("refused")]
    assert len(refused) >= 10
    assert snapshot_tree(workspace) == before


async def test_another_sessions_csrf_token_does_not_decide(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        mine, theirs = logged_in(server.url, token), logged_in(server.url, token)
        [link] = links(mine)
        form = {**decide_form(mine.get(link)), "csrf": theirs.get(link).csrf()}
        assert mine.post(f"{link}/decide", form).status == 403
    await nothing_recorded(toolset, requests)


async def test_csrf_token_in_the_query_string_does_not_count(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        form = decide_form(http.get(link))
        csrf = form.pop("csrf")
        assert http.post(f"{link}/decide?csrf={csrf}", form).status == 403
    await nothing_recorded(toolset, requests)


async def test_non_form_bodies_and_other_methods_do_not_decide(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        form = decide_form(http.get(link))
        query = urlencode(form)
        # a form may send text/plain or multipart: only a urlencoded form is parsed
        for content_type in ("text/plain", "application/json", "multipart/form-data; boundary=x"):
            assert raw_post(http, f"{link}/decide", query, content_type) in (400, 403, 415)
        assert http.get(f"{link}/decide?{query}").status in (404, 405)
        for method in ("PUT", "PATCH", "DELETE"):
            assert http.request(method, f"{link}/decide?{query}").status in (404, 405), method
        override = {"X-HTTP-Method-Override": "POST", "X-Method-Override": "POST"}
        reply = http.request("GET", f"{link}/decide?{query}&_method=POST", headers=override)
        assert reply.status in (404, 405)
        assert http.get(f"{link}?{query}").status == 200  # the page itself: read only
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before


# --- Host header and binding address ---------------------------------------------------

BAD_HOSTS = (
    "evil.test",
    "127.0.0.1.evil.test",
    "localhost.evil.test",
    "localhost:1@evil.test",
    "evil.test#@127.0.0.1",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "0.0.0.0",
    "127.1",
    "2130706433",
    "localhost.",
    "",
)


async def test_foreign_host_headers_get_nothing(make_workspace: Callable[..., Path]) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        form = decide_form(http.get(link))
        for host in BAD_HOSTS:
            for path in ("/", link, "/login"):
                reply = http.get(path, headers={"Host": host})
                assert reply.status == 400, (host, path, reply.status)
                assert UNTOUCHED not in reply.body
                assert "notes.txt" not in reply.body
            reply = http.post(
                f"{link}/decide", form, headers={"Host": host}, origin=f"http://{host}"
            )
            assert reply.status == 400, (host, reply.status)
        assert http.get("/", headers={"Host": server.url.split("//")[1]}).status == 200
    await nothing_recorded(toolset, requests)


def refused_starts(tmp_path: Path, variants: dict[str, list[str]]) -> dict[str, str]:
    """Run ``vsh-ai inbox`` once per variant (extra arguments), all at once; each must
    exit non-zero without serving. Returns what each printed."""
    (tmp_path / "ws").mkdir(exist_ok=True)
    command = [sys.executable, "-m", "vsh_ai", "inbox", str(tmp_path / "ws"), "--port", "0"]
    started = {
        label: subprocess.Popen(
            [*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for label, extra in variants.items()
    }
    said: dict[str, str] = {}
    try:
        for label, process in started.items():
            output, _ = process.communicate(timeout=60)
            assert process.returncode != 0, (label, output)
            assert "vsh-ai inbox for" not in output, label
            said[label] = output
    finally:
        for process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return said


def test_non_loopback_bind_is_refused_without_allow_remote(tmp_path: Path) -> None:
    hosts = ("0.0.0.0", "::", "192.0.2.1")
    said = refused_starts(tmp_path, {host: ["--host", host] for host in hosts})
    for host, output in said.items():
        assert "--allow-remote" in output, (host, output)


# --- decisions bound to what the page showed --------------------------------------------


async def test_item_a_cannot_be_decided_with_item_b_s_binding(
    make_workspace: Callable[..., Path],
) -> None:
    calls = [patch_call("edit-a"), patch_call("edit-b", "other.txt", UNTOUCHED, "changed")]
    workspace, toolset, requests = await pending(make_workspace, calls)
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        first, second = links(http)
        page_a, page_b = http.get(first), http.get(second)
        form_a, form_b = decide_form(page_a), decide_form(page_b)
        mixes = [
            {**form_a, "digest": form_b["digest"]},
            {**form_a, "transaction": form_b["transaction"]},
            {**form_b, "csrf": form_a["csrf"]},  # B's binding posted to A's item
        ]
        for form in mixes:
            reply = http.post(f"{first}/decide", form)
            assert reply.status in (400, 403, 409), reply.status
        for missing in ("digest", "transaction"):
            form = {k: v for k, v in form_a.items() if k != missing}
            assert http.post(f"{first}/decide", form).status in (400, 403, 409), missing
        bad = {**form_a, "decision": "approve ", "reason": "x"}
        assert http.post(f"{first}/decide", bad).status in (400, 403, 409)
        assert http.post(f"{first}/decide", {**form_a, "decision": "allow"}).status in (400, 409)
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before


async def test_an_approval_cannot_be_replayed_after_a_denial(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        assert http.post(f"{link}/decide", decide_form(page, "deny")).status == 303
        for _ in range(2):
            assert http.post(f"{link}/decide", decide_form(page)).status == 409
        fresh = http.get(link)
        if 'name="digest"' in fresh.body:  # a page reloaded after the denial
            assert http.post(f"{link}/decide", decide_form(fresh)).status in (403, 409)
    results = await toolset.decisions(requests)
    assert results.approvals["edit-1"] is not True
    assert snapshot_tree(workspace) == before


async def test_an_approval_does_not_carry_over_to_a_rerun_of_the_same_call(
    make_workspace: Callable[..., Path],
) -> None:
    """Approve the call as first shown; the agent then re-runs the same call id with
    other content. The approval must not commit the new content: not through the inbox
    (the old page) and not through a resume that mixes the two runs."""
    workspace, toolset, first = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        seen: list[Any] = []
        agent = deferred_agent(toolset, [patch_call("edit-1", new="EVIL")], seen)
        second = await agent.run("edit")
        assert isinstance(second.output, DeferredToolRequests)
        assert http.post(f"{link}/decide", decide_form(page)).status == 303
        assert http.post(f"{link}/decide", decide_form(page)).status == 409  # replay
    await nothing_recorded(toolset, second.output)
    approved = await toolset.decisions(first)
    assert approved.approvals == {"edit-1": True}
    await agent.run(message_history=second.all_messages(), deferred_tool_results=approved)
    assert (workspace / "notes.txt").read_text() in ("a\n", "b\n")


async def test_an_expired_request_cannot_be_approved_into_a_commit(
    make_workspace: Callable[..., Path],
) -> None:
    """The page was loaded in time; the approval is pressed after ``approval_ttl``."""
    workspace = make_workspace({"notes.txt": "a\n", "other.txt": UNTOUCHED})
    toolset = VshToolset(workspace, approval="deferred", approval_ttl=2.0)
    seen: list[Any] = []
    agent = deferred_agent(toolset, [patch_call("edit-1")], seen)
    first = await agent.run("edit")
    assert isinstance(first.output, DeferredToolRequests)
    before = snapshot_tree(workspace)
    with serving([workspace], ttl_s=2.0) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        await anyio.sleep(2.5)
        reply = http.post(f"{link}/decide", decide_form(page))
        assert reply.status == 409, reply.status
        assert "expired" in text(reply)
    results = await toolset.decisions(first.output)
    assert results.metadata["edit-1"]["principal"] != "alice"
    await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert snapshot_tree(workspace) == before
    [answer] = [part for part in seen if getattr(part, "tool_call_id", None) == "edit-1"]
    assert getattr(answer.content, "state", None) != "committed", answer


TRAVERSALS = (
    "/item/../../etc/passwd",
    "/item/..%2f..%2fetc%2fpasswd",
    "/item/%2e%2e/%2e%2e/etc/passwd",
    "/item//etc/passwd",
    "/item/%2Fetc%2Fpasswd",
    "/item/0-..%2f..%2fnotes.txt",
    "/item/0-../../other.txt",
    "/item/9-{key}",
    "/item/-1-{key}",
    "/item/0-{key}%00",
    "/item/0-{key}/../..",
    "/item/" + "0" * 5000,
)


async def test_traversal_and_foreign_item_ids_find_nothing(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        form = decide_form(http.get(link))
        key = link.removeprefix("/item/0-")
        for shape in TRAVERSALS:
            path = shape.format(key=key)
            page = http.get(path)
            assert page.status in (400, 404), (path, page.status)
            assert "root:" not in page.body
            assert UNTOUCHED not in page.body
            decided = http.post(f"{path}/decide", form)
            assert decided.status in (400, 403, 404, 409), (path, decided.status)
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before


async def test_an_item_id_of_one_workspace_does_not_reach_another(
    make_workspace: Callable[..., Path],
) -> None:
    left, left_tools, left_requests = await pending(make_workspace)
    right, right_tools, right_requests = await pending(make_workspace)
    before = snapshot_tree(left), snapshot_tree(right)
    with serving([left, right]) as (server, token):
        http = logged_in(server.url, token)
        found = links(http)
        [right_link] = [link for link in found if link.startswith("/item/1-")]
        form = decide_form(http.get(right_link))
        moved = right_link.replace("/item/1-", "/item/0-")
        assert http.get(moved).status == 404
        assert http.post(f"{moved}/decide", form).status in (404, 409)
    await nothing_recorded(left_tools, left_requests)
    await nothing_recorded(right_tools, right_requests)
    assert (snapshot_tree(left), snapshot_tree(right)) == before


# --- what pages show -------------------------------------------------------------------

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)> {{7*7}} {% raw %}'


def assert_inert(reply: Reply) -> None:
    assert reply.status == 200
    assert "<script" not in reply.body.lower()
    assert "<img" not in reply.body.lower()
    assert "onerror=" not in re.sub(r"&[a-z#0-9]+;", "", reply.body).replace("onerror=alert", "")
    assert "{{7*7}}" in reply.body or "{{7*7}}" in reply.body.replace("&#123;", "{")
    assert "alert(2)" in reply.body  # shown, as text


async def test_hostile_intent_and_file_name_are_shown_as_inert_text(
    make_workspace: Callable[..., Path],
) -> None:
    name = 'x"><img src=x onerror=alert(2)>{{7*7}}.txt'
    code = f"vsh_write('/workspace/notes.txt', {HOSTILE!r})\n"
    code += f"vsh_write({'/workspace/' + name!r}, 'n')\n"
    call = ToolCallPart("vsh_run", {"code": code, "intent": HOSTILE}, tool_call_id="hostile")
    workspace, toolset, requests = await pending(make_workspace, [call])
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        listing = http.get("/")
        assert "<img" not in listing.body.lower()
        assert "<script" not in listing.body.lower()
        page = http.get(link)
        assert_inert(page)
        # Evaluated, the template text would read "49" where "{{7*7}}" stands (a bare
        # "49" elsewhere can be part of a digest or a waiting time: not a finding).
        body = html.unescape(page.body)
        assert "{{7*7}}.txt" in body
        assert ">49.txt" not in body
        assert body.count("{{7*7}}") >= 2  # the file name and the intent, both verbatim
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert "script-src" not in page.headers["content-security-policy"]
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before


BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize("where", ["name", "intent"])
async def test_bidi_controls_in_names_and_intent_are_not_rendered_raw(
    make_workspace: Callable[..., Path], where: str
) -> None:
    name = "invoice\u202etxt.exe" if where == "name" else "invoice.txt"
    intent = "tidy \u202eetadpu\u2066 notes" if where == "intent" else "tidy notes"
    code = f"vsh_write({'/workspace/' + name!r}, 'x')\n"
    call = ToolCallPart("vsh_run", {"code": code, "intent": intent}, tool_call_id="rtl")
    workspace, _, _ = await pending(make_workspace, [call])
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        for reply in (http.get("/"), http.get(link)):
            assert reply.status == 200
            assert not BIDI.search(reply.body)


async def test_bidi_controls_in_diff_lines_are_made_visible(
    make_workspace: Callable[..., Path],
) -> None:
    line = 'access = "user\u202e \u2066// admin\u2069 \u2066"\n'
    call = ToolCallPart(
        "vsh_run",
        {"code": f"vsh_write('/workspace/notes.txt', {line!r})\n", "intent": "tidy"},
        tool_call_id="trojan",
    )
    workspace, _, _ = await pending(make_workspace, [call])
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        assert page.status == 200
        assert "access" in page.body
        assert not BIDI.search(page.body)


async def test_secrets_in_the_diff_never_leave_the_server(
    make_workspace: Callable[..., Path],
) -> None:
    content = f"aws_access_key_id = {AWS_KEY}\naws_secret_access_key = {AWS_SECRET}\n"
    content += f"token = {GITHUB}\n{PRIVATE_KEY}"
    code = f"vsh_write('/workspace/creds.ini', {content!r})\n"
    call = ToolCallPart("vsh_run", {"code": code, "intent": "add creds"}, tool_call_id="leak")
    workspace, toolset, requests = await pending(make_workspace, [call])
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        assert page.status == 200
        assert "creds.ini" in page.body
        replies = [http.get("/"), page]
        replies += [http.get(f"{link}{suffix}") for suffix in ("?page=2", "?page=0", "?page=-1")]
        replies += [http.get(f"{link}/{tail}") for tail in ("raw", "diff", "download", "json")]
        for reply in replies:
            for secret in (AWS_KEY, AWS_SECRET, GITHUB, PEM_BODY, PEM_BODY[:24]):
                assert secret not in reply.body, (secret[:8], reply.status)
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before


@pytest.mark.parametrize(
    "intent",
    [f"use key {GITHUB}", f"aws {AWS_KEY}, aws_secret_access_key = {AWS_SECRET}"],
    ids=["github", "aws"],
)
async def test_secrets_in_the_intent_are_redacted(
    make_workspace: Callable[..., Path], intent: str
) -> None:
    code = "vsh_write('/workspace/notes.txt', 'b\\n')\n"
    call = ToolCallPart("vsh_run", {"code": code, "intent": intent}, tool_call_id="i")
    workspace, _, _ = await pending(make_workspace, [call])
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        for reply in (http.get("/"), http.get(link)):
            for secret in (GITHUB, AWS_KEY, AWS_SECRET):
                assert secret not in reply.body


RAW_PATHS = (
    "/static/../../etc/passwd",
    "/static/..%2f..%2f..%2fetc%2fpasswd",
    "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/",
    "/static",
    "/static/.",
    "/static/inbox.css/..",
    "/static//etc/passwd",
    "/static/..%5c..%5cetc%5cpasswd",
    "/notes.txt",
    "/other.txt",
    "/workspace/other.txt",
    "/.vsh-runtime/",
    "/file?path=other.txt",
    "/raw?path=/etc/passwd",
    "/api/items",
    "/items.json",
    "/debug",
    "/docs",
    "/openapi.json",
)


async def test_no_endpoint_serves_files(make_workspace: Callable[..., Path]) -> None:
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        paths = [*RAW_PATHS, f"{link}/raw", f"{link}/file?path=other.txt", f"{link}/../.."]
        for path in paths:
            reply = http.get(path)
            assert reply.status in (301, 303, 307, 400, 404, 405), (path, reply.status)
            assert "root:" not in reply.body, path
            assert UNTOUCHED not in reply.body, path
            assert "import " not in reply.body, path


async def test_every_answer_forbids_scripts_framing_and_caching(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        anonymous = Http(server.url)
        http = logged_in(server.url, token)
        [link] = links(http)
        replies = {
            "login": anonymous.get("/login"),
            "failed login": anonymous.post("/login", {"token": "nope"}),
            "refused": anonymous.post("/login", {"token": "nope"}, origin="http://evil.test"),
            "list": http.get("/"),
            "item": http.get(link),
            "missing": http.get("/item/0-nothing"),
            "stale": http.post(f"{link}/decide", {**decide_form(http.get(link)), "digest": "0"}),
        }
        for label, reply in replies.items():
            for header in SECURITY_HEADERS:
                assert header in reply.headers, (label, header)
            assert "no-store" in reply.headers["cache-control"], label
            assert "frame-ancestors 'none'" in reply.headers["content-security-policy"], label
            assert reply.headers["x-frame-options"] == "DENY", label


async def test_an_oversized_reason_is_refused_without_a_decision(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        form = {**decide_form(http.get(link)), "reason": "r" * 2_000_000}
        reply = http.post(f"{link}/decide", form)
        assert reply.status in (400, 413), reply.status
        assert http.get("/").status == 200
    await nothing_recorded(toolset, requests)


# --- who decides, and what the log can be made to say ------------------------------------


async def test_the_form_cannot_choose_who_decided(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    caplog.set_level(logging.INFO)
    with serving([workspace], principal="alice") as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        form = {**decide_form(http.get(link)), "principal": "mallory", "approver": "mallory"}
        spoof = {"X-Forwarded-User": "mallory", "Remote-User": "mallory", "X-User": "mallory"}
        assert http.post(f"{link}/decide", form, headers=spoof).status == 303
    results = await toolset.decisions(requests)
    assert results.approvals == {"edit-1": True}
    assert results.metadata["edit-1"]["principal"] == "alice"
    decided = [r.getMessage() for r in caplog.records if r.getMessage().startswith("decision")]
    assert decided
    assert all("mallory" not in m and "alice" in m for m in decided)


async def test_a_reason_cannot_forge_log_lines(
    make_workspace: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace, toolset, requests = await pending(make_workspace)
    caplog.set_level(logging.INFO)
    forged_line = '\ndecision: approve /etc transaction 00 by root; reason "ok"\r\x1b[2K'
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        form = {**decide_form(http.get(link), "deny"), "reason": f"no{forged_line}"}
        assert http.post(f"{link}/decide", form).status == 303
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("vsh_ai.inbox")]
    assert messages
    for message in messages:
        assert not re.search(r"[\n\r\x1b]", message), message
    results = await toolset.decisions(requests)
    assert results.approvals["edit-1"] is not True


async def test_logout_needs_this_origin(make_workspace: Callable[..., Path]) -> None:
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        csrf = http.get("/").csrf()
        for origin in ("http://evil.test", "null", None):
            assert http.post("/logout", {"csrf": csrf}, origin=origin).status == 403, origin
        assert http.get("/logout").status in (404, 405)
        assert http.get("/").status == 200  # still logged in


@pytest.mark.parametrize("csrf", [None, "wrong"], ids=["missing", "wrong"])
async def test_logout_needs_the_csrf_token(
    make_workspace: Callable[..., Path], csrf: str | None
) -> None:
    workspace, _, _ = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        form = {} if csrf is None else {"csrf": csrf}
        http.post("/logout", form)
        assert http.get("/").status == 200  # still logged in


TOKENS_FILES = {
    "short": "short bob\n",
    "duplicate": "a" * 24 + " bob\n" + "a" * 24 + " carol\n",
    "bidi-principal": "b" * 24 + " b\u202eob\n",
    "separator-principal": "c" * 24 + " bob\u2028carol\n",
    "no-principal": "d" * 24 + "\n",
}


def test_weak_or_ambiguous_tokens_files_are_refused(tmp_path: Path) -> None:
    variants = {}
    for label, lines in TOKENS_FILES.items():
        (tmp_path / label).write_text(lines)
        variants[label] = ["--tokens-file", str(tmp_path / label)]
    for label, output in refused_starts(tmp_path, variants).items():
        assert f"{label}:" in output, (label, output)  # names the file and line


async def test_racing_approve_and_deny_record_one_decision(
    make_workspace: Callable[..., Path],
) -> None:
    """Two approvers press Approve and Deny at the same moment: exactly one decision is
    recorded, and it is the one whose page said so."""
    workspace, toolset, requests = await pending(make_workspace)
    with serving([workspace]) as (server, token):
        sessions = [logged_in(server.url, token) for _ in range(6)]
        [link] = links(sessions[0])
        forms = [
            decide_form(http.get(link), "approve" if n % 2 else "deny")
            for n, http in enumerate(sessions)
        ]
        statuses: dict[int, int] = {}
        start = threading.Barrier(len(sessions))

        def press(n: int) -> None:
            start.wait()
            statuses[n] = sessions[n].post(f"{link}/decide", forms[n]).status

        threads = [threading.Thread(target=press, args=(n,)) for n in range(len(sessions))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    winners = [n for n, status in statuses.items() if status == 303]
    assert len(winners) == 1, statuses
    assert sorted(statuses.values()) == [303] + [409] * 5, statuses
    results = await toolset.decisions(requests)
    assert (results.approvals["edit-1"] is True) == (forms[winners[0]]["decision"] == "approve")


async def test_reflected_input_is_escaped_and_redirects_stay_home(
    make_workspace: Callable[..., Path],
) -> None:
    workspace, _, _ = await pending(make_workspace)
    payload = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    with serving([workspace]) as (server, token):
        anonymous = Http(server.url)
        for path in (
            f"/login?token={quote(payload)}",
            f"/login?next={quote(payload)}",
            f"/item/{quote(payload)}",
            f"/{quote(payload)}",
        ):
            reply = anonymous.get(path)
            assert "<script" not in reply.body.lower(), path
            assert "<img" not in reply.body.lower(), path
        http = logged_in(server.url, token)
        assert "<script" not in http.get(f"/item/0-{quote(payload)}").body.lower()
        for name in ("next", "return_to", "redirect", "url"):
            target = quote("http://evil.test/")
            reply = Http(server.url).request("POST", f"/login?{name}={target}", {"token": token})
            assert reply.status == 303
            assert reply.headers["location"].startswith("/"), reply.headers["location"]
            assert not reply.headers["location"].startswith("//")


SECRET_SHAPES = {
    "file-name": ({}, f"vsh_write('/workspace/{GITHUB}.txt', 'x')\n"),
    "deleted-lines": (
        {"creds.ini": f"token = {GITHUB}\nid = {AWS_KEY}\n{PRIVATE_KEY}"},
        "vsh_remove('/workspace/creds.ini')\n",
    ),
    "replaced-lines": (
        {"creds.ini": f"token = {GITHUB}\nid = {AWS_KEY}\n"},
        "vsh_write('/workspace/creds.ini', 'token = none\\n')\n",
    ),
    "printed": ({}, f"print('{GITHUB}', '{AWS_KEY}')\nvsh_write('/workspace/n.txt', 'x')\n"),
    "bare-line": ({}, f"vsh_write('/workspace/n.txt', '{GITHUB}\\n{AWS_KEY}\\n')\n"),
}


@pytest.mark.parametrize("shape", sorted(SECRET_SHAPES))
async def test_secrets_in_names_removed_lines_and_output_stay_hidden(
    make_workspace: Callable[..., Path], shape: str
) -> None:
    files, code = SECRET_SHAPES[shape]
    call = ToolCallPart("vsh_run", {"code": code, "intent": "tidy"}, tool_call_id="s")
    workspace, toolset, requests = await pending(make_workspace, [call], **files)
    before = snapshot_tree(workspace)
    with serving([workspace]) as (server, token):
        http = logged_in(server.url, token)
        [link] = links(http)
        page = http.get(link)
        assert page.status == 200
        assert 'id="changes"' in page.body
        for reply in (http.get("/"), page, http.get(f"{link}?page=2")):
            for secret in (GITHUB, AWS_KEY, PEM_BODY[:24]):
                assert secret not in reply.body, (shape, secret[:6])
    await nothing_recorded(toolset, requests)
    assert snapshot_tree(workspace) == before
