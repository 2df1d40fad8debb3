"""LLMCommitJudge on real VSH evidence, driven by scripted FunctionModels."""

from __future__ import annotations

import json
import time

import anyio
import pytest
from llm_support import KEYS, LEAKS, Reviewer, everything_sent, packet_text, text_reply
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from vsh_ai import Verdict
from vsh_ai.llm import BUILTIN_INSTRUCTIONS, LLMCommitJudge, SharingPolicy, build_packet

pytestmark = pytest.mark.anyio

APP = "[server]\ntls = true\nport = 443\n"
SAFE = "vsh_write('/workspace/app.toml', vsh_read('/workspace/app.toml').replace('443', '8443'))"
SHARE = SharingPolicy(share=("*.toml",))


def judge_for(reviewer: Reviewer | FunctionModel, **options) -> LLMCommitJudge:
    model = reviewer.model() if isinstance(reviewer, Reviewer) else reviewer
    options.setdefault("sharing", SHARE)
    return LLMCommitJudge(model, **options)


@pytest.fixture
async def safe_evidence(evidence_for):
    return await evidence_for({"app.toml": APP}, SAFE, intent="move the port to 8443")


async def test_an_approval_citing_every_change_is_an_approval(safe_evidence) -> None:
    reviewer = Reviewer()
    judge = judge_for(reviewer, id="cfg-llm")
    verdict = await judge.review(safe_evidence)
    assert verdict.decision == "approve"
    assert verdict.failure is None
    assert verdict.judge == "cfg-llm"
    assert verdict.cited == ("C1",)
    assert verdict.reason == "The diff does what the intent says and nothing else."
    assert verdict.model == "function:scripted-reviewer"
    assert verdict.usage is not None
    assert (verdict.usage.requests, verdict.usage.input_tokens, verdict.usage.output_tokens) == (
        1,
        120,
        30,
    )
    assert verdict.latency_s is not None
    assert verdict.latency_s > 0
    assert verdict.details["packet_digest"] == build_packet(safe_evidence, SHARE).digest
    assert verdict.details["required"] == ["C1"]
    assert Verdict.model_validate_json(verdict.model_dump_json()) == verdict


@pytest.mark.parametrize("decision", ["review", "reject"])
async def test_review_and_reject_carry_reason_and_concerns(safe_evidence, decision: str) -> None:
    reviewer = Reviewer(
        decision=decision,
        cite=["C1"],
        reason="Port 8443 is not in the allowed list.",
        concerns=["C1 changes the public port"],
    )
    verdict = await judge_for(reviewer).review(safe_evidence)
    assert verdict.decision == decision
    assert verdict.failure is None
    assert verdict.reason == (
        "Port 8443 is not in the allowed list. Concerns: C1 changes the public port"
    )
    assert verdict.details["concerns"] == ["C1 changes the public port"]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (Reviewer(cite=["C1", "C9"]), "cited 1 ref(s) that were not in the evidence"),
        (Reviewer(cite=["POLICY"]), "without citing every change (C1 not addressed)"),
        (Reviewer(concerns=["C1 may break clients"]), "approved while reporting concerns"),
        (Reviewer(missing=["the client list"]), "approved while reporting concerns or missing"),
        (Reviewer(decision="reject", cite=["X1"]), "not in the evidence"),
    ],
)
async def test_inconsistent_reports_become_review(
    safe_evidence, script: Reviewer, expected: str
) -> None:
    verdict = await judge_for(script).review(safe_evidence)
    assert verdict.decision == "review"
    assert verdict.failure == "inconsistent_verdict"
    assert expected in verdict.reason
    assert len(script.calls) == 1


async def test_approval_with_concerns_tells_the_agent_what_is_wrong(safe_evidence) -> None:
    verdict = await judge_for(Reviewer(concerns=["C1: clients pin 443"])).review(safe_evidence)
    assert verdict.decision == "review"
    assert "Concerns: C1: clients pin 443" in verdict.reason


