"""yarn.lock (classic v1 and Berry) and pnpm-lock.yaml as lock entries.

Entries are keyed by package name (``name#2``... for further versions of the same name,
in version order, so a bump pairs with the entry it replaced). Each keeps its version,
registry host (the source), the exact tarball URL / resolution / commit (artifacts),
its integrity or checksum, and everything else as canonical JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cmp_to_key
from typing import Any

import nodesemver  # type: ignore[import-untyped]

from ._config_types import ConfigSyntaxError
from ._config_yaml import parse_yaml
from ._deps_model import (
    _NPM_SECTIONS,
    Dependency,
    DependencySyntaxError,
    LockEntry,
    Manifest,
    _flat,
    _source_text,
)
from ._deps_npm import _npm_source

_V1_FIELD = re.compile(r'^\s+("?)([^"\s:]+)\1:?\s+"?(.*?)"?\s*$')


def _name_of(spec: str) -> str:
    """``@babel/core@^7.0.0`` / ``lodash@npm:^4`` / ``/lodash@4.17.21(react@18)`` -> name;
    an alias (``string-width-cjs@npm:string-width@^4``) names the package it installs."""
    spec = spec.strip().strip('"').lstrip("/")
    alias = spec.find("@npm:", 1)
    if alias > 0 and spec.find("@", alias + 5 + 1) > 0:
        spec = spec[alias + 5 :]
    at = spec.find("@", 1)
    return spec[:at] if at > 0 else spec


def _compare(a: LockEntry, b: LockEntry) -> int:
    try:
        return int(nodesemver.compare(a.version or "0.0.0", b.version or "0.0.0", True))
    except (ValueError, TypeError):
        return (str(a.version) > str(b.version)) - (str(a.version) < str(b.version))


def _keyed(entries: Iterable[LockEntry]) -> dict[str, LockEntry]:
    """``name``, ``name#2``, ... in version order."""
    by_name: dict[str, list[LockEntry]] = {}
    for entry in entries:
        by_name.setdefault(entry.name, []).append(entry)
    locked: dict[str, LockEntry] = {}
    for name, group in sorted(by_name.items()):
        for n, entry in enumerate(sorted(group, key=cmp_to_key(_compare)), 1):
            key = name if n == 1 else f"{name}#{n}"
            locked[key] = LockEntry(
                key,
                entry.name,
                entry.version,
                entry.source,
                entry.integrity,
                entry.install_script,
                entry.fields,
                entry.artifacts,
            )
    return locked


def _entry(name: str, fields: Mapping[str, Any], resolved: str | None) -> LockEntry:
    integrity = fields.get("integrity") or fields.get("checksum")
    version = fields.get("version")
    other = {
        k: v
        for k, v in fields.items()
        if k not in ("version", "resolved", "resolution", "integrity", "checksum")
    }
    return LockEntry(
        name,
        name,
        str(version) if version is not None else None,
        _npm_source(resolved) if resolved else None,
        tuple(str(integrity).split()) if integrity else (),
        bool(fields.get("requiresBuild") or fields.get("hasInstallScript")),
        _source_text(other),
        (resolved,) if resolved else (),
    )


def _yarn_v1(text: str, path: str) -> Manifest:
    entries: list[LockEntry] = []
    header: list[str] | None = None
    fields: dict[str, Any] = {}
    nested: str | None = None

    def flush() -> None:
        if header:
            resolved = fields.get("resolved")
            entries.append(_entry(_name_of(header[0]), fields, resolved))

    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            flush()
            if not line.rstrip().endswith(":"):
                raise DependencySyntaxError(f"{path}: line {number}: not an entry header")
            header = [part.strip() for part in line.rstrip()[:-1].split(",")]
            fields, nested = {"requested": sorted(h.strip('"') for h in header)}, None
            continue
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if indent <= 2 and stripped.endswith(":"):
            nested = stripped[:-1].strip('"')
            fields[nested] = {}
            continue
        match = _V1_FIELD.match(line)
        if match is None:
            raise DependencySyntaxError(f"{path}: line {number}: not a field")
        key, value = match.group(2), match.group(3)
        if indent > 2 and nested is not None:
            fields[nested][key] = value
        else:
            nested = None
            fields[key] = value
    flush()
    return Manifest(path, "yarn.lock", "npm", locked=_keyed(entries))


def _yaml(text: str, path: str) -> dict[str, Any]:
    """The config reader's YAML (libyaml when present; alias bombs and duplicates refused)."""
    try:
        data = parse_yaml(text)
    except ConfigSyntaxError as error:
        raise DependencySyntaxError(f"{path}: {str(error)[:120]}") from None
    except Exception as error:  # yaml's YAMLError and its subclasses
        raise DependencySyntaxError(f"{path}: {type(error).__name__}") from None
    if not isinstance(data, dict):
        raise DependencySyntaxError(f"{path}: the top level is not a mapping")
    return data


