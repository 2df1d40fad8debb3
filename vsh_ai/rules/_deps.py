"""Dependency rules: prove version bumps allowed, reject dependency tampering.

:class:`AllowDependencyUpdates` is an allowance: it claims a change to a manifest or
lock file only when every changed package is an existing one whose exact pin moved to a
strictly newer exact version, from the same source with the same extras, marker and
hash discipline, nothing else in the file changed, and any lock file in the same
transaction agrees. :class:`DependencyRisks` is a denial for what the authorization
forbids outright: new sources or indexes, loosened ranges, dropped hashes, new install
scripts, packages silently disabled by a marker, look-alike names, removed security
tooling and downgrades. Facts come from :mod:`vsh_ai.analysis._deps` (``packaging`` and
``node-semver``), never from patterns over the text.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, ClassVar, Literal

import re2  # type: ignore[import-untyped]
from packaging.utils import canonicalize_name
from pydantic import Field, field_validator

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._deps import (
    LOCK_KINDS,
    NPM_KINDS,
    DependencyChange,
    DependencySyntaxError,
    Manifest,
    compare_locks,
    compare_manifests,
    file_kind,
    floor_major,
    is_newer,
    lock_entry_for,
    lock_mismatches,
    lock_resolution,
    major_of,
    parse_dependency_file,
    requirement_hashes,
    satisfies,
)
from ..analysis._memo import analysis_of
from ..analysis._secrets import redact_text
from ._base import Action, Allowance, Claim, GlobFields, Rule, net_changes
from ._glob import check_globs, matching

if TYPE_CHECKING:
    from ..analysis._changes import NetChange

__all__ = ("AllowDependencyUpdates", "DependencyRisks")

DEPENDENCY_FILES: tuple[str, ...] = (
    "**/pyproject.toml",
    "**/*requirements*.txt",
    "**/*requirements*.in",
    "**/*constraints*.txt",
    "**/requirements/**/*.txt",
    "**/requirements/**/*.in",
    "**/Pipfile",
    "**/Pipfile.lock",
    "**/package.json",
    "**/package-lock.json",
    "**/npm-shrinkwrap.json",
    "**/uv.lock",
    "**/poetry.lock",
    "**/yarn.lock",
    "**/pnpm-lock.yaml",
)
_RISK_FILES = (
    *DEPENDENCY_FILES,
    "**/pip.conf",
    "**/pip.ini",
    "**/uv.toml",
    "**/bunfig.toml",
    "**/.yarnrc.yml",
    "**/.yarnrc",
    "**/.condarc",
)

# npm lifecycle scripts that run on install (or on `npm install` of a git dependency).
_INSTALL_SCRIPTS = frozenset(
    {
        "preinstall",
        "install",
        "postinstall",
        "prepare",
        "preprepare",
        "postprepare",
        "prepublish",
        "prepack",
        "postpack",
        "dependencies",
    }
)
# Security tooling the authorization says must not be removed.
_SECURITY_TOOLS = frozenset(
    {
        "pip-audit",
        "safety",
        "bandit",
        "semgrep",
        "detect-secrets",
        "trufflehog",
        "pysa",
        "audit-ci",
        "better-npm-audit",
        "snyk",
        "eslint-plugin-security",
        "npm-audit-resolver",
        "retire",
        "gitleaks",
        "osv-scanner",
        "cyclonedx-bom",
        "cyclonedx-py",
        "pyup-tools",
        "ossaudit",
        "jake",
    }
)
_ADDING = re.compile(
    r"(?i)\b(add|adds|adding|added|introduc\w*|new (package|dependency)|install)\b"
)
# user:password@ or token@ in a URL: masked in reasons, which reach the agent and logs.
# RE2 (linear time): the text is untrusted and unbounded.
_URL_CREDENTIALS = re2.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@")


def _shown(text: str, limit: int = 80) -> str:
    """``text`` for a reason: URL credentials masked (``https://***@host``), then bounded."""
    masked: str = _URL_CREDENTIALS.sub(r"\1***@", text)
    masked = redact_text(masked)[0]  # the shared detector: tokens in queries, aliases, ...
    return masked if len(masked) <= limit else masked[: limit - 1] + "…"


def _parse_side(evidence: Evidence, path: str, side: Literal["before", "after"]) -> Manifest | None:
    """One side of ``path`` parsed, once per decision (the analysis memo; errors re-raise)."""
    data = evidence.before_bytes(path) if side == "before" else evidence.after_bytes(path)
    if data is None:
        return None
    return analysis_of(evidence).remember(
        ("manifest", path, data), lambda: parse_dependency_file(path, data)
    )


def _parse_renamed(evidence: Evidence, path: str, source: str) -> Manifest | None:
    """The rename source's old bytes read as ``path``'s kind (None: not that kind)."""
    data = evidence.before_bytes(source)
    if data is None:
        return None
    try:
        return parse_dependency_file(path, data)
    except DependencySyntaxError:
        return None


def _empty(path: str) -> Manifest | None:
    kind = file_kind(path)
    if kind is None:
        return None
    ecosystem: Literal["pypi", "npm"] = "npm" if kind in NPM_KINDS else "pypi"
    return Manifest(path, kind, ecosystem)


def _folders(evidence: Evidence) -> dict[PurePosixPath, tuple[str, ...]]:
    """Changed paths by their directory, in the order of the changes."""
    folders: dict[PurePosixPath, list[str]] = {}
    for change in evidence.changes:
        folders.setdefault(PurePosixPath(change.path).parent, []).append(change.path)
    return {folder: tuple(paths) for folder, paths in folders.items()}


def _siblings(evidence: Evidence, path: str, ecosystem: str, *, locks: bool) -> list[str]:
    """Changed dependency files of the same ecosystem in the same directory."""
    folders = analysis_of(evidence).remember(("folders",), lambda: _folders(evidence))
    found = []
    for other in folders.get(PurePosixPath(path).parent, ()):
        if other == path:
            continue
        kind = file_kind(other)
        if kind is None or kind in ("pip-config", "installer-config"):
            continue
        is_lock = kind in LOCK_KINDS
        npm = kind in NPM_KINDS
        if is_lock == locks and npm == (ecosystem == "npm"):
            found.append(other)
    return found


def _dep_changes(before: Manifest, after: Manifest) -> list[DependencyChange]:
    return list(compare_manifests(before, after).changes)


class AllowDependencyUpdates(Allowance):
    """Claims dependency manifest and lock edits that only bump exact pins.

    A modify of a file matching ``paths`` is claimed when every changed package exists
    already (and is in ``packages``, when given), keeps its source, extras, marker and
    per-line options, keeps hash checking (new hashes for the new version are fine), and
    moves from an exact pin (``==X`` / npm ``X``) to a strictly newer exact pin (a major
    upgrade only with ``allow_major``); nothing else in the file changed; and every lock
    file changed in the same directory records exactly the new versions. Lock files are
    claimed when each changed entry is an existing package moved to a newer version from
    the same source with new integrity hashes, consistent with the manifest.
    """

    type: Literal["allow_dependency_updates"] = "allow_dependency_updates"
    glob_fields: ClassVar[GlobFields] = (("paths", True),)
    paths: tuple[str, ...] = Field(
        default=DEPENDENCY_FILES,
        description="Root-anchored globs of the manifests and lock files claimed.",
    )
    allow_major: bool = Field(default=False, description="Also claim major-version upgrades.")
    allow_narrowing: bool = Field(
        default=False,
        description=(
            "Also claim a range moved to a narrower one with a higher lowest version of the "
            "same major (^8.2.3 -> ^8.5.0, >=2.31 -> >=2.32, ^1.2 -> 1.4.0)."
        ),
    )
    packages: tuple[str, ...] = Field(
        default=(), description="Only these packages may move (empty: any existing package)."
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(lambda globs: check_globs(globs))

    def _allowed_name(self, name: str) -> bool:
        if not self.packages:
            return True
        wanted = {canonicalize_name(p) for p in self.packages} | set(self.packages)
        return name in wanted or canonicalize_name(name) in wanted

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        path = change.path
        if matching(self.paths, path, ignore_case=True) is None:  # as DependencyRisks reads them
            return None
        if change.kind != "modify":
            return Claim(
                False,
                f"{path}: a {change.kind} of a dependency file; only edits of existing "
                "manifests and lock files are claimed",
            )
        kind = file_kind(path)
        if kind is None or kind in ("pip-config", "installer-config"):
            return Claim(False, f"{path} is not a dependency manifest or lock file understood here")
        try:
            before, after = (
                _parse_side(evidence, path, "before"),
                _parse_side(evidence, path, "after"),
            )
        except DependencySyntaxError as error:
            return Claim(False, f"{_shown(str(error), 160)}; fix the file's syntax")
        if before is None or after is None:
            return Claim(False, f"{path} has no content on one side")
        try:
            problems = (
                self._lock_problems(evidence, before, after)
                if after.is_lock
                else self._manifest_problems(evidence, before, after)
            )
        except DependencySyntaxError as error:
            return Claim(False, f"{_shown(str(error), 160)}; fix the file's syntax")
        if problems:
            shown = "; ".join(_shown(p, 160) for p in problems[:4])
            more = f" and {len(problems) - 4} more" if len(problems) > 4 else ""
            return Claim(
                False,
                f"{path}: {shown}{more}. Only move exact pins of existing packages to newer "
                "exact versions (same source, extras, marker and hashes), and change nothing else",
            )
        return Claim(True, self._proven(before, after))

    def _proven(self, before: Manifest, after: Manifest) -> str:
        if after.is_lock:
            moved = [
                f"{c.name} {c.before.version} -> {c.after.version}"
                for c in compare_locks(before, after)
                if c.before is not None and c.after is not None and c.key not in ("", "<project>")
            ]
        else:
            moved = [
                f"{c.name} {c.before.spec if c.before else ''} -> {c.after.spec if c.after else ''}"
                for c in _dep_changes(before, after)
            ]
        if not moved:
            return f"{after.path}: no dependency, option or other key changed"
        listed = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        return f"{after.path}: dependencies moved to newer versions ({listed})"

    def _manifest_problems(
        self, evidence: Evidence, before: Manifest, after: Manifest
    ) -> list[str]:
        diff = compare_manifests(before, after)
        problems: list[str] = []
        if diff.options_added or diff.options_removed:
            changed = [*diff.options_added, *diff.options_removed]
            problems.append(f"installer options or sources changed ({', '.join(changed[:3])})")
        if diff.other_keys:
            problems.append(
                f"{', '.join(diff.other_keys[:5])} changed; only dependency versions may change"
            )
        for dep in diff.changes:
            if not self._allowed_name(dep.name):
                problems.append(f"{dep.name} is not among the packages this allowance covers")
            problems.extend(
                dep.bump_problems(allow_major=self.allow_major, narrowing=self.allow_narrowing)
            )
        moved = {dep.name for dep in diff.changes}
        for lock_path in _siblings(evidence, after.path, after.ecosystem, locks=True):
            lock = _parse_side(evidence, lock_path, "after")
            if lock is None:
                problems.append(f"the lock file {lock_path} was deleted")
                continue
            problems.extend(lock_mismatches(after, lock, names=moved))
        return problems

    def _lock_problems(self, evidence: Evidence, before: Manifest, after: Manifest) -> list[str]:
        problems: list[str] = []
        other = sorted(
            k
            for k in before.rest.keys() | after.rest.keys()
            if before.rest.get(k) != after.rest.get(k)
        )
        if other:
            problems.append(f"{', '.join(other[:5])} changed; only package entries may change")
        if before.options != after.options:
            problems.append("the lock's sources or indexes changed")
        manifests = [
            m
            for m in (
                _parse_side(evidence, p, "after")
                for p in _siblings(evidence, after.path, after.ecosystem, locks=False)
            )
            if m is not None
        ]
        changed_roots = _dep_changes(before, after)  # the lock's copy of the manifest
        for dep in changed_roots:
            if not self._allowed_name(dep.name):
                problems.append(f"{dep.name} is not among the packages this allowance covers")
            problems.extend(
                dep.bump_problems(allow_major=self.allow_major, narrowing=self.allow_narrowing)
            )
        for entry in compare_locks(before, after):
            if entry.key in ("", "<project>"):
                if (
                    entry.before is None
                    or entry.after is None
                    or entry.before.fields != entry.after.fields
                ):
                    problems.append("the lock's root entry changed beyond dependency versions")
                continue
            if not self._allowed_name(entry.name):
                problems.append(f"{entry.name} is not among the packages this allowance covers")
            problems.extend(entry.problems(after.ecosystem, allow_major=self.allow_major))
            problems.extend(
                f"lock entry {entry.key} {phrase}"
                for _, phrase in lock_resolution(entry, after.ecosystem)
            )
        moved = {c.name for c in compare_locks(before, after)} | {d.name for d in changed_roots}
        for manifest in manifests:
            problems.extend(lock_mismatches(manifest, after, names=moved))
        for root in after.dependencies:  # the lock's own copy of the manifest's ranges
            locked = lock_entry_for(after, root.name)
            previous = lock_entry_for(before, root.name)
            if locked is None or previous is None or locked.version == previous.version:
                continue
            if (
                locked.version is None
                or satisfies(root.ecosystem, locked.version, root.spec) is not True
            ):
                problems.append(
                    f"{root.name}: the lock now has {locked.version}, outside the declared "
                    f"{root.spec or root.source or 'requirement'}"
                )
        return problems


class DependencyRisks(Rule):
    """Denies dependency tampering the authorization forbids (``action``, default reject).

    In changed manifests, lock files and pip configuration: a dependency or lock entry
    from a new source (URL, git, path, alias, another registry); new or changed installer
    options and indexes (``--index-url``, ``--extra-index-url``, ``--trusted-host``,
    ``-r``, uv/poetry sources, pip.conf); a range loosened (exact pin dropped, lower bound
    moved down, upper bound removed); ``--hash`` values dropped; a new or changed install
    script (``preinstall``, ``postinstall``, ``prepare``, ...); a lock entry gaining an
    install script; a package disabled by a marker that never holds; a new package whose
    name looks like an existing one; removed security tooling; an exact pin moved to an
    older version (``downgrade_action``). A plain new package gets ``new_package_action``
    (review) when the intent says something is being added, else ``action``.
    """

    type: Literal["dependency_risks"] = "dependency_risks"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: tuple[str, ...] = Field(
        default=_RISK_FILES, description="Root-anchored globs of the dependency files checked."
    )
    action: Action = "reject"
    new_package_action: Action = "review"
    downgrade_action: Action = "reject"
    major_action: Action | None = Field(
        default="review",
        description=(
            "What a major upgrade (an exact pin, a range's lowest version or a lock entry "
            "moving to another major) and a gained extra (other packages installed) decide: "
            "a person, by default, so a model after the rules cannot approve them; null "
            "leaves them to the allowances (allow_major) and the next judge."
        ),
    )

    _check_globs = field_validator("globs")(lambda globs: check_globs(globs))

    def check(self, evidence: Evidence, /) -> Verdict | None:
        rejects: list[str] = []
        reviews: list[str] = []
        for change in net_changes(evidence):
            path = change.path
            if matching(self.globs, path, ignore_case=True) is None:
                continue
            if change.kind not in ("create", "modify", "rename") or change.after is None:
                continue  # deletions, and the source end of a rename
            try:
                before = _parse_side(evidence, path, "before") if change.kind == "modify" else None
                if change.kind == "rename" and change.partner is not None:
                    before = _parse_renamed(evidence, path, change.partner)
                after = _parse_side(evidence, path, "after")
            except DependencySyntaxError as error:
                reviews.append(f"{_shown(str(error), 160)}; fix the file's syntax.")
                continue
            except EvidenceGap:
                raise
            if after is None:
                continue
            if before is None:
                before = _empty(path)
            if before is None:
                continue
            found_rejects, found_reviews = self._risks(evidence, before, after)
            rejects.extend(found_rejects)
            reviews.extend(found_reviews)
        if rejects:
            return self.verdict("reject", " ".join(rejects[:6]))
        if reviews:
            return self.verdict("review", " ".join(reviews[:6]))
        return None

    def _risks(
        self, evidence: Evidence, before: Manifest, after: Manifest
    ) -> tuple[list[str], list[str]]:
        path = after.path
        by_action: dict[Action, list[str]] = {"reject": [], "review": []}

        def flag(action: Action, message: str) -> None:
            by_action[action].append(f"{path}: {_shown(message, 200)}.")

        diff = compare_manifests(before, after)
        if diff.options_added or diff.options_removed:
            changed = [*diff.options_added, *(f"removed {o}" for o in diff.options_removed)]
            flag(
                self.action,
                f"installer options, indexes or sources change ({', '.join(changed[:3])}); "
                "keep index, hash-checking and source settings exactly as they were",
            )
        for name in (*diff.scripts_added, *diff.scripts_changed):
            if name.lower() in _INSTALL_SCRIPTS or name.lower().startswith(
                ("preinstall", "postinstall")
            ):
                flag(
                    self.action,
                    f'the "{name}" script runs on install and was added or changed; '
                    "install scripts may not be added",
                )
        removed = {c.name for c in diff.changes if c.kind == "removed"}
        existing = before.names()
        for dep in diff.changes:
            self._dependency_risks(evidence, dep, removed, existing, flag)
        if after.is_lock:
            # yarn Berry's checksums depend on its cache settings: when __metadata changes,
            # every checksum may change with the same files (a person decides, no reject).
            rehashed = after.kind == "yarn.lock" and before.rest != after.rest
            for entry in compare_locks(before, after):
                if entry.after is None or entry.key in ("", "<project>"):
                    continue
                if entry.source_change:
                    assert entry.before is not None
                    flag(
                        self.action,
                        f"lock entry {entry.key} changes its source ({entry.before.source} -> "
                        f"{entry.after.source}); keep the registry",
                    )
                elif (
                    entry.before is None
                    and entry.after.source is not None
                    and not _registry(entry.after.source)
                ):
                    flag(self.action, f"new lock entry {entry.key} comes from {entry.after.source}")
                if entry.after.install_script and not (
                    entry.before and entry.before.install_script
                ):
                    flag(self.action, f"lock entry {entry.key} now runs an install script")
                if (
                    entry.before is not None
                    and entry.before.integrity
                    and not entry.after.integrity
                ):
                    flag(self.action, f"lock entry {entry.key} drops its integrity hash")
                for severity, phrase in lock_resolution(entry, after.ecosystem):
                    if rehashed and severity == "reject" and "integrity" in phrase:
                        severity = "review"
                        phrase += " while the lock's cache settings (__metadata) change"
                    flag(
                        self.action if severity == "reject" else "review",
                        f"lock entry {entry.key} {phrase}"
                        + (
                            "; keep the recorded artifact or move to a new version"
                            if severity == "reject"
                            else "; a person checks where the new files come from"
                        ),
                    )
                old_version = entry.before.version if entry.before is not None else None
                new_version = entry.after.version
                if (
                    self.major_action is not None
                    and old_version
                    and new_version
                    and is_newer(after.ecosystem, old_version, new_version) is True
                    and major_of(after.ecosystem, old_version)
                    != major_of(after.ecosystem, new_version)
                ):
                    flag(
                        self.major_action,
                        f"lock entry {entry.key} moves to another major version "
                        f"({old_version} -> {new_version}); major upgrades go to a person",
                    )
                if (
                    self.major_action is not None
                    and old_version
                    and new_version
                    and is_newer(after.ecosystem, new_version, old_version) is True
                ):
                    flag(
                        self.downgrade_action,
                        f"lock entry {entry.key} is downgraded ({old_version} -> {new_version}); "
                        "upgrade instead",
                    )
        return by_action["reject"], by_action["review"]

    def _dependency_risks(
        self,
        evidence: Evidence,
        dep: DependencyChange,
        removed: set[str],
        existing: set[str],
        flag: Callable[[Action, str], None],
    ) -> None:
        name = dep.name
        if dep.kind == "removed":
            if canonicalize_name(name) in _SECURITY_TOOLS:
                flag(self.action, f"security tool {name} is removed; keep it")
            return
        assert dep.after is not None
        if dep.after.source is not None and (
            dep.before is None or dep.before.source != dep.after.source
        ):
            flag(
                self.action,
                f"{name} now installs from {dep.after.source}; use the default index",
            )
        if dep.disabled:
            flag(
                self.action,
                f"{name} gets a marker that never holds ({dep.after.marker}), which drops it",
            )
        elif dep.disabled_on_linux:
            flag(
                self.action,
                f"{name} gets a marker that excludes Linux ({dep.after.marker}), which drops "
                "it where CI and servers run",
            )
        elif (
            dep.kind == "changed"
            and not dep.same_marker
            and canonicalize_name(name) in _SECURITY_TOOLS
        ):
            flag(self.action, f"security tool {name} changes its environment marker; keep it")
        if dep.kind == "added":
            lookalike = [
                old
                for old in sorted(removed | existing)
                if old != name and difflib.SequenceMatcher(None, old, name).ratio() >= 0.8
            ]
            if lookalike:
                flag(
                    self.action,
                    f"new package {name} looks like {lookalike[0]} (typosquatting risk); "
                    "keep the original name",
                )
            else:
                intent = evidence.intent or ""
                said = _ADDING.search(intent) is not None or name.lower() in intent.lower()
                flag(
                    self.new_package_action if said else self.action,
                    f"{name} is a new package"
                    + ("" if said else " the intent does not say is being added")
                    + "; new packages go to a human",
                )
            return
        if dep.hashes == "removed":
            flag(self.action, f"{name} drops its --hash values; keep hash checking")
        hashed = requirement_hashes(dep)
        if hashed is not None:
            flag(
                self.action if hashed[0] == "reject" else "review",
                f"{name} {hashed[1]}"
                + (
                    "; keep the recorded hashes or move to a new version"
                    if hashed[0] == "reject"
                    else ""
                ),
            )
        assert dep.before is not None
        old, new = dep.before.spec or "any", dep.after.spec or "any"
        looseness = dep.looseness
        if looseness is None:
            flag(
                "review",
                f"{name}: the ranges {old} -> {new} cannot be compared here; a person checks them",
            )
        elif looseness:
            advice = (
                "keep an exact pin"
                if dep.old_pin is not None
                else "keep the lower bound at or above the old one and an upper bound"
            )
            flag(
                self.action, f"{name} range is loosened ({old} -> {new}): it {looseness}; {advice}"
            )
        elif dep.downgraded:
            flag(
                self.downgrade_action,
                f"{name} is downgraded ({old} -> {new}: every version it now admits is older); "
                "upgrade instead",
            )
        elif self.major_action is not None and (majors := _majors(dep)) is not None:
            flag(
                self.major_action,
                f"{name} moves to another major version ({old} -> {new}, major {majors[0]} -> "
                f"{majors[1]}); major upgrades go to a person",
            )
        gains = dep.after.extras and not set(dep.after.extras) <= set(dep.before.extras)
        if self.major_action is not None and gains:
            gained = sorted(set(dep.after.extras) - set(dep.before.extras))
            flag(
                self.major_action,
                f"{name} gains the extras {gained}, which install other packages; "
                "new packages go to a person",
            )


def _majors(dep: DependencyChange) -> tuple[int, int] | None:
    """(old, new) major of an upgrade that crosses a major version (pins or range floors)."""
    assert dep.before is not None
    assert dep.after is not None
    if dep.old_pin is not None and dep.new_pin is not None:
        if dep.newer is not True or not dep.major_bump:
            return None
        old, new = major_of(dep.ecosystem, dep.old_pin), major_of(dep.ecosystem, dep.new_pin)
    else:
        if dep.relation is None or dep.relation.floor != "higher":
            return None
        old = floor_major(dep.ecosystem, dep.before.spec)
        new = floor_major(dep.ecosystem, dep.after.spec)
    if old is None or new is None or new <= old:
        return None
    return old, new


def _registry(source: str) -> bool:
    return source.startswith(
        (
            "https://registry.npmjs.org",
            "https://registry.yarnpkg.com",  # yarn's mirror of the npm registry
            '{"registry": "https://pypi.org',
        )
    )
