"""More workflow findings for :class:`~vsh_ai.rules._workflows.WorkflowRisks`.

Each function compares both parsed sides of one workflow and yields ``(decision, reason)``:
commit-SHA pins the judge cannot check, cache and artifact paths that take in credential
folders or a tool's whole home folder, matrix entries dropped or pasted into scripts as
shell code, conditions that skip checks, the environment printed from a job holding
secrets, checksum checks removed, and new downloads.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any, Literal

from ..analysis._config import typed_equal
from ..analysis._workflows import (
    Workflow,
    job_steps,
    newer,
    parse_action,
    run_text,
    version_of,
)

Finding = tuple[Literal["reject", "review"], str]
_PIN_COMMENT = re.compile(r"@([0-9a-fA-F]{40})[ \t]*#[ \t]*(\S+)")
Pins = Mapping[str, Mapping[str, str]]

# Folders and files of the runner's home that hold credentials (home-relative).
_CREDENTIALS = (
    ".ssh", ".aws", ".docker", ".gnupg", ".kube", ".azure", ".config/gh", ".config/gcloud",
    ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".gem/credentials",
    ".m2/settings.xml", ".m2/settings-security.xml", ".gradle/gradle.properties",
    ".cargo/credentials", ".cargo/credentials.toml", ".terraform.d", ".vault-token",
)  # fmt: skip
# Package managers' cache folders (home-relative): the only home paths a cache may hold.
CACHE_HOMES = (
    ".cache/*", ".npm", ".m2/repository", ".cargo/registry", ".cargo/git", ".gradle/caches",
    ".gradle/wrapper", "go/pkg/mod", ".pnpm-store", ".local/share/pnpm/store",
    ".yarn/berry/cache", ".nuget/packages", ".ivy2/cache", ".sbt/boot",
    ".composer/cache", ".bundle/cache", ".conda/pkgs", ".rustup/toolchains",
)  # fmt: skip
_HOME = re.compile(
    r"^(\$HOME|\$\{HOME\}|\$\{\{\s*env\.HOME\s*\}\}|/home/runner|/root|/Users/runner)(?=/|$)"
)
_WORKSPACE = re.compile(
    r"^(\$\{\{\s*github\.workspace\s*\}\}|\$GITHUB_WORKSPACE|\$\{GITHUB_WORKSPACE\})(?=/|$)"
)
_CACHE = re.compile(r"^actions/cache(/restore|/save)?$")
_UPLOAD = "actions/upload-artifact"


def _comps(text: str) -> list[str]:
    return [c for c in text.split("/") if c and c != "."]


def _covers(pattern: list[str], target: list[str]) -> bool:
    """``pattern`` (globs allowed; ``**`` spans folders) names ``target`` or something in it."""
    for i, part in enumerate(pattern):
        if part == "**":
            return True
        if i >= len(target):
            return True  # target lies inside what pattern names
        if not fnmatchcase(target[i], part):
            return False
    return True


def _inside(pattern: list[str], target: list[str]) -> bool:
    """``pattern`` names ``target`` itself or something inside it."""
    return len(pattern) >= len(target) and _covers(pattern, target)


def _path_finding(line: str, what: str) -> Finding | None:
    text = _WORKSPACE.sub(".", _HOME.sub("~", line.strip()))
    if not text or text.startswith("!"):
        return None  # an exclusion takes nothing in
    if text.startswith(("$", "%")):
        return "review", f"{what} {line.strip()!r}, a folder named by a variable"
    home = text == "~" or text.startswith("~/")
    if not home and not text.startswith("/"):
        rel = posixpath.normpath(text)
        if rel.startswith("..") or _comps(rel)[:1] in ([".git"], [".github"]):
            return "review", f"{what} {line.strip()!r}, outside the project's own files"
        return None
    comps = _comps(posixpath.normpath(text[1:] if home else text))
    if not home:
        return "review", f"{what} {line.strip()!r}, an absolute path outside the workspace"
    for credential in _CREDENTIALS:
        target = _comps(credential)
        if _inside(comps, target):
            return "reject", f"{what} ~/{'/'.join(comps)}, which holds credentials (~/{credential})"
    if cache_home(text):
        return None
    shown = "~/" + "/".join(comps)
    return (
        "review",
        f"{what} {shown}, a tool's whole home folder rather than a package manager's cache "
        "(~/.cache/pip, ~/.npm, ~/.m2/repository, ~/.cargo/registry, ~/.gradle/caches), "
        "and such folders hold credential files",
    )


def cache_home(line: str) -> bool:
    """``~/...`` names a package manager's cache folder (or something in one)."""
    comps = _comps(posixpath.normpath(line.strip()[1:]))
    within = (
        len(comps) >= len(home)
        and all(fnmatchcase(c, h) for c, h in zip(comps, home, strict=False))
        for home in map(_comps, CACHE_HOMES)
    )
    return any(within) and not any(_covers(comps, _comps(c)) for c in _CREDENTIALS)


