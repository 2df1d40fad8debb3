"""A judge's answer is data; every stage sees its own evidence; judge failures are reviews.

Issue 16 item 3: the hook and ``Pipeline``/``Quorum`` validate a verdict once and go on with a
plain ``Verdict`` rebuilt from its stored fields, so nothing of the judge's object (a
property, ``model_copy``, ``is_final``) runs after the check. Each stage gets evidence no other
stage can change, and the hook's own last check uses pristine evidence. Everything runs
through a real Pydantic AI agent on a real VSH workspace; host bytes are compared after
every case that must not commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
import vsh
from conftest import snapshot_tree
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Evidence, JudgeHook, Pipeline, Quorum, Verdict, as_hook
from vsh_ai._hooks import bounded_feedback
from vsh_ai._verdict import Usage
from vsh_ai.rules import Rule, RuleSet
from vsh_ai.rules._allow import AllowPaths
from vsh_ai.toolset import VshToolset
from vsh_ai.toolset._result import VshResult

FILES = {"config/app.toml": "port = 80\n", "docs/guide.md": "# Guide\n"}
EDIT = "vsh_write('/workspace/config/app.toml', 'port = 81\\n')"

Maker = Callable[[], Any]


# -- judges -------------------------------------------------------------------------------


class Fixed:
    def __init__(self, decision: str, id: str | None = None) -> None:
        self.id = id or f"fixed-{decision}"
        self.decision = decision

    async def review(self, evidence: Evidence, /) -> Verdict:
        return Verdict(decision=self.decision, reason=f"{self.id} says so", judge=self.id)  # type: ignore[arg-type]


class Flips(Verdict):
    """Reads ``review`` the first time ``decision`` is read (the check), ``approve`` after."""

    def __getattribute__(self, name: str) -> Any:
        if name == "decision":
            state = object.__getattribute__(self, "__dict__")
            reads = state.get("_reads", 0)
            state["_reads"] = reads + 1
            return "review" if reads == 0 else "approve"
        return super().__getattribute__(name)


class CopiesToApproval(Verdict):
    """A review whose ``model_copy`` (used by today's pipeline and hook) is an approval."""

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Verdict:
        return Verdict.approve("approved by model_copy", judge="copies")


class NeverFinal(Verdict):
    """A reject that claims not to be final, so a pipeline would ask the next judge."""

    @property
    def is_final(self) -> bool:
        return False


ACCESSES: list[str] = []


class Spy(Verdict):
    """Records every attribute read made on it once it has been returned."""

    def __getattribute__(self, name: str) -> Any:
        if object.__getattribute__(self, "__dict__").get("_armed"):
            ACCESSES.append(name)
        return super().__getattribute__(name)


class Returns:
    """A judge returning a prepared object (built fresh for every call)."""

    def __init__(self, build: Callable[[], object], id: str = "returns") -> None:
        self.id = id
        self.build = build

    async def review(self, evidence: Evidence, /) -> Verdict:
        return self.build()  # type: ignore[return-value]


def spy() -> Spy:
    made = Spy(decision="review", reason="look at it", judge="spy")
    object.__getattribute__(made, "__dict__")["_armed"] = True
    return made


class Erases:
    """A stage that empties the evidence it was given, then says ``decision``."""

    def __init__(self, decision: str) -> None:
        self.id = f"erases-{decision}"
        self.decision = decision

    async def review(self, evidence: Evidence, /) -> Verdict:
        object.__setattr__(evidence, "changes", ())
        object.__setattr__(evidence, "effects", ())
        object.__setattr__(evidence, "contents", ())
        return Verdict(decision=self.decision, reason="nothing changed", judge=self.id)  # type: ignore[arg-type]


class Raises:
    def __init__(self, error: BaseException) -> None:
        self.id = f"raises-{type(error).__name__}"
        self.error = error

    async def review(self, evidence: Evidence, /) -> Verdict:
        raise self.error


class RaisingRule(Rule):
    type: Literal["raising_for_tests"] = "raising_for_tests"
    error: str = "GeneratorExit"

    def check(self, evidence: Evidence, /) -> Verdict | None:
        raise {"GeneratorExit": GeneratorExit, "KeyboardInterrupt": KeyboardInterrupt}[self.error]()


def docs_only() -> RuleSet:
    """Proves only edits under docs/: an edit of config/app.toml is unproven (review)."""
    return RuleSet([AllowPaths(id="docs", paths=("docs/**",), kinds=("modify",))], id="docs")


# -- an agent that submits one program ----------------------------------------------------


def one_program(code: str, returns: list[ToolReturnPart]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            call = ToolCallPart("vsh_run", {"code": code, "intent": "tune the port"}, "c1")
            return ModelResponse(parts=[call])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returns.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


async def agent_run(toolset: VshToolset, code: str = EDIT) -> VshResult:
    returns: list[ToolReturnPart] = []
    await Agent(one_program(code, returns), toolsets=[toolset]).run("tune the port")
    assert len(returns) == 1, returns
    result = returns[0].content
    assert isinstance(result, VshResult), result
    return result


def recorded(toolset: VshToolset, result: VshResult) -> Verdict:
    """The hook's verdict on the one transaction of this run (results of work that was not
    committed do not name their transaction)."""
    hook = toolset.judge_hook
    assert hook is not None
    transactions = list(hook._verdicts)
    assert len(transactions) == 1, transactions
    assert result.transaction in (None, transactions[0])
    verdict = hook.verdict_for(transactions[0])
    assert verdict is not None
    assert type(verdict) is Verdict, type(verdict)
    return verdict


@pytest.fixture
def workspace(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace(FILES)


# -- 1. a verdict is validated once, then only its plain copy is used -------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("make_judge", "expected"),
    [
        pytest.param(lambda: Returns(lambda: Flips.review("r", judge="j")), "review", id="flips"),
        pytest.param(
            lambda: Pipeline(Returns(lambda: Flips.review("r", judge="j"))),
            "review",
            id="flips-in-pipeline",
        ),
        pytest.param(
            lambda: Quorum(Returns(lambda: Flips.review("r", judge="j")), required=1),
            "review",
            id="flips-in-quorum",
        ),
        pytest.param(
            lambda: Returns(lambda: CopiesToApproval.review("r", judge="j")),
            "review",
            id="model-copy",
        ),
        pytest.param(
            lambda: Pipeline(Returns(lambda: CopiesToApproval.review("r", judge="j"))),
            "review",
            id="model-copy-in-pipeline",
        ),
        # Today's quorum never copies a vote: this case guards the rebuilt-vote path.
        pytest.param(
            lambda: Quorum(Returns(lambda: CopiesToApproval.review("r", judge="j")), required=1),
            "review",
            id="model-copy-in-quorum",
        ),
        pytest.param(
            lambda: Pipeline(Returns(lambda: NeverFinal.reject("no", judge="j")), Fixed("approve")),
            "reject",
            id="never-final-in-pipeline",
        ),
        pytest.param(
            lambda: Quorum(
                Returns(lambda: NeverFinal.reject("no", judge="j")), Fixed("approve"), required=1
            ),
            "reject",
            id="never-final-in-quorum",
        ),
    ],
)
async def test_a_verdict_object_cannot_change_its_answer_after_the_check(
    workspace: Path, make_judge: Maker, expected: str
) -> None:
    before = snapshot_tree(workspace)
    toolset = VshToolset(workspace, judge=make_judge())
    result = await agent_run(toolset)
    assert result.state == ("rejected" if expected == "reject" else "pending")
    verdict = recorded(toolset, result)
    assert verdict.decision == expected
    assert snapshot_tree(workspace) == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda j: j, id="direct"),
        pytest.param(lambda j: Pipeline(j), id="pipeline"),
        pytest.param(lambda j: Quorum(j, Fixed("approve"), required=2), id="quorum"),
    ],
)
async def test_nothing_of_the_judges_object_runs_after_it_returned(
    evidence_for: Any, wrap: Callable[[Any], Any]
) -> None:
    evidence = await evidence_for(FILES, EDIT)
    ACCESSES.clear()
    hook = as_hook(wrap(Returns(spy)))
    verdict = await hook.decide(evidence)
    assert ACCESSES == []
    assert type(verdict) is Verdict
    assert (verdict.decision, verdict.failure) == ("review", None)


