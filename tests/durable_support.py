"""Pieces shared by the durable-agent tests (DBOS and Temporal workers, the DBOS module)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from vsh_ai import Evidence, Verdict


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """Every tool return in a conversation, in order."""
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


class CountingJudge:
    """Approves every change and records each call in a file (counted across processes)."""

    id = "counting-judge"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def review(self, evidence: Evidence) -> Verdict:
        with self.path.open("a") as handle:
            handle.write(f"{os.getpid()}\n")
        return Verdict.approve("appending a log line is fine", judge="counting-judge")
