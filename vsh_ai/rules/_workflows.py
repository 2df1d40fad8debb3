"""GitHub Actions denials decided on the parsed workflow, not on changed lines.

:class:`WorkflowRisks` compares both sides of every changed workflow after YAML anchors and
merges are resolved (:mod:`vsh_ai.analysis._workflows`) and decides, with a reason that
names the job and the tool:

reject
    a test, lint or security check removed from a job (its step, its job, or the file's
    jobs gone) or neutered on a line of its own (``|| true``, ``--exit-zero``, ``-k "not
    ..."``, ``--collect-only``); a workflow that ran checks reduced to manual triggers
    only; ``pull_request_target`` together with a checkout of the pull request's head; an
    action replaced by a look-alike (``actoins/checkout``, another owner's ``checkout``);
    a downloaded file executed later in the job without a checksum check; and, read from
    the parsed tree so flow-style YAML is caught too, jobs or steps disabled by ``if:
    false``, ``continue-on-error``, write permissions, downloads piped into a shell and
    secrets printed or forwarded in a script line new to the workflow.
review
    a removed ``push``/``pull_request`` trigger or changed trigger filters,
    ``pull_request_target`` without a head checkout, a downloaded file executed after a
    checksum or signature check, a workflow that no longer parses.

A changed ``with:`` value (a cache key, a Python version) removes nothing: the step is
still there, and allowances decide whether the change is proven.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ..analysis._config import ConfigSyntaxError, TypedSet, typed_equal
from ..analysis._workflows import (
    MANUAL_EVENTS,
    WELL_KNOWN,
    Workflow,
    job_steps,
    lookalike,
    newer,
    parse_action,
    removed_checks,
    run_text,
    runs_checks,
    weakened_checks,
    workflow_side,
)
from ..analysis._workflows_exec import executions_added
from ._base import GlobFields, Rule
from ._glob import matching
from ._paths import validate_globs
from ._workflows_more import Finding, job_findings, matrix_findings, path_findings, pin_findings

__all__ = ("WORKFLOW_FILES", "WorkflowRisks")

WORKFLOW_FILES: tuple[str, ...] = (".github/workflows/**/*.yml", ".github/workflows/**/*.yaml")
_CODE_EVENTS = ("push", "pull_request")
_OFFICIAL = frozenset({"actions"})
_MAX_CREATED = 100  # new workflows read in full per decision; more are reviewed unread
_HEAD_REFS = (
    "github.event.pull_request.head",
    "github.head_ref",
    "refs/pull/",
    "github.event.workflow_run.head",
)


class WorkflowRisks(Rule):
    """Denials on the meaning of workflow changes (see the module docs)."""

    type: Literal["workflow_risks"] = "workflow_risks"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: tuple[str, ...] = Field(
        default=WORKFLOW_FILES, description="Workflow files (matched in any case)."
    )

    known_pins: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description=(
            "Commit SHAs checked to be official releases, per action and version: "
            '{ "actions/checkout" = { "v4.1.1" = "<40-hex sha>" } }. Other new SHA pins of '
            "official actions are reviewed (a SHA already used for the same action is kept)."
        ),
    )

    _check_globs = field_validator("globs")(validate_globs)

    @field_validator("known_pins")
    @classmethod
    def _check_pins(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for action, pins in value.items():
            for version, sha in pins.items():
                if re.fullmatch(r"[0-9a-fA-F]{40}", sha) is None:
                    raise ValueError(
                        f"known_pins.{action}.{version} = {sha!r} is not a 40-hex commit SHA; "
                        "write the full SHA of the release's commit"
                    )
        return value

    def check(self, evidence: Evidence, /) -> Verdict | None:
        findings: list[Finding] = []
        paths: list[str] = []
        created = 0
        for change in evidence.changes:
            path = change.path
            if matching(self.globs, path, ignore_case=True) is None:
                continue
            if evidence.before_bytes(path) is None and evidence.after_bytes(path) is not None:
                created += 1
                if created > _MAX_CREATED:  # reviewed anyway: bounded work on bulk creates
                    findings.append(("review", f"{path} is a new workflow."))
                    paths.append(path)
                    continue
            found = list(_findings(evidence, path, self.known_pins))
            if found:
                findings.extend(found)
                paths.append(path)
        if not findings:
            return None
        worst: Literal["reject", "review"] = (
            "reject" if any(d == "reject" for d, _ in findings) else "review"
        )
        reasons = list(dict.fromkeys(r for d, r in findings if d == worst))
        shown = " ".join(reasons[:4]) + (
            f" And {len(reasons) - 4} more." if len(reasons) > 4 else ""
        )
        advice = (
            " Keep every check running on the same triggers, use the official actions, and "
            "never run downloaded files."
            if worst == "reject"
            else " A human must confirm this."
        )
        return self.verdict(worst, shown + advice, paths=list(dict.fromkeys(paths)))


def _findings(
    evidence: Evidence, path: str, known_pins: Mapping[str, Mapping[str, str]]
) -> Iterator[Finding]:
    try:
        before = workflow_side(evidence, path, "before")
    except ConfigSyntaxError:
        before = None  # an unreadable old side: nothing to compare (allowances refuse it)
    try:
        after = workflow_side(evidence, path, "after")
    except ConfigSyntaxError as error:
        yield (
            "review",
            (
                f"{path} does not parse as YAML ({str(error)[:120]}), so GitHub would run none "
                "of its jobs; fix its syntax."
            ),
        )
        return
    if after is None or after.tree is None:
        if before is not None:
            yield from _removed(path, before, None)
        return
    if before is not None:
        yield from _removed(path, before, after)
        yield from _triggers(path, before, after)
        yield from _matrix_and_runners(path, before, after)
        yield from matrix_findings(path, before, after)
        yield from job_findings(path, before, after)
    elif evidence.before_bytes(path) is None:
        yield "review", f"{path} is a new workflow: new code that runs with the repository's token."
    yield from _target(path, before, after)
    yield from _actions(path, before, after)
    yield from _scripts(path, before, after)
    yield from path_findings(path, before, after)
    text = (evidence.after_bytes(path) or b"").decode("utf-8", "replace")
    yield from pin_findings(path, before, after, text, known_pins)
    for run in executions_added(before, after):
        if run.verified:
            yield (
                "review",
                (
                    f"{path}: job {run.job!r} runs the downloaded file {run.file!r} "
                    f"(`{run.command}`) after a checksum or signature check."
                ),
            )
        else:
            yield (
                "reject",
                (
                    f"{path}: job {run.job!r} downloads {run.file!r} and then executes it "
                    f"(`{run.command}`); a download executed is code nobody reviewed."
                ),
            )


def _removed(path: str, before: Workflow, after: Workflow | None) -> Iterator[Finding]:
    for loss in removed_checks(before, after):
        yield "reject", f"{path} removes the check {loss.shown}."
    if after is not None:
        for loss in weakened_checks(before, after):
            yield "reject", f"{path} weakens the check {loss.shown}."


def _automatic(triggers: Mapping[str, Any]) -> list[str]:
    return [event for event in triggers if event not in MANUAL_EVENTS]


def _triggers(path: str, before: Workflow, after: Workflow) -> Iterator[Finding]:
    old, new = before.triggers, after.triggers
    if not old:
        return
    if _automatic(old) and not _automatic(new):
        checks = runs_checks(before)
        what = ", ".join(sorted(new)) or "no trigger at all"
        decision: Literal["reject", "review"] = "reject" if checks else "review"
        yield (
            decision,
            (
                f"{path} no longer runs on its own: its triggers {sorted(_automatic(old))} are "
                f"replaced by {what}, which disables its checks on every change."
                if checks
                else f"{path} no longer runs on its own (only {what})."
            ),
        )
        return
    for event in _CODE_EVENTS:
        if (
            event == "pull_request"
            and event in old
            and event not in new
            and "pull_request_target" not in new
            and runs_checks(before)
        ):
            yield (
                "reject",
                (
                    f"{path} removes its pull_request trigger, so its checks no longer run "
                    "on pull_request events (pull requests from forks are never checked)."
                ),
            )
            continue
        if event in old and event not in new:
            yield (
                "review",
                f"{path} removes its {event} trigger, so its jobs stop running on {event} events.",
            )
        elif event in old and event in new and not typed_equal(old[event], new[event]):
            only = _docs_only(new[event])
            if only and runs_checks(before) and not _docs_only(old[event]):
                yield (
                    "reject",
                    (
                        f"{path} now runs on {event} only when {', '.join(only[:4])} change, "
                        "so its checks no longer run on code changes."
                    ),
                )
                continue
            yield (
                "review",
                (
                    f"{path} changes the filters of its {event} trigger, which can stop its jobs "
                    "from running on the changes they guard."
                ),
            )


def _head_checkout(workflow: Workflow) -> bool:
    for job in workflow.jobs.values():
        for step in job_steps(job):
            action = parse_action(step.get("uses"))
            args = step.get("with")
            if action is None or action.name != "actions/checkout" or not isinstance(args, Mapping):
                continue
            ref = args.get("ref", args.get("repository", ""))
            if isinstance(ref, str) and any(marker in ref for marker in _HEAD_REFS):
                return True
    return False


def _target(path: str, before: Workflow | None, after: Workflow) -> Iterator[Finding]:
    old = before.triggers if before is not None else {}
    new = after.triggers
    for event in ("pull_request_target", "workflow_run"):
        if event not in new:
            continue
        head = _head_checkout(after)
        if event in old and (before is not None and _head_checkout(before) == head):
            continue
        if head:
            yield (
                "reject",
                (
                    f"{path} runs on {event} and checks out the pull request's code: untrusted "
                    "code then runs with the repository's token and secrets."
                ),
            )
        elif event not in old:
            yield (
                "review",
                (
                    f"{path} adds the {event} trigger, which gives runs started from forks the "
                    "repository's token and secrets."
                ),
            )


def _uses(workflow: Workflow | None) -> set[str]:
    if workflow is None:
        return set()
    return {
        " ".join(str(step.get("uses")).split())
        for job in workflow.jobs.values()
        for step in job_steps(job)
        if step.get("uses") is not None
    }


def _actions(path: str, before: Workflow | None, after: Workflow) -> Iterator[Finding]:
    old_uses = _uses(before)
    used: set[str] = set()
    versions: dict[str, list[tuple[int, ...]]] = {}
    for text in old_uses:
        action = parse_action(text)
        if action is not None:
            used.add(f"{action.owner}/{action.repo}".lower())
            if action.version is not None:
                versions.setdefault(action.name, []).append(action.version)
    known = sorted(used | WELL_KNOWN)
    seen: set[str] = set()
    for text in sorted(_uses(after) - old_uses):
        if text.startswith("docker://"):
            if "@sha256:" not in text:
                yield "review", f"{path} runs the container {text[:80]} by a movable tag."
            continue
        action = parse_action(text)
        if action is None:
            continue
        name = f"{action.owner}/{action.repo}".lower()
        if name not in used and name not in WELL_KNOWN and name not in seen:
            seen.add(name)
            imitated = lookalike(action, known)
            if imitated is not None:
                yield (
                    "reject",
                    (
                        f"{path} uses {action.owner}/{action.repo}, which is not {imitated} but "
                        "another account's repository with a look-alike name."
                    ),
                )
                continue
        old_names = {a.name for t in old_uses if (a := parse_action(t)) is not None}
        if action.path and action.name not in old_names:
            yield (
                "review",
                (
                    f"{path} runs {action.name}, the action in a sub-folder of "
                    f"{action.owner}/{action.repo}, not {action.owner}/{action.repo} itself."
                ),
            )
            continue
        if action.is_sha:
            if action.owner.lower() not in _OFFICIAL:
                yield (
                    "review",
                    (
                        f"{path} uses the third-party action {action.owner}/{action.repo} at "
                        f"commit {action.ref[:12]}; a human checks another owner's code."
                    ),
                )
            continue
        if action.owner.lower() not in _OFFICIAL:
            yield (
                "review",
                (
                    f"{path} uses the third-party action {text[:80]} at the movable ref "
                    f"{action.ref[:40]}; third-party actions go to a human."
                ),
            )
        elif action.version is None:
            yield "review", f"{path} moves {action.name} to {action.ref[:40]}, not a release."
        elif any(newer(action.version, old) for old in versions.get(action.name, ())):
            yield "review", f"{path} moves {action.name} back to the older {action.ref}."


def _matrix_and_runners(path: str, before: Workflow, after: Workflow) -> Iterator[Finding]:
    for jid, job in after.jobs.items():
        old = before.jobs.get(jid)
        if old is None:
            continue
        if _self_hosted(job.get("runs-on")) and not _self_hosted(old.get("runs-on")):
            yield (
                "review",
                (
                    f"{path}: job {jid!r} now runs on a self-hosted runner, inside the network, "
                    "with code from pull requests."
                ),
            )
        matrix, old_matrix = _matrix(job), _matrix(old)
        if (
            "matrix" in str(job.get("runs-on"))
            and _self_hosted_in(matrix)
            and not _self_hosted_in(old_matrix)
        ):
            yield (
                "review",
                f"{path}: job {jid!r} can now run on a self-hosted runner (a matrix value "
                "its runs-on uses), inside the network, with code from pull requests.",
            )
        if not typed_equal(matrix.get("exclude"), old_matrix.get("exclude")):
            yield "review", f"{path}: job {jid!r} changes its matrix excludes."
        for key, values in old_matrix.items():
            new = matrix.get(key)
            if key in ("exclude", "include") or not isinstance(values, list):
                continue
            if isinstance(new, list):
                present = TypedSet(new)
                gone = [v for v in values if v not in present]
                if gone:
                    shown = ", ".join(map(str, gone[:5]))
                    if key.lower() in ("language", "languages") and _scans_code(job):
                        yield (
                            "reject",
                            f"{path}: job {jid!r} drops {shown} from the languages its code "
                            "scanning analyses (a security check removed); keep them.",
                        )
                        continue
                    yield "review", f"{path}: job {jid!r} drops {shown} from its matrix {key}."


_SCANNERS = ("github/codeql-action/", "github/codeql-action@")


def _scans_code(job: Mapping[str, Any]) -> bool:
    """Whether a step of ``job`` runs GitHub's code scanning (CodeQL) action."""
    steps = job.get("steps")
    return isinstance(steps, list) and any(
        isinstance(step, Mapping) and str(step.get("uses", "")).lower().startswith(_SCANNERS)
        for step in steps
    )


