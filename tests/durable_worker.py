"""Child processes for the DBOS crash matrix (tests/test_durable_crash.py).

``python tests/durable_worker.py PHASE JOB...`` imports everything once, then forks one
child process per job (``CASE_DIR:ENGINE:PATH:POINT``), at most ``VSH_AI_CRASH_PARALLEL``
at a time, and prints one JSON line ``{case_dir: exit code}``. A child opens its own VSH
runtime and DBOS (SQLite under CASE_DIR), so nothing native crosses the fork.

Engines: ``durability`` (the agent has Pydantic AI's ``DBOSDurability`` and runs inside
our ``@DBOS.workflow``) and ``agent`` (the deprecated ``DBOSAgent`` wrapper, whose run id
changes on every execution: on the auto and judged paths its own run workflow is the
case's workflow, as in ``await dbos_agent.run(...)``; on the paths a person decides, our
workflow calls ``run_with_approvals(dbos_agent, ...)`` and each agent run is a child
workflow). Two more, for the controls: ``agent-runkey`` (DBOSAgent with the call key
vsh-ai 0.1 used, run id + run step + tool call id, which changes on every execution) and
``runid`` (DBOSDurability, our workflow passing a fresh ``run_id=`` on every execution:
the default key must then name the call by the recorded model response).

- ``start``: start workflow ``case`` (one agent turn appending ``line 1`` to log.txt)
  with a crash injected at POINT; the child dies with :data:`CRASH_CODE` (or SIGKILL
  while waiting for the human) when the point is reached, else finishes normally.
- ``recover``: a new process launches DBOS, which recovers the pending workflow; for
  the deferred and denied paths it answers when the workflow waits; it writes
  CASE_DIR/report-PHASE.json (or error-PHASE.txt).

Paths: ``auto`` (plain runtime, VSH policy auto-approves the append), ``judged`` (a
judge that approves and counts its calls in CASE_DIR/judge_calls.txt, across
processes), ``deferred`` (strict policy, human approval through vsh_ai.dbos),
``denied`` (the human denies), ``timeout`` (nobody answers within TIMEOUT_S).
``VSH_AI_CRASH_DATABASE_URL`` (a Postgres URL) puts each case in its own DBOS schema
there instead of a SQLite file; ``VSH_AI_CRASH_JOURNAL=0`` turns the commit journal
off (the "before" figures).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import time
import traceback
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync
from durable_support import CountingJudge, tool_returns
from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.durable_exec.dbos import DBOSAgent, DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.run import AgentRunResult

from vsh_ai import VshResult, VshToolset
from vsh_ai.dbos import (
    dbos_config,
    pending_approvals_async,
    run_with_approvals,
    send_approval_async,
)
from vsh_ai.toolset import _driver as _toolset_runtime

CRASH_CODE = 86
WORKFLOW_ID = "case"
INITIAL = "start\n"
APPENDED = "line 1\n"
PROGRAM = "p = '/workspace/log.txt'\nvsh_write(p, vsh_read(p) + 'line 1\\n')\n"
ENGINES = ("durability", "agent", "agent-runkey", "runid")
PATHS = ("auto", "judged", "deferred", "denied", "timeout")
TASK = "append a line to log.txt"
TIMEOUT_S = 4.0  # the "timeout" path: nobody answers within this
POINTS = (
    "none",
    "before_preview",
    "after_preview",
    "after_prepare",
    "before_finish",
    "waiting",
    "after_approved_prepare",
    "after_approved_commit",
    "after_denial_recorded",
)
WAIT_S = 30.0


# -- the agent --------------------------------------------------------------------------


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Append once; when the tool's result is back, say which state it reported."""
    returns = tool_returns(messages)
    if not returns:
        return ModelResponse(
            parts=[ToolCallPart("vsh_run", {"code": PROGRAM, "intent": "append line 1"})]
        )
    content = returns[-1].content
    state = content.state if isinstance(content, VshResult) else returns[-1].outcome
    return ModelResponse(parts=[TextPart(f"finished: {state}")])


