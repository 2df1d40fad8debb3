"""Non-interference attacks, second round: multi-call, deferred, journal, judge and helper
channels (issue 16 item 2).

Each attack runs the same *script* of worker-model responses (tool calls fixed in
advance, so the model cannot adapt to what it sees) on two workspaces that differ only in
the bytes of a file S the program may not see, and requires byte-identical views of
everything that is not committed: the worker model's requests at every step, the
Logfire spans, every ``VshResult``, the run outputs, and the text of any exception the
run raised. Masking is the harness's (``tests/channel_support.py``): workspace path and
transaction ids only.

Unlike the first round (one ``vsh_run`` per run), a script may issue several calls per
response, several responses, several ``agent.run`` on one toolset (state carried between
runs: pending work, journal records, bindings) and several deferred resumes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import vsh
from channel_support import (
    GUARDS,
    SECRET_PAIRS,
    Guard,
    Observation,
    Recorder,
    _first_difference,
    _jsonable,
    _mask,
    _output_view,
    _span_view,
    _strip_durations,
    _transactions,
    _worker_view,
    assert_noninterference,
    make_workspace,
)
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import (
    Evidence,
    Pipeline,
    Quorum,
    Verdict,
    VshCapability,
    VshResult,
    VshToolset,
    denial,
    load_judge,
)
from vsh_ai.rules import ProtectedReads, RuleSet

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
S = "/workspace/private/token.txt"
INTENT = "Tidy the public notes."

# -- scripted worker -------------------------------------------------------------------

Call = tuple[str, dict[str, Any], str]  # tool name, arguments, tool call id


def run(code: str, call_id: str, intent: str = INTENT) -> Call:
    return ("vsh_run", {"code": code, "intent": intent, "language": "monty"}, call_id)


def tool(name: str, call_id: str, **args: Any) -> Call:
    return (name, args, call_id)


Resume = Callable[[Path, DeferredToolRequests], DeferredToolResults | None]


@dataclass
class Script:
    """What the worker model answers at its n-th request (whatever it was shown), over
    every run of the attack; ``runs`` is the number of fresh ``agent.run`` calls."""

    responses: Sequence[Sequence[Call]]
    runs: int = 1
    resumes: Sequence[Resume] = ()
    before_run: Callable[[Path, int], None] | None = None
    #: Pass the first run's message history to later runs instead of fresh prompts.
    continue_history: bool = False
    #: When set, every request past the script repeats the last response (retry loops).
    repeat_last: bool = False
    calls: list[tuple[list[ModelMessage], AgentInfo]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.calls.append((list(messages), info))
            n = len(self.calls) - 1
            if n >= len(self.responses) and self.repeat_last:
                n = len(self.responses) - 1
            if n < len(self.responses) and self.responses[n]:
                return ModelResponse(
                    parts=[
                        ToolCallPart(name, args, tool_call_id=cid)
                        for name, args, cid in self.responses[n]
                    ]
                )
            return ModelResponse(parts=[TextPart("done")])

        return FunctionModel(respond, model_name="worker")


def approve_all(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
    return DeferredToolResults(
        approvals={c.tool_call_id: True for c in requests.approvals},
        metadata={c.tool_call_id: {"principal": "alice"} for c in requests.approvals},
    )


def deny_all(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
    return DeferredToolResults(
        approvals={c.tool_call_id: ToolDenied("The user said no.") for c in requests.approvals}
    )


async def observe_script(
    workspace: Path,
    script: Script,
    *,
    capfire: Any,
    options: Mapping[str, Any],
    capability: bool = False,
    deferred: bool = False,
) -> Observation:
    resolved = workspace.resolve()  # noqa: ASYNC240 - a path computation, before the run
    toolset_options = dict(options)
    if deferred:
        toolset_options["approval"] = "deferred"
    output_type: Any = [str, DeferredToolRequests] if deferred else str
    if capability:
        agent: Agent[None, Any] = Agent(
            script.model(),
            capabilities=[VshCapability(workspace, **toolset_options)],
            output_type=output_type,
        )
    else:
        toolset = VshToolset(workspace, **toolset_options)
        agent = Agent(script.model(), toolsets=[toolset], output_type=output_type)
    capfire.exporter.clear()
    outputs: list[Any] = []
    all_messages: list[ModelMessage] = []
    history: list[ModelMessage] | None = None
    resumes = list(script.resumes)
    for index in range(script.runs):
        if script.before_run is not None:
            script.before_run(workspace, index)
        try:
            if history is not None and script.continue_history:
                result = await agent.run("Go on.", message_history=history)
            else:
                result = await agent.run("Do the task.")
        except Exception as error:  # the exception text is part of the view
            outputs.append({"raised": type(error).__name__, "text": str(error)})
            break
        outputs.append(_output_view(result.output))
        messages = result.all_messages()
        while isinstance(result.output, DeferredToolRequests) and resumes:
            answers = resumes.pop(0)(workspace, result.output)
            if answers is None:
                break
            try:
                result = await agent.run(message_history=messages, deferred_tool_results=answers)
            except Exception as error:
                outputs.append({"raised": type(error).__name__, "text": str(error)})
                break
            outputs.append(_output_view(result.output))
            messages = result.all_messages()
        all_messages.extend(messages)
        history = messages
    spans = capfire.exporter.exported_spans_as_dict(include_instrumentation_scope=True)
    results = [
        p.content
        for m in all_messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(getattr(p, "content", None), VshResult)
    ]
    replacements: list[tuple[str, str | re.Pattern[str]]] = [
        ("<ws>", str(resolved)),
        ("<ws>", str(workspace)),
    ]
    replacements += [
        ("<tx>", re.compile(re.escape(tx[:8]) + r"[0-9A-Za-z_-]*"))
        for tx in sorted(_transactions(results, spans))
    ]
    return Observation(
        worker=_mask(_strip_durations(_worker_view(script.calls)), replacements),
        spans=_mask(_strip_durations([_span_view(s) for s in spans]), replacements),
        results=_mask(_strip_durations([_jsonable(r) for r in results]), replacements),
        states=[r.state for r in results],
        output=_mask(_strip_durations(outputs), replacements),
        judge_inputs=[],
        raw_results=results,
    )


async def attack(
    tmp_path: Path,
    make_script: Callable[[], Script],
    *,
    capfire: Any,
    guard: Guard = GUARDS["rules"],
    judge: Callable[[], Any] | None = None,
    options: Mapping[str, Any] | None = None,
    secrets: tuple[str, str] = SECRET_PAIRS[0],
    extra: Mapping[str, str] = {},
    deferred: bool = False,
    capability: bool = False,
    allow_settled: bool = False,
) -> tuple[Observation, Observation]:
    """Run the script on both sides, assert non-interference, return both observations."""
    observations = []
    for side, secret in zip("ab", secrets, strict=True):
        workspace = make_workspace(tmp_path / f"side-{side}" / "ws", guard, secret, extra)
        toolset_options: dict[str, Any] = {"tools": ["vsh_run"], **(options or {})}
        if "judge" not in toolset_options and "hook_handler" not in toolset_options:
            if judge is not None:
                toolset_options["judge"] = judge()
            elif guard.judge is not None:
                toolset_options["judge"] = guard.judge(Recorder())
        observations.append(
            await observe_script(
                workspace,
                make_script(),
                capfire=capfire,
                options=toolset_options,
                capability=capability,
                deferred=deferred,
            )
        )
    a, b = observations
    if a.settled and b.settled:
        # Refused work that leaves no VshResult (a retry, a denial) still shows in the
        # worker's view: compare everything anyway.
        assert_same_everything(a, b)
    else:
        assert_noninterference(a, b, allow_settled=allow_settled)
    assert a.output == b.output, f"outputs differ: {a.output} != {b.output}"
    return a, b


def assert_same_everything(a: Observation, b: Observation) -> None:
    for what in ("results", "worker", "spans", "output"):
        difference = _first_difference(getattr(a, what), getattr(b, what))
        assert difference is None, (
            f"{what} differ between the two workspaces (states {a.states} / {b.states}): "
            f"{difference}"
        )
    assert a.states == b.states


# -- programs --------------------------------------------------------------------------

READ_S_WRITE = f"s = vsh_read('{S}')\nvsh_write('/workspace/public/a.txt', 'a\\n' + s)\n'ok'"
READ_S_FIXED_WRITE = f"s = vsh_read('{S}')\nvsh_write('/workspace/public/a.txt', 'A\\n')\n'ok'"
PUBLIC_READ = "print(vsh_read('/workspace/public/notes.txt'))\nvsh_read('/workspace/public/b.txt')"
FIXED_WRITE = "vsh_write('/workspace/public/c.txt', 'C\\n')\n'ok'"
RAISE_S = f"s = vsh_read('{S}')\nraise ValueError(s)"


# -- judges ----------------------------------------------------------------------------


@dataclass
class FixedJudge:
    """A judge with a fixed verdict, whatever the evidence."""

    decision: str = "reject"
    reason: str = "Refused: this work may not be approved."
    id: str = "fixed-judge"

    async def review(self, evidence: Evidence, /) -> Verdict:
        return Verdict(decision=self.decision, reason=self.reason, judge=self.id)  # type: ignore[arg-type]


@dataclass
class CrashingJudge:
    """A judge that parses S's bytes and so raises an exception whose text quotes S."""

    id: str = "crashing-judge"

    async def review(self, evidence: Evidence, /) -> Verdict:
        for content in evidence.contents:
            if content.path.endswith("token.txt"):
                int(content.data.decode())  # ValueError: invalid literal ... 'alpha-key-1\n'
        raise RuntimeError("nothing captured")


