"""GitHub Actions workflows as data: triggers, jobs, steps, action references, checks.

Workflows are parsed by the shared YAML parser (:func:`vsh_ai.analysis._config.parse_config`:
anchors, aliases and ``<<`` merges resolved, duplicates refused, ``on:`` kept a name), so a
step reused or overridden through an anchor is seen where GitHub runs it. On the parsed
tree:

- :func:`triggers_of`: ``on:`` as a string, a list or a map, as ``{event: config}``;
- :func:`parse_action`: ``owner/repo[/path]@ref`` (a 40-hex commit SHA, a version tag or a
  branch), :func:`lookalike` for typosquats and other owners' copies of an action;
- :func:`job_steps` and :func:`check_tools`: the test, lint and security steps of a job,
  each known by the tools it runs (``pytest``, ``ruff``, ``pip-audit``, ``codeql-action``);
- :func:`removed_checks`, :func:`weakened_checks`: what a change drops or neuters, job by
  job, after merges are resolved (a changed ``with:`` value is not a removal);
- download-then-execute across steps lives in :mod:`._workflows_exec`.

Every function takes untrusted trees of any shape and never raises on odd values: what it
cannot read it treats as absent (the allowances then refuse to claim it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from .._evidence import Evidence
from ._config import ConfigSyntaxError, parse_config
from ._memo import analysis_of

__all__ = (
    "MANUAL_EVENTS",
    "ActionRef",
    "CheckLoss",
    "Workflow",
    "check_tools",
    "fetches_files",
    "job_steps",
    "lookalike",
    "parse_action",
    "removed_checks",
    "run_text",
    "runs_checks",
    "triggers_of",
    "weakened_checks",
    "workflow_of",
    "workflow_side",
)

MANUAL_EVENTS = frozenset({"workflow_dispatch", "repository_dispatch", "workflow_call"})
"""Events that only run a workflow when someone (or another workflow) asks."""

_SHA = re.compile(r"[0-9a-fA-F]{40}")
_VERSION = re.compile(r"[vV]?([0-9]+(?:\.[0-9]+){0,3})")
_USES = re.compile(r"([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)((?:/[^@\s]+)?)@(\S+)")


@dataclass(frozen=True, slots=True)
class ActionRef:
    """``owner/repo[/path]@ref`` of a ``uses:`` value (owner and repo as written)."""

    owner: str
    repo: str
    path: str
    ref: str

    @property
    def name(self) -> str:
        """``owner/repo/path`` folded to lower case (GitHub names ignore case)."""
        return f"{self.owner}/{self.repo}{self.path}".lower()

    @property
    def is_sha(self) -> bool:
        return _SHA.fullmatch(self.ref) is not None

    @property
    def version(self) -> tuple[int, ...] | None:
        """``v4.1.1`` -> (4, 1, 1); None for SHAs and branches."""
        match = _VERSION.fullmatch(self.ref)
        return tuple(int(p) for p in match.group(1).split(".")) if match else None


def parse_action(uses: Any) -> ActionRef | None:
    """The action a ``uses:`` value names; None for ``docker://``, ``./local`` and odd values."""
    if not isinstance(uses, str):
        return None
    return _action(uses)


@lru_cache(maxsize=4096)
def _action(uses: str) -> ActionRef | None:
    match = _USES.fullmatch(uses.strip())
    if match is None:
        return None
    owner, repo, path, ref = match.groups()
    return ActionRef(owner, repo, path.lower(), ref)


def newer(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    """``after`` is a strictly later version than ``before`` (missing parts count as 0)."""
    width = max(len(before), len(after))
    return after + (0,) * (width - len(after)) > before + (0,) * (width - len(before))


def version_of(text: str) -> tuple[int, ...] | None:
    match = _VERSION.fullmatch(text.strip())
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


# -- look-alike names ------------------------------------------------------------------

_CONFUSABLE = str.maketrans({"0": "o", "1": "l", "i": "l", "5": "s", "3": "e", "_": "", "-": ""})


def _skeleton(name: str) -> str:
    return (
        name.lower().translate(_CONFUSABLE).replace("rn", "m").replace("vv", "w").replace(".", "")
    )


def _distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (adjacent swaps count one), capped at ``limit + 1``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]


def _near(a: str, b: str) -> bool:
    if a == b:
        return False
    if _skeleton(a) == _skeleton(b):
        return True
    return min(len(a), len(b)) >= 4 and _distance(a, b, 2) <= (1 if len(a) < 7 else 2)