async def test_unshared_content_never_reaches_the_model(evidence_for) -> None:
    evidence = await evidence_for(
        {"app.toml": APP, "ops/keys.txt": "root-password: swordfish\n"},
        "vsh_read('/workspace/ops/keys.txt')\n" + SAFE,
    )
    reviewer = Reviewer()
    verdict = await judge_for(reviewer).review(evidence)
    assert verdict.decision == "review"
    assert verdict.failure == "unshared_content"
    assert '"ops/keys.txt"' in verdict.reason
    assert "swordfish" not in verdict.model_dump_json()
    assert reviewer.calls == []


@pytest.mark.parametrize(
    ("files", "code", "category"),
    [
        ({}, "vsh_write('/workspace/a.toml', b'\\x00\\x01binary')", "binary_content"),
        ({"app.toml": APP}, "vsh_write('/workspace/app.toml', 'x' * 5000)", "over_budget"),
        (
            {"app.toml": APP},
            "vsh_write('/workspace/app.toml', 'tls = false\\n')\n"
            "vsh_write('/workspace/app.toml', 'tls = true\\n')",
            "incomplete_evidence",
        ),
    ],
)
async def test_gaps_are_reviewed_before_any_model_call(
    evidence_for, files, code: str, category: str
) -> None:
    evidence = await evidence_for(files, code)
    reviewer = Reviewer()
    verdict = await judge_for(reviewer, max_input_bytes=4096).review(evidence)
    assert (verdict.decision, verdict.failure) == ("review", category)
    assert reviewer.calls == []
    assert verdict.usage is not None
    assert verdict.usage.requests == 0


async def test_secrets_are_redacted_before_the_model_sees_anything(evidence_for) -> None:
    secret = "sk-proj-" + "Q7" * 16
    evidence = await evidence_for(
        {"app.toml": APP}, f"vsh_write('/workspace/app.toml', 'api_key = \"{secret}\"\\n')"
    )
    reviewer = Reviewer(decision="reject", cite=["C1"], reason="C1 commits a credential.")
    verdict = await judge_for(reviewer).review(evidence)
    assert verdict.decision == "reject"
    messages, info = reviewer.calls[0]
    sent = everything_sent(messages, info)
    assert secret not in sent
    assert "Q7Q7" not in sent
    assert 'api_key = "[REDACTED:API key]"' in sent
    assert verdict.details["redactions"] == {"API key": 1}


async def test_one_request_no_tools_fresh_messages_bounded_output(safe_evidence) -> None:
    reviewer = Reviewer()
    judge = judge_for(reviewer, instructions="Only port changes are authorized.")
    first = await judge.review(safe_evidence)
    second = await judge.review(safe_evidence)
    assert first.decision == second.decision == "approve"
    assert len(reviewer.calls) == 2
    for messages, info in reviewer.calls:
        assert len(messages) == 1  # fresh: no earlier decision leaks into this one
        assert isinstance(messages[0], ModelRequest)
        assert info.function_tools == []
        assert [t.name for t in info.output_tools] == ["final_result"]
        assert not info.allow_text_output
        assert info.model_settings is not None
        assert info.model_settings.get("max_tokens") == 1024
        assert info.model_settings.get("max_retries") == 0
        assert info.instructions is not None
        assert info.instructions.startswith(BUILTIN_INSTRUCTIONS.strip()[:60])
        assert info.instructions.rstrip().endswith("Only port changes are authorized.")


def _calls_a_tool(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("vsh_write", {"path": "app.toml"})])


def _greedy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    args = {"decision": "approve", "reason": "fine", "cited": ["C1"]}
    return ModelResponse(
        parts=[ToolCallPart(info.output_tools[0].name, args)],
        usage=RequestUsage(input_tokens=10, output_tokens=5000),
    )