@dataclass
class QuotingCitesJudge:
    """Rejects with a fixed reason but cites the paths it saw read (names, not bytes)."""

    id: str = "citing-judge"

    async def review(self, evidence: Evidence, /) -> Verdict:
        return Verdict(
            decision="reject",
            reason="Refused: reads outside public/.",
            judge=self.id,
            cited=tuple(p for p in evidence.read_paths if not p.startswith("public/")),
        )


def private_reads_hook(event: vsh.RequestEvent) -> vsh.HookDecision:
    """A raw VSH hook: reject work that read private/**, else send it to review."""
    for effect in event.effects:
        if any("private/" in p for p in effect.paths):
            return vsh.HookDecision.reject("Refused: reads private data.")
    return vsh.HookDecision.review("A person decides.")


# -- controls --------------------------------------------------------------------------


async def test_control_multi_run_same_secret(tmp_path: Path, capfire: Any) -> None:
    """The harness itself: two runs on one toolset, three responses, identical S."""
    script = lambda: Script(  # noqa: E731
        [[run(READ_S_WRITE, "c1")], [run(PUBLIC_READ, "c2")]], runs=2
    )
    await attack(tmp_path, script, capfire=capfire, secrets=("same\n", "same\n"))


async def test_control_deferred_same_secret(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(READ_S_WRITE, "c1")]], resumes=[deny_all])  # noqa: E731
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        guard=GUARDS["rules-review"],
        deferred=True,
        secrets=("same\n", "same\n"),
    )


