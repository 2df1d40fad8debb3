"""Tutorial 4: a durable agent whose change waits for a person, across a process restart.

An agent adds a release note to CHANGELOG.md. The policy is ``strict``, so the change
needs a human approval, and the approver may answer hours or days later, after the
process that asked has long gone. Durable execution makes that safe:

* Pydantic AI's ``DBOSDurability`` capability makes every model request a DBOS step,
  recorded in DBOS's system database (a SQLite file here; Postgres by URL).
* ``vsh_ai.dbos.run_with_approvals`` runs the agent inside our ``@DBOS.workflow``;
  when the change needs approval it publishes what is pending (a DBOS event) and
  waits for the decision (a DBOS message), durably.
* The toolset binds the approval to the exact VSH transaction the approver saw, and
  its commit journal makes a replayed tool call return its recorded result: the
  change commits exactly once, whatever crashes in between.

The story runs in four separate processes, which this script starts itself:

1. **worker** starts the workflow; the agent proposes the change; the workflow waits.
   We then kill the process (SIGKILL: no clean shutdown).
2. **approver** is what an approval UI would do: with a ``DBOSClient`` on the same
   database (no workflow code, no DBOS launch) it reads what is pending, shows the
   diff, and approves as ``alice``.
3. **worker** again, a new process: launching DBOS recovers the pending workflow, which
   replays its recorded steps, receives the approval, commits, and finishes.
4. **worker** once more: the workflow is finished, nothing runs or commits again.

    .venv/bin/python tutorials/04_durable_agent.py

Set ``VSH_AI_TUTORIAL_DIR`` to keep the workspace and database somewhere you can look
at (default: a temporary folder), or ``VSH_AI_DBOS_DATABASE_URL`` to a
``postgresql://`` URL to run the same story on Postgres. ``VSH_AI_TUTORIAL_MODEL``
swaps the scripted agent for a real model.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

from dbos import DBOS, DBOSClient, SetWorkflowID, WorkflowHandleAsync
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import VshResult, VshToolset
from vsh_ai.dbos import (
    dbos_config,
    pending_approvals,
    pending_approvals_async,
    run_with_approvals,
    send_approval,
)

WORKFLOW_ID = "release-notes-1.4.1"
WAIT = 7 * 86400  # a person may take a week: the wait and the approval TTL both allow it
CHANGELOG = "# Changelog\n\n## 1.4.0\n- Faster startup\n"
TASK = "Add a 1.4.1 entry to CHANGELOG.md: 'Fix request timeout handling'."
PROGRAM = """\
p = '/workspace/CHANGELOG.md'
text = vsh_read(p)
head, rest = text.split('## 1.4.0', 1)
vsh_write(p, head + '## 1.4.1\\n- Fix request timeout handling\\n\\n## 1.4.0' + rest)
"""

# -- the agent: the same one in every process ---------------------------------------------
#
# The agent is not a workflow input (DBOS would pickle it on every start): every process
# that may run or recover the workflow builds the same agent, with the same name, before
# DBOS.launch(), and the workflow finds it in this module. Recovery starts inside
# DBOS.launch(), so build it first. (Here the workspace path arrives on the command line,
# so launch() builds it; in an application this is module-level code.)


def scripted_agent() -> FunctionModel:
    """Plays the agent offline: submit the edit, then report what the tool said."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            part
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if not returns:
            args = {"code": PROGRAM, "intent": "Add the 1.4.1 release note."}
            return ModelResponse(parts=[ToolCallPart("vsh_run", args)])
        result = returns[-1].content
        state = result.state if isinstance(result, VshResult) else str(result)
        return ModelResponse(parts=[TextPart(f"The release note change is {state}.")])

    return FunctionModel(respond, model_name="scripted-agent")


def agent_model() -> Model | str:
    return os.environ.get("VSH_AI_TUTORIAL_MODEL") or scripted_agent()


AGENT: Agent[None, Any] | None = None


def build_agent(workspace: Path) -> Agent[None, Any]:
    toolset = VshToolset(
        workspace,
        policy="strict",  # every change waits for a person
        approval="deferred",  # ...as a DeferredToolRequests, not as feedback to the agent
        approval_ttl=WAIT,  # an approval older than this commits nothing (reports stale)
        tools=["vsh_run", "vsh_read"],
    )
    return Agent(
        agent_model(),
        name="release_notes",  # names the DBOS steps: keep it stable across deploys
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        instructions="You maintain CHANGELOG.md at /workspace; make the change with vsh_run.",
        capabilities=[DBOSDurability()],
    )


@DBOS.workflow(name="release-notes")
async def release_notes(task: str) -> str:
    assert AGENT is not None
    result = await run_with_approvals(AGENT, task, timeout_s=WAIT)
    return str(result.output)


def launch(folder: Path) -> None:
    global AGENT
    AGENT = build_agent(folder / "workspace")
    # SQLite file next to the workspace by default; VSH_AI_DBOS_DATABASE_URL wins.
    DBOS(config=dbos_config("vsh-ai-tutorial", directory=folder, log_level="WARNING"))
    DBOS.launch()  # recovers this app version's pending workflows, if any