def _odd(**fields: Any) -> Callable[[], Verdict]:
    base: dict[str, Any] = {"decision": "approve", "reason": "fine", "judge": "odd"}
    return lambda: Verdict.model_construct(**{**base, **fields})


class Text(str):
    pass


class Number(int):
    pass


@pytest.mark.anyio
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(_odd(decision=Text("approve")), id="decision-str-subclass"),
        pytest.param(_odd(reason=Text("fine")), id="reason-str-subclass"),
        pytest.param(_odd(judge=None), id="judge-none"),
        pytest.param(_odd(failure="made-up"), id="unknown-failure"),
        pytest.param(_odd(cited=[Text("ref")]), id="cited-str-subclass"),
        pytest.param(_odd(cited="ref"), id="cited-not-a-sequence"),
        pytest.param(
            _odd(usage=Usage.model_construct(requests=True, input_tokens=1, output_tokens=1)),
            id="usage-bool",
        ),
        pytest.param(
            _odd(usage=Usage.model_construct(requests=Number(1), input_tokens=1, output_tokens=1)),
            id="usage-int-subclass",
        ),
        pytest.param(_odd(usage={"requests": 1}), id="usage-dict"),
        pytest.param(_odd(latency_s=float("nan")), id="latency-nan"),
        pytest.param(_odd(latency_s="1"), id="latency-text"),
        pytest.param(_odd(details=[("a", 1)]), id="details-not-a-dict"),
        pytest.param(_odd(model=b"gpt"), id="model-bytes"),
        pytest.param(lambda: Fixed("approve"), id="not-a-verdict"),
    ],
)
async def test_odd_fields_are_a_wrong_type_review(evidence_for: Any, build: Maker) -> None:
    evidence = await evidence_for(FILES, EDIT)
    for judge in (Returns(build), Pipeline(Returns(build)), Quorum(Returns(build), required=1)):
        verdict = await as_hook(judge).decide(evidence)
        assert type(verdict) is Verdict
        assert (verdict.decision, verdict.failure) == ("review", "wrong_type"), judge