def _leaky(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise ModelHTTPError(500, "leaky", body="upstream echoed: tls = true, port = 443")


def _crashes(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise RuntimeError("internal detail: port = 443")


@pytest.mark.parametrize(
    ("model", "category"),
    [
        (text_reply("Looks good to me, approve!"), "invalid_output"),
        (FunctionModel(_calls_a_tool), "invalid_output"),
        (FunctionModel(_greedy), "over_budget"),
        (FunctionModel(_leaky), "provider_error"),
        (FunctionModel(_crashes), "exception"),
    ],
)
async def test_model_failures_are_reviewed_without_echoing_details(
    safe_evidence, model: FunctionModel, category: str
) -> None:
    verdict = await judge_for(model).review(safe_evidence)
    assert (verdict.decision, verdict.failure) == ("review", category)
    dumped = verdict.model_dump_json()
    assert "port = 443" not in dumped
    assert "tls = true" not in dumped
    assert "approve" not in verdict.reason


async def test_a_slow_model_times_out_into_review(safe_evidence) -> None:
    reviewer = Reviewer(delay=5.0)
    with anyio.fail_after(2):
        verdict = await judge_for(reviewer, timeout=0.2).review(safe_evidence)
    assert (verdict.decision, verdict.failure) == ("review", "timeout")
    assert "0.2s" in verdict.reason


async def test_capacity_is_bounded_and_the_wait_is_bounded(safe_evidence) -> None:
    reviewer = Reviewer(delay=0.5)
    judge = judge_for(reviewer, max_concurrency=1, capacity_wait=0.05)
    verdicts: list[Verdict] = []

    async def decide() -> None:
        verdicts.append(await judge.review(safe_evidence))

    async with anyio.create_task_group() as group:
        group.start_soon(decide)
        group.start_soon(decide)
    assert sorted((v.decision, v.failure or "") for v in verdicts) == [
        ("approve", ""),
        ("review", "capacity"),
    ]
    assert len(reviewer.calls) == 1


async def test_no_capacity_wait_still_uses_a_free_slot(safe_evidence) -> None:
    verdict = await judge_for(Reviewer(), capacity_wait=0).review(safe_evidence)
    assert verdict.decision == "approve"


def test_the_model_is_always_explicit_and_settings_cannot_weaken_limits() -> None:
    with pytest.raises(TypeError, match="explicit model"):
        LLMCommitJudge(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="explicit model"):
        LLMCommitJudge("")
    model = Reviewer().model()
    with pytest.raises(ValueError, match="max_output_tokens"):
        LLMCommitJudge(model, model_settings={"max_tokens": 10_000})
    with pytest.raises(ValueError, match="max_retries"):
        LLMCommitJudge(model, model_settings={"max_retries": 3})
    with pytest.raises(ValueError, match="timeout"):
        LLMCommitJudge(model, timeout=0)


def test_the_digest_covers_instructions_sharing_limits_and_model() -> None:
    model = Reviewer().model()
    base = LLMCommitJudge(model)
    assert LLMCommitJudge(model).digest == base.digest
    variants = [
        LLMCommitJudge(model, instructions="only ports"),
        LLMCommitJudge(model, sharing=SharingPolicy(share=("*.toml",))),
        LLMCommitJudge(model, sharing=SharingPolicy(redact_secrets=False)),
        LLMCommitJudge(model, max_input_bytes=20_000),
        LLMCommitJudge(Reviewer().model().__class__(Reviewer(), model_name="other")),
    ]
    assert len({v.digest for v in variants} | {base.digest}) == len(variants) + 1


async def test_one_span_per_decision_without_contents(safe_evidence, capfire) -> None:
    await judge_for(Reviewer()).review(safe_evidence)
    spans = [
        s
        for s in capfire.exporter.exported_spans_as_dict()
        if s["name"].startswith("vsh-ai llm judge")
    ]
    assert len(spans) == 1
    attributes = spans[0]["attributes"]
    assert attributes["judge_id"] == "llm-judge"
    assert attributes["verdict"] == "approve"
    # Counts, sizes, citations and the transaction are computed from the judged work
    # (possibly refused bytes): they stay in the verdict, not the span.
    for computed in ("requests", "output_tokens", "transaction", "cited", "packet_bytes"):
        assert computed not in attributes
    flat = repr(capfire.exporter.exported_spans_as_dict())
    for content in ("port = 8443", "tls = true", "move the port"):
        assert content not in flat


JUDGE_FILE = """
id = "ports"
[rules]
on_unproven = "escalate"
[[rules.rule]]
type = "no_secrets"
[llm]
instructions = "Only port changes are authorized."
share = ["*.toml"]
max_input_bytes = 20000
"""


async def test_a_judge_file_puts_this_judge_behind_its_rules(tmp_path, safe_evidence) -> None:
    from vsh_ai._judge_files import load_judge

    path = tmp_path / "ports.toml"
    path.write_text(JUDGE_FILE)
    reviewer = Reviewer(decision="reject", cite=["C1"], reason="Port 8443 is reserved.")
    judge = load_judge(path, model=reviewer.model())
    verdict = await judge.review(safe_evidence)
    assert (verdict.decision, verdict.judge) == ("reject", "ports.llm")
    assert verdict.details["trail"] == ["ports.rules/unproven:abstain", "ports.llm:reject"]
    _, info = reviewer.calls[0]
    assert info.instructions is not None
    assert info.instructions.rstrip().endswith("Only port changes are authorized.")


# -- issue 10 item 1: a rename never carries unshared bytes to the model ---------------


@pytest.mark.parametrize("variant", list(LEAKS))
async def test_an_approving_model_never_sees_renamed_unshared_bytes(
    evidence_for, variant: str
) -> None:
    language, code = LEAKS[variant]
    evidence = await evidence_for(KEYS, code, language=language)
    reviewer = Reviewer()  # would approve anything it is shown
    judge = judge_for(reviewer, sharing=SharingPolicy(share=("public/**",)))
    verdict = await judge.review(evidence)
    assert (verdict.decision, verdict.failure) == ("review", "unshared_content"), variant
    assert reviewer.calls == []
    assert "hunter2" not in verdict.model_dump_json()
    # The same work with the keys shared does reach the model: the refusal is provenance.
    shared = Reviewer()
    await judge_for(shared, sharing=SharingPolicy(share=("**",))).review(evidence)
    assert len(shared.calls) == 1


# -- issue 10 item 5: limits count what is really sent and received --------------------


def sent_bytes(messages: list[ModelMessage], info: AgentInfo) -> int:
    """Bytes a provider receives: instructions, output tool definitions and the prompt."""
    size = len((info.instructions or "").encode())
    for tool in info.output_tools:
        size += len(tool.name) + len((tool.description or "").encode())
        size += len(json.dumps(tool.parameters_json_schema).encode())
    return size + len(packet_text(messages).encode())


async def test_max_input_bytes_counts_the_instructions_too(safe_evidence) -> None:
    """858 KB were sent under a 13.5 KB budget: instructions were not counted."""
    huge = "Only port changes are authorized. " * 25_000  # 850 KB of instructions
    with pytest.raises(ValueError, match="leaves no room"):
        LLMCommitJudge(Reviewer().model(), instructions=huge, max_input_bytes=13_500)
    reviewer = Reviewer()
    judge = judge_for(reviewer, instructions="x" * 7_500, max_input_bytes=13_500)
    verdict = await judge.review(safe_evidence)
    assert verdict.decision == "approve"
    messages, info = reviewer.calls[0]
    assert sent_bytes(messages, info) <= 13_500
    assert verdict.details["input_bytes"] == sent_bytes(messages, info)
    # The packet alone fits 13.5 KB; with 10 KB of instructions the request does not.
    tight = Reviewer()
    verdict = await judge_for(tight, instructions="x" * 10_000, max_input_bytes=13_500).review(
        safe_evidence
    )
    assert (verdict.decision, verdict.failure) == ("review", "over_budget")
    assert tight.calls == []


async def test_the_send_time_check_refuses_what_the_estimate_missed(safe_evidence) -> None:
    """Second line of defence: the request is measured as sent, before the provider."""
    reviewer = Reviewer()
    judge = judge_for(reviewer, max_input_bytes=8_000)
    judge.packet_budget = 8_000  # as if the estimate of the instructions were wrong
    padded = safe_evidence.model_copy(update={"intent": "move the port " + "y" * 5_000})
    verdict = await judge.review(padded)
    assert (verdict.decision, verdict.failure) == ("review", "over_budget")
    assert "with its instructions" in verdict.reason
    assert reviewer.calls == []
    assert verdict.usage is not None
    assert verdict.usage.requests == 0


def _cut_short(reason: str) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        report = Reviewer().report(packet_text(messages))  # a complete, valid approval
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, report)],
            usage=RequestUsage(input_tokens=100, output_tokens=20),
            finish_reason=reason,  # type: ignore[arg-type]
        )

    return FunctionModel(answer)


