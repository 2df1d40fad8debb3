"""pyproject.toml: PEP 621 lists, dependency groups, Poetry tables, uv/poetry sources."""

from __future__ import annotations

from typing import Any

from packaging.utils import canonicalize_name

from .. import _toml
from ._deps_model import Dependency, DependencySyntaxError, Manifest, _flat, _pop, _source_text
from ._deps_pip import _pep508
from ._deps_ranges import npm_exact, pep440_exact

_POETRY_SOURCE_KEYS = ("git", "path", "url", "source", "branch", "rev", "tag", "develop")
_POETRY_KNOWN = ("version", "extras", "markers", "python", *_POETRY_SOURCE_KEYS)


def _poetry_deps(section: str, name: str, value: Any) -> list[Dependency]:
    """A poetry dependency value (a constraint, a table, or a list of tables, one per
    environment) as dependencies; keys that change what is installed (``allow-prereleases``,
    ``optional``, ``platform``...) are the dependency's options."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [d for item in value for d in _poetry_deps(section, name, item)]
    key = canonicalize_name(name)
    if isinstance(value, str):
        spec = value.strip()
        if pep440_exact(spec) is None and npm_exact(spec) is not None:
            spec = f"=={spec}"  # poetry's bare "1.2.3" is an exact pin
        return [Dependency("pypi", section, key, spec)]
    if not isinstance(value, dict):
        return [Dependency("pypi", section, key, "", source=_source_text(value))]
    spec = str(value.get("version", ""))
    if spec and pep440_exact(spec) is None and npm_exact(spec) is not None:
        spec = f"=={spec}"
    extras = tuple(sorted(canonicalize_name(str(e)) for e in value.get("extras", ())))
    marker_parts = [str(value[k]) for k in ("markers",) if k in value]
    if "python" in value:
        marker_parts.append(f"python {value['python']}")
    marker = " and ".join(marker_parts) or None
    source_keys = {k: value[k] for k in _POETRY_SOURCE_KEYS if k in value}
    options = tuple(
        sorted(f"{k}={_source_text(v)}" for k, v in value.items() if k not in _POETRY_KNOWN)
    )
    source = _source_text(source_keys) if source_keys else None
    return [Dependency("pypi", section, key, spec, extras, marker, source, options=options)]


def parse_pyproject(text: str, path: str = "pyproject.toml") -> Manifest:
    """``[project]`` dependency lists, dependency groups, uv/poetry sources and indexes."""
    try:
        data: dict[str, Any] = _toml.loads(text)
    except _toml.TOMLDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    deps: list[Dependency] = []
    options: list[str] = []

    def pep508_list(section: str, items: Any) -> None:
        if items is None:
            return
        if not isinstance(items, list):
            raise DependencySyntaxError(f"{path}: {section} is not a list")
        for item in items:
            if isinstance(item, str):
                deps.append(_pep508(item, section))
            else:  # {include-group = "x"} and similar: an option of the file
                options.append(f"{section}: {_source_text(item)}")

    pep508_list("project.dependencies", _pop(data, "project.dependencies"))
    pep508_list("build-system.requires", _pop(data, "build-system.requires"))
    for table in ("project.optional-dependencies", "dependency-groups"):
        groups = _pop(data, table)
        if isinstance(groups, dict):
            for group, items in groups.items():
                pep508_list(f"{table}.{group}", items)
        elif groups is not None:
            raise DependencySyntaxError(f"{path}: {table} is not a table")

    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    poetry_tables: list[tuple[str, Any]] = []
    if isinstance(poetry, dict):
        for name in ("dependencies", "dev-dependencies"):
            poetry_tables.append((f"tool.poetry.{name}", poetry.pop(name, None)))
        groups = poetry.get("group")
        if isinstance(groups, dict):
            for group, body in groups.items():
                if isinstance(body, dict):
                    poetry_tables.append(
                        (f"tool.poetry.group.{group}.dependencies", body.pop("dependencies", None))
                    )
    for section, table in poetry_tables:
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            deps.extend(_poetry_deps(section, str(name), value))

    sources = _pop(data, "tool.uv.sources")
    if isinstance(sources, dict):
        redirected: dict[str, str] = {
            canonicalize_name(k): _source_text(v) for k, v in sources.items()
        }
        deps = [
            Dependency(
                d.ecosystem,
                d.section,
                d.name,
                d.spec,
                d.extras,
                d.marker,
                d.source or (f"uv:{redirected[d.name]}" if d.name in redirected else None),
                d.hashes,
                d.options,
                d.line,
                d.raw,
            )
            for d in deps
        ]
        for name, value in sorted(redirected.items()):
            options.append(f"tool.uv.sources.{name} = {value}")
    for key in (
        "tool.uv.index",
        "tool.uv.index-url",
        "tool.uv.extra-index-url",
        "tool.uv.find-links",
        "tool.uv.no-index",
        "tool.poetry.source",
        "tool.pdm.source",
        "tool.pip",
        "tool.uv.pip",
    ):
        value = _pop(data, key)
        if value is not None:
            options.append(f"{key} = {_source_text(value)}")
    return Manifest(path, "pyproject", "pypi", tuple(deps), tuple(options), rest=_flat(data))
