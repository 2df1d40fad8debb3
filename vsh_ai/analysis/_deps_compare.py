"""Two parses of a dependency file compared: dependency, option and lock entry changes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import nodesemver  # type: ignore[import-untyped]
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ._deps_intervals import Relation
from ._deps_model import _NPM_OVERRIDES, Dependency, LockEntry, Manifest, marker_never_holds
from ._deps_ranges import (
    Ecosystem,
    below_major,
    ceiling_widened,
    floor_major,
    is_newer,
    major_of,
    relate_ranges,
    satisfies,
)

_DIST_TAG = re.compile(r"^[A-Za-z][\w.-]*$")

HashState = Literal["none", "kept", "replaced", "removed", "added"]


@dataclass(frozen=True, slots=True)
class DependencyChange:
    """One dependency added, removed or changed between two versions of a manifest."""

    section: str
    name: str
    before: Dependency | None
    after: Dependency | None

    @property
    def kind(self) -> Literal["added", "removed", "changed"]:
        if self.before is None:
            return "added"
        return "removed" if self.after is None else "changed"

    def _same(self, field: str) -> bool:
        """Both sides exist and agree on ``field``."""
        if self.before is None or self.after is None:
            return False
        return bool(getattr(self.before, field) == getattr(self.after, field))

    @property
    def same_source(self) -> bool:
        return self._same("source")

    @property
    def same_extras(self) -> bool:
        return self._same("extras")

    @property
    def same_marker(self) -> bool:
        return self._same("marker")

    @property
    def same_options(self) -> bool:
        return self._same("options")

    @property
    def hashes(self) -> HashState:
        old = self.before.hashes if self.before else ()
        new = self.after.hashes if self.after else ()
        if not old:
            return "added" if new else "none"
        if not new:
            return "removed"
        return "kept" if set(old) <= set(new) else "replaced"

    @property
    def old_pin(self) -> str | None:
        return self.before.pin if self.before else None

    @property
    def new_pin(self) -> str | None:
        return self.after.pin if self.after else None

    @property
    def ecosystem(self) -> Ecosystem:
        dep = self.after or self.before
        assert dep is not None
        return dep.ecosystem

    @property
    def newer(self) -> bool | None:
        """Exact pin -> strictly newer exact pin."""
        if self.old_pin is None or self.new_pin is None:
            return None
        return is_newer(self.ecosystem, self.old_pin, self.new_pin)

    @property
    def major_bump(self) -> bool:
        if self.old_pin is None or self.new_pin is None:
            return False
        old, new = major_of(self.ecosystem, self.old_pin), major_of(self.ecosystem, self.new_pin)
        return old is None or new is None or old != new

    @property
    def relation(self) -> Relation | None:
        """How the new range relates to the old one (None: a source, or not a range)."""
        if self.before is None or self.after is None:
            return None
        if self.before.source is not None or self.after.source is not None:
            return None
        return relate_ranges(self.ecosystem, self.after.spec, self.before.spec)

    @property
    def narrowed(self) -> bool | None:
        """The new range admits only versions the old one did (None: cannot tell)."""
        relation = self.relation
        return None if relation is None else relation.subset

    @property
    def looseness(self) -> str | None:
        """How the new range lets in versions the old one kept out, other than by an upgrade.

        "" when it does not: a narrower range (``^8.2.3`` -> ``^8.5.0``), an exact pin
        moved to another exact pin (see :attr:`downgraded`), a range moved up. Else a true
        phrase: the exact pin was dropped, the range reaches below every version the old
        one admitted, the upper bound was dropped, a dist-tag replaces the range. None:
        one side cannot be read as a range (cannot tell).
        """
        if self.before is None or self.after is None or self.after.source is not None:
            return ""
        if self.before.source is not None or self.new_pin is not None:
            return ""
        if self.old_pin is not None:
            return "is no longer an exact pin"
        relation = self.relation
        if relation is None:
            tag = self.after.spec.strip()
            if self.ecosystem == "npm" and _DIST_TAG.match(tag):
                return (
                    f"follows the dist-tag {tag!r} (whatever version it names) instead of a range"
                )
            return None
        if relation.subset or relation.empty:
            return ""
        if relation.floor == "lower" and not relation.disjoint:
            return "now admits versions older than any the old range admitted"
        if relation.ceiling_dropped:
            return "no longer has an upper bound"
        if (widened := self.ceiling_widened) is not None:
            return (
                f"now admits versions up to {widened[1]} where the old range stopped below "
                f"{widened[0]}: its upper bound rises further above its floor than before"
            )
        return ""

    @property
    def non_index(self) -> tuple[str, ...]:
        """Version forms the public index never serves that the new spec gains: local labels
        (``==42.0.8+shop1``, npm build metadata ``1.2.3+build``) and PEP 440's arbitrary
        equality (``===``), which matches a version string no index release has."""
        if self.after is None or self.after.source is not None:
            return ()
        before = non_index_forms(self.ecosystem, self.before.spec) if self.before else set()
        return tuple(sorted(non_index_forms(self.ecosystem, self.after.spec) - before))

    @property
    def ceiling_widened(self) -> tuple[str, str] | None:
        """(old, new) upper bound when the range widens upward (see :func:`ceiling_widened`)."""
        if self.before is None or self.after is None or self.relation is None:
            return None
        return ceiling_widened(self.ecosystem, self.after.spec, self.before.spec)

    @property
    def loosened(self) -> bool:
        return bool(self.looseness)

    @property
    def downgraded(self) -> bool:
        """An exact pin moved to an older one, or the whole range moved below the old one."""
        if self.old_pin is not None and self.new_pin is not None:  # ==2.31.0 -> ==2.31: equal
            return is_newer(self.ecosystem, self.new_pin, self.old_pin) is True
        relation = self.relation
        return relation is not None and relation.disjoint and relation.floor == "lower"

    def _narrowing_problems(self, where: str, *, allow_major: bool) -> list[str]:
        return _narrowing(self, where, allow_major=allow_major)

    @property
    def disabled(self) -> bool:
        """A marker that holds nowhere now drops a package that was installed before."""
        if self.after is None or self.after.marker is None:
            return False
        before_off = (
            self.before is not None
            and self.before.marker is not None
            and (marker_never_holds(self.before.marker))
        )
        return not before_off and marker_never_holds(self.after.marker)

    @property
    def disabled_on_linux(self) -> bool:
        """A changed marker now drops a package on Linux (where CI and servers run)."""
        if self.before is None or self.after is None or self.after.marker is None:
            return False
        if self.before.marker == self.after.marker:
            return False
        was_on = self.before.marker is None or not marker_never_holds(
            self.before.marker, platforms=("linux",)
        )
        return was_on and marker_never_holds(self.after.marker, platforms=("linux",))

    def bump_problems(self, *, allow_major: bool, narrowing: bool = False) -> list[str]:
        """Why this is not "an exact pin moved to a strictly newer exact version" ([] if it is).

        With ``narrowing``, a range may also move to a narrower one whose lowest version
        is higher (``^8.2.3`` -> ``^8.5.0``, ``>=2.31`` -> ``>=2.32``, ``^1.2`` -> ``1.4.0``).
        """
        where = f"{self.name} ({self.section})"
        if self.before is None:
            return [f"{where} is a new package"]
        if self.after is None:
            return [f"{where} was removed"]
        problems: list[str] = []
        if not self.same_source:
            problems.append(f"{where} changes its source")
        if not self.same_extras:
            problems.append(
                f"{where} changes extras {list(self.before.extras)} -> {list(self.after.extras)}"
            )
        if not self.same_marker:
            problems.append(f"{where} changes its environment marker")
        if not self.same_options:
            problems.append(f"{where} changes its per-line installer options")
        if self.name == "python" and self.section.startswith("tool.poetry"):
            problems.append(f"{where} is the Python version requirement, not a package")
        if self.hashes == "removed":
            problems.append(f"{where} drops its --hash values")
        elif self.hashes == "added":
            problems.append(f"{where} gains --hash values it did not have")
        if self.non_index:
            problems.append(f"{where} names {', '.join(self.non_index)}, not an index release")
        if self.old_pin is None and narrowing:
            problems.extend(self._narrowing_problems(where, allow_major=allow_major))
        elif self.old_pin is None:
            problems.append(f"{where} was not pinned exactly before ({self.before.spec or 'any'})")
        elif self.new_pin is None:
            problems.append(
                f"{where} is no longer an exact pin ({self.before.spec} -> "
                f"{self.after.spec or self.after.source or 'any'})"
            )
        elif self.newer is not True:
            problems.append(
                f"{where} does not move to a newer version ({self.old_pin} -> {self.new_pin})"
            )
        elif self.major_bump and not allow_major:
            problems.append(f"{where} is a major upgrade ({self.old_pin} -> {self.new_pin})")
        return problems


def _narrowing(change: DependencyChange, where: str, *, allow_major: bool) -> list[str]:
    """A range moved to newer versions: narrower, or a higher floor within the same major."""
    assert change.before is not None
    assert change.after is not None
    old, new = change.before.spec or "any", change.after.spec or change.after.source or "any"
    relation = change.relation
    if relation is None:
        return [f"{where}: cannot compare the ranges {old} -> {new}"]
    if relation.empty or relation.equal:
        return [f"{where}: {old} -> {new} admits no new version"]
    low_old = floor_major(change.ecosystem, change.before.spec)
    low_new = floor_major(change.ecosystem, change.after.spec)
    if not allow_major and (low_old is None or low_new is None or low_old != low_new):
        return [f"{where}: {old} -> {new} moves the lowest version to another major"]
    if relation.subset:
        return []
    if relation.floor != "higher" or relation.ceiling_dropped:
        return [f"{where}: {old} -> {new} does not move to newer versions only"]
    if change.ceiling_widened is not None:
        return [f"{where}: {old} -> {new} raises the upper bound further than the floor"]
    if not allow_major and not below_major(change.ecosystem, change.after.spec, low_old or 0):
        return [f"{where}: {old} -> {new} admits versions of a higher major"]
    return []


_LOCAL_LABEL = re.compile(r"\+[0-9A-Za-z][0-9A-Za-z.\-_]*")


def non_index_forms(ecosystem: Ecosystem, spec: str) -> set[str]:
    """The local labels (``+shop1``) in ``spec`` or a version, and ``===`` (PEP 440)."""
    found = {m.group(0) for m in _LOCAL_LABEL.finditer(spec)} if "+" in spec else set()
    if ecosystem == "pypi" and "===" in spec:
        found.add("arbitrary equality (===)")
    return found


@dataclass(frozen=True, slots=True)
class ManifestDiff:
    """What changed between two parses of the same dependency file."""

    changes: tuple[DependencyChange, ...]
    options_added: tuple[str, ...]
    options_removed: tuple[str, ...]
    other_keys: tuple[str, ...]
    scripts_added: tuple[str, ...]
    scripts_changed: tuple[str, ...]


def compare_manifests(before: Manifest, after: Manifest) -> ManifestDiff:
    """Dependencies added/removed/changed, options and scripts, other changed keys."""
    old, new = before.by_key(), after.by_key()
    changes = tuple(
        DependencyChange(key[0], key[1].partition("#")[0], old.get(key), new.get(key))
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key) and not _same_dep(old.get(key), new.get(key))
    )
    old_opts, new_opts = set(before.options), set(after.options)
    other = tuple(
        sorted(
            k
            for k in before.rest.keys() | after.rest.keys()
            if before.rest.get(k) != after.rest.get(k)
        )
    )
    return ManifestDiff(
        changes,
        tuple(sorted(new_opts - old_opts)),
        tuple(sorted(old_opts - new_opts)),
        other,
        tuple(sorted(after.scripts.keys() - before.scripts.keys())),
        tuple(
            sorted(
                k
                for k in after.scripts.keys() & before.scripts.keys()
                if after.scripts[k] != before.scripts[k]
            )
        ),
    )


def _same_dep(a: Dependency | None, b: Dependency | None) -> bool:
    """Equal but for position and spelling (line numbers, raw text)."""
    if a is None or b is None:
        return False
    return (
        a.ecosystem,
        a.section,
        a.name,
        a.spec,
        a.extras,
        a.marker,
        a.source,
        a.hashes,
        a.options,
    ) == (b.ecosystem, b.section, b.name, b.spec, b.extras, b.marker, b.source, b.hashes, b.options)


@dataclass(frozen=True, slots=True)
class LockChange:
    """One lock entry added, removed or changed."""

    key: str
    before: LockEntry | None
    after: LockEntry | None

    @property
    def name(self) -> str:
        entry = self.after or self.before
        assert entry is not None
        return entry.name

    @property
    def source_change(self) -> bool:
        """The registry, index or repository changes (``http://`` -> ``https://`` of the
        same host and path is not a change of source: the same files, fetched securely)."""
        if self.before is None or self.after is None:
            return False
        old, new = self.before.source, self.after.source
        if old == new:
            return False
        secured = [
            a.startswith("http://") and b == "https://" + a[len("http://") :]
            for a, b in zip(self.before.artifacts, self.after.artifacts, strict=False)
        ]
        return not (
            old is not None
            and new is not None
            and old.startswith("http://")
            and new == "https://" + old[len("http://") :]
            and len(self.before.artifacts) == len(self.after.artifacts)
            and all(secured)
        )

    def problems(self, ecosystem: Ecosystem, *, allow_major: bool) -> list[str]:
        """Why this is not a same-source upgrade of an existing entry ([] if it is)."""
        where = f"lock entry {self.key or '<root>'}"
        if self.before is None:
            return [f"{where} is new"]
        if self.after is None:
            return [f"{where} was removed"]
        if self.key in ("", "<project>"):
            return [f"{where} (the project's own requirements) changed"]
        problems: list[str] = []
        if self.source_change:
            problems.append(f"{where} changes its source")
        if self.after.install_script and not self.before.install_script:
            problems.append(f"{where} gains an install script")
        if self.before.integrity and not self.after.integrity:
            problems.append(f"{where} drops its integrity hashes")
        old, new = self.before.version, self.after.version
        if old is None or new is None:
            problems.append(f"{where} has no version")
        elif old != new:
            newer = is_newer(ecosystem, old, new)
            if newer is not True:
                problems.append(f"{where} does not move to a newer version ({old} -> {new})")
            elif major_of(ecosystem, old) != major_of(ecosystem, new) and not allow_major:
                problems.append(f"{where} is a major upgrade ({old} -> {new})")
            elif self.before.integrity and self.before.integrity == self.after.integrity:
                problems.append(f"{where} changes version but keeps the old integrity hash")
        elif self.before.integrity != self.after.integrity:
            problems.append(f"{where} changes its integrity hash without a new version")
        return problems


def compare_locks(before: Manifest, after: Manifest) -> tuple[LockChange, ...]:
    keys = sorted(before.locked.keys() | after.locked.keys())
    return tuple(
        LockChange(k, before.locked.get(k), after.locked.get(k))
        for k in keys
        if before.locked.get(k) != after.locked.get(k)
    )


def lock_entry_for(lock: Manifest, name: str) -> LockEntry | None:
    """The top-level lock entry of a package (``node_modules/x`` or the name)."""
    if lock.kind == "package-lock":
        return lock.locked.get(f"node_modules/{name}")
    if lock.kind in ("yarn.lock", "pnpm-lock"):
        return lock.locked.get(name)
    return lock.locked.get(canonicalize_name(name))


def _lock_versions(lock: Manifest, name: str) -> list[str | None]:
    """Every version the lock holds for ``name`` (yarn and pnpm keep several side by side)."""
    first = lock_entry_for(lock, name)
    if first is None:
        return []
    found = [first.version]
    if lock.kind in ("yarn.lock", "pnpm-lock", "uv.lock", "poetry.lock", "pipfile.lock"):
        n = 2
        while (entry := lock.locked.get(f"{first.key}#{n}")) is not None:
            found.append(entry.version)
            n += 1
    return found


def lock_mismatches(
    manifest: Manifest, lock: Manifest, *, names: set[str] | None = None
) -> list[str]:
    """Exact manifest pins whose lock entry has another version, and lock roots that differ.

    ``names`` limits the check to those packages (e.g. the ones a change moved).
    """
    problems: list[str] = []
    for dep in manifest.dependencies:
        if names is not None and dep.name not in names:
            continue
        pin = dep.pin
        if dep.section in _NPM_OVERRIDES:
            continue
        if pin is None:
            if dep.source is None and dep.spec and names is not None:
                problems.extend(_range_mismatch(dep, manifest, lock))
            continue
        entry = lock_entry_for(lock, dep.name)
        if entry is None:
            if lock.kind != "package-lock" or dep.section != "peerDependencies":
                problems.append(f"{dep.name} {pin} has no entry in {lock.path}")
            continue
        if not any(
            version is not None
            and (
                version == pin
                or is_newer(dep.ecosystem, version, pin) is None
                or _same_version(dep.ecosystem, version, pin)
            )
            for version in _lock_versions(lock, dep.name)
        ):
            problems.append(
                f"{dep.name}: {manifest.path} pins {pin}, {lock.path} has {entry.version}"
            )
    if lock.dependencies:  # the lock's copy of the manifest requirements must agree
        for dep in lock.dependencies:
            if names is not None and dep.name not in names:
                continue
            if manifest.kind == "pyproject" and dep.section != "project.dependencies":
                continue
            if ":" in dep.section:  # a pnpm workspace project's own package.json
                continue
            match = [d for d in manifest.dependencies if d.name == dep.name]
            if not match:
                problems.append(
                    f"{lock.path} requires {dep.name}, which {manifest.path} does not list"
                )
            elif not any(_same_spec(dep, d) for d in match):
                problems.append(
                    f"{dep.name}: {lock.path} records {dep.spec or dep.source}, "
                    f"{manifest.path} declares {match[0].spec or match[0].source}"
                )
    return problems


def _range_mismatch(dep: Dependency, manifest: Manifest, lock: Manifest) -> list[str]:
    """A range whose package the lock holds at no version inside it."""
    versions = _lock_versions(lock, dep.name)
    if not versions:
        return []
    if any(v is not None and satisfies(dep.ecosystem, v, dep.spec) is True for v in versions):
        return []
    shown = ", ".join(str(v) for v in versions[:3])
    return [f"{dep.name}: {manifest.path} requires {dep.spec}, {lock.path} has {shown}"]


def _same_version(ecosystem: Ecosystem, a: str, b: str) -> bool:
    try:
        if ecosystem == "npm":
            return bool(nodesemver.eq(a, b, False))
        return Version(a) == Version(b)
    except (InvalidVersion, ValueError, TypeError):
        return a == b


def _same_spec(a: Dependency, b: Dependency) -> bool:
    if a.ecosystem == "npm":
        return a.spec == b.spec and a.source == b.source
    try:
        return SpecifierSet(a.spec) == SpecifierSet(b.spec)
    except InvalidSpecifier:
        return a.spec == b.spec
