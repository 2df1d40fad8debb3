"""Judges, pipelines of judges, and the fail-closed adapter that makes any judge a VSH hook."""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
import logfire
import vsh

from ._evidence import Evidence
from ._staging import isolated, lazy_copies, reads_only, stage_evidence
from ._verdict import Usage, Verdict, WrongVerdict, plain_verdict, type_name

__all__ = (
    "DEFAULT_CONCURRENCY",
    "FEEDBACK_LIMIT",
    "Judge",
    "JudgeHook",
    "Pipeline",
    "Quorum",
    "as_hook",
    "bounded_feedback",
    "concurrency_of",
    "isolated",
    "judge_digest",
    "reads_only",
)

FEEDBACK_LIMIT = 8192
"""UTF-8 bytes of feedback a decision carries: VSH refuses hook feedback over 16,384."""

DEFAULT_CONCURRENCY = 8
"""Hook slots for a judge that states no limit of its own (see :func:`concurrency_of`)."""
_DEFAULT_CAPACITY_WAIT = 5.0


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


def concurrency_of(judge: Judge) -> int | None:
    """How many decisions ``judge`` itself takes at once, or None when it states no limit.

    A judge's ``max_concurrency`` attribute (a positive int, as
    :class:`~vsh_ai.llm.LLMCommitJudge` has); for a :class:`Pipeline` or :class:`Quorum`
    the largest limit among its judges, a judge without one (a rule set) counting as
    :data:`DEFAULT_CONCURRENCY`. A hook whose limit is below its judge's would halve a
    judge configured for more.
    """
    if isinstance(judge, Pipeline | Quorum):
        limits = [concurrency_of(j) for j in judge.judges]
        if all(limit is None for limit in limits):
            return None
        return max(limit or DEFAULT_CONCURRENCY for limit in limits)
    limit = getattr(judge, "max_concurrency", None)
    return limit if type(limit) is int and limit >= 1 else None


def _capacity_wait_of(judge: Judge) -> float:
    """The judge's own ``capacity_wait`` (largest of a pipeline's or quorum's), else 5 s."""
    if isinstance(judge, Pipeline | Quorum):
        return max((_capacity_wait_of(j) for j in judge.judges), default=_DEFAULT_CAPACITY_WAIT)
    wait = getattr(judge, "capacity_wait", None)
    if isinstance(wait, bool) or not isinstance(wait, int | float):
        return _DEFAULT_CAPACITY_WAIT
    return float(wait) if math.isfinite(wait) and wait >= 0 else _DEFAULT_CAPACITY_WAIT
    return _DEFAULT_CAPACITY_WAIT


def _checked(name: str, verdict: object) -> Verdict:
    """The plain :class:`Verdict` rebuilt from what judge ``name`` returned (checked once).

    A forged or odd answer (wrong type, a decision outside the known set, an approval with
    a failure category, a field of the wrong exact type) raises :class:`WrongVerdict`.
    """
    try:
        return plain_verdict(verdict)
    except WrongVerdict as error:
        raise WrongVerdict(f"judge {name!r} returned {error}", what=error.what) from None


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
        self._names = tuple(str(j.id) for j in judges)
        self.id = id or "pipeline(" + ",".join(self._names) + ")"
        self.digest = _combined_digest("pipeline", judges)

    async def review(self, evidence: Evidence, /) -> Verdict:
        """Each judge gets its own copy of ``evidence``; each answer is checked once and
        only its plain rebuild is used (see :func:`~vsh_ai._verdict.plain_verdict`)."""
        copy = lazy_copies(evidence)
        trail: list[Verdict] = []
        for name, judge in zip(self._names, self.judges, strict=True):
            given = stage_evidence(judge, evidence, copy)
            verdict = _checked(name, await review_off_loop(judge, given))
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
        self._names = tuple(str(j.id) for j in judges)
        self.required = required
        self.id = id or f"quorum({required}/{len(judges)})"
        self.digest = _combined_digest("quorum", judges, str(required))

    async def review(self, evidence: Evidence, /) -> Verdict:
        """Each judge gets its own copy of ``evidence``; each vote is checked once, as it
        arrives, and only its plain rebuild is counted. Any invalid vote fails the quorum."""
        copy = lazy_copies(evidence)
        verdicts: list[Verdict | None] = [None] * len(self.judges)
        invalid: list[WrongVerdict] = []

        async def ask(index: int, judge: Judge) -> None:
            answer = await review_off_loop(judge, stage_evidence(judge, evidence, copy))
            try:
                verdicts[index] = _checked(self._names[index], answer)
            except WrongVerdict as error:
                invalid.append(error)

        async with anyio.create_task_group() as group:
            for index, judge in enumerate(self.judges):
                group.start_soon(ask, index, judge)
        if invalid:
            raise invalid[0]
        results = [verdict for verdict in verdicts if verdict is not None]
        if len(results) != len(self.judges):  # pragma: no cover - every task answered or raised
            raise WrongVerdict("a judge of the quorum gave no answer")
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


