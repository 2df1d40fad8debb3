"""How a tool call is named across replays: the key the commit journal records it under."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic_ai import RunContext

__all__ = ("CallKey", "default_call_key")

CallKey = Callable[[RunContext[Any]], str | None]
"""How a tool call is named in the commit journal: the same key on a replay means "this
call again". None means the call is not journaled."""


def default_call_key(ctx: RunContext[Any]) -> str | None:
    """The run id, the run step and the tool call id: stable when a durable engine replays
    a run (under ``DBOSDurability`` the run id is ``<workflow id>:<step>``).

    The step tells apart two calls of one run whose model reused an id (some models say
    ``call_0`` every turn): without it the second, identical call would get the first's
    result and do nothing. Encoded as JSON, never joined with a separator: the call id
    comes from the model, and ``"a" + ":b:c"`` must not name the call ``"a:b" + ":c"``
    (another run's recorded result would be returned).
    """
    if ctx.run_id is None or ctx.tool_call_id is None:
        return None
    return json.dumps([ctx.run_id, ctx.run_step, ctx.tool_call_id])