# -- multi-call channels ---------------------------------------------------------------


async def test_same_program_twice_in_sequence(tmp_path: Path, capfire: Any) -> None:
    """Call 2 repeats refused call 1 on the same base: a duplicate transaction."""
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(READ_S_WRITE, "c2")]])  # noqa: E731
    a, _ = await attack(tmp_path, script, capfire=capfire)
    assert a.states[0] == "rejected"


async def test_same_program_twice_in_parallel(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(READ_S_WRITE, "c1"), run(READ_S_WRITE, "c2")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire)


async def test_same_pending_program_twice(tmp_path: Path, capfire: Any) -> None:
    """Pending (review) work is kept; the same program again meets it."""
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(READ_S_WRITE, "c2")]])  # noqa: E731
    a, _ = await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"])
    assert a.states[0] == "pending"


async def test_refused_then_released_read(tmp_path: Path, capfire: Any) -> None:
    """A released read after refused work carries nothing of the refused work."""
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(PUBLIC_READ, "c2")]])  # noqa: E731
    a, _ = await attack(tmp_path, script, capfire=capfire)
    assert a.states == ["rejected", "read"]


async def test_pending_then_read_of_the_written_file(tmp_path: Path, capfire: Any) -> None:
    """Pending work wrote S into public/a.txt; a later read of public/a.txt is released."""
    read_a = "print(vsh_read('/workspace/public/a.txt'))"
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(read_a, "c2")]])  # noqa: E731
    a, _ = await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"])
    assert a.states == ["pending", "read"]


async def test_pending_then_write_of_the_same_file(tmp_path: Path, capfire: Any) -> None:
    """Pending S-derived work on public/a.txt, then a fixed write of public/a.txt."""
    fixed = "vsh_write('/workspace/public/a.txt', 'fixed\\n')\n'ok'"
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(fixed, "c2")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"])