def bounded_feedback(text: str, limit: int = FEEDBACK_LIMIT) -> str:
    """``text`` as valid UTF-8 of at most ``limit`` bytes, marked when it was shortened.

    VSH refuses hook feedback over 16,384 bytes (the commit then fails), so a reason that
    lists every path of a large change is cut at a character boundary and ends with
    `` … [feedback shortened: first N of M bytes]``. Idempotent.
    """
    data = text.encode("utf-8", "replace")  # a lone surrogate becomes '?'
    if len(data) <= limit:
        return data.decode("utf-8")
    total = len(data)
    marker = " … [feedback shortened: first {} of {} bytes]"
    room = max(0, limit - len(marker.format(limit, total).encode()))
    head = data[:room].decode("utf-8", "ignore")
    return head + marker.format(len(head.encode()), total)


def _to_decision(verdict: Verdict) -> vsh.HookDecision:
    if verdict.decision == "abstain":
        return vsh.HookDecision.follow_policy()
    reason = bounded_feedback(verdict.reason)
    if verdict.decision == "approve":
        return vsh.HookDecision.approve(reason)
    if verdict.decision == "reject":
        return vsh.HookDecision.reject(reason)
    return vsh.HookDecision.review(reason)


_INTERRUPTS = (KeyboardInterrupt, SystemExit)
_GROUP_EXCEPTIONS = BaseExceptionGroup.__dict__["exceptions"]