@pytest.mark.parametrize(
    ("finish_reason", "category"), [("length", "over_budget"), ("content_filter", "invalid_output")]
)
async def test_a_cut_short_or_filtered_answer_is_review(
    safe_evidence, finish_reason: str, category: str
) -> None:
    verdict = await judge_for(_cut_short(finish_reason)).review(safe_evidence)
    assert (verdict.decision, verdict.failure) == ("review", category)
    assert verdict.details["finish_reason"] == finish_reason
    ok = await judge_for(_cut_short("tool_call")).review(safe_evidence)
    assert ok.decision == "approve"


def _no_usage_long_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    report = Reviewer(reason="fine " + "x" * 590).report(packet_text(messages))
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, report)])


async def test_output_beyond_the_byte_bound_is_review_without_usage(safe_evidence) -> None:
    """A provider that reports no usage cannot exceed the output bound unnoticed."""
    judge = judge_for(FunctionModel(_no_usage_long_answer), max_output_tokens=64)
    assert judge.max_output_bytes == 512
    verdict = await judge.review(safe_evidence)
    assert (verdict.decision, verdict.failure) == ("review", "over_budget")
    assert verdict.details["output_bytes"] > 512
    roomy = judge_for(FunctionModel(_no_usage_long_answer), max_output_bytes=4096)
    assert (await roomy.review(safe_evidence)).decision == "approve"


