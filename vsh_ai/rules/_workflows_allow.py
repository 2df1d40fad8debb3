"""Prove everyday workflow edits allowed by comparing the parsed workflows.

:class:`AllowWorkflowEdits` claims a modify of a workflow when, after YAML anchors and
merges are resolved, the two trees differ only by:

- a step's ``uses:`` moved within the same official action (``actions/*`` by default): to
  a newer version tag, or pinned to a full 40-hex commit SHA (a ``# vX.Y`` comment on that
  line must not name an older version; a SHA pin never goes back to a tag); other
  owners' actions never move (a human checks another owner's code);
- Python versions added to a job's matrix (``python-version`` and its spellings; existing
  entries kept, ``3.N`` strings or unambiguous numbers);
- caching: ``cache``/``cache-dependency-path`` (and setup-uv's ``enable-cache``) set,
  changed or removed on a setup action; ``path``/``key``/``restore-keys`` of an existing
  ``actions/cache`` step changed; an ``actions/cache`` step inserted or removed (paths,
  keys and expressions from safe contexts only: never ``secrets`` or event text);
- nothing at all (comments, layout, quoting, flow vs block style).

Every other key must keep its typed value, steps stay in order, and added lines (comments
included, since comments are not parsed) must hold no opaque token except a commit SHA
after ``@`` on a ``uses:`` line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence
from ..analysis._changes import NetChange
from ..analysis._config import ConfigSyntaxError, typed_equal
from ..analysis._memo import analysis_of
from ..analysis._workflows import ActionRef, newer, parse_action, version_of, workflow_side
from ._base import Allowance, Claim, GlobFields
from ._glob import matching
from ._paths import validate_globs
from ._workflows import WORKFLOW_FILES
from ._workflows_matrix import new_value_problem
from ._workflows_more import cache_home

__all__ = ("AllowWorkflowEdits",)

_PYTHON_KEYS = frozenset(
    {"python", "python-version", "python_version", "python-versions", "py", "pyver"}
)
_PYTHON = re.compile(r"(3\.[0-9]{1,2}(\.[0-9]+)?(-dev)?|pypy-?3\.[0-9]{1,2})")
_LABEL_KEYS = frozenset({"name", "label", "display-name", "display_name", "title"})
_LABEL = re.compile(r"[A-Za-z0-9 ._()+-]{1,60}")
_CACHE_ACTION = re.compile(r"^actions/cache(/restore|/save)?$")
_SETUP_ACTION = re.compile(r"^(actions/setup-[a-z]+|astral-sh/setup-uv)$")
_SETUP_CACHE_KEYS = frozenset(
    {"cache", "cache-dependency-path", "enable-cache", "cache-dependency-glob"}
)
_CACHE_MANAGERS = frozenset(
    {"pip", "pipenv", "poetry", "npm", "yarn", "pnpm", "maven", "gradle", "sbt", "true", "false"}
)
_CACHE_STEP_KEYS = frozenset({"name", "id", "uses", "with"})
_CACHE_WITH_KEYS = frozenset(
    {"path", "key", "restore-keys", "enableCrossOsArchive", "fail-on-cache-miss", "lookup-only"}
)
# ${{ ... }} in cache keys and paths: contexts whose values are the runner's, the matrix's
# or file hashes, never secrets or text from the triggering event.
_EXPRESSION = re.compile(r"\$\{\{([^}]*)\}\}")
_MAX_VALUE = 4096
_SAFE_EXPRESSION = re.compile(
    r"\s*(runner\.(os|arch|temp|tool_cache)|matrix\.[A-Za-z0-9_-]+|env\.[A-Za-z0-9_]+|"
    r"steps\.[A-Za-z0-9_-]+\.outputs\.[A-Za-z0-9_-]+|inputs\.[A-Za-z0-9_-]+|"
    r"github\.(sha|ref|ref_name|run_id|run_number|run_attempt|workflow|job|base_ref|"
    r"event_name|repository)|hashFiles\(\s*('[-A-Za-z0-9_./*!{},]+'\s*,?\s*)+\))\s*"
)
_LITERAL = re.compile(r"[-A-Za-z0-9_./*+~!|@:,=]*")
_PATH_LINE = re.compile(r"!?[-A-Za-z0-9_./*~@+]+")
# Cache paths a restored (possibly poisoned) cache must never write: credentials,
# repository metadata and files a shell runs.
_PATH_FORBIDDEN = re.compile(
    r"(^|/)(\.git|\.github|\.ssh|\.gnupg|\.aws|\.docker|\.kube|\.config/gh|\.bashrc|"
    r"\.bash_profile|\.profile|\.zshrc|\.npmrc|\.pypirc|\.netrc|\.git-credentials|"
    r"\.local/bin|bin)(/|$)"
)
_TOKEN = re.compile(r"[A-Za-z0-9+=_-]{12,}")
_PIN_COMMENT = re.compile(r"@([0-9a-fA-F]{40})\s*#\s*(\S+)")


def _mixed(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _opaque(token: str) -> bool:
    """Random-looking: mixed letters and digits in a long run (``ghp_X9...``, base64)."""
    if not _mixed(token):
        return False
    parts = re.split(r"[-_=+]", token)
    return len(parts) == 1 or any(len(p) >= 8 and _mixed(p) for p in parts)


def _safe_text(text: str, *, path: bool = False) -> bool:
    """A cache key or path: literal characters and safe ``${{ }}`` expressions only."""
    if len(text) > _MAX_VALUE:
        return False  # no real cache key or path is this long (and scans stay linear)
    rest = _EXPRESSION.sub(lambda m: "x" if _SAFE_EXPRESSION.fullmatch(m.group(1)) else "\0", text)
    if "\0" in rest or "${{" in rest:
        return False
    for line in rest.splitlines() or [""]:
        line = line.strip()
        if not line:
            continue
        if path:
            if _PATH_LINE.fullmatch(line) is None or _PATH_FORBIDDEN.search(line.lstrip("!~/")):
                return False
            if line.lstrip("!").startswith("/") or ".." in line.split("/"):
                return False
            if line.startswith("~") and not cache_home(line):
                return False  # a tool's whole home folder holds credential files
        elif _LITERAL.fullmatch(line) is None:
            return False
    return True


class AllowWorkflowEdits(Allowance):
    """Claims workflow edits that only bump or pin actions, add Python versions or adjust
    caching (see the module docs)."""

    type: Literal["allow_workflow_edits"] = "allow_workflow_edits"
    glob_fields: ClassVar[GlobFields] = (("paths", True),)
    paths: tuple[str, ...] = Field(
        default=WORKFLOW_FILES, description="Workflow files claimed (matched in any case)."
    )
    official_owners: tuple[str, ...] = Field(
        default=("actions",), description="Owners whose actions may move to newer version tags."
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(validate_globs)

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        path = change.path
        if matching(self.paths, path, ignore_case=True) is None:
            return None
        if change.kind != "modify":
            return Claim(False, f"{path}: a {change.kind} of a workflow; only edits are claimed")
        try:
            before = workflow_side(evidence, path, "before")
            after = workflow_side(evidence, path, "after")
        except ConfigSyntaxError as error:
            return Claim(False, f"{path} cannot be parsed as YAML: {str(error)[:160]}")
        if before is None or after is None or before.tree is None or after.tree is None:
            return Claim(False, f"{path} is not a workflow mapping on both sides")
        lines = analysis_of(evidence).new_lines(path)
        if lines is None:
            return Claim(False, f"{path} is binary")
        pins: dict[str, str] = {}
        for number, line in lines:
            for sha, comment in _PIN_COMMENT.findall(line):
                pins[sha.lower()] = comment
            for token in _TOKEN.findall(line):
                if _opaque(token) and not (len(token) == 40 and f"@{token}" in line):
                    return Claim(
                        False,
                        f"{path} line {number} adds an opaque token (a key, password, hash or "
                        "encoded value?); workflow edits here change versions and caching only",
                    )
        old_text = analysis_of(evidence).text(evidence.before_bytes(path) or b"")
        old_pins = {sha.lower(): comment for sha, comment in _PIN_COMMENT.findall(old_text)}
        compare = _Compare(self.official_owners, pins, old_pins)
        compare.tree(before.tree, after.tree)
        if compare.problems:
            shown = "; ".join(compare.problems[:4])
            more = f"; and {len(compare.problems) - 4} more" if len(compare.problems) > 4 else ""
            return Claim(False, f"{path}: {shown}{more}")
        if not compare.proven:
            return Claim(True, f"{path}: same workflow (only comments or formatting)")
        return Claim(True, f"{path}: " + "; ".join(dict.fromkeys(compare.proven)))


class _Compare:
    """Walks two workflow trees and records what differs: proven edits or problems."""

    def __init__(
        self, official: tuple[str, ...], pins: dict[str, str], old_pins: dict[str, str]
    ) -> None:
        self.official = frozenset(o.lower() for o in official)
        self.pins = pins
        self.old_pins = old_pins
        self.problems: list[str] = []
        self.proven: list[str] = []
        self.job_after: Mapping[str, Any] = {}  # the job whose matrix is compared

    def _problem(self, where: str, what: str) -> None:
        self.problems.append(f"{where} {what}")

    def _same(self, a: Any, b: Any, where: str) -> None:
        if not typed_equal(a, b):
            self._problem(where, "changes, and only versions, Python matrices and caching may")

    def tree(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        for key in before.keys() | after.keys():
            if key == "jobs":
                continue
            self._same(before.get(key), after.get(key), str(key))
        old_jobs, new_jobs = before.get("jobs"), after.get("jobs")
        if not (isinstance(old_jobs, Mapping) and isinstance(new_jobs, Mapping)):
            self._same(old_jobs, new_jobs, "jobs")
            return
        if old_jobs.keys() != new_jobs.keys():
            self._problem("jobs", "are added, removed or renamed")
            return
        for jid in old_jobs:
            self.job(str(jid), old_jobs[jid], new_jobs[jid])

    def job(self, jid: str, before: Any, after: Any) -> None:
        if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
            self._same(before, after, f"jobs.{jid}")
            return
        self.job_after = after
        for key in before.keys() | after.keys():
            where = f"jobs.{jid}.{key}"
            if key == "steps":
                self.steps(where, before.get(key), after.get(key))
            elif key == "strategy":
                self.strategy(where, before.get(key), after.get(key))
            else:
                self._same(before.get(key), after.get(key), where)

    def strategy(self, where: str, before: Any, after: Any) -> None:
        if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
            self._same(before, after, where)
            return
        for key in before.keys() | after.keys():
            old, new = before.get(key), after.get(key)
            if key != "matrix" or not (isinstance(old, Mapping) and isinstance(new, Mapping)):
                self._same(old, new, f"{where}.{key}")
                continue
            for name in old.keys() | new.keys():
                a, b = old.get(name), new.get(name)
                if name in _PYTHON_KEYS and isinstance(a, list) and isinstance(b, list):
                    self.pythons(f"{where}.matrix.{name}", a, b)
                elif name == "include" and isinstance(a, list) and isinstance(b, list):
                    self.includes(f"{where}.matrix.include", old, a, b)
                else:
                    self._same(a, b, f"{where}.matrix.{name}")

    def pythons(self, where: str, before: list[Any], after: list[Any]) -> None:
        remaining = list(after)
        for item in before:
            index = next((i for i, x in enumerate(remaining) if typed_equal(x, item)), None)
            if index is None:
                self._problem(where, f"drops {item!r}; Python versions may only be added")
                return
            remaining.pop(index)
        for item in remaining:
            text = (
                item if isinstance(item, str) else repr(item) if isinstance(item, float) else None
            )
            if (
                text is None
                or _PYTHON.fullmatch(text) is None
                or (isinstance(item, float) and text in ("3.1", "3.2"))
            ):
                self._problem(where, f"adds {item!r}, not a Python version written as a string")
                return
        if remaining:
            self.proven.append(f"Python {', '.join(map(str, remaining))} added to {where}")

    def includes(
        self, where: str, matrix: Mapping[str, Any], before: list[Any], after: list[Any]
    ) -> None:
        """Entries added to ``include``: a new Python version with values seen before."""
        added_entries: list[Any] = []
        i = 0
        for entry in after:  # every old entry kept, in order; the rest are additions
            if i < len(before) and typed_equal(entry, before[i]):
                i += 1
            else:
                added_entries.append(entry)
        if i < len(before):
            self._problem(where, "changes or removes existing entries")
            return
        seen: dict[str, list[Any]] = {}
        for entry in before:
            if isinstance(entry, Mapping):
                for key, value in entry.items():
                    seen.setdefault(str(key), []).append(value)
        for key, values in matrix.items():
            if isinstance(values, list):
                seen.setdefault(str(key), []).extend(values)
        versions = {v for k in _PYTHON_KEYS for v in map(str, seen.get(k, ()))}
        added: list[str] = []
        for entry in added_entries:
            keys = [k for k in entry if k in _PYTHON_KEYS] if isinstance(entry, Mapping) else []
            if not isinstance(entry, Mapping) or len(keys) != 1:
                self._problem(where, f"adds {str(entry)[:60]!r}, not one new Python version")
                return
            version = entry[keys[0]]
            if not (isinstance(version, str) and _PYTHON.fullmatch(version)):
                self._problem(where, f"adds {version!r}, not a Python version string")
                return
            # A known version is fine in a new combination (another test env or runner).
            fresh = version not in versions
            for key, value in entry.items():
                if key in _LABEL_KEYS and isinstance(value, str) and _LABEL.fullmatch(value):
                    continue  # a display name only (no shell or expression syntax)
                if key != keys[0] and not any(
                    typed_equal(value, v) for v in seen.get(str(key), ())
                ):
                    problem = new_value_problem(str(key), value, str(key) in seen, self.job_after)
                    if problem:
                        self._problem(where, f"adds {key} = {str(value)[:40]!r}, {problem}")
                        return
                    fresh = True
            if not fresh:
                self._problem(where, f"adds {version!r} with nothing new (no new test environment)")
                return
            added.append(version)
        if added:
            self.proven.append(f"include entries for Python {', '.join(added)} added to {where}")

    def steps(self, where: str, before: Any, after: Any) -> None:
        if not (isinstance(before, list) and isinstance(after, list)):
            self._same(before, after, where)
            return
        i = j = 0
        while i < len(before) or j < len(after):
            old = before[i] if i < len(before) else None
            new = after[j] if j < len(after) else None
            if old is not None and new is not None and self._pairs(old, new):
                self.step(f"{where}[{j}]", old, new)
                i, j = i + 1, j + 1
            elif new is not None and self._cache_step(new):
                self.proven.append(f"cache step inserted at {where}[{j}]")
                j += 1
            elif old is not None and self._cache_step(old):
                self.proven.append(f"cache step removed from {where}")
                i += 1
            else:
                self._problem(where, "adds, removes or reorders steps other than cache steps")
                return

    def _pairs(self, old: Any, new: Any) -> bool:
        """Same step, possibly edited: same keys but uses/with, and the same action."""
        if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
            return typed_equal(old, new)
        a, b = parse_action(old.get("uses")), parse_action(new.get("uses"))
        if (a is None) != (b is None) or (a is not None and b is not None and a.name != b.name):
            return typed_equal(old.get("uses"), new.get("uses"))
        return all(
            typed_equal(old.get(k), new.get(k))
            for k in old.keys() | new.keys()
            if k not in ("uses", "with")
        )

    def step(self, where: str, old: Any, new: Any) -> None:
        if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
            self._same(old, new, where)
            return
        if not typed_equal(old.get("uses"), new.get("uses")):
            self.uses(f"{where}.uses", old.get("uses"), new.get("uses"))
        action = parse_action(new.get("uses"))
        name = f"{action.owner}/{action.repo}{action.path}".lower() if action else ""
        old_with, new_with = old.get("with", {}), new.get("with", {})
        if not (isinstance(old_with, Mapping) and isinstance(new_with, Mapping)):
            self._same(old_with, new_with, f"{where}.with")
            return
        for key in old_with.keys() | new_with.keys():
            a, b = old_with.get(key), new_with.get(key)
            if typed_equal(a, b) and (key in old_with) == (key in new_with):
                continue
            spot = f"{where}.with.{key}"
            if _SETUP_ACTION.match(name) and key in _SETUP_CACHE_KEYS:
                self.setup_cache(spot, key, b)
            elif _CACHE_ACTION.match(name) and key in ("path", "key", "restore-keys"):
                if b is not None and not (isinstance(b, str) and _safe_text(b, path=key == "path")):
                    self._problem(
                        spot, f"= {str(b)[:60]!r} is not a cache {key} from safe contexts"
                    )
                else:
                    self.proven.append(f"cache {key} adjusted at {where}")
            else:
                self._same(a, b, spot)

    def setup_cache(self, spot: str, key: str, value: Any) -> None:
        if value is None:
            self.proven.append(f"{spot} removed")
        elif key in ("cache", "enable-cache") and (
            isinstance(value, bool) or (isinstance(value, str) and value in _CACHE_MANAGERS)
        ):
            self.proven.append(f"{spot} = {value}")
        elif (
            key in ("cache-dependency-path", "cache-dependency-glob")
            and isinstance(value, str)
            and _safe_text(value, path=True)
        ):
            self.proven.append(f"{spot} = {value.strip()}")
        else:
            self._problem(spot, f"= {str(value)[:60]!r} is not a known cache setting")

    def _cache_step(self, step: Any) -> bool:
        if not isinstance(step, Mapping) or not set(step) <= _CACHE_STEP_KEYS:
            return False
        action = parse_action(step.get("uses"))
        if action is None or not _CACHE_ACTION.match(action.name) or not self._pinned(action):
            return False
        args = step.get("with")
        if not isinstance(args, Mapping) or not set(args) <= _CACHE_WITH_KEYS or "key" not in args:
            return False
        name = step.get("name")
        if name is not None and not (
            isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9 ._()/-]*", name)
        ):
            return False
        for key, value in args.items():
            if key in ("path", "key", "restore-keys"):
                if not (isinstance(value, str) and _safe_text(value, path=key == "path")):
                    return False
            elif not isinstance(value, bool):
                return False
        return True

    def _pinned(self, action: ActionRef) -> bool:
        return action.is_sha or (
            action.version is not None and action.owner.lower() in self.official
        )

    def uses(self, where: str, old: Any, new: Any) -> None:
        a, b = parse_action(old), parse_action(new)
        if a is None or b is None or a.name != b.name:
            self._problem(where, f"= {str(new)[:80]!r} is not the same action as {str(old)[:80]!r}")
            return
        shown = f"{b.owner}/{b.repo}{b.path}"
        if b.owner.lower() not in self.official:
            self._problem(
                where,
                f"moves {shown}, not an official action, to {b.ref[:40]}; a human checks "
                "what another owner's code at that ref does",
            )
            return
        if b.is_sha:
            comment = self.pins.get(b.ref.lower())
            claimed = version_of(comment) if comment else None
            if a.is_sha:
                was = self.old_pins.get(a.ref.lower())
                old_version = version_of(was) if was else None
                if claimed is not None and old_version is not None and newer(claimed, old_version):
                    self._problem(where, f"re-pins {shown} from {was} to an older {comment}")
                    return
                self.proven.append(
                    f"{shown} re-pinned to commit {b.ref[:12]}"
                    + (f" ({comment})" if comment else "")
                )
                return
            if a.version is not None and claimed is not None and newer(claimed, a.version):
                self._problem(
                    where,
                    f"pins {shown} to a commit its comment calls {comment}, older than {a.ref}",
                )
                return
            if a.version is None and not a.is_sha:
                self.proven.append(f"{shown} pinned from branch {a.ref} to commit {b.ref[:12]}")
                return
            self.proven.append(
                f"{shown} pinned to commit {b.ref[:12]}" + (f" ({comment})" if comment else "")
            )
            return
        if a.is_sha:
            self._problem(where, f"moves {shown} from a commit SHA back to the movable ref {b.ref}")
            return
        if a.version is None or b.version is None:
            self._problem(where, f"moves {shown} to {b.ref}, not a version tag")
            return
        if not newer(a.version, b.version):
            self._problem(where, f"does not move {shown} to a newer version than {a.ref}")
            return
        self.proven.append(f"{shown} {a.ref} -> {b.ref}")