def _path_lines(step: Mapping[str, Any]) -> list[str]:
    args = step.get("with")
    value = args.get("path") if isinstance(args, Mapping) else None
    return value.splitlines() if isinstance(value, str) else []


def path_findings(path: str, before: Workflow | None, after: Workflow) -> Iterator[Finding]:
    """New cache or artifact paths that take in credentials or a tool's whole home."""
    for jid, job in after.jobs.items():
        old_job = before.jobs.get(jid, {}) if before is not None else {}
        old = {
            (a.name, line.strip())
            for step in job_steps(old_job)
            if (a := parse_action(step.get("uses"))) is not None
            for line in _path_lines(step)
        }
        for step in job_steps(job):
            action = parse_action(step.get("uses"))
            if action is None or not (_CACHE.match(action.name) or action.name == _UPLOAD):
                continue
            what = (
                f"{path}: job {jid!r} saves into the Actions cache, which later runs restore,"
                if _CACHE.match(action.name)
                else f"{path}: job {jid!r} uploads as a downloadable artifact"
            )
            for line in _path_lines(step):
                if (action.name, line.strip()) in old:
                    continue
                words = line.split()
                for word in words:
                    found = _path_finding(word, what)
                    if found is None:
                        continue
                    if len(words) > 1:  # YAML folds plain multi-line values: one odd path
                        found = ("review", found[1] + f" (in the one path {line.strip()!r})")
                    yield found[0], found[1] + "."
                    break


def pin_findings(
    path: str, before: Workflow | None, after: Workflow, text: str, known: Pins
) -> Iterator[Finding]:
    """Official actions newly pinned to a commit SHA that is neither already used for that
    action nor listed in the judge's ``known_pins`` under the version its comment names."""
    seen: set[tuple[str, str]] = set()
    newest: dict[str, tuple[tuple[int, ...], str]] = {}  # per action: newest version used
    if before is not None:
        for job in before.jobs.values():
            for step in job_steps(job):
                a = parse_action(step.get("uses"))
                if a is not None and a.is_sha:
                    seen.add((a.name, a.ref.lower()))
                elif a is not None and a.version is not None:
                    best = newest.get(a.name)
                    if best is None or newer(best[0], a.version):
                        newest[a.name] = (a.version, a.ref)
    table = {name.lower(): pins for name, pins in known.items()}
    comments: dict[str, str] = {}
    for sha, note in _PIN_COMMENT.findall(text):  # one pass over the text
        comments.setdefault(sha.lower(), note)
    for job in after.jobs.values():
        for step in job_steps(job):
            action = parse_action(step.get("uses"))
            if action is None or not action.is_sha or action.owner.lower() != "actions":
                continue
            sha = action.ref.lower()
            if (action.name, sha) in seen:
                continue
            seen.add((action.name, sha))
            comment = comments.get(sha)
            pins = table.get(action.name, {})
            listed = [v for v, s in pins.items() if s.lower() == sha]
            claimed = version_of(comment) if comment else None
            if listed and claimed is not None and not any(_release_of(v, claimed) for v in listed):
                yield (
                    "review",
                    f"{path} pins {action.name} to commit {sha[:12]} with the comment {comment}, "
                    f"but that commit is {listed[0]} in the judge's pin table.",
                )
                continue
            release = version_of(listed[0]) if listed else None
            used = newest.get(action.name)
            if release is not None and used is not None and newer(release, used[0]):
                yield (
                    "review",
                    f"{path} pins {action.name} to commit {sha[:12]}, the release {listed[0]} "
                    f"in the judge's pin table, older than the {used[1]} it used.",
                )
                continue
            if listed:
                continue  # the release the judge's table names, not older than before
            yield (
                "review",
                f"{path} pins {action.name} to commit {sha[:12]}"
                + (f" ({comment})" if comment else "")
                + ": a commit SHA the judge cannot check is the release its comment names (a "
                "fork's commit is reachable through the official repository too); list it in "
                "the judge's known_pins once checked.",
            )


