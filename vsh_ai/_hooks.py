"""Judges, pipelines of judges, and the fail-closed adapter that makes any judge a VSH hook."""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, get_args, runtime_checkable

import anyio
import logfire
import vsh

from ._evidence import Evidence
from ._verdict import Decision, Usage, Verdict, json_safe

__all__ = ("Judge", "JudgeHook", "Pipeline", "Quorum", "as_hook", "judge_digest")


@runtime_checkable
class Judge(Protocol):
    """Anything that reviews evidence: ``id`` names it, ``review`` decides.

    A judge may also expose ``digest`` (a stable hash of its definition); the hook id
    given to VSH derives from it, so a changed definition is a new hook id.
    """

    @property
    def id(self) -> str: ...

    async def review(self, evidence: Evidence, /) -> Verdict: ...


def judge_digest(judge: Judge) -> str:
    """The definition digest of a judge (its ``digest`` attribute, else its id and type)."""
    digest = getattr(judge, "digest", None)
    if isinstance(digest, str) and digest:
        return digest
    kind = f"{type(judge).__module__}.{type(judge).__qualname__}"
    return hashlib.sha256(f"{kind}\n{judge.id}".encode()).hexdigest()


def _combined_digest(kind: str, judges: Sequence[Judge], extra: str = "") -> str:
    parts = [kind, extra, *(judge_digest(j) for j in judges)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


_DECISIONS = frozenset(get_args(Decision))


def _checked(judge: Judge, verdict: object) -> Verdict:
    """``verdict`` if it is a real decision; a forged one (wrong type, unknown decision set
    by ``model_construct``, approval carrying a failure category) raises ``TypeError``."""
    if not isinstance(verdict, Verdict):
        raise TypeError(f"judge {judge.id!r} returned {type(verdict).__name__}, not Verdict")
    decision = verdict.decision
    if type(decision) is not str or decision not in _DECISIONS:
        raise TypeError(f"judge {judge.id!r} returned an invalid decision")
    if decision == "approve" and verdict.failure is not None:
        raise TypeError(f"judge {judge.id!r} approved with failure {verdict.failure!r}")
    return verdict


def _sum_usage(verdicts: Sequence[Verdict]) -> Usage | None:
    usages = [v.usage for v in verdicts if v.usage is not None]
    if not usages:
        return None
    return Usage(
        requests=sum(u.requests for u in usages),
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
    )


class Pipeline:
    """Ask judges in order; the first verdict that is not ``abstain`` decides.

    Put deterministic rules first: their reject/review is final, and a rule set that
    escalates (abstains) hands the decision to the next judge, typically an LLM judge.
    If every judge abstains, the pipeline abstains (the hook then follows VSH policy).
    """

    def __init__(self, *judges: Judge, id: str | None = None) -> None:
        if not judges:
            raise ValueError("Pipeline needs at least one judge")
        self.judges = judges
        self.id = id or "pipeline(" + ",".join(j.id for j in judges) + ")"
        self.digest = _combined_digest("pipeline", judges)

    async def review(self, evidence: Evidence, /) -> Verdict:
        trail: list[Verdict] = []
        for judge in self.judges:
            verdict = _checked(judge, await review_off_loop(judge, evidence))
            trail.append(verdict)
            if verdict.is_final:
                break
        last = trail[-1]
        details = {**last.details, "trail": [f"{v.judge}:{v.decision}" for v in trail]}
        if last.decision == "abstain":
            # An earlier stage's unproven changes stay unproven whoever abstains after it.
            unproven = [
                item
                for v in trail
                if isinstance(v.details.get("unproven"), list)
                for item in v.details["unproven"]
            ]
            if unproven:
                details["unproven"] = unproven
        return last.model_copy(update={"usage": _sum_usage(trail), "details": details})


class Quorum:
    """Approve only if at least ``required`` judges approve and none rejects.

    Any reject is a reject; otherwise anything short of the quorum is a review that
    carries the dissenting reasons. Judges run concurrently.
    """

    def __init__(self, *judges: Judge, required: int, id: str | None = None) -> None:
        if not judges:
            raise ValueError("Quorum needs at least one judge")
        if not 1 <= required <= len(judges):
            raise ValueError(f"required must be between 1 and {len(judges)}, got {required}")
        self.judges = judges
        self.required = required
        self.id = id or f"quorum({required}/{len(judges)})"
        self.digest = _combined_digest("quorum", judges, str(required))

    async def review(self, evidence: Evidence, /) -> Verdict:
        verdicts: list[Verdict | None] = [None] * len(self.judges)

        async def ask(index: int, judge: Judge) -> None:
            verdicts[index] = await review_off_loop(judge, evidence)

        async with anyio.create_task_group() as group:
            for index, judge in enumerate(self.judges):
                group.start_soon(ask, index, judge)
        results: list[Verdict] = []
        for judge, verdict in zip(self.judges, verdicts, strict=True):
            results.append(_checked(judge, verdict))
        usage = _sum_usage(results)
        votes = [f"{v.judge}:{v.decision}" for v in results]
        rejects = [v for v in results if v.decision == "reject"]
        if rejects:
            return Verdict.reject(
                rejects[0].reason, judge=self.id, usage=usage, details={"votes": votes}
            )
        approvals = sum(v.decision == "approve" for v in results)
        if approvals >= self.required:
            return Verdict.approve(
                f"{approvals} of {len(results)} judges approved.",
                judge=self.id,
                usage=usage,
                details={"votes": votes},
            )
        dissent = next((v for v in results if v.decision == "review"), None)
        reason = dissent.reason if dissent else "Not enough judges approved."
        return Verdict.review(
            f"Quorum not reached ({approvals}/{self.required} approvals): {reason}",
            judge=self.id,
            usage=usage,
            failure=dissent.failure if dissent else None,
            details={"votes": votes},
        )


async def review_off_loop(judge: Judge, evidence: Evidence) -> Verdict:
    """``judge.review(evidence)``, with synchronous rule evaluation moved to a worker thread.

    ``RuleSet.review`` computes synchronously (regexes, parsers); on the event loop a slow
    rule would block every timeout. In a thread, the caller's deadline still fires and an
    abandoned evaluation cannot decide anything.
    """
    from .rules._base import RuleSet  # rules import this module's siblings

    if isinstance(judge, RuleSet) and type(judge).review is RuleSet.review:
        return await anyio.to_thread.run_sync(judge.evaluate, evidence, abandon_on_cancel=True)
    return await judge.review(evidence)


def _abandon(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and stop caring: a judge that ignores cancellation keeps its verdict.

    A judge that swallows cancellation forever would also hang the event loop's shutdown
    (``asyncio.run`` waits for every registered task), so the task also leaves asyncio's
    task registry: the loop still runs it (a well-behaved judge finishes cancelling), but
    nobody waits for it.
    """
    task.cancel()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    unregister = getattr(asyncio.tasks, "_unregister_task", None)
    if unregister is not None:
        unregister(task)


def _unproven_text(unproven: object) -> str:
    if not isinstance(unproven, list):
        return "unproven changes"
    parts = []
    for item in unproven[:10]:
        if isinstance(item, dict):
            parts.append(f"{item.get('kind', 'change')} of {item.get('path', '?')}")
    more = f" and {len(unproven) - 10} more" if len(unproven) > 10 else ""
    return ", ".join(parts) + more if parts else "unproven changes"


def final_abstain(verdict: Verdict, evidence: Evidence) -> Verdict:
    """The last word on an ``abstain`` nobody overruled.

    A read-only abstain may follow VSH policy. An abstain on work that changes files, or
    one that says changes are unproven, becomes ``review``: a configured judge that has no
    opinion must never let policy auto-approve a mutation.
    """
    if verdict.decision != "abstain":
        return verdict
    unproven = verdict.details.get("unproven")
    if unproven:
        reason = (
            f"No judge could prove these changes allowed: {_unproven_text(unproven)}. "
            f"A person must review them. ({verdict.reason})"
        )
    elif evidence.changes:
        reason = (
            "No judge decided on this change (every judge abstained); a person must review "
            f"it. ({verdict.reason})"
        )
    else:
        return verdict
    return verdict.model_copy(update={"decision": "review", "reason": reason})


async def acquire_slot(slots: anyio.CapacityLimiter, wait: float) -> bool:
    """Take a slot, waiting at most ``wait`` seconds (a free one is taken even with 0)."""
    try:
        slots.acquire_nowait()
    except anyio.WouldBlock:
        try:
            with anyio.fail_after(wait):
                await slots.acquire()
        except TimeoutError:
            return False
    return True


def _to_decision(verdict: Verdict) -> vsh.HookDecision:
    if verdict.decision == "approve":
        return vsh.HookDecision.approve(verdict.reason)
    if verdict.decision == "reject":
        return vsh.HookDecision.reject(verdict.reason)
    if verdict.decision == "review":
        return vsh.HookDecision.review(verdict.reason)
    return vsh.HookDecision.follow_policy()


class JudgeHook:
    """The async VSH hook handler for one judge; owns every fail-closed path.

    Exceptions, a timeout over the whole decision, internal cancellation, a wrong
    return type, exhausted capacity and incomplete evidence each become ``review``
    with a short failure category; never ``approve``. ``abstain`` becomes VSH's
    follow-policy (which never upgrades pending work). Cancellation from outside is
    re-raised so VSH fails the hook and the transaction stays pending.
    """

    def __init__(
        self,
        judge: Judge,
        *,
        timeout: float = 60.0,
        max_concurrency: int = 8,
        capacity_wait: float = 5.0,
        require_complete_evidence: bool = True,
        remember: int = 256,
    ) -> None:
        if not isinstance(judge, Judge):
            raise TypeError(
                f"{judge!r} is not a Judge: it needs an `id` and `async review(evidence)`"
            )
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        if max_concurrency < 1 or not (math.isfinite(capacity_wait) and capacity_wait >= 0):
            raise ValueError("max_concurrency must be >= 1 and capacity_wait >= 0")
        self.judge = judge
        self.timeout = timeout
        self.capacity_wait = capacity_wait
        self.require_complete_evidence = require_complete_evidence
        self.hook_id = f"vsh-ai:{judge.id}:{judge_digest(judge)[:16]}"
        self._slots = anyio.CapacityLimiter(max_concurrency)
        self._remember = remember
        self._verdicts: OrderedDict[str, Verdict] = OrderedDict()

    def verdict_for(self, transaction: str) -> Verdict | None:
        """The full verdict of the latest decision on ``transaction`` (recent ones kept)."""
        return self._verdicts.get(transaction)

    async def __call__(self, event: vsh.RequestEvent | Evidence) -> vsh.HookDecision:
        verdict = await self.decide(event)
        return _to_decision(verdict)

    async def decide(self, event: vsh.RequestEvent | Evidence) -> Verdict:
        """Review one event and return the (fail-closed) verdict, recording it."""
        started = time.perf_counter()
        transaction = event.transaction
        with logfire.span(
            "vsh-ai judge {judge_id}", judge_id=self.judge.id, transaction=transaction
        ) as span:
            verdict = await self._decide(event)
            verdict = verdict.model_copy(
                update={
                    "latency_s": verdict.latency_s or time.perf_counter() - started,
                    # model_copy/model_construct skip validation: keep details JSON-safe
                    "details": json_safe(verdict.details)
                    if isinstance(verdict.details, dict)
                    else {},
                }
            )
            span.set_attributes(
                {
                    "verdict": verdict.decision,
                    "decided_by": verdict.judge,
                    "failure": verdict.failure or "",
                    "latency_s": verdict.latency_s or 0.0,
                }
            )
        self._verdicts[transaction] = verdict
        self._verdicts.move_to_end(transaction)
        while len(self._verdicts) > self._remember:
            self._verdicts.popitem(last=False)
        return verdict

    async def _decide(self, event: vsh.RequestEvent | Evidence) -> Verdict:
        name = self.judge.id
        try:
            evidence = event if isinstance(event, Evidence) else Evidence.from_event(event)
        except Exception as error:
            return Verdict.failed(
                "exception", f"Evidence could not be read ({type(error).__name__}).", judge=name
            )
        if self.require_complete_evidence and not evidence.complete:
            gaps = "; ".join(evidence.gaps())
            return Verdict.failed(
                "incomplete_evidence",
                f"Evidence is incomplete ({gaps}); a human must review this change.",
                judge=name,
            )
        if not await acquire_slot(self._slots, self.capacity_wait):
            return Verdict.failed(
                "capacity", "The judge is at capacity; review this change later.", judge=name
            )
        verdict = await self._review(evidence)
        return final_abstain(verdict, evidence)

    async def _review(self, evidence: Evidence) -> Verdict:
        """Ask the judge while holding a capacity slot (released here).

        The judge runs as its own task: at the deadline it is cancelled and abandoned, so
        a judge that swallows cancellation cannot hang the caller, and the clock is read
        again after it returns, so a judge that never yielded cannot decide late.
        """
        name = self.judge.id
        started = time.monotonic()
        deadline = started + self.timeout
        timed_out = Verdict.failed(
            "timeout", f"The judge did not decide within {self.timeout:g}s.", judge=name
        )
        try:
            task: asyncio.Task[Verdict] = asyncio.ensure_future(
                review_off_loop(self.judge, evidence)
            )
            try:
                done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - started))
            except BaseException:
                _abandon(task)  # cancelled from outside: VSH fails the hook, work stays pending
                raise
            if not done or time.monotonic() > deadline:
                _abandon(task)
                return timed_out
            try:
                verdict: object = task.result()
            except asyncio.CancelledError:
                return Verdict.failed("cancelled", "The judge's review was cancelled.", judge=name)
            except Exception as error:
                return Verdict.failed(
                    "exception", f"The judge failed ({type(error).__name__}).", judge=name
                )
        finally:
            self._slots.release()
        try:
            return _checked(self.judge, verdict)
        except TypeError:
            kind = type(verdict).__name__
            what = (
                "an invalid Verdict" if isinstance(verdict, Verdict) else f"{kind}, not a Verdict"
            )
            return Verdict.failed("wrong_type", f"The judge returned {what}.", judge=name)


def as_hook(
    judge: Judge,
    *,
    timeout: float = 60.0,
    max_concurrency: int = 8,
    capacity_wait: float = 5.0,
    require_complete_evidence: bool = True,
) -> JudgeHook:
    """Turn any judge into a fail-closed async VSH hook handler.

    Pass the result as ``hook_handler`` to ``vsh.HookedRuntime.open`` together with
    ``hook_id=hook.hook_id`` (the toolset does this for you).
    """
    return JudgeHook(
        judge,
        timeout=timeout,
        max_concurrency=max_concurrency,
        capacity_wait=capacity_wait,
        require_complete_evidence=require_complete_evidence,
    )
