"""Record a live judge model's traffic once, then replay it offline, failing clearly on misses."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

__all__ = (
    "RecordingModel",
    "Recordings",
    "ReplayError",
    "ReplayModel",
    "recording_path",
    "request_digest",
)

# Fields that differ between runs of the same case and say nothing about its content.
_VOLATILE_KEYS = frozenset(
    {"timestamp", "run_id", "conversation_id", "provider_response_id", "tool_call_id"}
)
# VSH transaction/event digests (and fences derived from them) change per run: mask them.
_DIGEST = re.compile(r"\b[0-9a-f]{16,}\b")


class ReplayError(RuntimeError):
    """A replayed run asked for traffic that was not recorded (or the recording is unusable)."""


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in sorted(value.items()) if k not in _VOLATILE_KEYS}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, str):
        return _DIGEST.sub("#", value)
    return value


def request_digest(messages: list[ModelMessage], parameters: ModelRequestParameters) -> str:
    """A stable key for one model request: its messages and output schema, minus volatile ids."""
    payload = {
        "messages": _normalize(ModelMessagesTypeAdapter.dump_python(messages, mode="json")),
        "output_tools": [
            {"name": t.name, "schema": t.parameters_json_schema} for t in parameters.output_tools
        ],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class Exchange(BaseModel):
    """One recorded request (its digest and a preview for humans) and the model's answer."""

    preview: str
    response: list[dict[str, Any]]


class Recordings(BaseModel):
    """A recording file: the model's name and its exchanges keyed by request digest."""

    model: str
    exchanges: dict[str, Exchange] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Recordings:
        if not path.is_file():
            raise ReplayError(
                f"no recording at {path}; record it once with network access: "
                f"`vsh-ai eval <suite> --model NAME --record`"
            )
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as error:
            raise ReplayError(
                f"{path}: not a valid recording ({error.error_count()} problem(s)); re-record it"
            ) from None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1) + "\n", encoding="utf-8")


def recording_path(folder: Path, scenario: str, model: str) -> Path:
    """Where a suite's traffic for ``model`` is kept: ``<folder>/<scenario>/<model>.json``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", model)
    return folder / scenario / f"{safe}.json"


def _preview(messages: list[ModelMessage]) -> str:
    from ._models import prompt_text

    return prompt_text(messages)[:200]


class RecordingModel(WrapperModel):
    """Pass requests to a live model and keep every exchange; ``save()`` writes them."""

    def __init__(self, wrapped: Model, path: Path) -> None:
        super().__init__(wrapped)
        self.path = path
        self.recordings = Recordings(model=f"{self.wrapped.system}:{self.wrapped.model_name}")

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        key = request_digest(messages, model_request_parameters)
        self.recordings.exchanges[key] = Exchange(
            preview=_preview(messages),
            response=ModelMessagesTypeAdapter.dump_python([response], mode="json"),
        )
        return response

    def save(self) -> Path:
        self.recordings.save(self.path)
        return self.path


class ReplayModel(Model):
    """Serve recorded answers with no network; unknown requests fail and are remembered.

    The judge turns a failed request into a fail-closed review, so the runner must call
    ``raise_for_misses()`` afterwards: a replay that missed is a broken run, not a score.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.recordings = Recordings.load(path)
        self.misses: list[str] = []

    @property
    def model_name(self) -> str:
        return self.recordings.model

    @property
    def system(self) -> str:
        return "replay"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        key = request_digest(messages, model_request_parameters)
        exchange = self.recordings.exchanges.get(key)
        if exchange is None:
            self.misses.append(key)
            raise ReplayError(f"no recorded answer for request {key[:12]} in {self.path}")
        (response,) = ModelMessagesTypeAdapter.validate_python(exchange.response)
        assert isinstance(response, ModelResponse)
        return response

    def raise_for_misses(self) -> None:
        """Fail loudly if any request had no recording (changed prompt, case or judge)."""
        if self.misses:
            raise ReplayError(
                f"{len(self.misses)} request(s) had no recording in {self.path} (first: "
                f"{self.misses[0][:12]}); the suite, judge instructions or evidence changed "
                f"since it was recorded - re-record with --record"
            )
