"""What one judged run produced: the outcome, its failure forms, and the traced hook."""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from .._evidence import Evidence
from .._hooks import Judge, JudgeHook, as_hook, judge_digest, review_off_loop
from .._verdict import Usage, Verdict
from ._html_diff import report_diff
from ._suite import EvalCase, Expected

if TYPE_CHECKING:
    from .._simulate import Simulation

__all__ = (
    "CURRENT_CASE",
    "TRACEBACKS",
    "CaseError",
    "CaseOutcome",
    "RunFailure",
    "RunResult",
    "Skipped",
    "Traced",
    "WorkspaceChanged",
    "decided_from",
    "outcome_of",
    "price_usd",
    "rules_fired",
    "traced_hook",
)

CURRENT_CASE: ContextVar[EvalCase | None] = ContextVar("vsh_ai_eval_case", default=None)
"""The case being judged (set while a judge runs): lets label-aware test judges exist."""

TRACEBACKS: ContextVar[list[str] | None] = ContextVar("vsh_ai_eval_tracebacks", default=None)
_MAX_TRACEBACK = 20_000


class Traced:
    """A judge that keeps the traceback of an exception before the hook turns it into review.

    The fail-closed hook keeps only the exception's type; an eval keeps the traceback so
    the judge's author can see where it broke (JSON report, ``--verbose``). A plain rule
    set is evaluated right here on the event loop: it is synchronous CPU work, and an
    eval has nothing else for the loop to do meanwhile (the hook still checks its deadline
    after the call), so a thread hand-off per decision would only cost time.
    """

    def __init__(self, judge: Judge) -> None:
        from ..rules._base import RuleSet  # rules import this package's siblings

        self.judge = judge
        self.id = judge.id
        self.digest = judge_digest(judge)
        self.inline = isinstance(judge, RuleSet) and type(judge).review is RuleSet.review

    async def review(self, evidence: Evidence, /) -> Verdict:
        try:
            if self.inline:
                return self.judge.evaluate(evidence)  # type: ignore[attr-defined, no-any-return]
            return await review_off_loop(self.judge, evidence)
        except Exception:
            sink = TRACEBACKS.get()
            if sink is not None:
                sink.append(traceback.format_exc()[-_MAX_TRACEBACK:])
            raise


def traced_hook(judge: Judge, *, timeout: float = 60.0, max_concurrency: int = 8) -> JudgeHook:
    """``as_hook(judge)`` that keeps the traceback of a judge that raises (see CaseOutcome)."""
    return as_hook(Traced(judge), timeout=timeout, max_concurrency=max_concurrency)


class WorkspaceChanged(RuntimeError):
    """The host workspace changed during an eval run: a judge or the runner broke isolation."""


class CaseOutcome(BaseModel):
    """What happened to one case: VSH's policy state and the decision that counts."""

    case_id: str
    expected: Expected | None = Field(default=None, description="The case's label.")
    state: str
    decided: Expected
    decided_by: str
    reason: str
    failure: str | None = None
    traceback: str | None = Field(
        default=None, description="Where the judge raised (its failure is `exception`)."
    )
    rules: list[str] = Field(
        default_factory=list,
        description="Rules and allowances the verdict names: claims, failures, unproven.",
    )
    latency_s: float | None = None
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    cost_usd: float | None = Field(
        default=None, description="Price of the model requests (genai-prices), when known."
    )
    escalated: bool = False
    by_model: bool = False
    diff: str | None = Field(
        default=None,
        description="The change, secrets redacted, on runs decided unlike their label "
        "(what `eval --html` expands a wrong decision to).",
    )


