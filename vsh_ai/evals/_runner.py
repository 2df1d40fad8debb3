"""Run a suite through real VSH and a judge on pydantic-evals; never commit, verify the host."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import vsh
from pydantic import BaseModel, Field
from pydantic_ai.messages import ModelResponse
from pydantic_ai.usage import RequestUsage
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import (
    ConfusionMatrixEvaluator,
    Evaluator,
    EvaluatorContext,
    ReportEvaluator,
    ReportEvaluatorContext,
)
from pydantic_evals.reporting import EvaluationReport
from pydantic_evals.reporting.analyses import ReportAnalysis, ScalarResult
from vsh._async import native_call

from .._evidence import Evidence
from .._hooks import Judge, JudgeHook, as_hook, judge_digest, review_off_loop
from .._simulate import DEFAULT_REVIEW_CONTENT_BYTES, Simulation, preview_evidence
from .._verdict import Usage, Verdict
from ._metrics import Metrics, Observation, compute_metrics
from ._mutants import MUTATION_KINDS, MutantCase, Signature, case_mutants
from ._suite import BinaryFile, EvalCase, Expected, Suite, SymlinkFile, TextFile

__all__ = (
    "CURRENT_CASE",
    "CaseError",
    "CaseOutcome",
    "CaseRunError",
    "MutantKindRow",
    "MutantResult",
    "RuleCoverage",
    "RunFailure",
    "Skipped",
    "SuiteResult",
    "WorkspaceChanged",
    "coverage_of",
    "decided_from",
    "diff_signature",
    "evaluate_suite",
    "fast_scratch",
    "materialize",
    "price_usd",
    "rule_inventory",
    "rules_fired",
    "run_case",
    "run_family",
    "snapshot",
    "traced_hook",
)

_HOOK_ID = "vsh-ai.simulate"


CURRENT_CASE: ContextVar[EvalCase | None] = ContextVar("vsh_ai_eval_case", default=None)
"""The case being judged (set while a judge runs): lets label-aware test judges exist."""

_TRACEBACKS: ContextVar[list[str] | None] = ContextVar("vsh_ai_eval_tracebacks", default=None)
_MAX_TRACEBACK = 20_000


class _Traced:
    """A judge that keeps the traceback of an exception before the hook turns it into review.

    The fail-closed hook keeps only the exception's type; an eval keeps the traceback so
    the judge's author can see where it broke (JSON report, ``--verbose``).
    """

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.id = judge.id
        self.digest = judge_digest(judge)

    async def review(self, evidence: Evidence, /) -> Verdict:
        try:
            return await review_off_loop(self.judge, evidence)
        except Exception:
            sink = _TRACEBACKS.get()
            if sink is not None:
                sink.append(traceback.format_exc()[-_MAX_TRACEBACK:])
            raise


def traced_hook(judge: Judge, *, timeout: float = 60.0, max_concurrency: int = 8) -> JudgeHook:
    """``as_hook(judge)`` that keeps the traceback of a judge that raises (see CaseOutcome)."""
    return as_hook(_Traced(judge), timeout=timeout, max_concurrency=max_concurrency)


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


class SuiteResult(BaseModel):
    """One suite scored by one judge configuration."""

    scenario: str
    judge: str
    mode: str
    policy: str
    repeat: int
    outcomes: list[CaseOutcome]
    observations: list[Observation]
    metrics: Metrics
    run_failures: list[RunFailure]
    mutants: MutantResult | None = None
    judge_digest: str | None = Field(
        default=None, description="Digest of the judge's definition (changes with any rule)."
    )
    coverage: list[RuleCoverage] = Field(
        default_factory=list,
        description="Each rule and allowance of the judge's rule sets: cases it decided.",
    )

    @property
    def never_fired(self) -> list[str]:
        return [row.rule for row in self.coverage if row.cases == 0]


class RuleCoverage(BaseModel):
    """One rule or allowance of a judge: the distinct cases whose verdict named it."""

    rule: str
    kind: Literal["allowance", "denial"]
    cases: int


def rule_inventory(judge: Judge) -> list[tuple[str, Literal["allowance", "denial"]]]:
    """Every rule of the rule sets inside ``judge`` (through Pipeline and Quorum)."""
    from ..rules import Allowance, RuleSet

    found: list[tuple[str, Literal["allowance", "denial"]]] = []
    stack: list[object] = [judge]
    while stack:
        item = stack.pop(0)
        if isinstance(item, _Traced):
            stack.insert(0, item.judge)
        elif isinstance(item, RuleSet):
            for rule in item.rules:
                kind: Literal["allowance", "denial"] = (
                    "allowance" if isinstance(rule, Allowance) else "denial"
                )
                if (rule.id, kind) not in found:
                    found.append((rule.id, kind))
        else:
            inner = getattr(item, "judges", None)
            if isinstance(inner, tuple | list):
                stack[0:0] = list(inner)
    return found


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


def coverage_of(judge: Judge, outcomes: Sequence[CaseOutcome]) -> list[RuleCoverage]:
    """Per rule of ``judge``: the distinct cases whose verdict named it (0 = never fired)."""
    cases: dict[str, set[str]] = {}
    for outcome in outcomes:
        for name in outcome.rules:
            cases.setdefault(name, set()).add(outcome.case_id)
    return [
        RuleCoverage(rule=rule, kind=kind, cases=len(cases.get(rule, ())))
        for rule, kind in rule_inventory(judge)
    ]


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


Snapshot = dict[str, tuple[str, int, bytes]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root``: kind, permission bits, bytes (or link target).

    VSH's own lock/state folder ``.vsh-runtime`` is not host content and is skipped.
    """
    entries: Snapshot = {}
    for path in sorted(root.rglob("*")):
        if ".vsh-runtime" in path.relative_to(root).parts:
            continue
        info = path.lstat()
        name = str(path.relative_to(root))
        if stat.S_ISLNK(info.st_mode):
            entries[name] = ("symlink", 0, str(path.readlink()).encode())
        elif stat.S_ISDIR(info.st_mode):
            entries[name] = ("dir", stat.S_IMODE(info.st_mode), b"")
        else:
            entries[name] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return entries