_AGENT: dict[str, AbstractAgent[None, Any]] = {}


def run_key(ctx: RunContext[Any]) -> str | None:
    """The call key of vsh-ai 0.1 (the control): run id, run step, tool call id. Under
    DBOSAgent the run id is drawn anew on every execution of the workflow."""
    if ctx.run_id is None or ctx.tool_call_id is None:
        return None
    return json.dumps([ctx.run_id, ctx.run_step, ctx.tool_call_id])


def build_agent(case_dir: Path, engine: str, path: str) -> AbstractAgent[None, Any]:
    workspace = case_dir / "ws"
    options: dict[str, Any] = {"tools": ["vsh_run"]}
    # VSH_AI_CRASH_JOURNAL=0 turns the commit journal off: the "before" figures.
    if os.environ.get("VSH_AI_CRASH_JOURNAL") == "0":
        options["journal"] = False
    if engine == "agent-runkey":
        options["call_key"] = run_key
    if path == "judged":
        options["judge"] = CountingJudge(case_dir / "judge_calls.txt")
    elif path in ("deferred", "denied", "timeout"):  # a person decides (or never answers)
        options.update(approval="deferred", policy="strict", approval_ttl=600)
    toolset = VshToolset(workspace, **options)
    model = FunctionModel(respond, model_name="crash-agent")
    if engine.startswith("agent"):
        with warnings.catch_warnings():  # DBOSAgent is deprecated: covered while it ships
            warnings.simplefilter("ignore")
            plain: Agent[None, Any] = Agent(
                model,
                name="crash_agent",
                toolsets=[toolset],
                output_type=[str, DeferredToolRequests],
            )
            return DBOSAgent(plain)
    return Agent(
        model,
        name="crash_agent",
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        capabilities=[DBOSDurability()],
    )


def summary(result: AgentRunResult[Any]) -> dict[str, Any]:
    """The agent's answer and every tool result it saw (JSON)."""
    returns = [part.content for part in tool_returns(result.all_messages())]
    return {
        "output": str(result.output),
        "returns": [
            r.model_dump(mode="json") if isinstance(r, VshResult) else repr(r) for r in returns
        ],
    }


@DBOS.workflow(name="vsh-ai-crash-case")
async def case_workflow(task: str) -> dict[str, Any]:
    timeout = TIMEOUT_S if os.environ.get("VSH_AI_CASE_PATH") == "timeout" else WAIT_S * 4
    agent = _AGENT["agent"]
    if os.environ.get("VSH_AI_CASE_ENGINE") == "runid":  # not replay-stable, on purpose
        return summary(await agent.run(task, run_id=str(uuid.uuid4())))
    return summary(await run_with_approvals(agent, task, timeout_s=timeout))


# -- crash injection (in the start child only) -------------------------------------------


def _die(point: str) -> None:
    (Path(os.environ["VSH_AI_CASE_DIR"]) / "crashed_at").write_text(point)
    os._exit(CRASH_CODE)


def _wrap(
    owner: Any,
    name: str,
    point: str,
    *,
    before: bool,
    when: Callable[[tuple[Any, ...], dict[str, Any]], bool] = lambda args, kwargs: True,
) -> None:
    """Make ``owner.name`` die before delegating or after it returns (when ``when`` holds)."""
    original: Callable[..., Any] = getattr(owner, name)

    async def crashing(*args: Any, **kwargs: Any) -> Any:
        if before and when(args, kwargs):
            _die(point)
        value = await original(*args, **kwargs)
        if not before and when(args, kwargs):
            _die(point)
        return value

    def crashing_sync(*args: Any, **kwargs: Any) -> Any:
        if before and when(args, kwargs):
            _die(point)
        value = original(*args, **kwargs)
        if not before and when(args, kwargs):
            _die(point)
        return value

    is_async = asyncio.iscoroutinefunction(original)
    setattr(owner, name, crashing if is_async else crashing_sync)


