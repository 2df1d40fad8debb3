"""npm manifests and lock files: package.json, package-lock.json / npm-shrinkwrap.json."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ._deps_model import (
    _NPM_OVERRIDES,
    _NPM_SECTIONS,
    MAX_NPM_RANGES,
    Dependency,
    DependencySyntaxError,
    LockEntry,
    Manifest,
    _flat,
    _pop,
    _source_text,
)
from ._deps_ranges import _NPM_SOURCE


def _npm_dep(section: str, name: str, spec: Any) -> Dependency:
    if not isinstance(spec, str):
        return Dependency("npm", section, name, "", source=_source_text(spec), raw=str(spec))
    text = spec.strip()
    source = text if _NPM_SOURCE.match(text) else None
    return Dependency("npm", section, name, "" if source else text, source=source, raw=spec)


def parse_package_json(text: str, path: str = "package.json") -> Manifest:
    """npm manifest: the four dependency maps, overrides/resolutions, scripts, the rest."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    if not isinstance(data, dict):
        raise DependencySyntaxError(f"{path}: the top level is not an object")
    deps: list[Dependency] = []
    ranges = 0
    for section in (*_NPM_SECTIONS, *_NPM_OVERRIDES):
        table = _pop(data, section)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise DependencySyntaxError(f"{path}: {section} is not an object")
        for name, spec in table.items():
            ranges += spec.count("||") + 1 if isinstance(spec, str) else 1
            if ranges > MAX_NPM_RANGES:
                raise DependencySyntaxError(
                    f"{path}: more than {MAX_NPM_RANGES} version ranges (at {section}.{name}); "
                    "a manifest this large is not analysed"
                )
            deps.append(_npm_dep(section, str(name), spec))
    scripts = data.get("scripts", {})
    scripts = {str(k): str(v) for k, v in scripts.items()} if isinstance(scripts, dict) else {}
    options = [
        f"{key} = {_source_text(data[key])}"
        for key in ("publishConfig", "bundleDependencies", "bundledDependencies", "workspaces")
        if key in data
    ]
    return Manifest(path, "package.json", "npm", tuple(deps), tuple(options), scripts, _flat(data))


# -- lock files -----------------------------------------------------------------------


def _npm_source(resolved: Any) -> str | None:
    if not isinstance(resolved, str):
        return None
    if resolved.startswith(("http://", "https://")) and "/-/" in resolved:
        parts = urlsplit(resolved)
        return f"{parts.scheme}://{parts.netloc}"
    return resolved.split("#", 1)[0]


def parse_package_lock(text: str, path: str = "package-lock.json") -> Manifest:
    """package-lock.json v1, v2, v3 (and npm-shrinkwrap.json)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    if not isinstance(data, dict):
        raise DependencySyntaxError(f"{path}: the top level is not an object")
    locked: dict[str, LockEntry] = {}
    deps: list[Dependency] = []
    packages = data.pop("packages", None)
    legacy = data.pop("dependencies", None)
    if isinstance(packages, dict):
        for key, entry in packages.items():
            if not isinstance(entry, dict):
                raise DependencySyntaxError(f"{path}: packages[{key!r}] is not an object")
            if key == "":  # the root: a copy of the manifest's dependency maps
                for section in _NPM_SECTIONS:
                    table = entry.get(section) or {}
                    if isinstance(table, dict):
                        deps.extend(_npm_dep(section, str(n), s) for n, s in table.items())
                rest = {k: v for k, v in entry.items() if k not in _NPM_SECTIONS}
                locked[""] = LockEntry("", "", None, None, fields=_source_text(rest))
                continue
            name = str(entry.get("name") or key.rpartition("node_modules/")[2])
            locked[key] = _lock_entry(key, name, entry)
    elif isinstance(legacy, dict):

        def walk(table: Mapping[str, Any], prefix: str) -> None:
            for name, entry in table.items():
                if not isinstance(entry, dict):
                    raise DependencySyntaxError(f"{path}: dependencies[{name!r}] is not an object")
                key = f"{prefix}node_modules/{name}"
                nested = entry.get("dependencies")
                locked[key] = _lock_entry(
                    key, str(name), {k: v for k, v in entry.items() if k != "dependencies"}
                )
                if isinstance(nested, dict):
                    walk(nested, f"{key}/")

        walk(legacy, "")
    rest = _flat(data)
    return Manifest(path, "package-lock", "npm", tuple(deps), rest=rest, locked=locked)


def _lock_entry(key: str, name: str, entry: Mapping[str, Any]) -> LockEntry:
    other = {
        k: v
        for k, v in entry.items()
        if k not in ("version", "resolved", "integrity", "hasInstallScript")
    }
    version = entry.get("version")
    integrity = entry.get("integrity")
    resolved = entry.get("resolved")
    return LockEntry(
        key,
        name,
        str(version) if version is not None else None,
        _npm_source(resolved),
        tuple(str(integrity).split()) if integrity else (),
        bool(entry.get("hasInstallScript")),
        _source_text(other),
        (str(resolved),) if resolved else (),
    )