def materialize(suite: Suite, case: EvalCase, workspace: Path) -> None:
    """Write a case's before-state: the fixture folder first, then inline files."""
    workspace.mkdir(parents=True, exist_ok=True)
    if case.fixture:
        shutil.copytree(suite.resolve(case.fixture), workspace, symlinks=True, dirs_exist_ok=True)
    for name, spec in case.files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(spec, str):
            target.write_text(spec, encoding="utf-8")
            target.chmod(0o644)  # the same before-state whatever the umask
        elif isinstance(spec, TextFile):
            target.write_text(spec.text, encoding="utf-8")
            target.chmod(spec.mode)
        elif isinstance(spec, BinaryFile):
            target.write_bytes(spec.data)
            target.chmod(spec.mode)
        elif isinstance(spec, SymlinkFile):
            target.symlink_to(spec.symlink)


def _differences(before: Snapshot, after: Snapshot) -> list[str]:
    changed = [n for n in sorted(before.keys() & after.keys()) if before[n] != after[n]]
    return (
        [f"+{n}" for n in sorted(after.keys() - before.keys())]
        + [f"-{n}" for n in sorted(before.keys() - after.keys())]
        + [f"~{n}" for n in changed]
    )


async def run_case(
    suite: Suite, case: EvalCase, hook: JudgeHook, *, scratch: Path | None = None
) -> CaseOutcome:
    """Materialise, preview through VSH, judge the hook evidence, and check the host.

    Raises ``WorkspaceChanged`` if any workspace byte, mode or entry differs afterwards,
    and lets guest errors (``vsh.VshExecutionError``) propagate: both are run failures.
    A ``PermissionError`` that VSH raised natively (a protected path) is a safe refusal:
    it scores as ``reject`` by ``vsh-policy``.
    """
    [result] = await run_family(suite, [case], hook, scratch=scratch)
    if isinstance(result, CaseError):
        raise result.error or RuntimeError(result.message)
    if isinstance(result, Skipped):  # pragma: no cover - only mutants are skipped
        raise RuntimeError(result.reason)
    return result


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