def _commits(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A journal record that promises a commit (not the first, pending one of a deferral)."""
    expected = kwargs.get("expected")
    return isinstance(expected, VshResult) and expected.state == "committed"


def install_crash(path: str, point: str) -> None:
    driver = _toolset_runtime.WorkspaceDriver
    preview = "run" if path == "auto" else "preview"
    if point == "before_preview":
        _wrap(driver, preview, point, before=True)
    elif point == "after_preview":
        _wrap(driver, preview, point, before=False)
    elif point in ("after_prepare", "before_finish", "after_approved_prepare"):
        from vsh_ai.toolset import _journal as _toolset_journal

        journal = _toolset_journal.CommitJournal
        if point == "after_prepare":
            _wrap(journal, "prepare", point, before=False)
        elif point == "after_approved_prepare":  # deferred: journaled, approved, not committed
            _wrap(journal, "prepare", point, before=False, when=_commits)
        else:
            _wrap(journal, "finish", point, before=True)
    elif point == "after_approved_commit":
        _wrap(driver, "approve_and_commit", point, before=False)
    elif point == "after_denial_recorded":  # the toolset records the person's denial
        from vsh_ai.toolset import _bindings as _toolset_approvals

        def denied(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            return len(args) > 2 and args[2] == "denied"

        _wrap(_toolset_approvals.ApprovalStore, "finish", point, before=False, when=denied)


# -- one child ---------------------------------------------------------------------------


def host_text(case_dir: Path) -> str:
    return (case_dir / "ws" / "log.txt").read_text()


def judge_calls(case_dir: Path) -> int:
    calls = case_dir / "judge_calls.txt"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


async def _approve_when_waiting(deadline: float, *, deny: bool = False) -> None:
    """Approve (or deny) every call the workflow waits for, once; return when resolved."""
    while time.monotonic() < deadline:
        pending = await pending_approvals_async(WORKFLOW_ID, wait_s=0.2)
        if pending is not None and pending.state == "resolved":
            return
        if pending is not None and pending.state == "waiting":
            calls = [call.tool_call_id for call in pending.calls]
            await send_approval_async(
                WORKFLOW_ID,
                request_id=pending.request_id,
                principal="alice",
                approve=[] if deny else calls,
                deny=dict.fromkeys(calls, "not now") if deny else {},
            )
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the workflow never asked for approval")


async def _wait_until_waiting(deadline: float) -> None:
    while time.monotonic() < deadline:
        pending = await pending_approvals_async(WORKFLOW_ID, wait_s=0.2)
        if pending is not None and pending.state == "waiting":
            case_dir = Path(os.environ["VSH_AI_CASE_DIR"])
            (case_dir / "deadline").write_text(str(pending.deadline_unix_s))
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the workflow never asked for approval")


def _own_workflow(engine: str, path: str) -> bool:
    """DBOSAgent on a path nobody approves: its run workflow is the case's workflow."""
    return engine == "agent" and path in ("auto", "judged")


async def _start(engine: str, path: str, point: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    if _own_workflow(engine, path):
        with SetWorkflowID(WORKFLOW_ID):
            return summary(await _AGENT["agent"].run(TASK))
    with SetWorkflowID(WORKFLOW_ID):
        handle = await DBOS.start_workflow_async(case_workflow, TASK)
    if path in ("deferred", "denied", "timeout"):
        if point == "waiting":
            await _wait_until_waiting(deadline)
            await asyncio.sleep(0.2)  # let the workflow reach recv
            (Path(os.environ["VSH_AI_CASE_DIR"]) / "crashed_at").write_text(point)
            os.kill(os.getpid(), signal.SIGKILL)
        if path != "timeout":
            await _approve_when_waiting(deadline, deny=path == "denied")
    result: dict[str, Any] = await asyncio.wait_for(
        handle.get_result(polling_interval_sec=0.05), WAIT_S
    )
    return result


async def _recover(engine: str, path: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    handle: WorkflowHandleAsync[Any] = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
    if path in ("deferred", "denied"):
        await _approve_when_waiting(deadline, deny=path == "denied")
    result = await asyncio.wait_for(handle.get_result(polling_interval_sec=0.05), WAIT_S)
    if isinstance(result, AgentRunResult):  # DBOSAgent's own run workflow
        return summary(result)
    assert isinstance(result, dict), result
    return result


def child(phase: str, case_dir: Path, engine: str, path: str, point: str) -> None:
    """Run one phase of one case; never returns (exit code is the outcome)."""
    code = 0
    try:
        os.environ["VSH_AI_CASE_DIR"] = str(case_dir)
        os.environ["VSH_AI_CASE_PATH"] = path
        os.environ["VSH_AI_CASE_ENGINE"] = engine
        _AGENT["agent"] = build_agent(case_dir, engine, path)
        if phase == "start":
            install_crash(path, point)
        # VSH_AI_CRASH_DATABASE_URL (a Postgres URL): every case in its own DBOS schema.
        postgres = os.environ.get("VSH_AI_CRASH_DATABASE_URL")
        where: dict[str, Any] = {"directory": case_dir}
        if postgres:
            tag = hashlib.sha256(str(case_dir).encode()).hexdigest()[:10]
            schema = f"c{tag}_{case_dir.name}".replace("-", "_")[:60]
            where = {"database_url": postgres, "dbos_system_schema": schema}
        DBOS(
            config=dbos_config(
                "crash",
                notification_listener_polling_interval_sec=0.02,
                log_level="WARNING",
                **where,
            )
        )
        if phase == "recover" and path == "timeout":  # recover only after the deadline
            time.sleep(max(0.0, float((case_dir / "deadline").read_text()) - time.time() + 0.2))
        launched = time.monotonic()
        DBOS.launch()
        runner = _start(engine, path, point) if phase == "start" else _recover(engine, path)
        result = asyncio.run(runner)
        report = {
            "phase": phase,
            "seconds": time.monotonic() - launched,
            "result": result,
            "host": host_text(case_dir),
            "judge_calls": judge_calls(case_dir),
        }
        (case_dir / f"report-{phase}.json").write_text(json.dumps(report, indent=1))
    except BaseException:
        (case_dir / f"error-{phase}.txt").write_text(traceback.format_exc())
        code = 3
    os._exit(code)  # no DBOS teardown: the next process must not depend on a clean exit


def main(argv: list[str]) -> int:
    phase, jobs = argv[0], argv[1:]
    assert phase in ("start", "recover"), phase
    parallel = max(1, int(os.environ.get("VSH_AI_CRASH_PARALLEL", "4")))
    context = multiprocessing.get_context("fork")
    waiting = list(jobs)
    running: dict[str, multiprocessing.process.BaseProcess] = {}
    codes: dict[str, int | None] = {}
    deadline = time.monotonic() + 4 * WAIT_S + 2.0 * len(jobs)
    while waiting or running:
        while waiting and len(running) < parallel:
            job = waiting.pop(0)
            case_dir, engine, path, point = job.rsplit(":", 3)
            assert engine in ENGINES, job
            assert path in PATHS, job
            assert point in POINTS, job
            args = (phase, Path(case_dir), engine, path, point)
            started = context.Process(target=child, args=args)
            started.start()
            running[case_dir] = started
        for case_dir, process in list(running.items()):
            if not process.is_alive() or time.monotonic() > deadline:
                if process.is_alive():
                    process.kill()
                process.join()
                codes[case_dir] = process.exitcode
                del running[case_dir]
        time.sleep(0.02)
    print(json.dumps(codes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
