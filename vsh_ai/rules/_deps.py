"""Dependency rules: prove version bumps allowed, reject dependency tampering.

:class:`AllowDependencyUpdates` is an allowance: it claims a change to a manifest or
lock file only when every changed package is an existing one whose exact pin moved to a
strictly newer exact version, from the same source with the same extras, marker and
hash discipline, nothing else in the file changed, and any lock file in the same
transaction agrees. :class:`DependencyRisks` is a denial for what the authorization
forbids outright: new sources or indexes, loosened ranges, dropped hashes, new install
scripts, packages silently disabled by a marker, look-alike names, removed security
tooling and downgrades (in :mod:`._deps_risks`; shared helpers in :mod:`._deps_files`).
Facts come from :mod:`vsh_ai.analysis._deps` (``packaging``, ``node-semver``), never
from patterns over the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from packaging.utils import canonicalize_name
from pydantic import Field, field_validator

from .._evidence import Evidence
from ..analysis._deps import (
    DependencySyntaxError,
    Manifest,
    compare_locks,
    file_kind,
    hash_owners,
    lock_entry_for,
    lock_mismatches,
    lock_resolution,
    satisfies,
)
from ._base import Allowance, Claim, GlobFields
from ._deps_files import (
    DEPENDENCY_FILES,
    _dep_changes,
    _manifest_diff,
    _parse_side,
    _shown,
    _siblings,
)
from ._deps_risks import DependencyRisks
from ._glob import check_globs, matching

if TYPE_CHECKING:
    from ..analysis._changes import NetChange

__all__ = ("AllowDependencyUpdates", "DependencyRisks")


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
        return Claim(True, self._proven(evidence, before, after))

    def _proven(self, evidence: Evidence, before: Manifest, after: Manifest) -> str:
        if after.is_lock:
            moved = [
                f"{c.name} {c.before.version} -> {c.after.version}"
                for c in compare_locks(before, after)
                if c.before is not None and c.after is not None and c.key not in ("", "<project>")
            ]
        else:
            moved = [
                f"{c.name} {c.before.spec if c.before else ''} -> {c.after.spec if c.after else ''}"
                for c in _dep_changes(evidence, before, after)
            ]
        if not moved:
            return f"{after.path}: no dependency, option or other key changed"
        listed = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        return f"{after.path}: dependencies moved to newer versions ({listed})"

    def _manifest_problems(
        self, evidence: Evidence, before: Manifest, after: Manifest
    ) -> list[str]:
        diff = _manifest_diff(evidence, before, after)
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
        changed_roots = _dep_changes(evidence, before, after)  # the lock's copy of the manifest
        owners = hash_owners(after)
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
                for _, phrase in lock_resolution(entry, after.ecosystem, owners)
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