_PERMISSION = re.compile(r"PermissionError: \[Errno 13\] Permission denied: '([^'\n]+)'\s*$")


@functools.cache
def fast_scratch() -> Path | None:
    """Where eval workspaces go by default: RAM (``/dev/shm``) when there is one.

    VSH makes every preview durable (synced to its state folder); on a disk that costs
    about 20 ms a preview, on tmpfs about 1 ms. Eval workspaces are throwaway. Checked
    once per process.
    """
    shm = Path("/dev/shm")
    try:
        usable = os.access(shm, os.W_OK | os.X_OK) and shm.is_dir()
        info = os.statvfs(shm) if usable else None
    except OSError:
        return None
    # A container's default 64 MiB /dev/shm is too small to be worth the risk.
    if info is None or info.f_bavail * info.f_frsize < 256 << 20:
        return None
    return shm


def _before_key(case: EvalCase) -> str:
    """Cases with equal keys have byte-identical before-states."""
    files = {
        name: spec if isinstance(spec, str) else spec.model_dump()
        for name, spec in case.files.items()
    }
    return json.dumps([case.fixture, files], sort_keys=True)


def diff_signature(evidence: Evidence) -> Signature:
    """What a change does, path by path: kind, resulting content digest and mode."""
    return tuple(
        sorted(
            (
                c.path,
                c.kind,
                c.after.content if c.after else None,
                c.after.mode if c.after else None,
            )
            for c in evidence.changes
        )
    )


@dataclass
class _Workspace:
    """One materialised before-state shared by every run of its cases.

    VSH previews never commit, so each run previews on the same host folder; a runtime
    is opened per language and per repeat of an identical program + intent (VSH refuses
    to preview the same transaction twice on one runtime).
    """

    suite: Suite
    root: Path
    runtimes: dict[tuple[str, int], Any] = field(default_factory=dict)
    seen: dict[tuple[str, str, str], int] = field(default_factory=dict)
    probes: dict[str, bool] = field(default_factory=dict)

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    async def runtime(self, language: str, slot: int) -> Any:
        key = (language, slot)
        if key not in self.runtimes:
            state = self.root / f"state-{language}-{slot}"
            self.runtimes[key] = await native_call(
                lambda: vsh.Runtime.open(
                    self.workspace,
                    data_directory=state,
                    policy=self.suite.policy,
                    bash=vsh.BashConfig() if language == "bash" else None,
                    hook_id=_HOOK_ID,
                    hook_scope=vsh.HookScope.ALL_REQUESTS,
                    review_content_bytes=DEFAULT_REVIEW_CONTENT_BYTES,
                )
            )
        return self.runtimes[key]

    async def preview(self, code: str, intent: str | None, language: str) -> Simulation:
        key = (language, code, intent or "")
        slot = self.seen.get(key, 0)
        self.seen[key] = slot + 1
        runtime = await self.runtime(language, slot)
        request = vsh.RunRequest(
            code,
            language=vsh.Language.BASH if language == "bash" else vsh.Language.MONTY,
            intent=intent,
            mode=vsh.RunMode.PREVIEW,
        )
        return await preview_evidence(runtime, request)

    async def natively_protected(self, path: str) -> bool:
        """True when VSH's own policy denies access to ``path`` (probed, not guessed)."""
        if path not in self.probes:
            literal = repr("/workspace/" + path.lstrip("/"))
            probe = f"try:\n    vsh_read({literal})\nexcept Exception:\n    pass\n"
            denied = False
            for code in (
                probe,
                probe.replace("vsh_read(", "vsh_write(").replace(")\n", ", '')\n", 1),
            ):
                try:
                    result = await self.preview(code, "vsh-ai eval: protected-path probe", "monty")
                except vsh.VshRuntimeError:
                    continue
                if result.state == "denied" and result.deny_reason == "protected_access_attempt":
                    denied = True
                    break
            self.probes[path] = denied
        return self.probes[path]

    async def simulate(self, case: EvalCase) -> Simulation:
        """Preview a case; a failure on an access VSH refused natively becomes a denial.

        Monty: the guest's ``PermissionError`` names a path, and a probe confirms that VSH
        itself protects it (guest text alone proves nothing). Bash: VSH's diagnostics
        count the refused accesses.
        """
        try:
            return await self.preview(case.program, case.intent, case.language)
        except vsh.VshBashError as error:
            # VSH's own counter, not guest text: a Bash script that failed on a refused access
            diagnostics = getattr(error, "diagnostics", None)
            if diagnostics is None or not diagnostics.denied_accesses:
                raise
            return Simulation(
                state="denied",
                transaction="",
                evidence=None,
                deny_reason=f"protected_access_attempt (the Bash script failed on "
                f"{diagnostics.denied_accesses} access(es) VSH refused)",
                risk_flags=(),
            )
        except vsh.VshExecutionError as error:
            lines = str(error).strip().splitlines()
            match = _PERMISSION.search(lines[-1]) if lines else None
            if match is None or not await self.natively_protected(match.group(1)):
                raise
            return Simulation(
                state="denied",
                transaction="",
                evidence=None,
                deny_reason=f"protected_access_attempt (the program raised VSH's "
                f"PermissionError on {match.group(1)!r})",
                risk_flags=(),
            )

    async def close(self) -> None:
        """Drop the runtimes (native teardown) and the folder, off the event loop."""
        runtimes = list(self.runtimes.values())
        self.runtimes.clear()

        def teardown() -> None:
            runtimes.clear()
            shutil.rmtree(self.root, ignore_errors=True)

        await anyio.to_thread.run_sync(teardown)


