"""Dependency manifests: only version specifiers may change.

Covers ``requirements*.txt``, ``pyproject.toml`` and ``package.json``: the set of
dependency names must stay the same, every other field must stay equal, and URL, git,
path or index-changing specifiers are rejected.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import field_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ._base import Action, Rule
from ._config import flatten
from ._glob import matching
from ._paths import validate_globs

__all__ = ("DependencyVersionsOnly",)

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_URLISH = re.compile(
    r"(?i)(://|git\+|\s@\s|^\s*@|\bfile:|\blink:|\bgithub:|\bnpm:|\bgitlab:|^\.|/)"
)
_NPM_VERSION = re.compile(r"^[\s\d.xX*^~<>=|-]*[\dxX*][\w.+-]*[\s\d.xX*^~<>=|+-]*$|^(latest|\*)$")
_NPM_SECTIONS = ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies")
_PY_LISTS = ("project.dependencies", "build-system.requires")
_PY_TABLES = ("project.optional-dependencies", "dependency-groups")


# user:password@ or token@ in a URL: masked in reasons, which reach the agent and logs.
_URL_CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@")


def _shown(text: str, limit: int = 80) -> str:
    """``text`` for a reason: URL credentials masked (``https://***@host``), then bounded."""
    masked = _URL_CREDENTIALS.sub(lambda m: m.group(1) + "***@", text)
    return masked if len(masked) <= limit else masked[: limit - 1] + "…"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_VERSION = re.compile(r"(\d+(?:\.\d+)*)")


def _version(spec: str) -> tuple[int, ...] | None:
    """The first version number in a specifier (``==2.31.0`` → (2, 31, 0)), or None."""
    match = _VERSION.search(spec.split(";", 1)[0].split("--hash", 1)[0])
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


class _Manifest:
    def __init__(self) -> None:
        self.deps: dict[str, dict[str, str]] = {}  # section -> {dependency name: specifier}
        self.bad_specs: list[str] = []
        self.options: set[str] = set()
        self.rest: dict[str, Any] = {}

    def add(self, section: str, name: str, spec: str) -> None:
        self.deps.setdefault(section, {})[_norm(name)] = spec.strip()
        if _URLISH.search(spec):
            self.bad_specs.append(f"{name} ({spec.strip()})")


def _requirements(text: str) -> _Manifest:
    manifest = _Manifest()
    manifest.deps["requirements"] = {}
    for raw in text.replace("\\\n", " ").splitlines():  # join continuation lines
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            manifest.options.add(line)
            continue
        match = _NAME.match(line)
        if match is None:
            manifest.bad_specs.append(f"line '{line}'")
            continue
        manifest.add("requirements", match.group(1), line[match.end() :])
    return manifest


def _pep508(manifest: _Manifest, section: str, items: Any) -> None:
    if not isinstance(items, list):
        manifest.rest[section] = items  # unexpected shape: any change to it is reviewed
        return
    for item in items:
        match = _NAME.match(str(item))
        if match is None:
            manifest.bad_specs.append(f"{section} entry {str(item)!r}")
            continue
        manifest.add(section, match.group(1), str(item)[match.end() :])


def _pyproject(text: str) -> _Manifest:
    data = tomllib.loads(text)
    manifest = _Manifest()
    flat = flatten(data)
    for key in _PY_LISTS:
        value = flat.pop(key, None)
        if value is not None:
            _pep508(manifest, key, value)
    for table in _PY_TABLES:
        for key in [k for k in flat if k.startswith(table + ".")]:
            _pep508(manifest, key, flat.pop(key))
    for key in [k for k in flat if k.startswith("tool.poetry.") and "dependencies." in k]:
        spec = flat.pop(key)
        section, _, name = key.rpartition(".")
        manifest.add(section, name, spec if isinstance(spec, str) else json.dumps(spec))
    flat.pop("project.version", None)
    flat.pop("tool.poetry.version", None)
    manifest.rest = flat
    return manifest


def _package_json(text: str) -> _Manifest:
    data = json.loads(text)
    manifest = _Manifest()
    if not isinstance(data, dict):
        raise ValueError("package.json is not an object")
    for section in _NPM_SECTIONS:
        deps = data.pop(section, None) or {}
        manifest.deps[section] = {}
        for name, spec in deps.items() if isinstance(deps, dict) else []:
            manifest.deps[section][name] = str(spec)
            if not isinstance(spec, str) or not _NPM_VERSION.match(spec):
                manifest.bad_specs.append(f"{name} ({spec})")
    data.pop("version", None)
    manifest.rest = flatten(data)
    return manifest


def _parse(path: str, data: bytes) -> _Manifest:
    name = PurePosixPath(path).name
    text = data.decode("utf-8")
    if name == "package.json":
        return _package_json(text)
    if name == "pyproject.toml":
        return _pyproject(text)
    return _requirements(text)


class DependencyVersionsOnly(Rule):
    """In dependency manifests only version specifiers may change.

    Adding, removing or renaming dependencies, or changing any other field, gets
    ``action`` (review); URL, git, path or index specifiers are always rejected.
    """

    type: Literal["dependency_versions_only"] = "dependency_versions_only"
    globs: tuple[str, ...] = ("requirements*.txt", "pyproject.toml", "package.json")
    allow_major: bool = False
    downgrade_action: Action = "review"
    action: Action = "review"

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        rejects: list[str] = []
        reviews: list[str] = []
        for change in evidence.changes:
            path = change.path
            if matching(self.globs, path) is None or change.kind == "metadata_change":
                continue
            before_bytes, after_bytes = evidence.before_bytes(path), evidence.after_bytes(path)
            if before_bytes is None or after_bytes is None:
                reviews.append(f"{path} was created or deleted; only edit existing manifests.")
                continue
            try:
                before, after = _parse(path, before_bytes), _parse(path, after_bytes)
            except (ValueError, UnicodeDecodeError) as error:
                reviews.append(f"{path} could not be parsed ({str(error)[:80]}); fix its syntax.")
                continue
            new_bad = sorted(set(after.bad_specs) - set(before.bad_specs))
            if new_bad:
                shown = ", ".join(_shown(b) for b in new_bad[:3])
                rejects.append(
                    f"{path} adds URL, git, path or index specifiers ({shown}); "
                    "use plain version specifiers from the default index."
                )
            options = sorted(before.options ^ after.options)
            if options:
                rejects.append(
                    f"{path} changes installer options "
                    f"({', '.join(_shown(o) for o in options[:3])}); "
                    "keep index, hash-checking and other pip options exactly as they were."
                )
            for section in sorted(set(before.deps) | set(after.deps)):
                old, new = before.deps.get(section, {}), after.deps.get(section, {})
                self._compare(path, section, old, new, rejects, reviews)
            other = sorted(
                k
                for k in set(before.rest) | set(after.rest)
                if before.rest.get(k) != after.rest.get(k)
            )
            if other:
                reviews.append(
                    f"{path}: {', '.join(other[:5])} changed; change only dependency versions."
                )
        if rejects:
            return self.verdict("reject", " ".join(rejects))
        if reviews:
            return self.verdict(self.action, " ".join(reviews))
        return None

    def _compare(
        self,
        path: str,
        section: str,
        old: dict[str, str],
        new: dict[str, str],
        rejects: list[str],
        reviews: list[str],
    ) -> None:
        added, removed = sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys())
        lookalikes = [
            f"{a} (looks like {r})"
            for a in added
            for r in removed
            if difflib.SequenceMatcher(None, a, r).ratio() >= 0.8
        ]
        if lookalikes:
            rejects.append(
                f"{path}: {', '.join(lookalikes)} replaces a dependency with a look-alike "
                "name (typosquatting risk); keep the original package name."
            )
        elif added or removed:
            reviews.append(
                f"{path}: dependencies {', '.join([*added, *removed][:5])} were added or "
                f"removed in {section}; change only version specifiers of existing packages."
            )
        for name in sorted(old.keys() & new.keys()):
            before, after = _version(old[name]), _version(new[name])
            if old[name] == new[name]:
                continue
            if after is None or (before is not None and _looser(old[name], new[name])):
                reviews.append(
                    f"{path}: {name} was unpinned or loosened ({_shown(old[name]) or 'any'} -> "
                    f"{_shown(new[name]) or 'any'}); keep an exact or bounded version."
                )
            elif before is None or after == before:
                continue
            elif after < before:
                message = (
                    f"{path}: {name} is downgraded ({_shown(old[name])} -> {_shown(new[name])}); "
                    "upgrade instead, or ask a human to approve the downgrade."
                )
                (rejects if self.downgrade_action == "reject" else reviews).append(message)
            elif after[0] != before[0] and not self.allow_major:
                reviews.append(
                    f"{path}: {name} moves to a new major version "
                    f"({_shown(old[name])} -> {_shown(new[name])}); "
                    "a human must approve major upgrades."
                )


def _looser(old: str, new: str) -> bool:
    """``==1.2`` → ``>=1.2`` and similar: an exact pin became a range."""
    pinned = ("==" in old or re.match(r"^\s*\d", old) is not None) and "==" not in new
    return pinned and re.match(r"^\s*\d", new) is None
