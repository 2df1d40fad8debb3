"""The fail-closed hook adapter, pipelines and quorum, through a real ``vsh.HookedRuntime``."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import anyio
import pytest
import vsh
from conftest import snapshot_tree

from vsh_ai import Evidence, JudgeHook, Pipeline, Quorum, Verdict, as_hook
from vsh_ai.rules import RuleSet
from vsh_ai.rules._allow import AllowPaths

pytestmark = pytest.mark.anyio

FILES = {"config/app.toml": "port = 80\n", "README.md": "hi\n"}
EDIT = "vsh_write('/workspace/config/app.toml', 'port = 81\\n')"
OVERWRITE = (
    "vsh_write('/workspace/config/app.toml', 'port = 0\\n')\n"
    "vsh_write('/workspace/config/app.toml', 'port = 81\\n')"
)


class Fixed:
    """A judge that always gives the same decision."""

    def __init__(self, decision: str, id: str | None = None) -> None:
        self.decision = decision
        self.id = id or f"fixed-{decision}"
        self.calls = 0

    async def review(self, evidence: Evidence, /) -> Verdict:
        self.calls += 1
        return Verdict(decision=self.decision, reason=f"{self.id} says so", judge=self.id)  # type: ignore[arg-type]


class Raises:
    id = "raises"

    async def review(self, evidence: Evidence, /) -> Verdict:
        raise RuntimeError("boom: secret detail")


class Sleeps:
    id = "sleeps"

    def __init__(self, seconds: float = 30.0) -> None:
        self.seconds = seconds
        self.started = anyio.Event()

    async def review(self, evidence: Evidence, /) -> Verdict:
        self.started.set()
        await anyio.sleep(self.seconds)
        return Verdict.approve("late", judge=self.id)


class CancelsItself:
    id = "cancels-itself"

    async def review(self, evidence: Evidence, /) -> Verdict:
        raise asyncio.CancelledError


class WrongType:
    id = "wrong-type"

    async def review(self, evidence: Evidence, /) -> Verdict:
        return "approve"  # type: ignore[return-value]


class SwallowsCancellation:
    """A badly written judge: ignores cancellation and approves anyway."""

    id = "swallows-cancellation"

    def __init__(self) -> None:
        self.started = anyio.Event()

    async def review(self, evidence: Evidence, /) -> Verdict:
        self.started.set()
        with contextlib.suppress(BaseException):  # deliberately wrong
            await anyio.sleep(30)
        return Verdict.approve("approved despite cancellation", judge=self.id)


def open_hooked(
    workspace: Path,
    hook: JudgeHook,
    *,
    policy: str = "strict",
    scope: vsh.HookScope = vsh.HookScope.REVIEW_REQUIRED,
) -> vsh.HookedRuntime:
    return vsh.HookedRuntime.open(
        workspace,
        hook_handler=hook,
        hook_id=hook.hook_id,
        hook_scope=scope,
        policy=policy,
        review_content_bytes=1 << 20,
    )


async def run_hooked(
    workspace: Path,
    hook: JudgeHook,
    code: str = EDIT,
    *,
    policy: str = "strict",
    scope: vsh.HookScope = vsh.HookScope.REVIEW_REQUIRED,
) -> tuple[vsh.HookedRuntime, str, vsh.CommitResolution]:
    runtime = open_hooked(workspace, hook, policy=policy, scope=scope)
    receipt = await runtime.apreview(vsh.RunRequest(code, intent="tune the port"))
    resolution = await runtime.acommit(receipt.transaction)
    return runtime, receipt.transaction, resolution


async def cancel_once_the_judge_started(
    runtime: vsh.HookedRuntime, transaction: str, started: anyio.Event
) -> bool:
    """Commit, cancel from outside as soon as the judge is deciding; True if it finished."""
    finished = False

    async def commit() -> None:
        nonlocal finished
        await runtime.acommit(transaction)
        finished = True

    async with anyio.create_task_group() as group:
        group.start_soon(commit)
        with anyio.fail_after(30):  # a judge that never starts is a test failure, not a hang
            await started.wait()
        group.cancel_scope.cancel()
    return finished


@pytest.fixture
def workspace(make_workspace) -> Path:
    return make_workspace(FILES)


async def test_approve_commits(workspace) -> None:
    hook = as_hook(Fixed("approve"))
    _, tx, resolution = await run_hooked(workspace, hook)
    assert resolution.receipt.state == "committed"
    assert resolution.hook.verdict == "approve"
    assert (workspace / "config/app.toml").read_text() == "port = 81\n"
    verdict = hook.verdict_for(tx)
    assert verdict is not None and verdict.latency_s is not None  # noqa: PT018


@pytest.mark.parametrize(
    ("judge", "failure", "reason"),
    [
        (Raises(), "exception", "The judge failed (RuntimeError)."),
        (WrongType(), "wrong_type", "The judge returned str, not a Verdict."),
        (CancelsItself(), "cancelled", "The judge's review was cancelled."),
        (Sleeps(), "timeout", "The judge did not decide within 0.05s."),
        (SwallowsCancellation(), "timeout", "The judge did not decide within 0.05s."),
    ],
)
async def test_failures_become_review_and_host_is_unchanged(workspace, judge, failure, reason):
    before = snapshot_tree(workspace)
    # Only the judges that never answer get the short timeout: on a loaded machine a
    # 0.05s deadline could otherwise turn an immediate failure into "timeout".
    hook = as_hook(judge, timeout=0.05 if failure == "timeout" else 30)
    runtime, tx, resolution = await run_hooked(workspace, hook)
    assert resolution.hook.verdict == "review"
    assert resolution.receipt.state == "pending_approval"
    assert runtime.native.transaction_state(tx) == "pending_approval"
    verdict = hook.verdict_for(tx)
    assert verdict is not None
    assert (verdict.decision, verdict.failure, verdict.reason) == ("review", failure, reason)
    assert "secret detail" not in verdict.reason
    assert snapshot_tree(workspace) == before


async def test_outer_cancellation_fails_the_hook_and_leaves_work_pending(workspace) -> None:
    before = snapshot_tree(workspace)
    judge = Sleeps()
    hook = as_hook(judge, timeout=60)
    runtime = open_hooked(workspace, hook)
    receipt = await runtime.apreview(vsh.RunRequest(EDIT, intent="tune"))
    finished = await cancel_once_the_judge_started(runtime, receipt.transaction, judge.started)
    assert not finished, "the commit was cancelled while the judge was deciding"
    assert runtime.native.transaction_state(receipt.transaction) == "pending_approval"
    assert hook.verdict_for(receipt.transaction) is None, "no verdict was ever produced"
    assert snapshot_tree(workspace) == before


async def test_capacity_exhaustion_waits_boundedly_then_reviews(workspace, evidence_for) -> None:
    before = snapshot_tree(workspace)
    judge = Sleeps(seconds=600)  # holds the only slot for the whole test (cancelled below)
    hook = as_hook(judge, max_concurrency=1, capacity_wait=0.05, timeout=900)
    held = await evidence_for(FILES, EDIT)
    async with anyio.create_task_group() as group:
        group.start_soon(hook.decide, held)
        with anyio.fail_after(30):  # a judge never asked: fail, do not hang
            await judge.started.wait()
        started = anyio.current_time()
        runtime, tx, resolution = await run_hooked(workspace, hook)
        waited = anyio.current_time() - started
        group.cancel_scope.cancel()
    assert resolution.hook.verdict == "review"
    verdict = hook.verdict_for(tx)
    assert verdict is not None
    assert verdict.failure == "capacity"
    assert waited < 300, "the wait for capacity is bounded (it never waited for the slot)"
    assert runtime.native.transaction_state(tx) == "pending_approval"
    assert snapshot_tree(workspace) == before


async def test_incomplete_evidence_is_never_approved(workspace) -> None:
    before = snapshot_tree(workspace)
    judge = Fixed("approve")
    hook = as_hook(judge)
    _, tx, resolution = await run_hooked(workspace, hook, OVERWRITE)
    assert resolution.hook.verdict == "review"
    verdict = hook.verdict_for(tx)
    assert verdict is not None
    assert verdict.failure == "incomplete_evidence"
    assert verdict.details["gaps"] == [
        "an intermediate write to config/app.toml is not resolvable from captured content"
    ]
    assert "config/app.toml" not in verdict.reason  # fixed text: gaps name computed paths
    assert judge.calls == 1, "asked (its reject would stand), never obeyed when it approves"
    assert snapshot_tree(workspace) == before


async def test_a_reject_on_incomplete_evidence_stands(make_workspace) -> None:
    """Incomplete evidence is never approved, but what the judge rejects stays rejected:
    whether the evidence is complete is the program's doing, the judge's reject is not."""
    workspace = make_workspace(FILES)
    before = snapshot_tree(workspace)
    hook = as_hook(Fixed("reject"))
    _, _tx, resolution = await run_hooked(workspace, hook, OVERWRITE)
    assert resolution.hook.verdict == "reject"
    assert resolution.receipt.state == "rejected"
    assert snapshot_tree(workspace) == before


async def test_final_abstain_on_a_mutation_is_review_never_policy(workspace, make_workspace):
    before = snapshot_tree(workspace)
    _, _, pending = await run_hooked(workspace, as_hook(Fixed("abstain")), policy="strict")
    assert pending.receipt.state == "pending_approval"
    assert pending.hook.verdict == "review"
    assert snapshot_tree(workspace) == before

    # balanced auto-approves this small edit; a judge with no opinion must not let it through
    small = make_workspace(FILES)
    small_before = snapshot_tree(small)
    _, _, auto = await run_hooked(
        small, as_hook(Fixed("abstain")), policy="balanced", scope=vsh.HookScope.ALL_REQUESTS
    )
    assert auto.receipt.state == "pending_approval"
    assert snapshot_tree(small) == small_before


async def test_read_only_abstain_follows_policy(workspace) -> None:
    _, _, read = await run_hooked(
        workspace,
        as_hook(Fixed("abstain")),
        "vsh_read('/workspace/README.md')",
        policy="balanced",
        scope=vsh.HookScope.ALL_REQUESTS,
    )
    assert read.receipt.state == "committed"
    assert read.hook.verdict == "follow_policy"


class Unproven:
    """A rule-set-like judge escalating an unproven change, even on read-only work."""

    id = "escalates"

    async def review(self, evidence: Evidence, /) -> Verdict:
        unproven = [{"path": "config/app.toml", "kind": "modify", "reason": "no allowance"}]
        return Verdict.abstain("unproven", judge=self.id, details={"unproven": unproven})


@pytest.mark.parametrize("code", [EDIT, "vsh_read('/workspace/README.md')"])
async def test_final_abstain_carrying_unproven_is_review(workspace, code) -> None:
    before = snapshot_tree(workspace)
    hook = as_hook(Pipeline(Unproven(), Fixed("abstain", id="also-abstains")))
    _, tx, resolution = await run_hooked(
        workspace, hook, code, policy="balanced", scope=vsh.HookScope.ALL_REQUESTS
    )
    assert resolution.hook.verdict == "review"
    assert resolution.receipt.state == "pending_approval"
    verdict = hook.verdict_for(tx)
    assert verdict is not None
    assert "modify of config/app.toml" in verdict.reason
    assert snapshot_tree(workspace) == before


async def test_escalating_rule_set_as_last_stage_never_approves(workspace) -> None:
    before = snapshot_tree(workspace)
    rules = RuleSet(
        [AllowPaths(id="docs", paths=("docs/**",), kinds=("modify",))], on_unproven="escalate"
    )
    _, _, resolution = await run_hooked(
        workspace, as_hook(rules), policy="balanced", scope=vsh.HookScope.ALL_REQUESTS
    )
    assert resolution.hook.verdict == "review"
    assert resolution.receipt.state == "pending_approval"
    assert snapshot_tree(workspace) == before


async def test_reject_is_terminal(workspace) -> None:
    before = snapshot_tree(workspace)
    runtime, tx, resolution = await run_hooked(workspace, as_hook(Fixed("reject")))
    assert resolution.receipt.state == "rejected"
    assert runtime.native.transaction_state(tx) == "rejected"
    assert snapshot_tree(workspace) == before


async def test_rule_set_as_hook_end_to_end(workspace) -> None:
    rules = RuleSet([AllowPaths(id="docs", paths=("docs/**",), kinds=("modify",))], id="docs-only")
    hook = as_hook(rules)
    _, _, resolution = await run_hooked(workspace, hook)
    assert resolution.hook.verdict == "review"
    assert "config/app.toml" in resolution.hook.reason
    assert resolution.hook.hook_id != "" and hook.hook_id.startswith("vsh-ai:docs-only:")  # noqa: PT018


async def test_pipeline_first_decisive_verdict_wins(evidence_for) -> None:
    evidence = await evidence_for(FILES, EDIT)
    second = Fixed("approve", "second")
    verdict = await Pipeline(Fixed("abstain", "first"), second, Fixed("reject", "third")).review(
        evidence
    )
    assert verdict.decision == "approve"
    assert verdict.details["trail"] == ["first:abstain", "second:approve"]
    stop = Fixed("never")
    verdict = await Pipeline(Fixed("review", "r"), stop).review(evidence)
    assert (verdict.decision, stop.calls) == ("review", 0)
    only_abstain = await Pipeline(Fixed("abstain")).review(evidence)
    assert only_abstain.decision == "abstain"
    with pytest.raises(TypeError, match="not a Verdict"):
        await Pipeline(WrongType()).review(evidence)


@pytest.mark.parametrize(
    ("decisions", "required", "expected"),
    [
        (("approve", "approve", "review"), 2, "approve"),
        (("approve", "review", "review"), 2, "review"),
        (("approve", "approve", "reject"), 2, "reject"),
        (("approve", "abstain", "abstain"), 2, "review"),
        (("approve",), 1, "approve"),
    ],
)
async def test_quorum(evidence_for, decisions, required, expected) -> None:
    evidence = await evidence_for(FILES, EDIT)
    judges = [Fixed(d, f"j{i}") for i, d in enumerate(decisions)]
    verdict = await Quorum(*judges, required=required).review(evidence)
    assert verdict.decision == expected
    assert len(verdict.details["votes"]) == len(decisions)


def test_quorum_and_pipeline_validate() -> None:
    with pytest.raises(ValueError, match="required must be between"):
        Quorum(Fixed("approve"), required=2)
    with pytest.raises(ValueError, match="at least one judge"):
        Pipeline()
    with pytest.raises(TypeError, match="is not a Judge"):
        as_hook(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        as_hook(Fixed("approve"), timeout=0)


async def test_one_span_per_decision_without_contents(workspace, capfire) -> None:
    hook = as_hook(
        RuleSet([AllowPaths(id="cfg", paths=("config/**",), kinds=("modify",))], id="svc")
    )
    await run_hooked(workspace, hook)
    spans = [
        s for s in capfire.exporter.exported_spans_as_dict() if s["name"].startswith("vsh-ai judge")
    ]
    assert len(spans) == 1
    attributes = spans[0]["attributes"]
    assert attributes["judge_id"] == "svc"
    assert attributes["verdict"] == "approve"
    assert "port = 81" not in str(attributes)


async def test_outer_cancellation_cannot_be_turned_into_approval(workspace) -> None:
    before = snapshot_tree(workspace)
    judge = SwallowsCancellation()
    hook = as_hook(judge, timeout=60)
    runtime = open_hooked(workspace, hook)
    receipt = await runtime.apreview(vsh.RunRequest(EDIT, intent="tune"))
    await cancel_once_the_judge_started(runtime, receipt.transaction, judge.started)
    assert runtime.native.transaction_state(receipt.transaction) != "committed"
    assert snapshot_tree(workspace) == before
    verdict = hook.verdict_for(receipt.transaction)
    assert verdict is None or verdict.decision != "approve", verdict


async def test_zero_capacity_wait_still_uses_a_free_slot(evidence_for) -> None:
    hook = as_hook(Fixed("approve"), max_concurrency=1, capacity_wait=0)
    evidence = await evidence_for(FILES, EDIT)
    for _ in range(3):
        verdict = await hook.decide(evidence)
        assert (verdict.decision, verdict.failure) == ("approve", None)


async def test_swallowed_asyncio_task_cancellation_is_not_an_approval(workspace) -> None:
    """``task.cancel()`` (edge-triggered, unlike anyio scopes) swallowed by the judge."""
    before = snapshot_tree(workspace)
    judge = SwallowsCancellation()
    hook = as_hook(judge, timeout=60)
    runtime = open_hooked(workspace, hook)
    receipt = await runtime.apreview(vsh.RunRequest(EDIT, intent="tune"))
    task = asyncio.ensure_future(runtime.acommit(receipt.transaction))
    with anyio.fail_after(30):  # a judge never asked: fail, do not hang
        await judge.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runtime.native.transaction_state(receipt.transaction) == "pending_approval"
    assert hook.verdict_for(receipt.transaction) is None
    assert snapshot_tree(workspace) == before


class Forged:
    """A judge whose verdict bypassed validation (``model_construct``)."""

    def __init__(self, decision: str, failure: str | None = None) -> None:
        self.id = f"forged-{decision}"
        self.decision = decision
        self.failure = failure

    async def review(self, evidence: Evidence, /) -> Verdict:
        return Verdict.model_construct(
            decision=self.decision, reason="forged", judge=self.id, failure=self.failure
        )


@pytest.mark.parametrize(
    "make_judge",
    [
        lambda: Forged("approve", failure="timeout"),
        lambda: Pipeline(Forged("Approve")),
        # A vote that is neither a valid reject nor an approval must not be ignored.
        lambda: Quorum(Forged("REJECT"), Fixed("approve"), required=1),
    ],
)
async def test_forged_verdicts_are_never_approvals(workspace, make_judge) -> None:
    before = snapshot_tree(workspace)
    hook = as_hook(make_judge())
    runtime, tx, resolution = await run_hooked(workspace, hook)
    assert resolution.hook.verdict == "review"
    assert runtime.native.transaction_state(tx) == "pending_approval"
    verdict = hook.verdict_for(tx)
    assert verdict is not None
    assert verdict.failure in ("wrong_type", "exception")
    assert snapshot_tree(workspace) == before


def test_the_hook_takes_as_many_decisions_at_once_as_its_judge() -> None:
    from llm_support import Reviewer

    from vsh_ai._hooks import DEFAULT_CONCURRENCY
    from vsh_ai.llm import LLMCommitJudge

    def slots(hook: JudgeHook) -> float:
        return hook._slots.total_tokens

    llm = LLMCommitJudge(Reviewer().model(), max_concurrency=16, capacity_wait=42)
    rules = RuleSet([AllowPaths(id="docs", paths=("docs/**",), kinds=("modify",))])
    assert slots(as_hook(llm)) == 16
    assert as_hook(llm).capacity_wait == 42
    assert slots(as_hook(Pipeline(rules, llm))) == 16
    assert slots(as_hook(Quorum(llm, Fixed("approve"), required=1))) == 16
    small = LLMCommitJudge(Reviewer().model(), max_concurrency=2)
    assert slots(as_hook(small)) == 2
    # A rule stage states no limit: it is not held to the LLM stage's smaller one.
    assert slots(as_hook(Pipeline(rules, small))) == DEFAULT_CONCURRENCY
    assert slots(as_hook(Fixed("approve"))) == DEFAULT_CONCURRENCY
    assert as_hook(Fixed("approve")).capacity_wait == 5.0
    assert slots(as_hook(llm, max_concurrency=3)) == 3, "an explicit limit wins"