# -- the processes -----------------------------------------------------------------------


async def start(folder: Path) -> None:
    """Process 1: start the workflow and report once it waits (then it is killed)."""
    launch(folder)
    with SetWorkflowID(WORKFLOW_ID):
        await DBOS.start_workflow_async(release_notes, TASK)
    while True:
        pending = await pending_approvals_async(WORKFLOW_ID, wait_s=1)
        if pending is not None and pending.state == "waiting":
            break
    print(f"   workflow {WORKFLOW_ID} waits for approval of {len(pending.calls)} change(s)")
    print("   WAITING", flush=True)
    await asyncio.sleep(3600)  # the parent kills us here


def approve(folder: Path) -> None:
    """Process 2: an approver with nothing but a client on the system database."""
    url = str(dbos_config("vsh-ai-tutorial", directory=folder)["system_database_url"])
    client = DBOSClient(system_database_url=url)
    try:
        pending = pending_approvals(WORKFLOW_ID, client=client)
        if pending is None or pending.state != "waiting":
            raise SystemExit(f"nothing waits for approval: {pending}")
        for call in pending.calls:
            view = call.metadata
            print(f"   pending {call.tool_name} {call.tool_call_id[:16]}...")
            print(f"     transaction {str(view.get('transaction'))[:16]}..., {view['summary']}")
            for line in str(view.get("diff") or "").splitlines():
                print(f"     | {line}")
        send_approval(
            WORKFLOW_ID,
            request_id=pending.request_id,  # binds the decision to what was shown
            principal="alice",
            approve=[call.tool_call_id for call in pending.calls],
            client=client,
        )
        print("   alice approved; the worker that asked is gone, the message waits in the database")
    finally:
        client.destroy()


async def resume(folder: Path) -> None:
    """Processes 3 and 4: launch DBOS, which recovers the workflow; wait for its result."""
    launch(folder)
    handle: WorkflowHandleAsync[str] = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
    output = await handle.get_result(polling_interval_sec=0.1)
    status = await DBOS.get_workflow_status_async(WORKFLOW_ID)
    print(f"   workflow {WORKFLOW_ID}: {status.status if status else 'unknown'}")
    print(f"   agent: {output}")
    DBOS.destroy()


# -- the story (the parent process) -------------------------------------------------------


def show_host(workspace: Path) -> None:
    print("   host CHANGELOG.md now:")
    for line in (workspace / "CHANGELOG.md").read_text().splitlines():
        print(f"     | {line}")


def step(folder: Path, mode: str) -> None:
    done = subprocess.run(
        [sys.executable, __file__, mode, str(folder)], text=True, capture_output=True
    )
    print(done.stdout, end="")
    if done.returncode != 0:
        raise SystemExit(f"step {mode} failed:\n{done.stderr}")


def story(folder: Path) -> None:
    workspace = folder / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "CHANGELOG.md").write_text(CHANGELOG)
    url = str(dbos_config("vsh-ai-tutorial", directory=folder)["system_database_url"])
    where = url if url.startswith("sqlite") else "$VSH_AI_DBOS_DATABASE_URL"
    print(f"Workspace in {folder}; DBOS system database: {where}")
    show_host(workspace)

    print("\n== 1. A worker starts the workflow; the change waits for a person")
    errors = folder / "worker-1.log"
    with errors.open("w") as stderr:
        worker = subprocess.Popen(
            [sys.executable, __file__, "start", str(folder)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert worker.stdout is not None
        waiting = False
        for line in worker.stdout:
            if line.strip() == "WAITING":
                waiting = True
                break
            print(line, end="")
        worker.kill()  # SIGKILL: no shutdown, no cleanup
        worker.wait()
    if not waiting:
        raise SystemExit(f"the first worker failed:\n{errors.read_text()}")
    print(f"   worker killed (exit {worker.returncode}) while the workflow waited")
    show_host(workspace)

    print("\n== 2. An approver reads what is pending and approves (no worker running)")
    step(folder, "approve")

    print("\n== 3. A new worker process recovers the workflow; the change commits")
    step(folder, "resume")
    show_host(workspace)

    print("\n== 4. Another restart: the workflow is finished, nothing commits again")
    step(folder, "resume")
    show_host(workspace)
    entries = (workspace / "CHANGELOG.md").read_text().count("## 1.4.1")
    print(f"\nThe 1.4.1 entry is in CHANGELOG.md {entries} time(s): approved once, committed once.")


def main() -> None:
    if len(sys.argv) == 3:
        mode, folder = sys.argv[1], Path(sys.argv[2])
        if mode == "start":
            asyncio.run(start(folder))
        elif mode == "approve":
            approve(folder)
        elif mode == "resume":
            asyncio.run(resume(folder))
        else:
            raise SystemExit(f"unknown step {mode!r}")
        return
    chosen = os.environ.get("VSH_AI_TUTORIAL_DIR")
    if chosen:
        story(Path(chosen))
        return
    with tempfile.TemporaryDirectory() as tmp:
        story(Path(tmp))


if __name__ == "__main__":
    main()