def _matrix(job: Mapping[str, Any]) -> Mapping[str, Any]:
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, Mapping) else None
    return matrix if isinstance(matrix, Mapping) else {}


def _self_hosted_in(value: Any) -> bool:
    """Whether any string in a matrix (lists and include entries too) names self-hosted."""
    if isinstance(value, str):
        return "self-hosted" in value.lower()
    if isinstance(value, Mapping):
        return any(_self_hosted_in(v) for v in value.values())
    if isinstance(value, list):
        return any(_self_hosted_in(v) for v in value)
    return False


def _self_hosted(runs_on: Any) -> bool:
    if isinstance(runs_on, Mapping):
        runs_on = runs_on.get("labels", runs_on.get("group"))
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    return any(isinstance(label, str) and "self-hosted" in label.lower() for label in labels)


# Script text that runs a download or leaks a secret, read per line of each step's script
# (the judge's line patterns miss scripts spelled inside flow-style YAML).
_SCRIPT_RISKS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), what)
    for pattern, what in (
        (
            r"(curl|wget|iwr|Invoke-WebRequest)\b[^|\n]*\|\s*(sudo\s+)?((ba|z|da|k)?sh|"
            r"python[0-9.]*|perl|ruby|node|iex|Invoke-Expression|pwsh)\b",
            "pipes a download into a shell or interpreter",
        ),
        (r"(<\(|\$\(|`)\s*(curl|wget)\b", "executes a download through substitution"),
        (r"(echo|printf|cat|tee)\b.*\$\{\{\s*secrets\.", "prints a secret"),
        (r"\$\{\{\s*secrets\.[^}]*\}\}.*(\||>>?)", "forwards a secret to another command or file"),
        (r"toJSON\(\s*secrets\s*\)", "dumps every secret"),
    )
)
_FALSE = frozenset({"false", "0", "${{ false }}", "${{false}}", "${{ 0 }}", "${{0}}"})