async def test_retry_then_released_read(tmp_path: Path, capfire: Any) -> None:
    """A guest error quoting S (a retry), then a released public read."""
    script = lambda: Script([[run(RAISE_S, "c1")], [run(PUBLIC_READ, "c2")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire)


async def test_two_runs_same_toolset_same_program(tmp_path: Path, capfire: Any) -> None:
    """Two fresh runs on one toolset submit the same refused program (new run ids)."""
    script = lambda: Script(  # noqa: E731
        [[run(READ_S_WRITE, "c1")], [], [run(READ_S_WRITE, "c1")]], runs=2
    )
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"])


# -- guest errors: frames ----------------------------------------------------------------


async def test_traceback_depth_follows_secret(tmp_path: Path, capfire: Any) -> None:
    """The number of traceback frames is len(S) % 4 + 1 (messages withheld, frames kept)."""
    code = (
        f"s = vsh_read('{S}')\n"
        "def f(n):\n"
        "    if n == 0:\n"
        "        raise ValueError('deep')\n"
        "    f(n - 1)\n"
        "f(len(s) % 4)\n"
    )
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, secrets=("abc\n", "abcdef\n"))


async def test_traceback_line_follows_secret(tmp_path: Path, capfire: Any) -> None:
    """Which line raises depends on S's first byte."""
    code = (
        f"s = vsh_read('{S}')\n"
        "if s.startswith('a'):\n"
        "    raise ValueError('stop')\n"
        "else:\n"
        "    raise ValueError('stop')\n"
    )
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire)


async def test_hook_handler_guest_error_quotes_secret(tmp_path: Path, capfire: Any) -> None:
    """A raw hook_handler (no Judge) protects private/**: guest messages must be withheld."""
    script = lambda: Script([[run(RAISE_S, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, options={"hook_handler": private_reads_hook})


async def test_hook_handler_rejects_read_and_write(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(READ_S_WRITE, "c2")]])  # noqa: E731
    a, _ = await attack(
        tmp_path, script, capfire=capfire, options={"hook_handler": private_reads_hook}
    )
    assert a.states[0] == "rejected"


async def test_max_retries_exhausted_quotes_secret(tmp_path: Path, capfire: Any) -> None:
    """The model keeps sending a program whose error quotes S until the run gives up."""
    script = lambda: Script([[run(RAISE_S, "c1")]], repeat_last=True)  # noqa: E731
    a, _ = await attack(tmp_path, script, capfire=capfire, options={"max_retries": 1})
    assert a.output
    assert a.output[0].get("raised") == "UnexpectedModelBehavior"


# -- refused output fields ---------------------------------------------------------------


async def test_output_withheld_flag_follows_secret(tmp_path: Path, capfire: Any) -> None:
    """Refused work prints (and returns) something only when S starts with 'a'."""
    code = (
        f"s = vsh_read('{S}')\n"
        "vsh_write('/workspace/public/a.txt', 'A\\n')\n"
        "if s.startswith('a'):\n"
        "    print('x')\n"
        "'r' if s.startswith('a') else None\n"
    )
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire)


async def test_public_modify_sized_by_secret(tmp_path: Path, capfire: Any) -> None:
    """A public file gets len(S) lines of fixed text: summary/diff counts follow S."""
    code = (
        f"s = vsh_read('{S}')\n"
        "head = 'first line\\nsecond line\\n'\n"
        "vsh_write('/workspace/public/notes.txt', head + 'z\\n' * len(s))\n"
        "'ok'"
    )
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"])


# -- deferred mode -----------------------------------------------------------------------