class Opaque:
    def __repr__(self) -> str:
        raise AssertionError("repr of a judge's object ran")

    def model_dump(self, **_: Any) -> Any:
        raise AssertionError("model_dump of a judge's object ran")


@pytest.mark.anyio
async def test_the_plain_verdict_holds_plain_data_only(evidence_for: Any) -> None:
    evidence = await evidence_for(FILES, EDIT)
    details = {"note": Text("kept"), "n": Number(3), "set": {Opaque()}, "odd": Opaque(), 7: [1]}
    build = _odd(
        decision="review",
        cited=("a", "b"),
        usage=Usage(requests=1, input_tokens=2, output_tokens=3),
        latency_s=0.5,
        model="m",
        details=details,
    )
    verdict = await as_hook(Returns(build)).decide(evidence)
    assert type(verdict) is Verdict and verdict.decision == "review"  # noqa: PT018
    assert verdict.cited == ("a", "b") and type(verdict.cited) is tuple  # noqa: PT018
    assert type(verdict.usage) is Usage and verdict.usage.total_tokens == 5  # noqa: PT018
    assert verdict.details == {
        "note": "kept",
        "n": 3,
        "set": ["<Opaque>"],
        "odd": "<Opaque>",
        "7": [1],
    }
    assert type(verdict.details["note"]) is str and type(verdict.details["n"]) is int  # noqa: PT018