# Popular actions a look-alike would imitate (their owners, and repositories by owner).
WELL_KNOWN = frozenset(
    {
        "actions/checkout",
        "actions/setup-python",
        "actions/setup-node",
        "actions/setup-go",
        "actions/setup-java",
        "actions/setup-dotnet",
        "actions/cache",
        "actions/upload-artifact",
        "actions/download-artifact",
        "actions/github-script",
        "actions/labeler",
        "actions/stale",
        "actions/dependency-review-action",
        "actions/attest-build-provenance",
        "github/codeql-action",
        "docker/login-action",
        "docker/build-push-action",
        "docker/setup-buildx-action",
        "docker/setup-qemu-action",
        "docker/metadata-action",
        "pypa/gh-action-pypi-publish",
        "pypa/gh-action-pip-audit",
        "codecov/codecov-action",
        "astral-sh/setup-uv",
        "astral-sh/ruff-action",
        "pre-commit/action",
        "softprops/action-gh-release",
        "peaceiris/actions-gh-pages",
        "aws-actions/configure-aws-credentials",
        "azure/login",
        "google-github-actions/auth",
        "hashicorp/setup-terraform",
        "dtolnay/rust-toolchain",
        "golangci/golangci-lint-action",
        "aquasecurity/trivy-action",
        "gitleaks/gitleaks-action",
        "step-security/harden-runner",
        "ossf/scorecard-action",
        "peter-evans/create-pull-request",
        "release-drafter/release-drafter",
    }
)


# Repository names many accounts use for their own, unrelated actions.
_GENERIC = frozenset(
    {"action", "actions", "login", "auth", "github-action", "gh-action", "setup", "deploy"}
)


def lookalike(new: ActionRef, known: Iterable[str]) -> str | None:
    """The known ``owner/repo`` that ``new`` imitates, or None.

    A look-alike is another repository whose owner is a near spelling of a known owner
    (``actoins``, ``action5``) with the same or a near repository name, or a known
    repository name under another owner (someone's copy, a fork).
    """
    owner, repo = new.owner.lower(), new.repo.lower()
    for name in known:
        known_owner, _, rest = name.partition("/")
        known_repo = rest.split("/", 1)[0]
        if owner == known_owner:
            continue  # the same account: its own repositories, not a look-alike
        same = repo == known_repo and repo not in _GENERIC
        if same or (_near(repo, known_repo) and _near(owner, known_owner)):
            return f"{known_owner}/{known_repo}"
    return None


# -- the workflow tree -----------------------------------------------------------------


# Words of commands and actions that fetch files: a text without any fetches nothing.
# curl|wget|aria2c|invoke-webrequest|iwr|invoke-restmethod|irm|bitstransfer|gh\s|download,
# factored by first letter (the same words; about twice as fast to search).
_FETCH_WORDS = re.compile(
    r"(?i)c(?:url)|w(?:get)|a(?:ria2c)|i(?:nvoke-(?:webrequest|restmethod)|wr|rm)|"
    r"b(?:itstransfer)|g(?:h\s)|d(?:ownload)"
)
# The same words in ASCII bytes already lowered: on ASCII text, ``(?i)`` pairs each letter
# with its ASCII case only (the four non-ASCII letters it also matches, U+0130, U+0131,
# U+017F and U+212A, cannot occur) and ``\s`` is exactly these ten characters, so a search
# of ``data.lower()`` finds a word exactly when :data:`_FETCH_WORDS` does, about nine times
# faster (no case folding per character).
_FETCH_WORDS_ASCII = re.compile(
    rb"c(?:url)|w(?:get)|a(?:ria2c)|i(?:nvoke-(?:webrequest|restmethod)|wr|rm)|"
    rb"b(?:itstransfer)|g(?:h[\t\n\x0b\x0c\r\x1c-\x1f ])|d(?:ownload)"
)


def fetches_files(data: bytes) -> bool:
    """Whether ``data`` holds a word of a command or action that fetches files."""
    if data.isascii():
        return _FETCH_WORDS_ASCII.search(data.lower()) is not None
    return _FETCH_WORDS.search(data.decode("utf-8", "replace")) is not None