def parse_yarn_lock(text: str, path: str = "yarn.lock") -> Manifest:
    """yarn.lock: classic (v1, its own syntax) or Berry (YAML with ``__metadata``)."""
    if "__metadata:" not in text[:4096]:
        return _yarn_v1(text, path)
    data = _yaml(text, path)
    metadata = data.pop("__metadata", {})
    entries: list[LockEntry] = []
    for header, fields in data.items():
        if not isinstance(fields, dict):
            raise DependencySyntaxError(f"{path}: {str(header)[:80]!r} is not a mapping")
        resolution = fields.get("resolution")
        first = str(header).split(",")[0]
        fields = {**fields, "requested": sorted(h.strip() for h in str(header).split(","))}
        entries.append(_entry(_name_of(first), fields, str(resolution) if resolution else None))
    rest = _flat({"__metadata": metadata}) if isinstance(metadata, dict) else {}
    return Manifest(path, "yarn.lock", "npm", rest=rest, locked=_keyed(entries))


def _pnpm_version(key: str) -> str | None:
    """``/lodash@4.17.21`` / ``lodash@4.17.21(react@18)`` / ``/lodash/4.17.21`` -> version."""
    key = key.lstrip("/").split("(", 1)[0]
    at = key.find("@", 1)
    if at > 0:
        return key[at + 1 :].split("_", 1)[0]
    if "/" in key:  # lockfile v5: /name/version
        return key.rsplit("/", 1)[1].split("_", 1)[0]
    return None


def _pnpm_name(key: str) -> str:
    bare = key.lstrip("/").split("(", 1)[0]
    if bare.find("@", 1) > 0:
        return _name_of(bare)
    return bare.rsplit("/", 1)[0] if "/" in bare else bare


def parse_pnpm_lock(text: str, path: str = "pnpm-lock.yaml") -> Manifest:
    """pnpm-lock.yaml v5-v9: ``packages`` entries with their ``resolution``."""
    data = _yaml(text, path)
    packages = data.pop("packages", None) or {}
    data.pop("snapshots", None)  # v9: the dependency graph of each package, no sources
    if not isinstance(packages, dict):
        raise DependencySyntaxError(f"{path}: packages is not a mapping")
    entries: list[LockEntry] = []
    for key, fields in packages.items():
        if not isinstance(fields, dict):
            raise DependencySyntaxError(f"{path}: packages[{str(key)[:80]!r}] is not a mapping")
        resolution = fields.get("resolution") or {}
        if not isinstance(resolution, dict):
            raise DependencySyntaxError(f"{path}: {str(key)[:80]!r} has no resolution mapping")
        where = resolution.get("tarball") or resolution.get("repo")
        if resolution.get("commit"):
            where = f"{where}#{resolution['commit']}"
        merged = {
            "version": fields.get("version") or _pnpm_version(str(key)),
            "integrity": resolution.get("integrity"),
            **{k: v for k, v in fields.items() if k not in ("resolution", "version")},
            "resolution": {k: v for k, v in resolution.items() if k != "integrity"},
        }
        name = str(fields.get("name") or _pnpm_name(str(key)))
        entries.append(_entry(name, merged, str(where) if where else None))
    deps = _pnpm_importers(data)
    rest = _flat(data)  # settings, overrides, catalogs
    return Manifest(path, "pnpm-lock", "npm", tuple(deps), rest=rest, locked=_keyed(entries))


def _pnpm_importers(data: dict[str, Any]) -> list[Dependency]:
    """The lock's copy of the manifests' ranges (removed from ``data``), as dependencies."""
    importers = data.pop("importers", None)
    projects: dict[str, Any] = dict(importers) if isinstance(importers, dict) else {}
    if not projects:  # one project, v5/v6: the sections sit at the top level
        projects["."] = {s: data.pop(s) for s in (*_NPM_SECTIONS, "specifiers") if s in data}
    deps: list[Dependency] = []
    for project, sections in sorted(projects.items()):
        if not isinstance(sections, dict):
            raise DependencySyntaxError(f"importer {str(project)[:80]!r} is not a mapping")
        specifiers = sections.get("specifiers") or {}
        for section in _NPM_SECTIONS:
            table = sections.get(section) or {}
            if not isinstance(table, dict):
                raise DependencySyntaxError(f"importer {str(project)[:80]!r}: {section}")
            for name, value in table.items():
                spec = value.get("specifier") if isinstance(value, dict) else specifiers.get(name)
                where = section if project == "." else f"{project}:{section}"
                deps.append(Dependency("npm", where, str(name), str(spec or "")))
    return deps
