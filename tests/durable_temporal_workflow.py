"""The workflow of the Temporal crash matrix: one agent turn that appends a line.

Kept apart from the agents' module: Temporal's sandbox re-executes this module for every
workflow run, and the agents (with their native VSH runtimes) must come from the host
process, through ``imports_passed_through``. The input names the case (its agent).
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_support import tool_returns
    from durable_temporal_agent import AGENTS

    from vsh_ai import VshResult


@workflow.defn(name="vsh-ai-temporal-crash-case")
class CaseWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = tuple(AGENTS.values())

    @workflow.run
    async def run(self, case: str) -> dict[str, Any]:
        result = await AGENTS[case].run("append a line to log.txt")
        returns = [part.content for part in tool_returns(result.all_messages())]
        return {
            "output": str(result.output),
            "returns": [
                r.model_dump(mode="json") if isinstance(r, VshResult) else r for r in returns
            ],
            "run_id": result.run_id,
        }