async def test_deferred_denial_helper_with_note(tmp_path: Path, capfire: Any) -> None:
    def deny(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
        return DeferredToolResults(
            approvals={c.tool_call_id: denial("alice", "not today") for c in requests.approvals}
        )

    script = lambda: Script([[run(READ_S_WRITE, "c1")]], resumes=[deny])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"], deferred=True)


async def test_deferred_secret_changed_then_approved(tmp_path: Path, capfire: Any) -> None:
    """The host rewrites S (to other bytes on each side) before the approval: stale."""

    def rewrite_and_approve(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
        token = ws / "private" / "token.txt"
        token.write_text(token.read_text() + "rotated\n")
        return approve_all(ws, requests)

    script = lambda: Script([[run(READ_S_WRITE, "c1")]], resumes=[rewrite_and_approve])  # noqa: E731
    a, _ = await attack(
        tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"], deferred=True
    )
    assert a.states == ["stale"]


async def test_deferred_deny_then_approve_again(tmp_path: Path, capfire: Any) -> None:
    """A denial is final; a later resume approving the same call commits nothing."""

    def deny_then_replay(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
        return deny_all(ws, requests)

    script = lambda: Script(  # noqa: E731
        [[run(READ_S_WRITE, "c1")], [run(READ_S_WRITE, "c1")]],
        resumes=[deny_then_replay, approve_all],
    )
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"], deferred=True)


async def test_deferred_deny_secret_call_approve_other(tmp_path: Path, capfire: Any) -> None:
    """Two pending calls in one response; the S-reading one denied, the other approved."""

    def split(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
        return DeferredToolResults(
            approvals={
                c.tool_call_id: (ToolDenied("no") if c.tool_call_id == "c1" else True)
                for c in requests.approvals
            },
            metadata={c.tool_call_id: {"principal": "alice"} for c in requests.approvals},
        )

    other = "vsh_write('/workspace/public/a.txt', 'other\\n')\n'ok'"
    script = lambda: Script(  # noqa: E731
        [[run(READ_S_WRITE, "c1"), run(other, "c2")]], resumes=[split]
    )
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"], deferred=True)


async def test_deferred_unresumed_then_new_run_same_program(tmp_path: Path, capfire: Any) -> None:
    """Run 1 leaves the S-reading program pending (never resumed); run 2 submits it again."""
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(READ_S_WRITE, "c1")]], runs=2)  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"], deferred=True)


async def test_deferred_expired_after_secret_rewrite(tmp_path: Path, capfire: Any) -> None:
    import time

    def late(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
        time.sleep(0.3)
        return approve_all(ws, requests)

    script = lambda: Script([[run(READ_S_WRITE, "c1")]], resumes=[late])  # noqa: E731
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        guard=GUARDS["rules-review"],
        deferred=True,
        options={"approval_ttl": 0.1},
    )


# -- journal -----------------------------------------------------------------------------


def fixed_key(ctx: Any) -> str:
    return "the-one-key"


async def test_journal_replay_same_key(tmp_path: Path, capfire: Any) -> None:
    """Run 2 replays run 1's call key with the same arguments: the recorded result."""
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [], [run(READ_S_WRITE, "c1")]], runs=2)  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, options={"call_key": fixed_key})


async def test_journal_same_key_other_program(tmp_path: Path, capfire: Any) -> None:
    """Run 2 reuses run 1's call key with a different (public, read-only) program."""
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [], [run(PUBLIC_READ, "c1")]], runs=2)  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, options={"call_key": fixed_key})


async def test_journal_replay_of_a_retry(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(RAISE_S, "c1")], [], [run(RAISE_S, "c1")]], runs=2)  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, options={"call_key": fixed_key})


# -- judges ------------------------------------------------------------------------------


async def test_fixed_custom_judge(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(RAISE_S, "c2")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, judge=FixedJudge)


async def test_fixed_judge_citing_read_paths(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(READ_S_WRITE, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, judge=QuotingCitesJudge)


async def test_crashing_judge_quotes_secret(tmp_path: Path, capfire: Any) -> None:
    """The judge's own exception text quotes S (int('alpha-key-1')): fail-closed review."""
    script = lambda: Script([[run(READ_S_FIXED_WRITE, "c1")]])  # noqa: E731
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        judge=CrashingJudge,
        options={"review_content_bytes": 65536},
    )


async def test_pipeline_and_quorum(tmp_path: Path, capfire: Any) -> None:
    rules = lambda: RuleSet([ProtectedReads(globs=("private/**",), action="review")])  # noqa: E731
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(READ_S_FIXED_WRITE, "c2")]])  # noqa: E731
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        judge=lambda: Pipeline(rules(), FixedJudge("approve", "ok")),
    )
    await attack(
        tmp_path / "q",
        script,
        capfire=capfire,
        judge=lambda: Quorum(rules(), FixedJudge("approve", "ok"), required=2),
    )


