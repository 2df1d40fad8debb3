"""Two-workspace harness for the non-interference tests (issue 16 item 2).

A *channel attack* is one program run by a real Pydantic AI agent (a ``FunctionModel``
that issues one ``vsh_run`` call, then ends) on two workspaces that differ only in the
bytes of one file S the program is not allowed to see. For work that is not committed,
everything observable must be byte-identical across the two runs:

- the worker model's view: every part of every request the model received (tool return
  contents as the model gets them, retry prompts, instructions, tool definitions);
- every attribute and event of every Logfire span exported during the run (start/end
  times, span/trace ids, ``code.*`` location attributes and durations ignored);
- every field of each ``VshResult`` the toolset returned (``verdict.latency_s``, a
  duration, ignored).

Two things are masked because they differ between two runs of the same program on
byte-identical workspaces and so say nothing about S: the absolute workspace path
(``<ws>``) and VSH transaction ids (``<tx>``, a fresh id per preview; also the hook
``event_id``, a digest naming it). Nothing else is normalised: a timing figure inside a
retry text, for instance, is a difference (``test_control_*`` shows the harness itself
reports none on identical workspaces).

``Guard`` says how S is protected: natively by VSH (``.env``), by a rule judge
(``protected_reads``), by a judge file from ``judges/``, or by an LLM judge's sharing
allowlist (the judge model is a recording ``FunctionModel`` with a fixed verdict).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import vsh
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from pydantic_core import to_jsonable_python

from vsh_ai import LLMCommitJudge, SharingPolicy, VshResult, VshToolset, load_judge
from vsh_ai.rules import ProtectedReads, RuleSet

__all__ = (
    "COMMITTED_STATES",
    "GUARDS",
    "SECRET_PAIRS",
    "Guard",
    "Observation",
    "Recorder",
    "assert_noninterference",
    "observe",
    "observe_pair",
)

CALL_ID = "attack-1"
INTENT = "Tidy the public notes."
COMMITTED_STATES = frozenset({"committed", "read"})

#: Two values of S: different first bytes, different lengths, nothing a secret
#: detector flags (so no judge's decision or feedback depends on which one it is).
SECRET_PAIRS: tuple[tuple[str, str], ...] = (
    ("alpha-key-1\n", "omega-key-22\n"),
    ("red 42\n", "blue 7\n"),
    ("key-0001\n", "key-0002\n"),  # same length, only the last digit differs
    ("x\n", "yy yy yy yy yy yy yy yy\n"),
    ("mango\n", "kiwi fruit\n"),
)

# Files every workspace holds besides S (identical on both sides).
BASE_FILES: Mapping[str, str] = {
    "public/notes.txt": "first line\nsecond line\n",
    "public/a.txt": "a\n",
    "public/b.txt": "b\n",
    "public/c.txt": "c\n",
    "public/sub/d.txt": "d\n",
}


# -- judges ---------------------------------------------------------------------------


@dataclass
class Recorder:
    """A judge model (FunctionModel script) with a fixed verdict that records its inputs.

    Usage is reported as a real provider would (input tokens grow with the packet), so
    an S-dependent packet shows up in ``verdict.usage`` too.
    """

    decision: str = "reject"
    reason: str = "Refused: this work may not be approved."
    calls: list[str] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen = "\n".join(repr(m) for m in messages)
        self.calls.append(seen)
        return ModelResponse(
            parts=[
                ToolCallPart(
                    info.output_tools[0].name,
                    {"decision": self.decision, "reason": self.reason, "cited": []},
                )
            ],
            usage=RequestUsage(input_tokens=len(seen) // 4, output_tokens=20),
            model_name="recorder",
        )

    def model(self) -> FunctionModel:
        return FunctionModel(self, model_name="recorder")


@dataclass(frozen=True)
class Guard:
    """How S is protected: where it lives and which judge (if any) refuses work reading it."""

    name: str
    secret_path: str
    judge: Callable[[Recorder], Any] | None
    #: Prefix of the file's bytes before S's value (e.g. ``API_KEY=`` for ``.env``).
    prefix: str = ""


def _rule_judge(recorder: Recorder, action: str = "reject") -> RuleSet:
    return RuleSet([ProtectedReads(globs=("private/**",), action=action)])  # type: ignore[arg-type]


def _review_rule_judge(recorder: Recorder) -> RuleSet:
    return _rule_judge(recorder, "review")


def _judge_file(recorder: Recorder) -> Any:
    root = Path(__file__).resolve().parent.parent
    return load_judge(root / "judges" / "secrets-hygiene.toml", skip_llm=True)


def _llm_judge(recorder: Recorder) -> LLMCommitJudge:
    return LLMCommitJudge(recorder.model(), sharing=SharingPolicy(share=("public/**",)))


GUARDS: dict[str, Guard] = {
    # (a) VSH itself refuses every access to .env; no judge.
    "vsh-env": Guard("vsh-env", ".env", None, prefix="API_KEY="),
    # (a') VSH-protected .env, with a rule judge configured as well.
    "vsh-env+rules": Guard("vsh-env+rules", ".env", _rule_judge, prefix="API_KEY="),
    # (b) a rule judge rejects any transaction that read private/**.
    "rules": Guard("rules", "private/token.txt", _rule_judge),
    # (b') the same rule with action review: the work stays pending.
    "rules-review": Guard("rules-review", "private/token.txt", _review_rule_judge),
    # (b'') the bundled secrets-hygiene judge file protects **/settings.toml reads.
    "judge-file": Guard("judge-file", "deploy/settings.toml", _judge_file),
    # (c) an LLM judge whose sharing allowlist is public/** only.
    "llm": Guard("llm", "private/token.txt", _llm_judge),
}


# -- one run --------------------------------------------------------------------------


@dataclass
class Observation:
    """Everything observable of one agent run, masked (see module docs)."""

    worker: list[Any]
    spans: list[Any]
    results: list[Any]
    states: list[str]
    output: Any
    judge_inputs: list[str]
    raw_results: list[VshResult]

    @property
    def settled(self) -> bool:
        """True when every tool result is committed or released read-only work."""
        return bool(self.states) and all(s in COMMITTED_STATES for s in self.states)


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)


_DURATION_KEY = re.compile(r"(duration|latency|elapsed|_seconds$|_ms$|(^|_)time$)", re.I)


def _strip_durations(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_durations(v)
            for k, v in value.items()
            if not (isinstance(k, str) and (k == "latency_s" or _DURATION_KEY.search(k)))
        }
    if isinstance(value, list | tuple):
        return [_strip_durations(v) for v in value]
    return value


def _part_view(part: Any) -> dict[str, Any]:
    """One request part as the model receives it (no timestamp, no app-only metadata)."""
    view: dict[str, Any] = {"class": type(part).__name__}
    if dataclasses.is_dataclass(part):
        for f in dataclasses.fields(part):
            if f.name in ("timestamp", "metadata"):
                continue
            view[f.name] = _jsonable(getattr(part, f.name))
    else:  # pragma: no cover - every pydantic-ai part is a dataclass today
        view["repr"] = repr(part)
    for method in ("model_response_str", "model_response"):
        render = getattr(part, method, None)
        if callable(render):
            try:
                view[method] = _decoded(_jsonable(render()))
            except Exception as error:  # record, never hide
                view[method] = f"<{method} raised {type(error).__name__}>"
    return view


def _decoded(text: Any) -> Any:
    """A JSON string (a tool return as the model gets it) as data, so that durations in it
    can be dropped like everywhere else; any other value unchanged."""
    if isinstance(text, str) and text[:1] in "{[":
        try:
            return {"json": json.loads(text)}
        except ValueError:
            return text
    return text


def _worker_view(calls: Sequence[tuple[list[ModelMessage], AgentInfo]]) -> list[Any]:
    """What the worker model was given at every step: messages, instructions, tools."""
    steps: list[Any] = []
    for messages, info in calls:
        step: dict[str, Any] = {
            "instructions": info.instructions,
            "tools": [
                _jsonable(
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters_json_schema,
                    }
                )
                for t in info.function_tools
            ],
            "messages": [],
        }
        for message in messages:
            if isinstance(message, ModelRequest):
                step["messages"].append(
                    {
                        "request": [_part_view(p) for p in message.parts],
                        "instructions": message.instructions,
                    }
                )
            elif isinstance(message, ModelResponse):
                step["messages"].append({"response": [_part_view(p) for p in message.parts]})
        steps.append(step)
    return steps


def _span_view(span: dict[str, Any]) -> dict[str, Any]:
    attributes = {
        k: v
        for k, v in span.get("attributes", {}).items()
        if not k.startswith("code.") and not _DURATION_KEY.search(k)
    }
    events = [
        {
            "name": e.get("name"),
            "attributes": {
                k: v
                for k, v in e.get("attributes", {}).items()
                if not k.startswith("code.") and not _DURATION_KEY.search(k)
            },
        }
        for e in span.get("events", [])
    ]
    return {
        "name": span.get("name"),
        "scope": span.get("instrumentation_scope"),
        "root": span.get("parent") is None,
        "attributes": attributes,
        "events": events,
    }


def _mask(value: Any, replacements: Sequence[tuple[str, str | re.Pattern[str]]]) -> Any:
    if isinstance(value, str):
        for new, old in replacements:
            if isinstance(old, re.Pattern):
                value = old.sub(new, value)
            elif old:
                value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {_mask(k, replacements): _mask(v, replacements) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask(v, replacements) for v in value]
    return value


#: Span attributes holding per-preview ids: a VSH transaction id, and the hook event id
#: (a digest over the event, which names that transaction).
_ID_ATTRIBUTES = ("transaction", "event_id")


def _transactions(results: Sequence[VshResult], spans: Sequence[dict[str, Any]]) -> set[str]:
    ids = {r.transaction for r in results if r.transaction}
    for span in spans:
        for key in _ID_ATTRIBUTES:
            value = span.get("attributes", {}).get(key)
            if isinstance(value, str) and len(value) >= 16:
                ids.add(value)
    return ids


def make_workspace(root: Path, guard: Guard, secret: str, extra: Mapping[str, str] = {}) -> Path:
    """A workspace holding the base files, ``extra`` and S = ``guard.prefix + secret``."""
    root.mkdir(parents=True)
    files = {**BASE_FILES, **extra, guard.secret_path: guard.prefix + secret}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _worker_model(
    code: str, language: str, calls: list[tuple[list[ModelMessage], AgentInfo]]
) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append((list(messages), info))
        if len(calls) == 1:
            args = {"code": code, "intent": INTENT, "language": language}
            return ModelResponse(parts=[ToolCallPart("vsh_run", args, tool_call_id=CALL_ID)])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond, model_name="worker")


@dataclass(frozen=True)
class Deferred:
    """Deferred mode: how the app answers the run's ``DeferredToolRequests``.

    ``answer``: ``deny`` (``ToolDenied``), ``approve``, or None (no resume).
    ``before_resume``: called with the workspace before resuming (e.g. a host edit that
    makes the approved transaction stale, or a sleep past the approval TTL).
    """

    answer: str | None = "deny"
    before_resume: Callable[[Path], None] | None = None


async def observe(
    workspace: Path,
    guard: Guard,
    code: str,
    *,
    capfire: Any,
    language: str = "monty",
    options: Mapping[str, Any] | None = None,
    deferred: Deferred | None = None,
) -> Observation:
    """Run the attack once on ``workspace`` and collect everything observable."""
    recorder = Recorder()
    # Only vsh_run is registered: building the ten file helpers' schemas costs about three
    # times as much as the run itself, and the worker calls nothing else.
    toolset_options: dict[str, Any] = {
        "bash": language == "bash",
        "tools": ["vsh_run"],
        **(options or {}),
    }
    if guard.judge is not None:
        toolset_options.setdefault("judge", guard.judge(recorder))
    if deferred is not None:
        toolset_options["approval"] = "deferred"
    resolved = workspace.resolve()  # noqa: ASYNC240 - a path computation, before the run
    toolset = VshToolset(workspace, **toolset_options)
    calls: list[tuple[list[ModelMessage], AgentInfo]] = []
    agent: Agent[None, Any] = Agent(
        _worker_model(code, language, calls),
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests] if deferred is not None else str,
    )
    capfire.exporter.clear()
    run = await agent.run("Do the task.")
    outputs: list[Any] = [_output_view(run.output)]
    messages = run.all_messages()
    if deferred is not None and isinstance(run.output, DeferredToolRequests):
        if deferred.before_resume is not None:
            deferred.before_resume(workspace)
        if deferred.answer is not None:
            approvals: dict[str, Any] = {
                c.tool_call_id: (
                    ToolDenied("The user said no.") if deferred.answer == "deny" else True
                )
                for c in run.output.approvals
            }
            metadata = {c.tool_call_id: {"principal": "alice"} for c in run.output.approvals}
            run = await agent.run(
                message_history=messages,
                deferred_tool_results=DeferredToolResults(approvals=approvals, metadata=metadata),
            )
            outputs.append(_output_view(run.output))
            messages = run.all_messages()
    spans = capfire.exporter.exported_spans_as_dict(include_instrumentation_scope=True)
    results = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(getattr(p, "content", None), VshResult)
    ]
    replacements: list[tuple[str, str | re.Pattern[str]]] = [
        ("<ws>", str(resolved)),
        ("<ws>", str(workspace)),
    ]
    # An id, or any shortened form of it (a handle made of its first 8+ characters).
    replacements += [
        ("<tx>", re.compile(re.escape(tx[:8]) + r"[0-9A-Za-z_-]*"))
        for tx in sorted(_transactions(results, spans))
    ]
    return Observation(
        worker=_mask(_strip_durations(_worker_view(calls)), replacements),
        spans=_mask(_strip_durations([_span_view(s) for s in spans]), replacements),
        results=_mask(_strip_durations([_jsonable(r) for r in results]), replacements),
        states=[r.state for r in results],
        output=_mask(outputs, replacements),
        judge_inputs=recorder.calls,
        raw_results=results,
    )


def _output_view(output: Any) -> Any:
    """The run's output; of ``DeferredToolRequests`` only what the model itself produced
    (the calls and which need approval), never ``metadata`` (that is for the app)."""
    if isinstance(output, DeferredToolRequests):
        return {
            "calls": [_part_view(c) for c in output.calls],
            "approvals": [_part_view(c) for c in output.approvals],
        }
    return _jsonable(output)


async def observe_pair(
    tmp_path: Path,
    guard: Guard,
    code: str,
    *,
    capfire: Any,
    secrets: tuple[str, str] = SECRET_PAIRS[0],
    language: str = "monty",
    options: Mapping[str, Any] | None = None,
    deferred: Deferred | None = None,
    extra: Mapping[str, str] = {},
) -> tuple[Observation, Observation]:
    """The same attack on two workspaces differing only in S (same path length)."""
    observations = []
    for side, secret in zip("ab", secrets, strict=True):
        workspace = make_workspace(tmp_path / f"side-{side}" / "ws", guard, secret, extra)
        observations.append(
            await observe(
                workspace,
                guard,
                code,
                capfire=capfire,
                language=language,
                options=options,
                deferred=deferred,
            )
        )
    return observations[0], observations[1]


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{path or '<root>'}: {_short(a)} != {_short(b)}"
    if isinstance(a, dict):
        for key in list(dict.fromkeys([*a, *b])):
            if key not in a or key not in b:
                return f"{path}.{key}: present on one side only"
            found = _first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items"
        return None
    if isinstance(a, str) and a != b:
        i = next(
            (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        start = max(0, i - 80)
        return f"{path or '<root>'} at char {i}: {a[start : i + 160]!r} != {b[start : i + 160]!r}"
    if a != b:
        return f"{path or '<root>'}: {_short(a)} != {_short(b)}"
    return None


def _short(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def assert_noninterference(a: Observation, b: Observation, *, allow_settled: bool = False) -> None:
    """Fail, naming the first differing field, unless both runs look byte-identical.

    When both runs settled (committed / released reads) their real output is allowed to
    differ: only with ``allow_settled`` is that pair skipped; an attack is written so
    that at least one side is refused, so by default a settled pair is itself a failure.
    """
    if a.settled and b.settled:
        assert allow_settled, (
            f"both runs settled ({a.states} / {b.states}): the attack did not exercise refused work"
        )
        return
    for what in ("results", "worker", "spans", "output"):
        difference = _first_difference(getattr(a, what), getattr(b, what))
        if difference is not None:
            # Collect the runs' garbage now: CPython 3.11 can fail pytest's traceback
            # rendering ("AST constructor recursion depth mismatch") when a collection
            # runs finalizers in the middle of its ast.parse.
            gc.collect()
        assert difference is None, (
            f"{what} differ between the two workspaces (states {a.states} / {b.states}): "
            f"{difference}"
        )
    assert a.states == b.states


def assert_same_view(a: Observation, b: Observation) -> None:
    """Two runs (of different programs) show the worker, the spans and the results the
    same thing, whatever their outcome (the model's own calls, whose program text
    differs, are left out)."""
    for what in ("results", "worker", "spans", "output"):
        difference = _first_difference(
            _without_responses(getattr(a, what)), _without_responses(getattr(b, what))
        )
        assert difference is None, f"{what} differ ({a.states} / {b.states}): {difference}"
    assert a.states == b.states


def _without_responses(value: Any) -> Any:
    """``value`` without the model's own messages (``response`` entries)."""
    if isinstance(value, dict):
        return {k: _without_responses(v) for k, v in value.items() if k != "response"}
    if isinstance(value, list):
        return [_without_responses(v) for v in value]
    return value


def budget(ms: int = 250, os_calls: int = 2_000) -> vsh.ExecutionBudget:
    """A smaller budget so budget attacks stay fast (identical on both sides)."""
    return vsh.ExecutionBudget(max_duration_ms=ms, max_os_calls=os_calls)