# -- 2. every stage gets evidence no other stage can change ---------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "make_judge",
    [
        pytest.param(lambda: Pipeline(Erases("abstain"), docs_only()), id="pipeline"),
        pytest.param(lambda: Quorum(Erases("approve"), docs_only(), required=2), id="quorum"),
        pytest.param(
            lambda: Pipeline(Pipeline(Erases("abstain")), docs_only()), id="nested-pipeline"
        ),
        # the hook's own last word: an abstain on a mutation must see the mutation
        pytest.param(lambda: Erases("abstain"), id="final-abstain"),
        pytest.param(lambda: Pipeline(Fixed("abstain"), Erases("abstain")), id="final-abstain-2"),
    ],
)
async def test_a_stage_cannot_change_what_later_stages_or_the_hook_see(
    workspace: Path, make_judge: Maker
) -> None:
    before = snapshot_tree(workspace)
    toolset = VshToolset(workspace, judge=make_judge())  # balanced: policy would auto-approve
    result = await agent_run(toolset)
    assert result.state == "pending"
    assert recorded(toolset, result).decision == "review"
    assert snapshot_tree(workspace) == before


@pytest.mark.anyio
async def test_stages_get_equal_but_separate_evidence(evidence_for: Any) -> None:
    evidence = await evidence_for(FILES, EDIT)
    seen: list[Evidence] = []

    class Keeps:
        id = "keeps"

        async def review(self, given: Evidence, /) -> Verdict:
            seen.append(given)
            return Verdict.abstain("no opinion", judge=self.id)

    await Pipeline(Keeps(), Keeps()).review(evidence)
    await Quorum(Keeps(), Keeps(), required=1).review(evidence)
    assert len(seen) == 4
    assert all(given == evidence and type(given) is Evidence for given in seen)
    assert len({id(given) for given in [*seen, evidence]}) == 5
    assert len({id(given.changes[0]) for given in [*seen, evidence]}) == 5


# -- 3. exceptions: a judge's failure is a review; interrupts propagate ----------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "make_judge",
    [
        pytest.param(lambda: Raises(GeneratorExit()), id="judge"),
        pytest.param(lambda: Pipeline(Fixed("abstain"), Raises(GeneratorExit())), id="pipeline"),
        pytest.param(
            lambda: Quorum(Fixed("approve"), Raises(GeneratorExit()), required=1), id="quorum"
        ),
        pytest.param(lambda: RuleSet([RaisingRule()]), id="rule"),
        pytest.param(lambda: Raises(RuntimeError("boom")), id="exception"),
        pytest.param(lambda: Raises(BaseExceptionGroup("x", [GeneratorExit()])), id="group"),
    ],
)
async def test_generator_exit_from_a_judge_is_a_review(workspace: Path, make_judge: Maker) -> None:
    before = snapshot_tree(workspace)
    toolset = VshToolset(workspace, judge=make_judge())
    result = await agent_run(toolset)
    assert result.state == "pending"
    verdict = recorded(toolset, result)
    assert (verdict.decision, verdict.failure) == ("review", "exception")
    assert snapshot_tree(workspace) == before


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True])
async def test_generator_exit_from_a_hook_handler_is_a_review(
    workspace: Path, is_async: bool
) -> None:
    before = snapshot_tree(workspace)

    def handler(event: vsh.RequestEvent) -> vsh.HookDecision:
        raise GeneratorExit

    async def async_handler(event: vsh.RequestEvent) -> vsh.HookDecision:
        raise GeneratorExit

    toolset = VshToolset(workspace, hook_handler=async_handler if is_async else handler)
    result = await agent_run(toolset)
    assert result.state == "pending"
    assert result.feedback is not None and "GeneratorExit" in result.feedback  # noqa: PT018
    assert snapshot_tree(workspace) == before


@pytest.mark.parametrize(
    "make_judge",
    [
        pytest.param(lambda: Raises(KeyboardInterrupt()), id="keyboard-interrupt"),
        pytest.param(lambda: Raises(SystemExit(3)), id="system-exit"),
        pytest.param(
            lambda: Pipeline(Fixed("abstain"), Raises(KeyboardInterrupt())), id="in-pipeline"
        ),
        pytest.param(
            lambda: Quorum(Fixed("approve"), Raises(KeyboardInterrupt()), required=1),
            id="in-quorum",
        ),
        pytest.param(lambda: RuleSet([RaisingRule(error="KeyboardInterrupt")]), id="rule"),
    ],
)
def test_interrupts_propagate_and_nothing_commits(
    make_workspace: Callable[..., Path], make_judge: Maker
) -> None:
    workspace = make_workspace(FILES)
    before = snapshot_tree(workspace)
    toolset = VshToolset(workspace, judge=make_judge())
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        asyncio.run(agent_run(toolset))
    assert snapshot_tree(workspace) == before
    for transaction in list(toolset.judge_hook._verdicts if toolset.judge_hook else ()):
        assert toolset.runtime.native.transaction_state(transaction) != "committed"


