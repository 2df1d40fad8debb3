"""How a tool call is named across replays: the key the commit journal records it under.

A durable engine that recovers a run calls its tools again; the journal recognises a call
it has seen by this key, so the key must be the same on every execution of the call and
differ between calls. What is stable depends on the engine (Pydantic AI 2.62):

- ``DBOSDurability`` inside your ``@DBOS.workflow``: the run id is ``<workflow id>:<step>``,
  derived from the workflow, so the run id, the run step and the tool call id (from the
  recorded model step) name the call.
- ``DBOSAgent`` (deprecated): every execution draws a fresh run id. The workflow id is
  stable (each ``DBOSAgent.run`` is its own workflow, or a child workflow with a derived
  id), and so is the model response that made the call (a recorded step): the call is
  named by the workflow id, that response's timestamp and id, the run step and the tool
  call id. The same holds for ``DBOSDurability`` with a run id you chose.
- ``TemporalDurability`` / ``TemporalAgent``: tools run as activities whose input, the
  serialized run context, is recorded in the workflow history, so every attempt sees the
  same run id, run step and tool call id. A tool run in workflow code (its activity
  turned off) is re-run on each replay: only ``TemporalDurability``'s run id
  (``<workflow run id>:<replay-safe uuid>``) is stable there.

Anything else inside a durable engine cannot be named stably: an agent without durable
model requests inside a DBOS workflow (recovery asks the model again, which names its
calls anew), an agent run inside a DBOS step or inside your own Temporal activity (a
retry re-runs the whole agent), a ``TemporalAgent`` tool in workflow code. There
:func:`default_call_key` raises :class:`UnstableCallKey` instead of guessing: a guessed
key that changes on recovery commits the same change twice, silently.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart

__all__ = ("CallKey", "UnstableCallKey", "default_call_key")

CallKey = Callable[[RunContext[Any]], str | None]
"""How a tool call is named in the commit journal: the same key on a replay means "this
call again". None means the call is not journaled."""

_FIX = (
    "Pass VshToolset(call_key=...) a function of the RunContext that returns the same "
    "string every time the engine re-executes this call (and a different one for every "
    "other call), or journal=False if this workspace is never replayed."
)


class UnstableCallKey(RuntimeError):
    """The default call key cannot name this tool call stably under its durable engine.

    Raised by :func:`default_call_key` before anything runs: a key that changed when the
    engine re-executed the run would let a recovered run commit the same change twice.
    The message says why and what to pass as ``call_key=``.
    """


def default_call_key(ctx: RunContext[Any]) -> str | None:
    """A key that stays the same when a durable engine re-executes the call.

    Outside a durable engine, and wherever the engine keeps it stable (see the module
    docs): the run id, the run step and the tool call id. Under ``DBOSAgent`` (whose run
    id changes on every execution): the workflow id, the recorded model response that
    made the call, the run step and the tool call id. Raises :class:`UnstableCallKey`
    where no stable key exists. None (not journaled) when the call has no id.

    The step tells apart two calls of one run whose model reused an id (some models say
    ``call_0`` every turn): without it the second, identical call would get the first's
    result and do nothing. Encoded as JSON, never joined with a separator: the call id
    comes from the model, and ``"a" + ":b:c"`` must not name the call ``"a:b" + ":c"``
    (another run's recorded result would be returned).
    """
    if ctx.run_id is None or ctx.tool_call_id is None:
        return None
    temporal = _temporal_key(ctx)
    if temporal is not None:
        return temporal
    dbos = _dbos_key(ctx)
    if dbos is not None:
        return dbos
    return _run_key(ctx)


def _run_key(ctx: RunContext[Any]) -> str:
    return json.dumps([ctx.run_id, ctx.run_step, ctx.tool_call_id])


# -- Temporal ------------------------------------------------------------------------------


