"""Choose the judge for each suite (rules, Python, live, recorded, replayed, stress) and run."""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from rich.progress import Progress

from .._hooks import Judge, Pipeline
from .._judge_files import (
    LLMSection,
    bundled_judges,
    load_judge,
    load_judge_file,
    resolve_judge_path,
)
from ._metrics import compute_metrics
from ._names import STRESS_MODES
from ._outcome import RunFailure, RunResult, traced_hook
from ._pool import close_started, default_workers, run_in_pool, start_workers
from ._report import EvalReport
from ._runner import plan_families, run_families
from ._scoring import Labelled, score_labelled, suite_result
from ._split import RemoteLane
from ._suite import Suite, load_suite

if TYPE_CHECKING:
    # Pydantic AI (about 1 s to import) only when a model judges: a rules-only eval, and
    # every worker process, never import it before the pydantic-evals experiment does.
    from pydantic_ai.models import Model

    from ._replay import RecordingModel, ReplayModel

__all__ = (
    "EvalOptions",
    "EvalSetupError",
    "build_judge",
    "recordings_dir",
    "run_evals",
    "run_evals_sync",
)

STRESS_TIMEOUT_S = 0.5
POOL_MIN_RUNS = 1000
"""Below this many runs (unless ``workers`` is set), starting processes costs more than it saves."""
SHARE_MIN_RUNS = 300
"""Below this many labelled runs (unless ``workers`` is set), they stay in this process: a
worker's start-up (about 2 s of CPU on its own core) would not pay for itself."""


class EvalSetupError(ValueError):
    """The eval cannot start: bad judge spec, missing judge file, conflicting options."""


