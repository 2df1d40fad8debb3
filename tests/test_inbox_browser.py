"""The inbox in a real browser (Debian's Chromium through Playwright): log in with the
token, read a pending diff, approve it and watch the agent's resume commit exactly that
transaction; deny; and the refusals: a stale page, a missing CSRF token, a wrong token,
a form sent from another origin. Screenshots of the main pages are saved for review.

One server serves every scenario's workspace for the whole module (each scenario has a
workspace of its own, so the tests stay independent).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import pytest
from browser_support import browser, page, screenshot_dir
from conftest import snapshot_tree, write_tree
from inbox_support import defer, deferred_agent, patch_call, serving
from pydantic_ai import DeferredToolRequests
from pydantic_ai.messages import ToolReturnPart

from vsh_ai import VshToolset
from vsh_ai.inbox._items import WorkspaceInbox

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ("browser", "page")  # the fixtures, imported for pytest

T = TypeVar("T")
BIG_LINES = 5_000


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine outside Playwright's own event loop (a worker thread of its own)."""

    async def call() -> T:
        return await make()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, call).result()


@dataclass
class Scenario:
    workspace: Path
    toolset: VshToolset
    first: Any
    key: str

    @property
    def requests(self) -> DeferredToolRequests:
        assert isinstance(self.first.output, DeferredToolRequests)
        return self.first.output

    def resume(self) -> list[Any]:
        """What the app does: read the inbox's decisions, resume the agent with them."""

        async def go() -> list[Any]:
            results = await self.toolset.decisions(self.requests, wait=5)
            seen: list[Any] = []
            agent = deferred_agent(self.toolset, [patch_call("edit-1")], seen)
            await agent.run(
                message_history=self.first.all_messages(), deferred_tool_results=results
            )
            return [p for p in seen if isinstance(p, ToolReturnPart)]

        return run_async(go)

    def binding(self) -> Any:
        [binding] = self.toolset.store.all()  # type: ignore[union-attr]
        return binding


NAMES = ("approve", "deny", "stale", "csrf", "origin", "big")


@pytest.fixture(scope="module")
def inbox(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, dict[str, Scenario]]]:
    root = tmp_path_factory.mktemp("inbox-browser")
    prepared: dict[str, tuple[Path, VshToolset, Any]] = {}
    for name in NAMES:
        workspace = write_tree(root / name, {"notes.txt": "a\n"})
        if name == "big":
            lines = "".join(f"line {i} = {i * 7}\n" for i in range(BIG_LINES))
            write_tree(workspace, {"notes.txt": lines})
            code = (
                "text = open('/workspace/notes.txt').read()\n"
                "open('/workspace/notes.txt', 'w').write(text.replace(' = ', ' := '))\n"
            )
            call = patch_call("edit-1")
            call.tool_name, call.args = "vsh_run", {"code": code, "intent": "rename operators"}
        else:
            call = patch_call("edit-1")
        toolset = VshToolset(workspace, approval="deferred")
        first, _ = run_async(lambda: defer(toolset, [call]))  # noqa: B023
        prepared[name] = (workspace, toolset, first)
    workspaces = [prepared[name][0] for name in NAMES]
    with serving(workspaces, principal="alice") as (server, token):
        scenarios = {}
        for index, name in enumerate(NAMES):
            workspace, toolset, first = prepared[name]
            [item] = WorkspaceInbox(index, workspace, ttl_s=600).items()
            scenarios[name] = Scenario(workspace, toolset, first, item.key)
        yield server.url, token, scenarios


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshot_dir(tmp_path_factory)


def log_in(page: Page, url: str, token: str) -> None:
    page.goto(f"{url}/login?token={token}")
    page.click("#login")
    page.wait_for_selector("#pending-count")


def test_log_in_read_the_diff_approve_and_the_resume_commits_it(
    page: Page, inbox: tuple[str, str, dict[str, Scenario]], shots: Path
) -> None:
    url, token, scenarios = inbox
    scenario = scenarios["approve"]
    page.goto(f"{url}/login?token={token}")
    page.screenshot(path=str(shots / "login.png"))
    page.click("#login")
    assert int(page.text_content("#pending-count") or "0") == len(NAMES)
    page.screenshot(path=str(shots / "list.png"), full_page=True)
    page.click(f'a[href="/item/{scenario.key}"]')
    assert page.text_content("#summary") == "1 modify: notes.txt"
    assert [r.text_content() for r in page.query_selector_all("#diff tr.del td.line")] == ["a"]
    assert [r.text_content() for r in page.query_selector_all("#diff tr.add td.line")] == ["b"]
    transaction = page.text_content("#transaction")
    assert transaction == scenario.requests.metadata["edit-1"]["transaction"]
    page.screenshot(path=str(shots / "item.png"), full_page=True)
    page.fill("#reason", "one-line fix, as asked")
    page.click("#approve")
    assert "approved" in (page.text_content("#notice") or "")
    assert snapshot_tree(scenario.workspace)["notes.txt"] == b"a\n"  # nothing until resume
    [part] = scenario.resume()
    assert (part.content.state, part.content.transaction) == ("committed", transaction)
    assert snapshot_tree(scenario.workspace)["notes.txt"] == b"b\n"
    assert (scenario.binding().end_state, scenario.binding().end_principal) == (
        "committed",
        "alice",
    )