def _leaves(error: BaseException, depth: int = 0) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; ``error`` itself otherwise."""
    if depth > 32 or not issubclass(type(error), BaseExceptionGroup):
        return [error]
    inner = _GROUP_EXCEPTIONS.__get__(error)
    if type(inner) is not tuple:
        return [error]
    return [leaf for item in inner[:1000] for leaf in _leaves(item, depth + 1)]


def _judge_failed(name: str, error: BaseException) -> Verdict:
    """The review for a judge that raised ``error``; interrupts propagate instead.

    Any exception, ``GeneratorExit`` and other ``BaseException`` subclasses included, is
    the judge failing: ``review`` with failure ``exception`` (``wrong_type`` when a
    pipeline or quorum found an invalid answer). ``KeyboardInterrupt`` and ``SystemExit``
    (also inside an exception group) are re-raised: the process is stopping.
    """
    leaves = _leaves(error)
    for leaf in leaves:
        if issubclass(type(leaf), _INTERRUPTS):
            raise leaf
    if leaves and all(issubclass(type(leaf), WrongVerdict) for leaf in leaves):
        return Verdict.failed("wrong_type", "A judge returned an invalid Verdict.", judge=name)
    return Verdict.failed("exception", f"The judge failed ({type_name(error)}).", judge=name)


class JudgeHook:
    """The async VSH hook handler for one judge; owns every fail-closed path.

    Exceptions (``GeneratorExit`` included), a timeout over the whole decision, internal
    cancellation, a wrong return type, exhausted capacity and incomplete evidence each
    become ``review`` with a short failure category; never ``approve``. ``abstain``
    becomes VSH's follow-policy (which never upgrades pending work). Cancellation from
    outside, ``KeyboardInterrupt`` and ``SystemExit`` are re-raised so VSH fails the hook
    and the transaction stays pending.

    The judge's answer is data: it is checked once and rebuilt as a plain ``Verdict``
    (:func:`~vsh_ai._verdict.plain_verdict`); nothing of the judge's object runs after
    it returned, and :meth:`verdict_for` only ever holds such rebuilt verdicts. The judge
    reviews its own copy of the evidence; the hook's last checks use the pristine one.
    Feedback is bounded to :data:`FEEDBACK_LIMIT` bytes. Concurrency and capacity wait
    follow the judge's own when not given (see :func:`as_hook`).
    """

    def __init__(
        self,
        judge: Judge,
        *,
        timeout: float = 60.0,
        max_concurrency: int | None = None,
        capacity_wait: float | None = None,
        require_complete_evidence: bool = True,
        remember: int = 256,
    ) -> None:
        if not isinstance(judge, Judge):
            raise TypeError(
                f"{judge!r} is not a Judge: it needs an `id` and `async review(evidence)`"
            )
        if max_concurrency is None:
            max_concurrency = concurrency_of(judge) or DEFAULT_CONCURRENCY
        if capacity_wait is None:
            capacity_wait = _capacity_wait_of(judge)
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
        """The verdict of the latest decision on ``transaction`` (recent ones kept).

        Always a plain ``Verdict`` built by the hook, never the judge's own object.
        """
        return self._verdicts.get(transaction)

    async def __call__(self, event: vsh.RequestEvent | Evidence) -> vsh.HookDecision:
        verdict = await self.decide(event)
        return _to_decision(verdict)

    async def decide(self, event: vsh.RequestEvent | Evidence) -> Verdict:
        """Review one event and return the (fail-closed) verdict, recording it."""
        started = time.perf_counter()
        transaction = event.transaction
        # Identity and decision only: the transaction id (a digest of the workspace's bytes)
        # and timings belong to the judged work, which may be refused (toolset/_render.py).
        with logfire.span("vsh-ai judge {judge_id}", judge_id=self.judge.id) as span:
            verdict = await self._decide(event)  # a plain Verdict built here
            verdict = verdict.model_copy(
                update={
                    "latency_s": verdict.latency_s or time.perf_counter() - started,
                    "reason": bounded_feedback(verdict.reason),
                }
            )
            span.set_attributes(
                {
                    "verdict": verdict.decision,
                    "decided_by": verdict.judge,
                    "failure": verdict.failure or "",
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
        incomplete: Verdict | None = None
        if self.require_complete_evidence and not evidence.complete:
            # Never an approval; but the judge is still asked, so that what it rejects or
            # reviews (a protected read, unshared content) gets the same answer whether or
            # not the program also left a gap (which is the program's doing).
            incomplete = Verdict(
                decision="review",
                reason="The evidence of this change is incomplete (VSH did not capture "
                "every version the program wrote or read); a human must review it.",
                judge=name,
                failure="incomplete_evidence",
                details={"gaps": list(evidence.gaps())},
            )
        try:
            # The judge's own copy; ``evidence`` stays pristine. A pipeline or quorum never
            # hands its input to a stage that could change it (each such stage gets a copy),
            # and vsh-ai's own judges only read, so those read this one.
            shared = type(self.judge) in (Pipeline, Quorum) or reads_only(self.judge)
            given = evidence if shared else isolated(evidence)()
        except Exception as error:
            return Verdict.failed(
                "exception", f"Evidence could not be copied ({type_name(error)}).", judge=name
            )
        if not await acquire_slot(self._slots, self.capacity_wait):
            return Verdict.failed(
                "capacity", "The judge is at capacity; review this change later.", judge=name
            )
        verdict = await self._review(given)
        if incomplete is not None and verdict.decision in ("approve", "abstain"):
            return incomplete  # the judge's own review or reject stands
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
                answer: object = task.result()
            except asyncio.CancelledError:
                return Verdict.failed("cancelled", "The judge's review was cancelled.", judge=name)
            except BaseException as error:  # GeneratorExit too; interrupts re-raised
                return _judge_failed(name, error)
        finally:
            self._slots.release()
        try:
            return _checked(name, answer)
        except WrongVerdict as error:
            return Verdict.failed("wrong_type", f"The judge returned {error.what}.", judge=name)


def as_hook(
    judge: Judge,
    *,
    timeout: float = 60.0,
    max_concurrency: int | None = None,
    capacity_wait: float | None = None,
    require_complete_evidence: bool = True,
) -> JudgeHook:
    """Turn any judge into a fail-closed async VSH hook handler.

    ``max_concurrency`` (decisions at once) and ``capacity_wait`` (seconds a decision
    waits for a slot) default to the judge's own (:func:`concurrency_of`; an
    :class:`~vsh_ai.llm.LLMCommitJudge` configured for 16 gets 16 hook slots), else
    :data:`DEFAULT_CONCURRENCY` slots and 5 seconds.

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