def _off(value: Any) -> bool:
    """``if:`` values that never run: ``false``, ``0`` and their expression forms."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value == 0
    return isinstance(value, str) and " ".join(value.split()).lower() in _FALSE


def _ignored(value: Any) -> bool:
    """``continue-on-error`` values that let a failure pass (``true`` or an expression)."""
    return value is True or (isinstance(value, str) and (value.strip() == "true" or "${{" in value))


def _writes(permissions: Any) -> bool:
    if isinstance(permissions, str):
        return permissions.strip() in ("write-all", "write")
    if isinstance(permissions, Mapping):
        return any(isinstance(v, str) and v.strip() == "write" for v in permissions.values())
    return False


def _scripts(path: str, before: Workflow | None, after: Workflow) -> Iterator[Finding]:
    """Disabled jobs and steps, ignored failures, write permissions and risky script lines
    new in ``after`` (structural: every YAML spelling alike)."""
    old_jobs = before.jobs if before is not None else {}
    old_lines: frozenset[str] | None = None
    tree = after.tree or {}
    old_tree = (before.tree or {}) if before is not None else {}
    if _writes(tree.get("permissions")) and not _writes(old_tree.get("permissions")):
        yield "reject", f"{path} grants the workflow write permissions."
    for jid, job in after.jobs.items():
        old = old_jobs.get(jid, {})
        for key, what in (("if", "disables"), ("continue-on-error", "ignores the failures of")):
            test = _off if key == "if" else _ignored
            if test(job.get(key)) and not test(old.get(key)):
                yield "reject", f"{path} {what} job {jid!r} ({key}: {job.get(key)!r})."
        if _writes(job.get("permissions")) and not _writes(old.get("permissions")):
            yield "reject", f"{path} grants job {jid!r} write permissions."
        old_steps = {_step_key(s): s for s in job_steps(old)}
        for step in job_steps(job):
            before_step = old_steps.get(_step_key(step), {})
            for key, what in (("if", "disables"), ("continue-on-error", "ignores the failures of")):
                test = _off if key == "if" else _ignored
                if test(step.get(key)) and not test(before_step.get(key)):
                    yield (
                        "reject",
                        f"{path} {what} a step of job {jid!r} ({key}: {step.get(key)!r}).",
                    )
        if before is not None and before.signature.get(jid) == after.signature[jid]:
            continue  # the same scripts: no new line
        if old_lines is None:
            old_lines = frozenset().union(*before.lines.values()) if before else frozenset()
        for line in after.lines.get(jid, frozenset()) - old_lines:
            for pattern, what in _SCRIPT_RISKS:
                if pattern.search(line):
                    yield "reject", f"{path}: job {jid!r} {what} (`{line[:80]}`)."
                    break


def _step_key(step: Mapping[str, Any]) -> str:
    action = parse_action(step.get("uses"))
    return f"uses:{action.name}" if action is not None else " ".join(run_text(step).split())


# Paths that hold documentation only: a trigger filtered to these never sees code.
_DOCS = re.compile(
    r"(?i)^(\*\*/)?(docs?|documentation|site|\.github/ISSUE_TEMPLATE)(/.*)?$|"
    r"^(\*\*/)?[^/]*\.(md|rst|txt|adoc)$|^(\*\*/)?(README|CHANGELOG|CHANGES|LICENSE|AUTHORS)[^/]*$"
)


def _docs_only(config: Any) -> list[str]:
    """The trigger's ``paths`` when every one of them is documentation (else empty)."""
    paths = config.get("paths") if isinstance(config, Mapping) else None
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths:
        return []
    wanted = [p for p in paths if isinstance(p, str) and not p.startswith("!")]
    if not wanted or len(wanted) != len(paths):
        return []
    return wanted if all(_DOCS.match(p.strip()) for p in wanted) else []