def _temporal_key(ctx: RunContext[Any]) -> str | None:
    """The key inside a Temporal activity or workflow; None outside Temporal."""
    if "temporalio.activity" not in sys.modules:  # nothing imported Temporal: not in it
        return None
    from temporalio import activity, workflow

    if activity.in_activity():
        from pydantic_ai.durable_exec.temporal import TemporalRunContext

        if isinstance(ctx, TemporalRunContext):
            # Pydantic AI's tool activity: its input (this run context) is in the workflow
            # history, the same on every attempt, on any worker.
            return _run_key(ctx)
        info = activity.info()
        raise UnstableCallKey(
            f"tool call {ctx.tool_call_id!r} runs inside Temporal activity "
            f"{info.activity_type!r} of workflow {info.workflow_id!r}, in an agent run that is "
            "not Temporal-durable: a retry of that activity runs the whole agent again, whose "
            "model names its calls anew, so the same change could commit twice. Run the agent "
            "in the workflow with TemporalDurability (its tool calls become activities of "
            f"their own). {_FIX}"
        )
    if workflow.in_workflow():
        run = workflow.info().run_id
        if ctx.run_id is not None and ctx.run_id.startswith(f"{run}:"):
            return _run_key(ctx)  # TemporalDurability's replay-safe run id
        raise UnstableCallKey(
            f"tool call {ctx.tool_call_id!r} runs in the code of Temporal workflow "
            f"{workflow.info().workflow_id!r} (its activity is turned off), where every replay "
            f"runs it again, and its run id {ctx.run_id!r} is not derived from the workflow run "
            "(TemporalAgent, or a run_id you passed, draws it anew on each replay). Keep the "
            "VSH tool an activity (the default), or use TemporalDurability without run_id=. "
            f"{_FIX}"
        )
    return None


# -- DBOS -----------------------------------------------------------------------------------


def _dbos_key(ctx: RunContext[Any]) -> str | None:
    """The key inside a DBOS workflow; None outside DBOS."""
    if "dbos" not in sys.modules:
        return None
    from dbos import DBOS

    workflow_id = DBOS.workflow_id
    if workflow_id is None:
        return None
    if DBOS.step_id is not None:
        raise UnstableCallKey(
            f"tool call {ctx.tool_call_id!r} runs inside a step of DBOS workflow "
            f"{workflow_id!r}: a step that did not finish runs again on recovery, with the "
            "whole agent run in it, whose model names its calls anew, so the same change could "
            "commit twice. Run the agent in the workflow itself, with DBOSDurability. "
            f"{_FIX}"
        )
    assert ctx.run_id is not None
    if ctx.run_id.startswith(f"{workflow_id}:"):
        return _run_key(ctx)  # DBOSDurability's default run id: <workflow id>:<step>
    if not _durable_model(ctx):
        raise UnstableCallKey(
            f"tool call {ctx.tool_call_id!r} runs in DBOS workflow {workflow_id!r}, but the "
            "agent's model requests are not DBOS steps (the agent has no DBOSDurability "
            "capability): a recovered workflow asks the model again, which names its calls "
            "anew, so the same change could commit twice. Add DBOSDurability() to the agent's "
            f"capabilities. {_FIX}"
        )
    response = _response_of(ctx)
    if response is None:
        raise UnstableCallKey(
            f"tool call {ctx.tool_call_id!r} runs in DBOS workflow {workflow_id!r} with a run "
            f"id ({ctx.run_id!r}) that is drawn anew on every execution (DBOSAgent, or a "
            "run_id you passed), and no model response in the run names the call, so nothing "
            f"recorded identifies it. {_FIX}"
        )
    # The response is a recorded step's output: the same on every execution of the
    # workflow, and its timestamp (with the provider's response id) tells apart two runs
    # in one workflow whose models reuse call ids.
    stamp = response.timestamp.isoformat()
    identity = [stamp, response.provider_response_id, response.model_name]
    return json.dumps(["dbos", workflow_id, identity, ctx.run_step, ctx.tool_call_id])


def _durable_model(ctx: RunContext[Any]) -> bool:
    """Whether this run's model requests are DBOS steps (DBOSAgent's DBOSModel, or a
    DBOSDurability capability inside its workflow)."""
    from pydantic_ai.durable_exec.dbos import DBOSDurability, DBOSModel

    model: Any = ctx.model
    for _ in range(8):  # wrappers (instrumentation, fallbacks) around the DBOS model
        if isinstance(model, DBOSModel):
            return True
        model = getattr(model, "wrapped", None)
        if model is None:
            break
    capabilities = ctx.capabilities.values()
    return any(isinstance(c, DBOSDurability) and c.in_durable_context for c in capabilities)


def _response_of(ctx: RunContext[Any]) -> ModelResponse | None:
    """The latest model response in the run that made this tool call."""
    for message in reversed(ctx.messages):
        if isinstance(message, ModelResponse) and any(
            isinstance(part, ToolCallPart) and part.tool_call_id == ctx.tool_call_id
            for part in message.parts
        ):
            return message
    return None