async def test_judge_file_secret_looking_s(tmp_path: Path, capfire: Any) -> None:
    """secrets-hygiene protects **/settings.toml; on one side S looks like a credential."""
    guard = Guard("judge-file-deep", "a/b/settings.toml", None)
    code = (
        "s = vsh_read('/workspace/a/b/settings.toml')\n"
        "vsh_write('/workspace/public/a.txt', 'A\\n')\n'ok'"
    )
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        guard=guard,
        judge=lambda: load_judge(ROOT / "judges" / "secrets-hygiene.toml", skip_llm=True),
        secrets=('name = "demo"\n', 'api_key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"\n'),
    )


# -- policies, scopes, capability, helpers -------------------------------------------------


async def test_strict_policy_pending_scope(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(RAISE_S, "c2")]])  # noqa: E731
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        options={"policy": "strict", "judge_scope": "policy_pending"},
    )


async def test_paranoid_scope_all_read_only(tmp_path: Path, capfire: Any) -> None:
    code = f"s = vsh_read('{S}')\nprint(s)\ns"
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(
        tmp_path, script, capfire=capfire, options={"policy": "paranoid", "judge_scope": "all"}
    )


async def test_capability(tmp_path: Path, capfire: Any) -> None:
    script = lambda: Script([[run(READ_S_WRITE, "c1")], [run(RAISE_S, "c2")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, capability=True)


async def test_helper_search_hits_only_in_secret(tmp_path: Path, capfire: Any) -> None:
    """vsh_search for S's text over the workspace, reads judged: a hit on one side only."""
    script = lambda: Script(  # noqa: E731
        [[tool("vsh_search", "c1", query="alpha", path="/workspace")]]
    )
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        options={"judge_scope": "all", "tools": ["vsh_search"]},
    )


async def test_helper_read_copy_move_of_secret(tmp_path: Path, capfire: Any) -> None:
    """The file helpers pointed at S itself (reads judged)."""
    script = lambda: Script(  # noqa: E731
        [
            [tool("vsh_read", "c1", path=S)],
            [tool("vsh_copy", "c2", source=S, destination="/workspace/public/copy.txt")],
            [tool("vsh_move", "c3", source=S, destination="/workspace/public/moved.txt")],
            [tool("vsh_glob", "c4", pattern="**/*.txt")],
        ]
    )
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        options={
            "judge_scope": "all",
            "tools": ["vsh_read", "vsh_copy", "vsh_move", "vsh_glob"],
        },
    )


# -- "syntax errors are shown in full" -------------------------------------------------------


@pytest.mark.parametrize(
    "raise_line",
    [
        "raise SyntaxError(s)",
        "raise ValueError('SyntaxError: ' + s)",
        "raise ValueError('invalid syntax\\n' + s)",
    ],
)
async def test_guest_raised_syntax_error_quotes_secret(
    tmp_path: Path, capfire: Any, raise_line: str
) -> None:
    """A program that raises SyntaxError itself at run time, with S as the message."""
    code = f"s = vsh_read('{S}')\n{raise_line}\n"
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire)


async def test_no_reviewer_search_over_env(tmp_path: Path, capfire: Any) -> None:
    """No judge: VSH alone protects .env; a workspace-wide search for S's text."""
    code = (
        "hits = vsh_search('alpha', '/workspace')\n"
        "vsh_write('/workspace/public/a.txt', str(hits))\n"
        "hits"
    )
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS["vsh-env"])


# -- indirect reads of S feeding a public write (pending: the diff may be shown) -----------

INDIRECT = {
    "search-count": "v = str(len(vsh_search('a', '/workspace/private')))",
    "search-repr": "v = str(vsh_search('key', '/workspace/private'))",
    "list-repr": "v = str(vsh_list('/workspace/private'))",
    "glob-repr": "v = str(vsh_glob('*', '/workspace/private'))",
    "copy-then-read": (
        "vsh_copy('/workspace/private/token.txt', '/workspace/public/t.txt')\n"
        "v = vsh_read('/workspace/public/t.txt')\n"
        "vsh_remove('/workspace/public/t.txt')"
    ),
    "move-read-move-back": (
        "vsh_move('/workspace/private/token.txt', '/workspace/public/t.txt')\n"
        "v = vsh_read('/workspace/public/t.txt')\n"
        "vsh_move('/workspace/public/t.txt', '/workspace/private/token.txt')"
    ),
    "patch-probe": (
        "try:\n"
        "    vsh_patch('/workspace/private/token.txt', 'alpha', 'alpha')\n"
        "    v = 'yes'\n"
        "except Exception:\n"
        "    v = 'no'"
    ),
    "pathlib-size": "v = str(len(Path('/workspace/private/token.txt').read_bytes()))",
}