def _release_of(listed: str, claimed: tuple[int, ...]) -> bool:
    """``listed`` (v4.1.1) is the release ``claimed`` names (v4.1.1, v4.1 or v4)."""
    version = version_of(listed)
    return version is not None and version[: len(claimed)] == claimed


def _matrix(job: Mapping[str, Any]) -> Mapping[str, Any]:
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, Mapping) else None
    return matrix if isinstance(matrix, Mapping) else {}


_SHELL = re.compile(r"[;|&`$<>\n]")
_CODE = re.compile(r"[;|&`\n]|\$\(")  # ends or chains a command when pasted unquoted
_RUNS = re.compile(r"`|\$\(")  # runs a command inside double quotes too
_PYTHON_KEYS = ("python", "python-version", "python_version", "py")


def matrix_findings(path: str, before: Workflow, after: Workflow) -> Iterator[Finding]:
    """Include entries dropped, matrix values holding shell syntax that a script pastes in,
    and Python versions YAML reads as numbers like 3.1."""
    for jid, job in after.jobs.items():
        old_job = before.jobs.get(jid)
        if old_job is None:
            continue
        new, old = _matrix(job), _matrix(old_job)
        old_include, new_include = old.get("include"), new.get("include")
        if isinstance(old_include, list):
            kept = new_include if isinstance(new_include, list) else []
            kept_keys = {_key(n) for n in kept}
            gone = [e for e in old_include if _key(e) not in kept_keys]
            if gone:
                yield (
                    "review",
                    f"{path}: job {jid!r} drops or changes {len(gone)} entry(ies) of its matrix "
                    f"include ({str(gone[0])[:60]}), which can end testing a platform or version.",
                )
        script = " ".join(run_text(step) for step in job_steps(job))
        old_values = {(k, _key(v)) for k, v in _values(old)}
        for key, value in _values(new):
            if (key, _key(value)) in old_values:
                continue
            if isinstance(value, str) and _SHELL.search(value):
                used = _pasted(script, key, value)
                yield (
                    "reject" if used else "review",
                    f"{path}: job {jid!r} adds the matrix value {key} = {value[:60]!r}, shell "
                    + ("syntax its scripts run as code." if used else "syntax in a matrix value."),
                )
            elif key in _PYTHON_KEYS and isinstance(value, float) and repr(value) in ("3.1", "3.2"):
                yield (
                    "review",
                    f"{path}: job {jid!r} adds Python {value!r} to its matrix: YAML reads an "
                    f"unquoted 3.{int(value * 10) % 10}0 as the number {value!r}; quote it.",
                )


def _key(value: Any) -> str:
    """A value with its type, for set look-ups (different spellings only cost a review)."""
    return f"{type(value).__name__}:{value!r}"


def _pasted(script: str, key: str, value: str) -> bool:
    """``${{ matrix.KEY }}`` appears in a script where ``value`` runs as shell code: unquoted
    with a command separator, or in double quotes with a command substitution."""
    for match in re.finditer(rf"\$\{{\{{\s*matrix\.{re.escape(key)}\s*\}}\}}", script):
        line = script[script.rfind("\n", 0, match.start()) + 1 : match.start()]
        quote = ""
        for char in line:
            if quote and char == quote:
                quote = ""
            elif not quote and char in "'\"":
                quote = char
        if (not quote and _CODE.search(value)) or (quote == '"' and _RUNS.search(value)):
            return True
    return False