@pytest.mark.anyio
async def test_outer_cancellation_still_propagates(evidence_for: Any) -> None:
    evidence = await evidence_for(FILES, EDIT)
    reviewing = asyncio.Event()

    class Waits:
        id = "waits"

        async def review(self, given: Evidence, /) -> Verdict:
            reviewing.set()
            await asyncio.sleep(30)
            return Verdict.approve("late", judge=self.id)

    hook = as_hook(Waits())
    task = asyncio.ensure_future(hook.decide(evidence))
    await asyncio.wait_for(reviewing.wait(), 60)  # cancelled while the judge is deciding
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert hook.verdict_for(evidence.transaction) is None


# -- 4. bounded feedback ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["x" * 40_000, "é" * 20_000, "🙂" * 9_000, "a" + "🙂" * 5000])
def test_bounded_feedback_is_valid_utf8_under_the_limit(text: str) -> None:
    bounded = bounded_feedback(text)
    size = len(bounded.encode())
    assert size <= 8192, size
    assert "[feedback shortened:" in bounded
    assert text.startswith(bounded.split(" … [feedback shortened:")[0])
    assert bounded_feedback(bounded) == bounded
    assert bounded_feedback("short") == "short"


@pytest.mark.anyio
async def test_a_long_judge_reason_still_resolves(workspace: Path) -> None:
    before = snapshot_tree(workspace)

    class Verbose:
        id = "verbose"

        async def review(self, evidence: Evidence, /) -> Verdict:
            return Verdict.review("Please change this. " * 5000, judge=self.id)

    toolset = VshToolset(workspace, judge=Verbose())
    result = await agent_run(toolset)
    assert result.state == "pending"
    verdict = recorded(toolset, result)
    assert len(verdict.reason.encode()) <= 8192
    assert snapshot_tree(workspace) == before


@pytest.mark.anyio
@pytest.mark.parametrize("count", [1_000, pytest.param(10_000, marks=pytest.mark.slow)])
async def test_a_rule_set_approves_a_very_large_change_and_it_commits(
    make_workspace: Callable[..., Path], count: int
) -> None:
    workspace = make_workspace({"docs/.keep": ""})
    hook: JudgeHook = as_hook(
        RuleSet([AllowPaths(id="docs", paths=("docs/**",), kinds=("create",))], id="docs")
    )
    runtime = vsh.HookedRuntime.open(
        workspace,
        hook_handler=hook,
        hook_id=hook.hook_id,
        policy="strict",
        review_content_bytes=64 << 20,
    )
    code = f"for i in range({count}):\n    vsh_write(f'/workspace/docs/f{{i}}.txt', 'x')\n"
    budget = vsh.ExecutionBudget(
        max_duration_ms=600_000,
        max_os_calls=4 * count + 100,
        max_evidence_records=4 * count + 100,
        max_evidence_bytes=256 << 20,
    )
    receipt = await runtime.apreview(vsh.RunRequest(code, intent="docs", budget=budget))
    resolution = await runtime.acommit(receipt.transaction)
    assert resolution.receipt.state == "committed"
    assert resolution.hook.verdict == "approve"
    assert len(resolution.hook.reason.encode()) <= 8192
    # The rule set names the first paths and counts the rest; the hook had nothing to cut.
    assert f"and {count - 5} more ({count} changes in all)." in resolution.hook.reason
    assert "feedback shortened" not in resolution.hook.reason
    assert len(list((workspace / "docs").glob("f*.txt"))) == count