@dataclass(frozen=True)
class Workflow:
    """One side of a workflow file: its parsed tree (None: empty or not a mapping).

    What rules ask of it (jobs, triggers, each job's check tools) is computed once per
    object; :func:`workflow_side` keeps one object per side and decision.
    """

    tree: Mapping[str, Any] | None
    fetches: bool = True
    """False when the text names no download command or action (nothing to follow)."""

    @cached_property
    def triggers(self) -> dict[str, Any]:
        return triggers_of(self.tree)

    @cached_property
    def jobs(self) -> dict[str, Mapping[str, Any]]:
        jobs = self.tree.get("jobs") if self.tree is not None else None
        if not isinstance(jobs, Mapping):
            return {}
        return {str(k): v for k, v in jobs.items() if isinstance(v, Mapping)}

    @cached_property
    def signature(self) -> dict[str, tuple[tuple[Any, ...], ...]]:
        """What checks depend on, per job: each step's name, action (not its ref), script
        and condition. Jobs with equal signatures run the same checks."""
        return {
            jid: tuple(
                (
                    step.get("name"),
                    _identity(step),
                    step.get("if"),
                    step.get("continue-on-error"),
                )
                for step in job_steps(job)
            )
            for jid, job in self.jobs.items()
        }

    @cached_property
    def step_tools(self) -> dict[str, tuple[tuple[Mapping[str, Any], frozenset[str]], ...]]:
        """Each job's steps with the check tools each runs (:func:`check_tools`)."""
        return {
            jid: tuple((step, check_tools(step)) for step in job_steps(job))
            for jid, job in self.jobs.items()
        }

    @cached_property
    def tools(self) -> dict[str, frozenset[str]]:
        """The check tools each job runs."""
        return {
            jid: frozenset().union(*(tools for _, tools in steps))
            for jid, steps in self.step_tools.items()
        }

    @cached_property
    def marks(self) -> dict[str, frozenset[str]]:
        """What shows a check is still in each job: tools, step names and identities."""
        out: dict[str, frozenset[str]] = {}
        for jid, steps in self.step_tools.items():
            marks: set[str] = set(self.tools[jid])
            for step, _ in steps:
                name = step.get("name")
                if isinstance(name, str):
                    marks.add(f"step:{' '.join(name.lower().split())}")
                marks.add(f"id:{_identity(step)}")
            out[jid] = frozenset(marks)
        return out

    @cached_property
    def lines(self) -> dict[str, frozenset[str]]:
        """Each job's script lines, whitespace-normalised."""
        return {
            jid: frozenset().union(*(_lines(run_text(step)) for step in job_steps(job)))
            for jid, job in self.jobs.items()
        }


def workflow_of(data: bytes, path: str = "") -> Workflow:
    """Parse workflow bytes (:class:`ConfigSyntaxError` when they are not YAML)."""
    tree = parse_config(data, "yaml", path)
    return Workflow(tree if isinstance(tree, Mapping) else None, fetches_files(data))


def workflow_side(evidence: Evidence, path: str, side: str) -> Workflow | None:
    """One side of ``path`` as a workflow, once per decision (None: no file on that side).

    :class:`ConfigSyntaxError` when it is not YAML, every time it is asked.
    """
    data = evidence.before_bytes(path) if side == "before" else evidence.after_bytes(path)
    if data is None:
        return None
    memo = analysis_of(evidence)
    key = ("workflow", data)
    try:
        found: Workflow | ConfigSyntaxError = memo.remember(key, lambda: _parsed(data, path))
    except RecursionError:
        raise ConfigSyntaxError(f"{path}: nested too deeply") from None
    if isinstance(found, ConfigSyntaxError):
        raise found
    return found


def _parsed(data: bytes, path: str) -> Workflow | ConfigSyntaxError:
    try:
        return workflow_of(data, path)
    except ConfigSyntaxError as error:
        return error


def triggers_of(tree: Any) -> dict[str, Any]:
    """``on:`` as ``{event: its config or None}`` (string, list and map spellings alike)."""
    if not isinstance(tree, Mapping):
        return {}
    on = tree.get("on", tree.get(True))  # True: a loader that read `on` as YAML 1.1 bool
    if isinstance(on, str):
        return {on.strip(): None}
    if isinstance(on, list):
        return {str(event).strip(): None for event in on if isinstance(event, str)}
    if isinstance(on, Mapping):  # `push:` and `push: {}` alike: no filters
        return {str(event).strip(): config or None for event, config in on.items()}
    return {}