def _values(matrix: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for key, values in matrix.items():
        if key in ("include", "exclude") and isinstance(values, list):
            for entry in values:
                if isinstance(entry, Mapping):
                    yield from ((str(k), v) for k, v in entry.items())
        elif isinstance(values, list):
            yield from ((str(key), v) for v in values)


_EVENT_TEST = re.compile(
    r"""^\s*(?:\$\{\{)?\s*github\.event_name\s*(==|!=)\s*['"]([a-z_]+)['"]\s*(?:\}\})?\s*$"""
)


def _skipped_on(condition: object, automatic: list[str]) -> list[str]:
    """The automatic triggers (push, pull_request) on which ``condition`` is provably false:
    ``github.event_name == 'X'`` skips every other one, ``!= 'X'`` skips X."""
    test = _EVENT_TEST.match(str(condition))
    if test is None:
        return []
    operator, event = test.groups()
    if operator == "==":
        return [e for e in automatic if e != event]
    return [e for e in automatic if e == event]


_PRINT_ENV = re.compile(r"^(printenv|env|set|export\s+-p|declare\s+-p[x]?|compgen\s+-e)\s*(\||$)")
_VERIFY = re.compile(
    r"\b(sha(1|224|256|384|512)sum|shasum|b2sum|md5sum)\b.*(-c\b|--check)|\bgpg\b.*--verify|"
    r"\bcosign\s+verify|\bminisign\s+-V|\bopenssl\s+dgst\b.*-verify|\bslsa-verifier\b"
)
_DOWNLOAD = re.compile(r"\b(curl|wget|Invoke-WebRequest|iwr)\b")


def _secret_env(*envs: Any) -> bool:
    return any(
        isinstance(env, Mapping) and any("secrets." in str(v) for v in env.values()) for env in envs
    )


def job_findings(path: str, before: Workflow, after: Workflow) -> Iterator[Finding]:
    """New conditions on checking jobs and steps, the environment printed where it holds
    secrets, checksum checks removed from a job that still downloads, new downloads."""
    automatic = [e for e in after.triggers if e in ("push", "pull_request")]
    tree_env = (after.tree or {}).get("env")
    for jid, job in after.jobs.items():
        old_job = before.jobs.get(jid)
        if old_job is None:
            continue
        checks = bool(before.tools.get(jid))
        condition = job.get("if")
        if checks and condition is not None and not typed_equal(condition, old_job.get("if")):
            skipped = _skipped_on(condition, automatic)
            if skipped:
                yield (
                    "reject",
                    f"{path}: job {jid!r} gets the condition if: {str(condition)[:80]}, so its "
                    f"checks are skipped on {' and '.join(skipped)} events.",
                )
            else:
                yield (
                    "review",
                    f"{path}: job {jid!r} gets the condition if: {str(condition)[:80]}, which "
                    "can skip its checks.",
                )
        old_conditions = {_key(s.get("if")) for s in job_steps(old_job)}
        for step, tools in after.step_tools.get(jid, ()):  # check tools computed once per side
            condition = step.get("if")
            if condition is None or not tools:
                continue
            if _key(condition) in old_conditions:
                continue
            skipped = _skipped_on(condition, automatic)
            if skipped:
                yield (
                    "reject",
                    f"{path}: a check step of job {jid!r} gets the condition if: "
                    f"{str(condition)[:80]}, so it is skipped on {' and '.join(skipped)} events.",
                )
            else:
                yield (
                    "review",
                    f"{path}: a check step of job {jid!r} gets the condition if: "
                    f"{str(condition)[:80]}, which can skip it.",
                )
        new_lines = after.lines.get(jid, frozenset()) - before.lines.get(jid, frozenset())
        for step in job_steps(job):
            if not _secret_env(tree_env, job.get("env"), step.get("env")):
                continue
            for line in new_lines & _step_lines(step):
                if _PRINT_ENV.match(line):
                    yield (
                        "reject",
                        f"{path}: job {jid!r} prints its environment (`{line[:60]}`), which "
                        "holds secrets, into the log.",
                    )
        old_checks = {x for x in before.lines.get(jid, ()) if _VERIFY.search(x)}
        new_checks = {x for x in after.lines.get(jid, ()) if _VERIFY.search(x)}
        old_fetches = {x for x in before.lines.get(jid, ()) if _DOWNLOAD.search(x)}
        if len(new_checks) < len(old_checks):
            gone = sorted(old_checks - new_checks)[0]
            kept = old_fetches <= after.lines.get(jid, frozenset())  # every download still there
            yield (
                "reject" if kept and old_fetches else "review",
                f"{path}: job {jid!r} removes the checksum or signature check `{gone[:80]}`"
                + (" of a file it still downloads." if kept and old_fetches else "."),
            )
        for line in sorted(new_lines):
            if _DOWNLOAD.search(line):
                yield (
                    "review",
                    f"{path}: job {jid!r} downloads in a new script line (`{line[:80]}`): bytes "
                    "from the network a human checks.",
                )
                break


def _step_lines(step: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(" ".join(x.split()) for x in run_text(step).replace("\\\n", " ").splitlines())
