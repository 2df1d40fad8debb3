"""Tutorial 5: a person approves an agent's change in ``vsh-ai inbox``; the app resumes.

An agent raises a service's timeout in ``service.toml``. The toolset runs in deferred
mode, so the change waits for a person and the agent run ends with
``DeferredToolRequests``. Then:

1. the app starts ``vsh-ai inbox WORKSPACE`` (a local web page on 127.0.0.1 that prints
   a login URL with a random token, as Jupyter does);
2. a person opens it, reads the exact diff, the judge's verdict and the intent (shown as
   untrusted text) and approves with a reason. Here a scripted "person" does what the
   browser would (log in, open the item, press Approve); pass ``--wait`` to do it
   yourself in a browser instead;
3. the app calls ``await toolset.decisions(requests, wait=...)``, which turns the
   recorded decision into ``DeferredToolResults`` (the approver is the ``principal``),
   and resumes the agent: VSH commits exactly the transaction the person saw.

    .venv/bin/python tutorials/05_inbox_approvals.py [--wait]

Set ``VSH_AI_TUTORIAL_DIR`` to keep the workspace somewhere you can look at (default: a
temporary folder).
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import math
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshToolset

BEFORE = '[service]\nname = "api"\ntimeout = "5s"\n'
CALL = ToolCallPart(
    "vsh_patch",
    {"path": "/workspace/service.toml", "old": 'timeout = "5s"', "new": 'timeout = "30s"'},
    tool_call_id="raise-timeout",
)


def scripted_agent(toolset: VshToolset, seen: list[Any]) -> Agent[None, str | DeferredToolRequests]:
    """A stand-in for a real model: proposes the edit, then reports what the tool said."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if isinstance(last, ModelRequest) and returns:
            seen.extend(returns)
            return ModelResponse(parts=[TextPart(f"the edit is {returns[0].content.state}")])
        return ModelResponse(parts=[CALL])

    return Agent(
        FunctionModel(respond), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )


def start_inbox(workspace: Path) -> tuple[subprocess.Popen[str], str]:
    """``vsh-ai inbox WORKSPACE`` on a free port; returns the process and its login URL."""
    inbox = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vsh_ai",
            "inbox",
            str(workspace),
            "--port",
            "0",
            "--principal",
            "alice",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert inbox.stdout is not None
    for line in inbox.stdout:
        print(f"   inbox | {line.rstrip()}")
        if line.startswith("Open "):
            return inbox, line.split()[1]
    raise SystemExit(f"vsh-ai inbox exited ({inbox.wait()}) without printing its URL")


def approve_as_a_person(login_url: str, reason: str) -> None:
    """What a person does in the browser: log in, open the pending item, approve it."""
    parts = urllib.parse.urlsplit(login_url)
    base = f"{parts.scheme}://{parts.netloc}"
    token = urllib.parse.parse_qs(parts.query)["token"][0]
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )

    def post(path: str, form: dict[str, str]) -> str:
        data = urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(base + path, data, headers={"Origin": base})
        with opener.open(request) as response:
            return str(response.read().decode())

    listing = post("/login", {"token": token})  # the browser follows to the list
    [link] = re.findall(r'href="(/item/[^"]+)"', listing)
    with opener.open(base + link) as response:
        page = response.read().decode()
    summary = re.search(r'<h1 id="summary">(.*?)</h1>', page)
    print(f"   person sees: {summary.group(1) if summary else '?'}")
    for row in re.findall(r'<tr class="(add|del)">.*?<td class="line">(.*?)</td>', page, re.S):
        print(f"   person sees: {'+' if row[0] == 'add' else '-'} {re.sub(r'<[^>]+>', '', row[1])}")
    fields = {
        n: re.search(rf'name="{n}" value="([^"]*)"', page)
        for n in ("csrf", "transaction", "digest")
    }
    form = {n: m.group(1) for n, m in fields.items() if m is not None}
    done = post(f"{link}/decide", {**form, "decision": "approve", "reason": reason})
    print("   person pressed Approve:", "recorded" if "Recorded: approved" in done else done)


async def main() -> None:
    wait_for_a_person = "--wait" in sys.argv[1:]
    root = Path(os.environ.get("VSH_AI_TUTORIAL_DIR") or tempfile.mkdtemp(prefix="vsh-inbox-"))
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "service.toml").write_text(BEFORE)
    toolset = VshToolset(workspace, approval="deferred")

    print("== 1. the agent proposes a change; it waits for a person")
    first = await scripted_agent(toolset, []).run("Raise the service timeout to 30s.")
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    print(f"   pending: {[call.tool_call_id for call in requests.approvals]}")

    print("== 2. a person decides in vsh-ai inbox")
    inbox, login_url = start_inbox(workspace)
    try:
        if wait_for_a_person:
            print(f"   open {login_url} in a browser and approve or deny the change")
        else:
            approve_as_a_person(login_url, "30s matches the upstream's deadline")
        print("== 3. the app resumes with the recorded decisions")
        results = await toolset.decisions(requests, wait=math.inf if wait_for_a_person else 30)
    finally:
        inbox.terminate()
        inbox.wait(timeout=10)
    print(f"   decided by: {results.metadata.get('raise-timeout', {}).get('principal', 'denied')}")
    seen: list[Any] = []
    resumed = await scripted_agent(toolset, seen).run(
        message_history=first.all_messages(), deferred_tool_results=results
    )
    print(f"   agent: {resumed.output}")
    print(f"   committed transaction: {seen[0].content.transaction if seen else None}")
    print("   service.toml now:")
    for line in (workspace / "service.toml").read_text().splitlines():
        print(f"   | {line}")


if __name__ == "__main__":
    asyncio.run(main())
