"""Integrity and resolution: did the bytes a lock or ``--hash`` line names change, and why.

A version bump brings new hashes and new tarball URLs; the same version with other
hashes, another tarball URL, another commit or files from another host is a different
artifact under an unchanged name. These functions say which, as ``(severity, phrase)``
pairs ("reject": a statement about the change that is true whatever the reason;
"review": the change may be benign, a person decides). Nothing here reads the network:
a new hash is never "verified", only checked for consistency with the version it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Literal
from urllib.parse import unquote, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ._deps_compare import DependencyChange, LockChange, non_index_forms
from ._deps_model import LockEntry, Manifest
from ._deps_ranges import Ecosystem

Severity = Literal["reject", "review"]
Finding = tuple[Severity, str]
# Hash algorithms by strength (SRI and pip spellings); unknown names rank as the weakest.
_STRENGTH = {"md5": 0, "sha1": 1, "sha224": 2, "sha256": 3, "sha384": 4, "sha512": 5}
# hash -> {(package and version, tarball/file locations) it is recorded for: the lock key}
_Owner = tuple[tuple[str, str], tuple[str, ...]]
HashOwners = Mapping[str, Mapping[_Owner, str]]


def _owner(entry: LockEntry) -> _Owner:
    return ((entry.name.lower(), entry.version or ""), entry.artifacts)


def _same_artifact(a: _Owner, b: _Owner) -> bool:
    """The same package and version, or the same tarball URL (an npm alias or a nested
    copy): one artifact, which may be recorded more than once."""
    return a[0] == b[0] or (bool(a[1]) and a[1] == b[1])


def hash_owners(lock: Manifest) -> dict[str, dict[_Owner, str]]:
    """Which artifacts each hash in ``lock`` is recorded for (one pass over the entries)."""
    owners: dict[str, dict[_Owner, str]] = {}
    for key, entry in lock.locked.items():
        if key in ("", "<project>"):
            continue
        owner = _owner(entry)
        for digest in entry.integrity:
            owners.setdefault(digest, {}).setdefault(owner, key)
    return owners


def _strongest(digests: set[str]) -> tuple[int, str]:
    return max(
        ((_STRENGTH.get(_algorithm(d), -1), _algorithm(d)) for d in digests), default=(-1, "")
    )


def _borrowed(change: LockChange, owners: HashOwners | None) -> Finding | None:
    """A new hash that the same lock records for another artifact (a hash names one file)."""
    before, after = change.before, change.after
    if owners is None or after is None:
        return None
    mine = _owner(after)
    for digest in sorted(set(after.integrity) - set(before.integrity if before else ())):
        others = [
            key for owner, key in owners.get(digest, {}).items() if not _same_artifact(owner, mine)
        ]
        if others:
            return (
                "reject",
                f"records the hash that lock entry {others[0]} has for another artifact "
                f"({_algorithm(digest) or 'hash'} {digest[:24]}...)",
            )
    return None


def _weaker(old: set[str], new: set[str], what: str) -> Finding | None:
    """The new hashes' strongest algorithm is weaker than the old ones' (sha512 -> sha1)."""
    if not old or not new:
        return None
    (old_rank, old_name), (new_rank, new_name) = _strongest(old), _strongest(new)
    if new_rank >= old_rank:
        return None
    return (
        "review",
        f"moves its {what} from {old_name} to {new_name or 'an unknown algorithm'}, a weaker check",
    )


def _refiled(before: LockEntry, after: LockEntry) -> str | None:
    """A file a Python lock keeps under the same name with another hash."""
    old = dict(before.file_hashes)
    for file, digest in after.file_hashes:
        if file in old and old[file] != digest:
            return file
    return None


def _algorithm(digest: str) -> str:
    """``sha512-AbC..`` (SRI) / ``sha256:abc..`` / ``sha256=abc`` -> ``sha512`` / ``sha256``."""
    for separator in (":", "-", "="):
        head, found, _ = digest.partition(separator)
        if found:
            return head.lower()
    return ""


def _hash_change(old: set[str], new: set[str], what: str) -> Finding | None:
    """The same version with other hashes: gained (review), replaced (reject), other algorithm."""
    if old == new or not new:
        return None  # dropped hashes are their own denial
    if not old:
        return ("review", f"gains {what} it did not have for the same version")
    if old <= new:
        return ("review", f"keeps its {what} and gains {len(new - old)} more for the same version")
    if old & new:
        return ("review", f"replaces some of its {what} for the same version")
    if {_algorithm(d) for d in old} & {_algorithm(d) for d in new}:
        one = what[:-2] if what.endswith("hashes") else what[:-1]  # "file hash", "--hash value"
        return ("reject", f"keeps its version but every {one} changes: a different artifact")
    shown = ", ".join(sorted({_algorithm(d) for d in old} | {_algorithm(d) for d in new}))
    return ("review", f"switches its {what} to another algorithm ({shown}) for the same version")


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""


def _npm_tarball(url: str, name: str, version: str) -> tuple[bool, bool] | None:
    """(names this package, names this version) for a registry tarball URL
    (``/<name>/-/<base>-<version>.tgz``); None when the URL is not of that layout (git,
    file, other registries' layouts)."""
    path = unquote(urlsplit(url.split("#", 1)[0]).path)
    if "/-/" not in path or not path.endswith(".tgz"):
        return None
    folder, _, file = path.rpartition("/-/")
    base = name.rsplit("/", 1)[-1]
    return folder.endswith(f"/{name}") and file.startswith(f"{base}-"), file.endswith(
        f"-{version}.tgz"
    )


def _unaliased(key: str, name: str) -> bool:
    """A package-lock entry (``node_modules/<name>``) whose recorded name is its folder's: an
    alias (``npm:other@1``) records the installed package's name apart (``"name": "other"``)."""
    _, found, last = key.rpartition("node_modules/")
    return bool(found) and last == name


def _python_file_version(location: str) -> Version | None:
    file = PurePosixPath(unquote(urlsplit(location).path) or location).name
    try:
        if file.endswith(".whl"):
            return parse_wheel_filename(file)[1]
        return parse_sdist_filename(file)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def _same_version(ecosystem: Ecosystem, a: LockEntry, b: LockEntry) -> bool:
    if a.version is None or b.version is None:
        return False
    if ecosystem == "npm":
        return a.version == b.version
    try:
        return Version(a.version) == Version(b.version)
    except InvalidVersion:
        return a.version == b.version


def lock_resolution(
    change: LockChange, ecosystem: Ecosystem, owners: HashOwners | None = None
) -> list[Finding]:
    """What changed in where a lock entry's files come from and what they hash to.

    ``owners`` (:func:`hash_owners` of the new lock) lets a new hash that the lock records
    for another artifact be rejected: one hash names one file.
    """
    before, after = change.before, change.after
    if change.key in ("", "<project>"):
        return []
    borrowed = _borrowed(change, owners)
    found: list[Finding] = [borrowed] if borrowed is not None else []
    if before is None or after is None:
        return found
    gained = non_index_forms(ecosystem, after.version or "") - non_index_forms(
        ecosystem, before.version or ""
    )
    if gained:
        found.append(
            (
                "review",
                f"moves to {after.version}, a local version ({', '.join(sorted(gained))}) "
                "that the public index does not serve",
            )
        )
    if _same_version(ecosystem, before, after):
        label = "integrity hashes" if ecosystem == "npm" else "file hashes"
        hashed = _hash_change(set(before.integrity), set(after.integrity), label)
        refiled = _refiled(before, after)
        if refiled is not None:
            hashed = (
                "reject",
                f"keeps version {after.version} but the file hash of {refiled} changes: "
                "a different artifact under the same file name",
            )
        if hashed is not None:
            found.append(hashed)
        if before.artifacts != after.artifacts and not change.source_change:
            if before.source != after.source:
                return found  # http:// -> https:// of the same files
            new_hosts = {_host(a) for a in after.artifacts} - {_host(a) for a in before.artifacts}
            if ecosystem == "npm" or new_hosts - {""}:
                shown = ", ".join(sorted(set(after.artifacts) - set(before.artifacts))[:2])
                found.append(
                    (
                        "reject",
                        f"keeps version {after.version} but resolves to another location "
                        f"({shown or 'none'})",
                    )
                )
            elif hashed is None:
                found.append(("review", f"lists other files for the same version {after.version}"))
        return found
    if before.version is None or after.version is None:
        return found
    if before.integrity and set(before.integrity) == set(after.integrity):
        found.append(
            ("reject", f"moves to {after.version} but keeps the integrity hash of {before.version}")
        )
    weaker = _weaker(
        set(before.integrity),
        set(after.integrity),
        "integrity hash" if ecosystem == "npm" else "file hashes",
    )
    if weaker is not None:
        found.append(weaker)
    for artifact in after.artifacts:
        if ecosystem == "npm":
            names = _npm_tarball(artifact, after.name, after.version)
            if names is not None and not names[1]:
                found.append(
                    ("reject", f"records version {after.version} but its tarball is {artifact}")
                )
            elif names is not None and not names[0] and _unaliased(change.key, after.name):
                found.append(
                    (
                        "reject",
                        f"records the package {after.name} but its tarball is another "
                        f"package's ({artifact}), and the entry declares no alias",
                    )
                )
            elif names is not None and not names[0]:  # an alias (npm:other@1.2.3), or not
                found.append(("review", f"resolves to the tarball of another name ({artifact})"))
            elif names is None and artifact not in before.artifacts:
                found.append(
                    ("review", f"moves to {artifact}, which is not a registry tarball (git, URL)")
                )
        else:
            version = _python_file_version(artifact)
            try:
                expected = Version(after.version)
            except InvalidVersion:
                continue
            if version is not None and version != expected:
                found.append(
                    ("reject", f"records version {after.version} but lists the file {artifact}")
                )
                break
    return found


def requirement_hashes(change: DependencyChange) -> Finding | None:
    """A requirement whose version stays while its ``--hash`` values change."""
    before, after = change.before, change.after
    if before is None or after is None or before.source != after.source or not after.hashes:
        return None
    old = {h.partition("=")[2] or h for h in before.hashes}
    new = {h.partition("=")[2] or h for h in after.hashes}
    if before.spec != after.spec:
        return _weaker(old, new, "--hash values")
    return _hash_change(old, new, "--hash values")