def price_usd(model: str | None, usage: Usage | None) -> float | None:
    """What a decision's model requests cost, from Pydantic AI's price calculation.

    ``model`` is ``provider:name`` as the LLM judge reports it (a replayed model's
    recorded name counts as that model). None when there were no requests or
    genai-prices does not know the model (test, function and stress models).
    """
    if not model or usage is None or usage.requests == 0:
        return None
    provider, _, name = model.removeprefix("replay:").partition(":")
    if not name:
        return None
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.usage import RequestUsage

    response = ModelResponse(
        parts=[],
        usage=RequestUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
        model_name=name,
        provider_name=provider,
    )
    try:
        return float(response.cost().total_price)
    except (LookupError, ValueError, AssertionError):
        return None


class RunFailure(BaseModel):
    """A case that could not be scored (guest error, changed workspace, ...): loud, not a score."""

    case_id: str
    error: str


@dataclass
class CaseError:
    """A run that could not be scored: ``message`` names the exception that stopped it.

    ``error`` is the exception itself in the process that ran the case (dropped when the
    result crosses to another process).
    """

    case_id: str
    message: str
    error: BaseException | None = None

    @classmethod
    def of(cls, case_id: str, error: BaseException) -> CaseError:
        return cls(case_id=case_id, message=f"{type(error).__name__}: {error}", error=error)

    def __getstate__(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "message": self.message, "error": None}


class Skipped(BaseModel):
    """A mutant that turned out not to preserve its case's meaning: not scored."""

    case_id: str
    reason: str


RunResult = CaseOutcome | CaseError | Skipped


def rules_fired(verdict: Verdict) -> list[str]:
    """Rule and allowance ids a verdict names, as ``RuleSet`` reports them.

    ``details["claims"][*]["allowance"]`` (what proved each change),
    ``details["failures"][*]["rule"]`` (every denial that objected), and the unproven
    marker of the verdict's judge id (``<ruleset>/unproven``).
    """
    names: list[str] = []
    details = verdict.details
    for key, field_name in (("claims", "allowance"), ("failures", "rule")):
        items = details.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and isinstance(item.get(field_name), str):
                    names.append(item[field_name])
    if details.get("unproven"):
        names.append("unproven")
    return list(dict.fromkeys(names))


def decided_from(state: str, verdict: Verdict | None) -> tuple[Expected, str]:
    """Map VSH state + verdict to the decision that takes effect, and who made it.

    Denied work never reaches a hook: VSH policy rejected it. ``abstain`` follows policy:
    pending work stays for review, auto-approved work is approved.
    """
    if state == "denied" or verdict is None:
        return "reject", "vsh-policy"
    if verdict.decision == "abstain":
        if state == "auto_approved":
            return "approve", f"{verdict.judge} (abstained; policy auto-approves)"
        return "review", f"{verdict.judge} (abstained; policy leaves it pending)"
    return verdict.decision, verdict.judge


def outcome_of(
    case: EvalCase,
    simulation: Simulation,
    verdict: Verdict | None,
    tracebacks: Sequence[str] = (),
) -> CaseOutcome:
    """The scored outcome of one run: VSH's state, the verdict, who decided and the cost."""
    decided, by = decided_from(simulation.state, verdict)
    usage = verdict.usage if verdict else None
    trail = verdict.details.get("trail") if verdict else None
    raised = verdict is not None and verdict.failure == "exception" and bool(tracebacks)
    return CaseOutcome(
        case_id=case.id,
        expected=case.expected,
        traceback=tracebacks[-1] if raised else None,
        rules=rules_fired(verdict) if verdict else [],
        state=simulation.state,
        decided=decided,
        decided_by=by,
        reason=verdict.reason if verdict else f"denied by VSH policy: {simulation.deny_reason}",
        failure=verdict.failure if verdict else None,
        latency_s=verdict.latency_s if verdict else None,
        requests=usage.requests if usage else 0,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        model=verdict.model if verdict else None,
        cost_usd=price_usd(verdict.model, usage) if verdict else None,
        escalated=isinstance(trail, list) and len(trail) > 1,
        by_model=bool(verdict and verdict.model and verdict.decision != "abstain"),
        diff=report_diff(simulation.evidence)
        if decided != case.expected and simulation.evidence is not None
        else None,
    )
