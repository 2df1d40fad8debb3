"""Pipenv: Pipfile (TOML) and Pipfile.lock (JSON).

Pipfile's ``[packages]``/``[dev-packages]`` values are PEP 440 specifiers (``"*"`` is any
version) or tables (``version``, ``extras``, ``markers``, ``index``, ``git``, ``path``...);
``[[source]]`` entries are installer options (a changed index is a changed option).
Pipfile.lock's ``default``/``develop`` entries are lock entries with their ``hashes``;
``_meta.sources`` are options, ``_meta.hash`` (the Pipfile's digest) is left out.
"""

from __future__ import annotations

import json
from typing import Any

from packaging.utils import canonicalize_name

from .. import _toml
from ._deps_model import (
    Dependency,
    DependencySyntaxError,
    LockEntry,
    Manifest,
    _flat,
    _source_text,
)

_SECTIONS = {"packages": "packages", "dev-packages": "dev-packages"}
_SOURCE_KEYS = ("git", "path", "file", "editable", "ref", "subdirectory", "index")


def _pipfile_dep(section: str, name: str, value: Any) -> Dependency:
    if isinstance(value, str):
        spec = "" if value.strip() == "*" else value.strip()
        return Dependency("pypi", section, canonicalize_name(name), spec, raw=value)
    if not isinstance(value, dict):
        return Dependency("pypi", section, canonicalize_name(name), "", source=_source_text(value))
    spec = str(value.get("version", "")).strip()
    extras = tuple(sorted(canonicalize_name(str(e)) for e in value.get("extras", ())))
    marker = str(value["markers"]) if "markers" in value else None
    source_keys = {k: value[k] for k in _SOURCE_KEYS if k in value}
    return Dependency(
        "pypi",
        section,
        canonicalize_name(name),
        "" if spec == "*" else spec,
        extras,
        marker,
        _source_text(source_keys) if source_keys else None,
    )


def parse_pipfile(text: str, path: str = "Pipfile") -> Manifest:
    try:
        data: dict[str, Any] = _toml.loads(text)
    except _toml.TOMLDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    deps: list[Dependency] = []
    for table, section in _SECTIONS.items():
        entries = data.pop(table, None) or {}
        if not isinstance(entries, dict):
            raise DependencySyntaxError(f"{path}: [{table}] is not a table")
        deps.extend(_pipfile_dep(section, str(n), v) for n, v in entries.items())
    sources = data.pop("source", None)
    options = [f"source = {_source_text(sources)}"] if sources is not None else []
    for key in ("pipenv", "scripts"):
        if key in data:
            options.append(f"{key} = {_source_text(data.pop(key))}")
    return Manifest(path, "pipfile", "pypi", tuple(deps), tuple(options), rest=_flat(data))


def parse_pipfile_lock(text: str, path: str = "Pipfile.lock") -> Manifest:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    if not isinstance(data, dict):
        raise DependencySyntaxError(f"{path}: the top level is not an object")
    meta = data.pop("_meta", {}) or {}
    if not isinstance(meta, dict):
        raise DependencySyntaxError(f"{path}: _meta is not an object")
    meta.pop("hash", None)  # the Pipfile's digest: changes with every edit of it
    options = [f"_meta.sources = {_source_text(meta.pop('sources', None))}"]
    locked: dict[str, LockEntry] = {}
    for section in ("default", "develop"):
        table = data.pop(section, None) or {}
        if not isinstance(table, dict):
            raise DependencySyntaxError(f"{path}: {section} is not an object")
        for name, entry in table.items():
            if not isinstance(entry, dict):
                raise DependencySyntaxError(f"{path}: {section}[{name!r}] is not an object")
            version = str(entry.get("version", "")).removeprefix("===").removeprefix("==")
            # the index is named in _meta.sources (an option); git, path, file are sources
            source_keys = {k: entry[k] for k in _SOURCE_KEYS if k in entry and k != "index"}
            other = {k: v for k, v in entry.items() if k not in ("version", "hashes", *source_keys)}
            key: str = canonicalize_name(str(name))
            if key in locked:
                key = f"{key}#2"  # the same package in develop too
            locked[key] = LockEntry(
                key,
                canonicalize_name(str(name)),
                version or None,
                _source_text(source_keys) if source_keys else None,
                tuple(sorted(str(h) for h in entry.get("hashes", ()))),
                False,
                _source_text({"section": section, **other}),
            )
    rest = _flat({"_meta": meta, **data})
    return Manifest(path, "pipfile.lock", "pypi", (), tuple(options), rest=rest, locked=locked)