def job_steps(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    steps = job.get("steps")
    if not isinstance(steps, list):
        return []
    return [step for step in steps if isinstance(step, Mapping)]


def run_text(step: Mapping[str, Any]) -> str:
    run = step.get("run")
    return run if isinstance(run, str) else "" if run is None else str(run)


# -- checks: test, lint and security steps ---------------------------------------------

# Tools and words that make a command a test, lint or security check (whole words).
_CHECK_WORDS = (
    r"py\.?test|tox|nox|unittest|test|tests|lint|linter|linting|ruff|flake8|pylint|mypy|"
    r"pyright|pytype|pyre|black|isort|pydocstyle|pycodestyle|codespell|audit|pip-audit|"
    r"bandit|safety|codeql|codeql-action|scan|semgrep|trivy|snyk|gitleaks|trufflehog|"
    r"detect-secrets|osv-scanner|grype|checkov|tfsec|zizmor|check|eslint|tslint|prettier|"
    r"jest|vitest|mocha|karma|cypress|playwright|clippy|golangci-lint|govulncheck|vet|"
    r"shellcheck|hadolint|pre-commit|sonar|rubocop|rspec|phpunit|phpstan|ctest|coverage|"
    r"verify|dependency-review|dependency-review-action|scorecard|stylelint|markdownlint|"
    r"yamllint|actionlint|doctest|hypothesis|behave|nextest"
)
_CHECK = re.compile(rf"(?i)(?<![A-Za-z0-9_])({_CHECK_WORDS})(?![A-Za-z0-9_])")
# Commands that install or prepare, whatever their arguments say (`pip install .[test]`).
_SETUP = re.compile(
    r"(?i)^\s*(sudo\s+)?((python[0-9.]*|py)\s+-m\s+)?(pip[0-9.]*|pipx|uv\s+pip|uv|poetry|pdm|"
    r"hatch\s+env|conda|mamba|micromamba|npm|pnpm|yarn|bun|apt|apt-get|brew|choco|gem|"
    r"cargo|go|dnf|yum|apk)\s+(install|add|ci|sync|create|update|upgrade|get|i|lock)\b|"
    r"^\s*(echo|printf|cd|mkdir|cp|mv|ls|cat|export)\b|^\s*#"
)
_SPLIT = re.compile(r"&&|\|\||;|\n")
# Actions that only prepare a job: never check steps, whatever their step is named.
_PREPARE_ACTIONS = re.compile(
    r"(?i)^actions/(checkout|setup-[a-z]+|cache|upload-artifact|download-artifact)(/|$)"
)


def _commands(script: str) -> Iterator[str]:
    script = script.replace("\\\n", " ")
    for command in _SPLIT.split(script):
        command = " ".join(command.split())
        if command:
            yield command


def check_tools(step: Mapping[str, Any]) -> frozenset[str]:
    """The check tools a step runs: ``{"pytest", "ruff"}``, ``{"uses:github/codeql-action"}``.

    A ``uses:`` step counts when its action's name says it checks (``codeql-action``,
    ``gh-action-pip-audit``, ``super-linter``); a ``run:`` step by the check commands in
    its script (installers, ``echo`` and comments excluded); a step doing neither counts
    when its ``name:`` says it tests, lints or scans, known then by that name.
    """
    tools: set[str] = set()
    action = parse_action(step.get("uses"))
    if action is not None:
        if _PREPARE_ACTIONS.match(action.name):
            return frozenset()
        if _CHECK.search(action.name):
            return frozenset({f"uses:{action.owner.lower()}/{action.repo.lower()}"})
    tools.update(_script_tools(run_text(step)))
    if not tools and (action is not None or step.get("run") is not None):
        name = step.get("name")
        if isinstance(name, str) and _CHECK.search(name):
            tools.add(f"step:{' '.join(name.lower().split())}")
    return frozenset(tools)


@dataclass(frozen=True, slots=True)
class CheckLoss:
    """A check a change removes or neuters in one job."""

    job: str
    tool: str
    detail: str

    @property
    def shown(self) -> str:
        tool = self.tool.removeprefix("uses:").removeprefix("step:")
        return f"{tool!r} in job {self.job!r} ({self.detail})"


def runs_checks(workflow: Workflow) -> bool:
    """Whether any job of ``workflow`` runs a test, lint or security check."""
    return any(workflow.tools.values())


def _identity(step: Mapping[str, Any]) -> str:
    action = parse_action(step.get("uses"))
    return f"uses:{action.name}" if action is not None else " ".join(run_text(step).split())


def removed_checks(before: Workflow, after: Workflow | None) -> list[CheckLoss]:
    """Check tools a job runs before the change and no longer runs after it.

    Jobs are matched by id; a job that disappears may have moved to a new id (its tools
    count as kept when jobs new in ``after`` run them). A check known only by its step's
    name stays while a step keeps that name or that script. ``after`` None or without
    jobs: every check is removed.
    """
    old_jobs = before.jobs
    new_jobs = after.jobs if after is not None else {}
    same = after.signature if after is not None else {}
    moved: frozenset[str] | None = None
    losses: list[CheckLoss] = []
    for jid in old_jobs:
        if jid in same and same[jid] == before.signature[jid]:
            continue  # the same steps, scripts and names: nothing can be lost
        tools = before.tools[jid]
        if not tools:
            continue
        if after is not None and jid in new_jobs:
            kept, detail = after.marks[jid], "its step is gone"
        else:
            if moved is None:
                marks = after.marks if after is not None else {}
                moved = frozenset().union(*(m for j, m in marks.items() if j not in old_jobs))
            kept, detail = moved, "the job is gone"
        if tools <= kept:
            continue  # every tool still runs: nothing is lost
        lost: set[str] = set()
        for step, step_tools in before.step_tools[jid]:
            for tool in step_tools:
                if tool in kept:
                    continue
                if tool.startswith("step:") and f"id:{_identity(step)}" in kept:
                    continue
                lost.add(tool)
        losses.extend(CheckLoss(jid, tool, detail) for tool in sorted(lost))
    return losses


# Text on a new line naming a kept check tool that makes it unable to fail or run less.
_WEAKENING: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), what)
    for pattern, what in (
        (r"\|\|\s*(true|:|exit\s+0|/bin/true|echo\b|printf\b)", "its failure is ignored (|| ...)"),
        (r";\s*(true|:|exit\s+0)\s*$", "it ends in a command that always succeeds"),
        (r"(^|\s)--exit-zero\b", "it always exits zero (--exit-zero)"),
        (r"(^|\s)(--collect-only|--co)(\s|$)", "it collects tests without running them"),
        (r"(^|\s)-k\s*['\"]?\s*not\b", "it deselects tests (-k not ...)"),
        (r"(^|\s)-m\s*['\"]?\s*not\b", "it deselects tests (-m not ...)"),
        (r"(^|\s)--deselect\b", "it deselects tests (--deselect)"),
        (r"(^|\s)--ignore(-glob)?[= ]", "it ignores part of what it checks (--ignore ...)"),
        (r"(^|\s)--fail-under[= ]+0(\.0*)?(\s|$)", "its coverage floor is zero"),
        (r"(^|\s)--exit-code[= ]+0(\s|$)", "it always exits zero (--exit-code 0)"),
        (r"(^|\s)--(no-fail|warn-only)\b", "its findings no longer fail it"),
    )
)