def test_deny_with_a_reason(page: Page, inbox: tuple[str, str, dict[str, Scenario]]) -> None:
    url, token, scenarios = inbox
    scenario = scenarios["deny"]
    log_in(page, url, token)
    page.goto(f"{url}/item/{scenario.key}")
    page.fill("#reason", "not this file")
    page.click("#deny")
    assert "denied" in (page.text_content("#notice") or "")
    binding = scenario.binding()
    assert (binding.end_state, binding.end_principal, binding.end_message) == (
        "denied",
        "alice",
        "not this file",
    )
    [part] = scenario.resume()
    assert part.outcome == "denied"
    assert '"not this file"' in part.content
    assert snapshot_tree(scenario.workspace)["notes.txt"] == b"a\n"


def test_a_page_left_open_while_the_binding_changed_cannot_approve(
    page: Page, inbox: tuple[str, str, dict[str, Scenario]], shots: Path
) -> None:
    url, token, scenarios = inbox
    scenario = scenarios["stale"]
    log_in(page, url, token)
    page.goto(f"{url}/item/{scenario.key}")
    binding = scenario.binding()
    scenario.toolset.store._write(  # type: ignore[union-attr]
        binding.model_copy(update={"sequence": binding.sequence + 1})
    )
    page.click("#approve")
    assert "changed since this page was shown" in (page.text_content("#message") or "")
    page.screenshot(path=str(shots / "refused-stale.png"))
    assert scenario.binding().decision is None


def test_a_form_without_its_csrf_token_is_refused(
    page: Page, inbox: tuple[str, str, dict[str, Scenario]]
) -> None:
    url, token, scenarios = inbox
    scenario = scenarios["csrf"]
    log_in(page, url, token)
    page.goto(f"{url}/item/{scenario.key}")
    page.evaluate("document.querySelector('#decide input[name=csrf]').remove()")
    page.click("#approve")
    assert "CSRF token is missing or wrong" in (page.text_content("#message") or "")
    assert scenario.binding().decision is None


def test_a_wrong_token_does_not_log_in(
    page: Page, inbox: tuple[str, str, dict[str, Scenario]]
) -> None:
    url, token, _ = inbox
    page.goto(f"{url}/login")
    page.fill("#token", token[::-1])
    page.click("#login")
    assert "not valid" in (page.text_content(".error") or "")
    assert page.context.cookies() == []
    page.goto(f"{url}/")
    assert page.url.endswith("/login")


def test_a_form_on_another_origin_cannot_decide(
    page: Page, inbox: tuple[str, str, dict[str, Scenario]]
) -> None:
    url, token, scenarios = inbox
    scenario = scenarios["origin"]
    log_in(page, url, token)
    page.goto(f"{url}/item/{scenario.key}")
    fields = {
        name: page.get_attribute(f"#decide input[name={name}]", "value") or ""
        for name in ("csrf", "transaction", "digest")
    }  # even with the real CSRF token (leaked), another origin is refused
    inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
    attack = (
        f'<form id="f" method="post" action="{url}/item/{scenario.key}/decide">{inputs}'
        '<button name="decision" value="approve" id="go">win a prize</button></form>'
    )
    page.route(
        "http://attacker.test/",
        lambda route: route.fulfill(status=200, content_type="text/html", body=attack),
    )
    page.goto("http://attacker.test/")
    with page.expect_navigation():
        page.click("#go")
    assert page.url.startswith(url)
    assert "own page" in (page.text_content("#message") or "") or "Log in" in page.content()
    assert scenario.binding().decision is None


def test_a_5000_line_diff_renders_in_pages(
    page: Page, inbox: tuple[str, str, dict[str, Scenario]], shots: Path
) -> None:
    url, token, scenarios = inbox
    scenario = scenarios["big"]
    log_in(page, url, token)
    started = time.perf_counter()
    page.goto(f"{url}/item/{scenario.key}")
    loaded = time.perf_counter() - started
    rows = page.query_selector_all("#diff tr")
    assert 300 <= len(rows) <= 400  # one page, not the whole diff
    assert "page 1 of" in page.content()
    page.screenshot(path=str(shots / "big-diff.png"))
    page.click("a[rel=next]")
    assert "page 2 of" in page.content()
    assert page.query_selector_all("#diff tr.del")
    page.goto(f"{url}/item/{scenario.key}?page=9999")  # clamped to the last page
    assert page.query_selector_all("#diff tr.add")
    assert f"line {BIG_LINES - 1} := " in page.content()
    print(f"5,000-line diff: first page loaded in {loaded * 1000:.0f} ms ({len(rows)} rows)")