@pytest.mark.parametrize("how", sorted(INDIRECT))
@pytest.mark.parametrize("guard", ["rules-review", "rules"])
async def test_indirect_read_into_public_write(
    tmp_path: Path, capfire: Any, how: str, guard: str
) -> None:
    code = (
        "from pathlib import Path\n"
        f"{INDIRECT[how]}\n"
        "vsh_write('/workspace/public/a.txt', 'a\\n' + v + '\\n')\n"
        "vsh_write('/workspace/public/new.txt', v)\n"
        "'ok'"
    )
    script = lambda: Script([[run(code, "c1")]])  # noqa: E731
    await attack(tmp_path, script, capfire=capfire, guard=GUARDS[guard])


# -- stale: which read dependencies conflict follows S ----------------------------------------


async def test_deferred_stale_conflicts_follow_secret(tmp_path: Path, capfire: Any) -> None:
    """The program reads public/a.txt only when S starts with 'a'; the host then edits
    public/a.txt and public/b.txt before the approval: a stale commit either way, with one
    or two conflicting dependencies."""
    code = (
        f"s = vsh_read('{S}')\n"
        "if s.startswith('a'):\n"
        "    vsh_read('/workspace/public/a.txt')\n"
        "vsh_read('/workspace/public/b.txt')\n"
        "vsh_write('/workspace/public/c.txt', 'C\\n')\n"
        "'ok'"
    )

    def edit_and_approve(ws: Path, requests: DeferredToolRequests) -> DeferredToolResults:
        (ws / "public" / "a.txt").write_text("host a\n")
        (ws / "public" / "b.txt").write_text("host b\n")
        return approve_all(ws, requests)

    script = lambda: Script([[run(code, "c1")]], resumes=[edit_and_approve])  # noqa: E731
    a, _ = await attack(
        tmp_path, script, capfire=capfire, guard=GUARDS["rules-review"], deferred=True
    )
    assert a.states == ["stale"]


# -- protected reads through a rename --------------------------------------------------------

LAUNDER = {
    "move-file": (
        "vsh_move('/workspace/private/token.txt', '/workspace/public/t.txt')\n"
        "v = vsh_read('/workspace/public/t.txt')\n"
        "vsh_move('/workspace/public/t.txt', '/workspace/private/token.txt')\n"
    ),
    "move-folder": (
        "vsh_move('/workspace/private', '/workspace/open')\n"
        "v = vsh_read('/workspace/open/token.txt')\n"
        "vsh_move('/workspace/open', '/workspace/private')\n"
    ),
    "move-away": (
        "vsh_move('/workspace/private/token.txt', '/workspace/public/t.txt')\n"
        "v = vsh_read('/workspace/public/t.txt')\n"
    ),
}


@pytest.mark.parametrize("how", sorted(LAUNDER))
async def test_rename_launders_a_protected_read(tmp_path: Path, capfire: Any, how: str) -> None:
    """ProtectedReads(private/**, reject) before a judge that approves what the rules let
    through: the program renames S out of private/, reads it there (and renames it back),
    and writes its bytes to public/a.txt; a second call reads public/a.txt. The rule must
    refuse call 1, so call 2 sees the original public/a.txt on both sides."""
    code = f"{LAUNDER[how]}vsh_write('/workspace/public/a.txt', v)\n'ok'"
    read_a = "vsh_read('/workspace/public/a.txt')"
    script = lambda: Script([[run(code, "c1")], [run(read_a, "c2")]])  # noqa: E731
    rules = lambda: RuleSet([ProtectedReads(globs=("private/**",), action="reject")])  # noqa: E731
    await attack(
        tmp_path,
        script,
        capfire=capfire,
        judge=lambda: Pipeline(rules(), FixedJudge("approve", "Looks fine.")),
    )


async def test_control_harness_sees_a_released_difference(tmp_path: Path, capfire: Any) -> None:
    """The comparison is live: an unprotected S read and released differs between sides."""
    script = lambda: Script([[run(RAISE_S, "c1")], [run(f"vsh_read('{S}')", "c2")]])  # noqa: E731
    with pytest.raises(AssertionError, match="results differ"):
        await attack(
            tmp_path, script, capfire=capfire, guard=Guard("none", "private/token.txt", None)
        )
