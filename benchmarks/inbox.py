"""How fast is ``vsh-ai inbox`` with 1,000 pending approvals and a 5,000-line diff?

Setup: one workspace whose agent really deferred a call (a real VSH transaction) plus
999 more signed bindings written by the same store (``ApprovalStore.save``, copies of the
real one's approver view under other call ids: the listing reads, verifies and renders
exactly these records); and a second workspace whose agent rewrote every line of a
5,000-line file (a real deferred VSH transaction: 10,000 diff rows).

Measured (best of 5, wall clock): reading and verifying the 1,000 bindings; GET / (the
whole listing page over HTTP, uvicorn on 127.0.0.1); GET of the big diff's first page;
and, when Chromium is installed, the browser's load of both pages (navigation to
``load``). Target (issue 20): listing under 1 s, the big diff drawn without freezing
(each page is bounded at ``PAGE_ROWS`` rows whatever the diff's size).

    .venv/bin/python benchmarks/inbox.py
"""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
os.environ.setdefault("VSH_AI_APPROVAL_KEY_FILE", tempfile.mkdtemp() + "/approval.key")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from inbox_support import defer, patch_call

from vsh_ai import VshToolset
from vsh_ai.inbox._app import InboxConfig, create_app
from vsh_ai.inbox._auth import Tokens
from vsh_ai.inbox._diff_view import PAGE_ROWS
from vsh_ai.inbox._items import WorkspaceInbox
from vsh_ai.inbox._server import InboxServer

PENDING = 1_000
BIG_LINES = 5_000


def best(run: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


async def build(root: Path) -> tuple[Path, Path]:
    many = root / "many"
    many.mkdir()
    (many / "notes.txt").write_text("a\n")
    toolset = VshToolset(many, approval="deferred")
    await defer(toolset, [patch_call("edit-0")])
    store = toolset.store
    assert store is not None
    [real] = store.all()
    for number in range(1, PENDING):
        store.save(
            tool_call_id=f"edit-{number}",
            tool_name=real.tool_name,
            digest=real.args_digest,
            transaction=f"{number:064x}",
            changes=real.changes,
            risk_flags=real.risk_flags,
            metadata=real.metadata,
            harvest=real.harvest,
            review=real.review,
        )
    big = root / "big"
    big.mkdir()
    (big / "data.py").write_text("".join(f"value_{i} = {i * 7}\n" for i in range(BIG_LINES)))
    code = (
        "text = open('/workspace/data.py').read()\n"
        "open('/workspace/data.py', 'w').write(text.replace(' = ', ' = 1 + '))\n"
    )
    call = patch_call("edit-big")
    call.tool_name, call.args = "vsh_run", {"code": code, "intent": "offset every value"}
    await defer(VshToolset(big, approval="deferred"), [call])
    return many, big


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="vsh-inbox-bench-"))
    started = time.perf_counter()
    many, big = asyncio.run(build(root))
    print(
        f"setup: {PENDING} bindings + a {BIG_LINES}-line rewrite in "
        f"{time.perf_counter() - started:.1f} s"
    )
    inbox = WorkspaceInbox(0, many, ttl_s=600)
    assert len(inbox.items()) == PENDING
    read = best(inbox.items)
    tokens, token = Tokens.generated("bench")
    server = InboxServer(create_app(InboxConfig([many, big], tokens))).start()
    try:
        host, port = "127.0.0.1", server.port

        def request(
            method: str, path: str, body: str | None = None, cookie: str = ""
        ) -> tuple[int, str, str]:
            connection = http.client.HTTPConnection(host, port, timeout=30)
            headers = {"Origin": server.url, "Cookie": cookie}
            if body is not None:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode()
            cookies = response.headers.get("set-cookie") or ""
            connection.close()
            return response.status, text, cookies.split(";", 1)[0]

        _, _, cookie = request("POST", "/login", urlencode({"token": token}))
        status, listing, _ = request("GET", "/", cookie=cookie)
        assert status == 200
        assert f'id="pending-count">{PENDING + 1}<' in listing, "every pending item is listed"
        list_http = best(lambda: request("GET", "/", cookie=cookie))
        [big_item] = WorkspaceInbox(1, big, ttl_s=600).items()
        status, page, _ = request("GET", f"/item/{big_item.key}", cookie=cookie)
        rows = len(re.findall(r"<tr class=", page))
        pages = re.search(r"page 1 of (\d+)", page)
        diff_http = best(lambda: request("GET", f"/item/{big_item.key}", cookie=cookie))
        print(f"{'measure':<46} {'ms':>8} {'vs target':>10}")
        print(f"{'read+verify 1,000 bindings':<46} {read * 1000:8.1f} {read / 1.0:9.2f}x")
        print(
            f"{'GET / (1,001 pending, whole page)':<46} {list_http * 1000:8.1f} "
            f"{list_http / 1.0:9.2f}x"
        )
        print(
            f"{'GET 5,000-line diff, page 1':<46} {diff_http * 1000:8.1f} {diff_http / 1.0:9.2f}x"
        )
        print(
            f"listing page {len(listing) / 1024:.0f} KiB; diff page {len(page) / 1024:.0f} KiB, "
            f"{rows} rows (PAGE_ROWS={PAGE_ROWS}) of {pages.group(1) if pages else 1} pages"
        )
        browse(server.url, token, f"/item/{big_item.key}")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def browse(url: str, token: str, big_path: str) -> None:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        print("browser: skipped (Chromium not installed: apt-get install -y chromium)")
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{url}/login?token={token}")
        page.click("#login")
        for name, path in (
            ("browser: load listing (1,001 rows)", "/"),
            ("browser: load 5,000-line diff page 1", big_path),
        ):
            took = best(lambda path=path: page.goto(f"{url}{path}", wait_until="load"), repeats=3)
            timing = page.evaluate(
                "(() => { const n = performance.getEntriesByType('navigation')[0];"
                " return [n.responseStart - n.requestStart, n.loadEventEnd - n.responseStart]; })()"
            )
            print(f"{name:<46} {took * 1000:8.1f} {took / 1.0:9.2f}x")
            print(f"{'  of which server / browser (ms)':<46} {timing[0]:.0f} / {timing[1]:.0f}")
        browser.close()


if __name__ == "__main__":
    main()