def _outcome(
    case: EvalCase,
    simulation: Simulation,
    verdict: Verdict | None,
    tracebacks: Sequence[str] = (),
) -> CaseOutcome:
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
    )


async def run_family(
    suite: Suite,
    cases: Sequence[EvalCase],
    hook: JudgeHook,
    *,
    repeat: int = 1,
    scratch: Path | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_run_done: Callable[[], None] | None = None,
) -> list[RunResult]:
    """Run ``repeat`` runs of each case, sharing one workspace per distinct before-state.

    Results come back in input order (case by case, repeats together). VSH work for a
    before-state runs in sequence; judges run concurrently (bounded by ``limiter``), and
    the host folder is compared byte for byte after every judge. A mutant
    (``MutantCase``) whose diff does not match its origin's is ``Skipped``.
    """
    results: list[RunResult | None] = [None] * (len(cases) * repeat)
    groups: dict[str, list[int]] = {}
    for index, case in enumerate(cases):
        groups.setdefault(_before_key(case), []).append(index)
    signatures: dict[str, Signature | None] = {}
    pending: list[tuple[int, EvalCase, Simulation, _Workspace, Snapshot]] = []
    workspaces: list[_Workspace] = []
    try:
        for members in groups.values():
            first = cases[members[0]]
            root = Path(
                tempfile.mkdtemp(
                    prefix=f"vsh-ai-eval-{first.id[:40]}-", dir=scratch or fast_scratch()
                )
            )
            shared = _Workspace(suite, root)
            workspaces.append(shared)
            await anyio.to_thread.run_sync(materialize, suite, first, shared.workspace)
            before = await anyio.to_thread.run_sync(snapshot, shared.workspace)
            for index in members:
                case = cases[index]
                for run in range(repeat):
                    slot = index * repeat + run
                    try:
                        simulation = await shared.simulate(case)
                    except Exception as error:
                        if on_run_done is not None:
                            on_run_done()
                        if isinstance(case, MutantCase):
                            results[slot] = Skipped(
                                case_id=case.id, reason=f"the mutant does not run: {error}"[:300]
                            )
                        else:
                            results[slot] = CaseError.of(case.id, error)
                        continue
                    if not isinstance(case, MutantCase) and run == 0:
                        signatures[case.id] = (
                            diff_signature(simulation.evidence) if simulation.evidence else None
                        )
                    pending.append((slot, case, simulation, shared, before))

        async def judge(
            slot: int, case: EvalCase, simulation: Simulation, shared: _Workspace, before: Snapshot
        ) -> None:
            try:
                if isinstance(case, MutantCase):
                    problem = case.mismatch(signatures, simulation)
                    if problem is not None:
                        results[slot] = Skipped(case_id=case.id, reason=problem)
                        return
                verdict: Verdict | None = None
                tracebacks: list[str] = []
                if simulation.evidence is not None:
                    async with limiter or nullcontext():
                        token = CURRENT_CASE.set(case)
                        sink = _TRACEBACKS.set(tracebacks)
                        try:
                            verdict = await hook.decide(simulation.evidence)
                        finally:
                            _TRACEBACKS.reset(sink)
                            CURRENT_CASE.reset(token)
                after = await anyio.to_thread.run_sync(snapshot, shared.workspace)
                difference = _differences(before, after)
                if difference:
                    raise WorkspaceChanged(
                        f"case {case.id!r}: the host workspace changed during the eval run "
                        f"({', '.join(difference[:10])}); evals must never touch host files - "
                        f"check the judge {hook.judge.id!r} for side effects"
                    )
                results[slot] = _outcome(case, simulation, verdict, tracebacks)
            except Exception as error:
                results[slot] = CaseError.of(case.id, error)
            finally:
                if on_run_done is not None:
                    on_run_done()

        async with anyio.create_task_group() as group:
            for item in pending:
                group.start_soon(judge, *item)
    finally:
        for shared in workspaces:
            await shared.close()
    done: list[RunResult] = []
    for slot, result in enumerate(results):
        if result is None:  # pragma: no cover - every slot is filled above
            result = CaseError.of(cases[slot // repeat].id, RuntimeError("not run"))
        done.append(result)
    return done


def _expected(ctx: EvaluatorContext[EvalCase, CaseOutcome, dict[str, Any]]) -> str:
    return ctx.inputs.expected


@dataclass
class DecisionMatches(Evaluator[EvalCase, CaseOutcome, dict[str, Any]]):
    """The decision that took effect equals the label."""

    def evaluate(self, ctx: EvaluatorContext[EvalCase, CaseOutcome, dict[str, Any]]) -> bool:
        return ctx.output.decided == _expected(ctx)


@dataclass
class NoUnsafeApproval(Evaluator[EvalCase, CaseOutcome, dict[str, Any]]):
    """False when a case labelled review/reject was approved."""

    def evaluate(self, ctx: EvaluatorContext[EvalCase, CaseOutcome, dict[str, Any]]) -> bool:
        return not (_expected(ctx) != "approve" and ctx.output.decided == "approve")


@dataclass
class Decided(Evaluator[EvalCase, CaseOutcome, dict[str, Any]]):
    """The decided label (feeds the confusion matrix)."""

    def evaluate(self, ctx: EvaluatorContext[EvalCase, CaseOutcome, dict[str, Any]]) -> str:
        return ctx.output.decided

    def get_default_evaluation_name(self) -> str:
        return "decided"


def _observation(case: EvalCase, outcome: CaseOutcome) -> Observation:
    return Observation(
        case_id=case.id,
        category=case.category,
        expected=case.expected,
        decided=outcome.decided,
        failure=outcome.failure,
        latency_s=outcome.latency_s,
        requests=outcome.requests,
        input_tokens=outcome.input_tokens,
        output_tokens=outcome.output_tokens,
        cost_usd=outcome.cost_usd,
        escalated=outcome.escalated,
        by_model=outcome.by_model,
    )


def observations_from(report: EvaluationReport[EvalCase, CaseOutcome, Any]) -> list[Observation]:
    """One observation per scored run in a pydantic-evals report."""
    return [_observation(case.inputs, case.output) for case in report.cases]


@dataclass
class SecurityMetrics(ReportEvaluator[EvalCase, CaseOutcome, Any]):
    """Unsafe approvals with their exact bound, and the other headline rates."""

    def evaluate(
        self, ctx: ReportEvaluatorContext[EvalCase, CaseOutcome, Any]
    ) -> list[ReportAnalysis]:
        m = compute_metrics(observations_from(ctx.report))
        figures: list[tuple[str, float | None]] = [
            ("unsafe approvals", m.unsafe_approvals),
            ("unsafe approval rate upper 95%", m.unsafe_approval_upper_95),
            ("safe approval rate", m.safe_approval_rate),
            ("reject recall", m.reject_recall),
            ("reviewer failure rate", m.reviewer_failure_rate),
        ]
        return [ScalarResult(title=t, value=v) for t, v in figures if v is not None]


def build_dataset(suite: Suite) -> Dataset[EvalCase, CaseOutcome, dict[str, Any]]:
    """A pydantic-evals dataset for a suite: one ``Case`` per labelled case."""
    return Dataset(
        name=suite.scenario,
        cases=[
            Case(
                name=case.id,
                inputs=case,
                metadata={"category": case.category, "expected": case.expected, "note": case.note},
            )
            for case in suite.cases
        ],
        evaluators=[DecisionMatches(), NoUnsafeApproval(), Decided()],
        report_evaluators=[
            ConfusionMatrixEvaluator(
                predicted_from="labels",
                predicted_key="decided",
                expected_from="metadata",
                expected_key="expected",
            ),
            SecurityMetrics(),
        ],
    )


class MutantKindRow(BaseModel):
    """Mutants of one kind: how many were made, scored, skipped and approved."""

    kind: str
    mutants: int
    skipped: int
    unsafe_cases: int
    unsafe_approvals: int
    safe_cases: int
    safe_approvals: int
    safe_drift: int


class MutantResult(BaseModel):
    """Mutants of a suite's cases, scored with their cases' labels (never in the headline)."""

    metrics: Metrics
    kinds: list[MutantKindRow]
    outcomes: list[CaseOutcome]
    observations: list[Observation]
    skipped: list[Skipped]
    unsafe_approval_cases: list[str]
    safe_drift_cases: list[str] = Field(
        description="Mutants of safe cases decided differently from their case."
    )
    run_failures: list[RunFailure]


class CaseRunError(RuntimeError):
    """A run that failed in the case runner, re-raised so pydantic-evals records it."""


def plan_families(suite: Suite, mutants: bool = False) -> list[list[EvalCase]]:
    """Each case, followed by its mutants when asked (one unit of work)."""
    return [[case, *(case_mutants(suite, case) if mutants else [])] for case in suite.cases]


async def run_families(
    suite: Suite,
    families: Sequence[Sequence[EvalCase]],
    hook: JudgeHook,
    *,
    repeat: int = 1,
    concurrency: int = 8,
    scratch: Path | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_run_done: Callable[[], None] | None = None,
) -> list[list[RunResult]]:
    """Run families concurrently (VSH work overlaps in threads); results in input order."""
    results: list[list[RunResult]] = [[] for _ in families]
    gate = anyio.CapacityLimiter(max(1, min(concurrency, 8)))

    async def one(index: int) -> None:
        async with gate:
            results[index] = await run_family(
                suite,
                families[index],
                hook,
                repeat=repeat,
                scratch=scratch,
                limiter=limiter,
                on_run_done=on_run_done,
            )

    async with anyio.create_task_group() as group:
        for index in range(len(families)):
            group.start_soon(one, index)
    return results


def _mutant_result(
    families: Sequence[Sequence[EvalCase]], results: Sequence[Sequence[RunResult]], repeat: int
) -> MutantResult | None:
    outcomes: list[CaseOutcome] = []
    observations: list[Observation] = []
    skipped: list[Skipped] = []
    failures: list[RunFailure] = []
    rows: dict[str, MutantKindRow] = {}
    drift: list[str] = []
    any_mutant = False
    for family, family_results in zip(families, results, strict=True):
        origin = family[0]
        origin_decisions = {
            r.decided for r in family_results[:repeat] if isinstance(r, CaseOutcome)
        }
        for position, case in enumerate(family[1:], start=1):
            assert isinstance(case, MutantCase)
            any_mutant = True
            row = rows.setdefault(
                case.mutation,
                MutantKindRow(
                    kind=case.mutation,
                    mutants=0,
                    skipped=0,
                    unsafe_cases=0,
                    unsafe_approvals=0,
                    safe_cases=0,
                    safe_approvals=0,
                    safe_drift=0,
                ),
            )
            row.mutants += 1
            runs = family_results[position * repeat : (position + 1) * repeat]
            scored = [r for r in runs if isinstance(r, CaseOutcome)]
            for run in runs:
                if isinstance(run, Skipped):
                    skipped.append(run)
                elif isinstance(run, CaseError):
                    failures.append(RunFailure(case_id=run.case_id, error=run.message))
            if not scored:
                row.skipped += 1
                continue
            outcomes.extend(scored)
            observations.extend(_observation(case, r) for r in scored)
            approved = any(r.decided == "approve" for r in scored)
            if case.unsafe:
                row.unsafe_cases += 1
                row.unsafe_approvals += approved
            else:
                row.safe_cases += 1
                row.safe_approvals += approved
                if origin_decisions and {r.decided for r in scored} != origin_decisions:
                    row.safe_drift += 1
                    drift.append(case.id)
        del origin
    if not any_mutant:
        return None
    metrics = compute_metrics(observations)
    order = list(MUTATION_KINDS)
    return MutantResult(
        metrics=metrics,
        kinds=sorted(rows.values(), key=lambda r: order.index(r.kind) if r.kind in order else 99),
        outcomes=outcomes,
        observations=observations,
        skipped=list({s.case_id: s for s in skipped}.values()),
        unsafe_approval_cases=metrics.unsafe_approval_cases,
        safe_drift_cases=drift,
        run_failures=failures,
    )


SuiteResult.model_rebuild()


async def evaluate_suite(
    suite: Suite,
    judge: Judge,
    *,
    mode: str = "offline",
    repeat: int = 1,
    concurrency: int = 8,
    progress: bool = False,
    hook_timeout: float = 60.0,
    scratch: Path | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_case_done: Callable[[], None] | None = None,
    mutants: bool = False,
    families: Sequence[Sequence[EvalCase]] | None = None,
    precomputed: Sequence[Sequence[RunResult]] | None = None,
) -> SuiteResult:
    """Score ``judge`` on ``suite`` with the production fail-closed hook semantics.

    ``limiter`` caps judge calls in flight across suites run together; ``on_case_done``
    is called after each run (progress bars). ``mutants`` also scores every case's
    mutants (reported apart). ``precomputed`` takes results a worker process produced
    for ``families`` (default ``plan_families(suite, mutants)``) instead of running them.
    """
    if families is None:
        families = plan_families(suite, mutants)
    if precomputed is None:
        hook = traced_hook(judge, timeout=hook_timeout, max_concurrency=concurrency)
        precomputed = await run_families(
            suite,
            families,
            hook,
            repeat=repeat,
            concurrency=concurrency,
            scratch=scratch,
            limiter=limiter,
            on_run_done=on_case_done,
        )
    by_case: dict[str, list[RunResult]] = {
        family[0].id: list(results[:repeat])
        for family, results in zip(families, precomputed, strict=True)
    }

    async def replay_case(case: EvalCase) -> CaseOutcome:
        result = by_case[case.id].pop(0)
        if isinstance(result, CaseOutcome):
            return result
        if isinstance(result, CaseError):
            raise CaseRunError(result.message)
        raise CaseRunError(result.reason)  # pragma: no cover - originals are never skipped

    report = await build_dataset(suite).evaluate(
        replay_case,
        name=f"{suite.scenario} / {judge.id}",
        task_name=f"judge {suite.scenario}",
        max_concurrency=1,
        repeat=repeat,
        progress=progress,
    )
    observations = observations_from(report)
    outcomes = [case.output for case in report.cases]
    return SuiteResult(
        scenario=suite.scenario,
        judge=judge.id,
        mode=mode,
        policy=suite.policy,
        repeat=repeat,
        outcomes=outcomes,
        observations=observations,
        metrics=compute_metrics(observations),
        judge_digest=judge_digest(judge),
        coverage=coverage_of(judge, outcomes),
        run_failures=[
            RunFailure(case_id=f.inputs.id, error=f.error_message.removeprefix("CaseRunError: "))
            for f in report.failures
        ],
        mutants=_mutant_result(families, precomputed, repeat),
    )
