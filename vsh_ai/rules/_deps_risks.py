"""DependencyRisks: the dependency tampering the authorization forbids, decided by a rule."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal

from packaging.utils import canonicalize_name
from pydantic import Field, field_validator

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._deps import (
    DependencyChange,
    DependencySyntaxError,
    Manifest,
    compare_locks,
    floor_major,
    hash_owners,
    is_newer,
    lock_resolution,
    major_of,
    requirement_hashes,
)
from ._base import Action, GlobFields, Rule, net_changes
from ._deps_files import (
    _ADDING,
    _INSTALL_SCRIPTS,
    _RISK_FILES,
    _SECURITY_TOOLS,
    _empty,
    _manifest_diff,
    _parse_renamed,
    _parse_side,
    _shown,
)
from ._glob import check_globs, matching

if TYPE_CHECKING:
    pass


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

        diff = _manifest_diff(evidence, before, after)
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
            owners = hash_owners(after)
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
                elif entry.before is None:
                    flag(
                        self.new_package_action,
                        f"lock entry {entry.key} is new: the lock now installs a package it did "
                        "not before; new packages go to a person",
                    )
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
                for severity, phrase in lock_resolution(entry, after.ecosystem, owners):
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
        if dep.non_index:
            flag(
                "review",
                f"{name} now names {', '.join(dep.non_index)} ({dep.after.spec}): not a release "
                "of the public index but a local build or another index's; a person checks it",
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
                else "keep the upper bound as close above the floor as before"
                if dep.ceiling_widened is not None
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