@dataclass
class EvalOptions:
    """How to judge: ``judge`` is a judge file or ``module:attr`` (default: the suite's).

    ``logfire``: configure Logfire and send the experiment's spans (``configure_logfire``);
    off by default, and never content.
    """

    judge: str | Judge | None = None
    model: str | Model | None = None
    stress: str | None = None
    record: bool = False
    replay: bool = False
    repeat: int = 1
    concurrency: int = 16
    progress: bool = False
    recordings: Path | None = None
    scratch: Path | None = None
    mutants: bool = False
    workers: int | None = None
    logfire: bool = False
    _recorders: list[RecordingModel] = field(default_factory=list, repr=False)
    _replays: list[ReplayModel] = field(default_factory=list, repr=False)

    def validate(self) -> None:
        if self.stress and self.stress not in STRESS_MODES:
            raise EvalSetupError(
                f"--stress {self.stress!r} is not a mode; choose one of {', '.join(STRESS_MODES)}"
            )
        if self.stress and self.model:
            raise EvalSetupError("--stress replaces the model; do not combine it with --model")
        if (self.record or self.replay) and not self.model:
            raise EvalSetupError("--record and --replay need --model NAME (the model recorded)")
        if self.record and self.replay:
            raise EvalSetupError("choose --record (live, saves traffic) or --replay (offline)")
        if self.repeat < 1 or self.concurrency < 1:
            raise EvalSetupError("--repeat and --concurrency must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise EvalSetupError("--workers must be at least 1")


def _python_judge(spec: str) -> Judge:
    module_name, _, attr = spec.partition(":")
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise EvalSetupError(
            f"--judge {spec}: cannot load it ({error}); the module must be importable "
            "from the current folder or an installed package"
        ) from None
    if isinstance(value, type) or not isinstance(value, Judge):
        try:
            value = value() if callable(value) else value
        except Exception as error:
            raise EvalSetupError(
                f"--judge {spec}: building the judge raised {type(error).__name__}: {error}"
            ) from None
    judge = value
    if not isinstance(judge, Judge):
        raise EvalSetupError(
            f"--judge {spec}: {type(judge).__name__} is not a Judge (needs `id` and "
            "`async review(evidence)`)"
        )
    return judge


def _judge_file(suite: Suite, options: EvalOptions) -> Path:
    if isinstance(options.judge, str):
        path = resolve_judge_path(options.judge)
        if not path.is_file():
            known = ", ".join(bundled_judges()) or "none"
            raise EvalSetupError(
                f"judge file {options.judge} not found (suite {suite.scenario!r}); name a "
                f"TOML file, a bundled judge ({known}) or a Python judge as module:attr"
            )
        return path
    if suite.judge_path is None:
        raise EvalSetupError(f"suite {suite.scenario!r} names no default judge; pass --judge FILE")
    return suite.judge_path


def _installed(path: Path) -> bool:
    """True for a file inside the installed package (site-packages): never write there."""
    package = Path(__file__).resolve().parents[1]
    try:
        path.resolve().relative_to(package)
    except ValueError:
        return False
    return True


def recordings_dir(suite: Suite, options: EvalOptions) -> Path:
    """Where a suite's model traffic is recorded and replayed from.

    ``options.recordings`` when given; else ``recordings/`` beside the suite file; for a
    suite shipped inside the installed package, ``./recordings`` in the current folder
    when recording (the package is read-only), and for a replay whichever of the two
    holds recordings (the current folder first).
    """
    if options.recordings is not None:
        return options.recordings
    base = suite.path.parent if suite.path else Path.cwd()
    beside = base / "recordings"
    if not _installed(beside):
        return beside
    local = Path.cwd() / "recordings"
    if options.record or (local / suite.scenario).is_dir():
        return local
    return beside


def _resolved_model(name: str) -> Model:
    """``infer_model(name)`` with configuration errors as one clear line."""
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    try:
        return infer_model(name)
    except ImportError as error:
        raise EvalSetupError(
            f"--model {name}: its provider's package is not installed ({error})"
        ) from None
    except UserError as error:
        raise EvalSetupError(f"--model {name}: {error}") from None


def _model_for(suite: Suite, options: EvalOptions) -> tuple[Model | str, str]:
    from ._models import stress_model
    from ._replay import RecordingModel, ReplayModel, recording_path

    folder = recordings_dir(suite, options)
    if options.stress:
        return stress_model(options.stress), f"stress:{options.stress}"
    assert options.model is not None
    model = options.model
    name = model if isinstance(model, str) else f"{model.system}:{model.model_name}"
    path = recording_path(folder, suite.scenario, name)
    if options.replay:
        replay = ReplayModel(path)
        options._replays.append(replay)
        return replay, f"replay:{name}"
    if options.record:
        recorder = RecordingModel(_resolved_model(model) if isinstance(model, str) else model, path)
        options._recorders.append(recorder)
        return recorder, f"record:{name}"
    return _resolved_model(model) if isinstance(model, str) else model, f"live:{name}"


def build_judge(suite: Suite, options: EvalOptions) -> tuple[Judge, str]:
    """The judge for ``suite`` under ``options`` and a label naming the mode."""
    spec = options.judge
    if spec is not None and not isinstance(spec, str):
        if options.model or options.stress:
            raise EvalSetupError("--model/--stress apply to judge files, not Python judges")
        return spec, "python"
    if spec and ":" in spec and not spec.endswith(".toml") and not Path(spec).exists():
        if options.model or options.stress:
            raise EvalSetupError("--model/--stress apply to judge files, not Python judges")
        return _python_judge(spec), "python"
    path = _judge_file(suite, options)
    if not path.is_file():
        raise EvalSetupError(f"judge file {path} not found (suite {suite.scenario!r})")
    if not (options.model or options.stress):
        return load_judge(path, skip_llm=True), "rules"
    file = load_judge_file(path)
    if file.llm is None and options.model:
        raise EvalSetupError(
            f"{path}: --model needs the judge file's LLM judge, and this file has no [llm] "
            'table; add one (instructions = "what the model may approve", share = [globs '
            "of the paths it may read]; see `vsh-ai schema judge`), or drop --model to "
            "score the rules alone"
        )
    model, mode = _model_for(suite, options)
    # --stress on a file without [llm]: the offline stress model sees every path.
    llm = file.llm or LLMSection(share=("**",))
    judge = llm.build(
        model,
        id=f"{file.id}.llm",
        instructions=suite.authorization + ("\n\n" + file.llm.instructions if file.llm else ""),
        timeout=STRESS_TIMEOUT_S if options.stress == "timeout" else None,
        max_concurrency=max(options.concurrency, llm.max_concurrency),
    )
    rules = file.rule_set(on_unproven="escalate", id=f"{file.id}.rules")
    return Pipeline(rules, judge, id=f"{file.id}+llm"), mode


def _import_quietly(name: str) -> None:
    # a failure here is raised again, with its traceback, by the caller's own import
    with contextlib.suppress(Exception):
        importlib.import_module(name)


def _prefetch_experiment() -> None:
    """Import the pydantic-evals experiment (about 1 s of CPU, mostly Pydantic AI) in a
    thread while suites load and judges are built (pool workers start meanwhile too): the
    experiment's import in ``score_labelled`` waits for this one to finish."""
    name = f"{__package__}._experiment"
    if name not in sys.modules:
        threading.Thread(target=_import_quietly, args=(name,), daemon=True).start()


def _rules_only(options: EvalOptions) -> bool:
    """Whether judges are built without importing Pydantic AI on this thread: the
    prefetch must not race such an import (a package with import cycles, imported from
    two threads at once, fails with "partially initialized module")."""
    spec = options.judge
    python_judge = spec is not None and (
        not isinstance(spec, str)
        or (":" in spec and not spec.endswith(".toml") and not Path(spec).exists())
    )
    return not (options.model or options.stress or python_judge)


def _poolable(options: EvalOptions) -> bool:
    """Worker processes rebuild the judge from its spec: only specs can travel."""
    return (
        (options.judge is None or isinstance(options.judge, str))
        and options.model is None
        and not (options.record or options.replay)
    )


async def run_evals(suites: Sequence[Path | Suite], options: EvalOptions) -> EvalReport:
    """Score every suite; replay misses and setup errors raise, run failures are reported.

    A coroutine: ``await run_evals(find_suites(), EvalOptions())`` inside an event loop,
    or ``run_evals_sync(find_suites(), EvalOptions())`` from plain code. Each suite's
    labelled cases run as a pydantic-evals experiment whose task is the real run (the
    judge's spans sit inside each case's span; ``options.logfire`` sends them, see
    ``configure_logfire``). With ``options.mutants`` every case's mutants are scored too
    and reported apart; large mutant runs of file or ``module:attr`` judges use
    ``options.workers`` processes.
    """
    options.validate()
    if options.logfire:
        from ._telemetry import LogfireSetupError, configure_logfire

        try:
            configure_logfire()  # imports Pydantic AI here, before any prefetch thread
        except LogfireSetupError as error:
            raise EvalSetupError(str(error)) from None
    if _rules_only(options) and not options.logfire:
        _prefetch_experiment()
    options._recorders.clear()
    options._replays.clear()
    loaded = [s if isinstance(s, Suite) else load_suite(s) for s in suites]
    workers = options.workers if options.workers is not None else default_workers()
    # Start the workers a pool run will need now: they import while judges are built and
    # the labelled cases run. Estimated before planning (a case has about 5 mutants); a
    # guess too high only costs the spare workers' start-up.
    labelled_runs = sum(len(suite.cases) for suite in loaded) * options.repeat
    if _pooled(options, workers, labelled_runs * 5):
        start_workers(workers)
    elif _shared(options, workers, labelled_runs):
        start_workers(1)
    try:
        return await _run_loaded(loaded, options, workers)
    finally:
        close_started()
        if options.logfire:
            import logfire

            logfire.force_flush()


def run_evals_sync(suites: Sequence[Path | Suite], options: EvalOptions) -> EvalReport:
    """``run_evals`` from code that has no event loop running (scripts, notebooks' cells
    excepted): ``anyio.run(run_evals, suites, options)``."""
    return anyio.run(run_evals, suites, options)


def _shared(options: EvalOptions, workers: int, labelled_runs: int) -> bool:
    """Whether labelled cases are shared with a worker process (``_split``): two CPUs, a
    judge that travels as a spec, enough runs, and no Logfire (a worker's judge spans
    would not sit in the experiment's case spans)."""
    wanted = options.workers is not None or labelled_runs >= SHARE_MIN_RUNS
    return workers > 1 and wanted and _poolable(options) and not options.logfire


def _pooled(options: EvalOptions, workers: int, mutant_runs: int) -> bool:
    """Whether mutants run in worker processes: asked for, or enough of them to pay."""
    wanted = options.workers is not None or mutant_runs >= POOL_MIN_RUNS
    return options.mutants and workers > 1 and wanted and _poolable(options)


async def _run_loaded(loaded: list[Suite], options: EvalOptions, workers: int) -> EvalReport:
    prepared = [(suite, *build_judge(suite, options)) for suite in loaded]
    hooks = [traced_hook(judge, max_concurrency=options.concurrency) for _, judge, _ in prepared]
    # Suites run together; one limiter keeps `concurrency` judge calls in flight overall.
    limiter = anyio.CapacityLimiter(options.concurrency)
    labelled: list[Labelled | None] = [None] * len(prepared)
    bar = Progress(transient=True) if options.progress else None
    plans = [plan_families(suite, options.mutants) for suite in loaded]
    totals = [sum(len(f) for f in plan) * options.repeat for plan in plans]
    tasks = (
        [bar.add_task(s.scenario, total=t) for s, t in zip(loaded, totals, strict=True)]
        if bar
        else []
    )
    mutant_plans = [[family[1:] for family in plan] for plan in plans]
    mutant_total = sum(len(f) for plan in mutant_plans for f in plan) * options.repeat
    mutant_runs: list[list[list[RunResult]] | None] = [None] * len(prepared)
    pooled = False
    labelled_runs = sum(len(suite.cases) for suite in loaded) * options.repeat
    remote = (
        RemoteLane(
            judge=options.judge if isinstance(options.judge, str) else None,
            stress=options.stress,
            repeat=options.repeat,
            concurrency=options.concurrency,
            scratch=options.scratch,
            suites=len(prepared),
        )
        if _shared(options, workers, labelled_runs)
        else None
    )

    def advance(index: int) -> Callable[[], None] | None:
        if bar is None:
            return None
        return lambda: bar.advance(tasks[index])

    with bar or nullcontext():

        async def label(index: int) -> None:
            suite, judge, _ = prepared[index]
            try:
                labelled[index] = await score_labelled(
                    suite,
                    judge,
                    hooks[index],
                    repeat=options.repeat,
                    concurrency=options.concurrency,
                    scratch=options.scratch,
                    limiter=limiter,
                    on_run_done=advance(index),
                    remote=remote,
                )
            except BaseException:
                if remote is not None:
                    remote.close()  # the worker must not wait for this suite's queue
                raise

        try:
            async with anyio.create_task_group() as group:
                if remote is not None:
                    group.start_soon(partial(anyio.to_thread.run_sync, remote.serve))
                for index in range(len(prepared)):
                    group.start_soon(label, index)
        finally:
            if remote is not None:
                remote.close()
        done = [item for item in labelled if item is not None]
        # Mutants need their labelled case's diff, so they run after the experiment. (Run
        # beside it, the workers must preview every labelled case again for that diff:
        # measured, about 10% more CPU for no gain in wall time on two cores.)
        if options.mutants and _pooled(options, workers, mutant_total):
            pooled = True
            judge_spec = options.judge if isinstance(options.judge, str) else None
            results = await anyio.to_thread.run_sync(
                partial(
                    run_in_pool,
                    loaded,
                    mutant_plans,
                    judge=judge_spec,
                    stress=options.stress,
                    repeat=options.repeat,
                    concurrency=options.concurrency,
                    workers=workers,
                    scratch=options.scratch,
                    on_runs_done=(lambda i, n: bar.advance(tasks[i], n)) if bar else None,
                    signatures=[item.signatures for item in done],
                )
            )
            mutant_runs = list(results)
        elif options.mutants:

            async def mutate(index: int) -> None:
                mutant_runs[index] = await run_families(
                    loaded[index],
                    mutant_plans[index],
                    hooks[index],
                    repeat=options.repeat,
                    concurrency=options.concurrency,
                    scratch=options.scratch,
                    limiter=limiter,
                    on_run_done=advance(index),
                    signatures=done[index].signatures,
                )

            async with anyio.create_task_group() as group:
                for index in range(len(prepared)):
                    group.start_soon(mutate, index)
    results_by_suite = [
        suite_result(
            suite,
            judge,
            done[index],
            mode=mode,
            families=plans[index],
            mutants=mutant_runs[index],
        )
        for index, (suite, judge, mode) in enumerate(prepared)
    ]
    for replay in options._replays:
        replay.raise_for_misses()
    for recorder in options._recorders:
        recorder.save()
    observations = [o for r in results_by_suite for o in r.observations]
    failures: list[RunFailure] = [f for r in results_by_suite for f in r.run_failures]
    mutant_observations = [o for r in results_by_suite if r.mutants for o in r.mutants.observations]
    return EvalReport(
        suites=results_by_suite,
        overall=compute_metrics(observations),
        run_failures=failures,
        mutants=compute_metrics(mutant_observations) if options.mutants else None,
        workers=workers if pooled else 2 if remote is not None else 1,
    )