def _lines(script: str) -> frozenset[str]:
    return frozenset(" ".join(line.split()) for line in script.replace("\\\n", " ").splitlines())


def weakened_checks(before: Workflow, after: Workflow) -> list[CheckLoss]:
    """Check commands still in a job whose line gained text that neuters them.

    Only lines new to the job (not in any of its scripts before) that name a check tool
    the job ran before are read, so an unchanged ``|| true`` elsewhere, a new job's script
    or a new ``echo`` line never counts.
    """
    losses: list[CheckLoss] = []
    old_signature = before.signature
    for jid, signature in after.signature.items():
        if old_signature.get(jid, signature) == signature:
            continue  # a new job, or the same scripts: nothing neutered
        tools_before = before.tools.get(jid)
        if not tools_before:
            continue
        for line in after.lines[jid] - before.lines[jid]:
            tools = sorted(_script_tools(line) & tools_before)
            if not tools:
                continue
            for pattern, what in _WEAKENING:
                if pattern.search(line):
                    losses.append(CheckLoss(jid, tools[0], f"{what}: `{line[:80]}`"))
                    break
    return losses


def _script_tools(script: str) -> frozenset[str]:
    """The check tools a script's commands run (installers, ``echo`` and comments aside)."""
    tools: set[str] = set()
    for command in _commands(script):
        if _SETUP.match(command):
            continue
        match = _CHECK.search(command)
        if match:
            tools.add(match.group(1).lower().replace("py.test", "pytest"))
    return frozenset(tools)