async def test_capacity_wait_counts_inside_the_timeout(safe_evidence) -> None:
    holder = Reviewer(delay=3.0)
    judge = judge_for(holder, max_concurrency=1, capacity_wait=10.0, timeout=0.5)
    verdicts: list[tuple[Verdict, float]] = []

    async def decide() -> None:
        started = anyio.current_time()
        verdict = await judge.review(safe_evidence)
        verdicts.append((verdict, anyio.current_time() - started))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(decide)
            await anyio.sleep(0.05)
            group.start_soon(decide)
    assert len(verdicts) == 2
    assert {v.failure for v, _ in verdicts} <= {"capacity", "timeout"}
    for _, elapsed in verdicts:
        # The 0.5 s timeout, never the 10 s capacity wait nor the 3 s model (a margin for
        # a loaded box that still tells them apart)
        assert elapsed < 0.5 + 2.0


async def test_the_request_gets_only_what_the_wait_left_of_the_timeout(safe_evidence) -> None:
    reviewer = Reviewer(delay=0.6)
    judge = judge_for(reviewer, max_concurrency=1, capacity_wait=5.0, timeout=1.0)
    results: list[tuple[Verdict, float]] = []

    async def decide() -> None:
        started = anyio.current_time()
        results.append((await judge.review(safe_evidence), anyio.current_time() - started))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(decide)
            await anyio.sleep(0.05)
            group.start_soon(decide)  # waits ~0.55 s, then 0.6 s of model > 1 s in total
    first, second = results
    assert first[0].decision == "approve"
    assert (second[0].decision, second[0].failure) == ("review", "timeout")
    assert second[1] < 1.0 + 0.3


def _blocking_approval(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    time.sleep(0.8)  # a synchronous model: blocks the event loop, cancel scopes cannot fire
    report = Reviewer().report(packet_text(messages))
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, report)])


async def test_a_late_answer_is_never_a_decision(safe_evidence) -> None:
    """The deadline is checked after the call too: an approval after it is review."""
    verdict = await judge_for(FunctionModel(_blocking_approval), timeout=0.3).review(safe_evidence)
    assert (verdict.decision, verdict.failure) == ("review", "timeout")
    on_time = await judge_for(FunctionModel(_blocking_approval), timeout=5).review(safe_evidence)
    assert on_time.decision == "approve"
