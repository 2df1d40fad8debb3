"""Python lock files (uv.lock, poetry.lock), and every dependency file by its name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Literal

from packaging.utils import canonicalize_name

from .. import _toml
from ._deps_model import (
    MAX_FILE_BYTES,
    MAX_LOCK_FILE_BYTES,
    Dependency,
    DependencySyntaxError,
    FileKind,
    LockEntry,
    Manifest,
    _flat,
    _source_text,
)
from ._deps_npm import parse_package_json, parse_package_lock
from ._deps_pip import (
    _INSTALLER_CONFIGS,
    parse_installer_config,
    parse_pip_config,
    parse_requirements,
)
from ._deps_pipenv import parse_pipfile, parse_pipfile_lock
from ._deps_pyproject import parse_pyproject
from ._deps_yarn import parse_pnpm_lock, parse_yarn_lock


def _python_lock(text: str, path: str, kind: Literal["uv.lock", "poetry.lock"]) -> Manifest:
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as error:
        raise DependencySyntaxError(f"{path}: {error}") from None
    packages = data.pop("package", [])
    if not isinstance(packages, list):
        raise DependencySyntaxError(f"{path}: package is not an array of tables")
    locked: dict[str, LockEntry] = {}
    deps: list[Dependency] = []
    for entry in packages:
        if not isinstance(entry, dict) or "name" not in entry:
            raise DependencySyntaxError(f"{path}: a [[package]] has no name")
        name = canonicalize_name(str(entry["name"]))
        source = entry.get("source")
        if (
            kind == "uv.lock"
            and isinstance(source, dict)
            and (source.get("virtual") is not None or source.get("editable") == ".")
        ):
            # The project itself: its declared requirements mirror the manifest.
            requires = (entry.get("metadata") or {}).get("requires-dist") or []
            for item in requires:
                if isinstance(item, dict) and "name" in item:
                    deps.append(
                        Dependency(
                            "pypi",
                            "project.dependencies",
                            canonicalize_name(str(item["name"])),
                            str(item.get("specifier", "")),
                            tuple(sorted(item.get("extras", ()))),
                            item.get("marker"),
                            _source_text(
                                {k: item[k] for k in ("git", "url", "path", "index") if k in item}
                            )
                            if any(k in item for k in ("git", "url", "path", "index"))
                            else None,
                        )
                    )
            metadata = entry.get("metadata")
            kept = {k: v for k, v in entry.items() if k != "metadata"}
            if isinstance(metadata, dict):  # requires-dist is compared as dependencies
                kept["metadata"] = {k: v for k, v in metadata.items() if k != "requires-dist"}
            locked["<project>"] = LockEntry(
                "<project>", name, None, None, fields=_source_text(kept)
            )
            continue
        hashes: list[str] = []
        artifacts: list[str] = []
        file_hashes: list[tuple[str, str]] = []
        for blob in [entry.get("sdist"), *(entry.get("wheels") or []), *(entry.get("files") or [])]:
            if isinstance(blob, dict):
                if blob.get("hash"):
                    hashes.append(str(blob["hash"]))
                where = blob.get("url") or blob.get("file") or blob.get("path")
                if where:
                    artifacts.append(str(where))
                    if blob.get("hash"):
                        file_hashes.append((str(where), str(blob["hash"])))
        other = {
            k: v
            for k, v in entry.items()
            if k not in ("name", "version", "source", "sdist", "wheels", "files")
        }
        key: str = name
        n = 1
        while key in locked:
            n += 1
            key = f"{name}#{n}"
        version = entry.get("version")
        locked[key] = LockEntry(
            key,
            name,
            str(version) if version is not None else None,
            _source_text(source) if source is not None else None,
            tuple(sorted(hashes)),
            False,
            _source_text(other),
            tuple(sorted(artifacts)),
            tuple(sorted(file_hashes)),
        )
    data.pop(
        "metadata", None
    ) if kind == "poetry.lock" else None  # content-hash changes on any bump
    return Manifest(path, kind, "pypi", tuple(deps), rest=_flat(data), locked=locked)


def file_kind(path: str) -> FileKind | None:
    """What a dependency-related file is, by name; None for anything else."""
    name = PurePosixPath(path).name.lower()
    if name == "package.json":
        return "package.json"
    if name in ("package-lock.json", "npm-shrinkwrap.json"):
        return "package-lock"
    if name == "uv.lock":
        return "uv.lock"
    if name == "poetry.lock":
        return "poetry.lock"
    if name == "pipfile":
        return "pipfile"
    if name == "pipfile.lock":
        return "pipfile.lock"
    if name == "yarn.lock":
        return "yarn.lock"
    if name in ("pnpm-lock.yaml", "pnpm-lock.yml"):
        return "pnpm-lock"
    if name == "pyproject.toml":
        return "pyproject"
    if name in ("pip.conf", "pip.ini"):
        return "pip-config"
    if name in _INSTALLER_CONFIGS:
        return "installer-config"
    if name.endswith((".txt", ".in")) and (
        "requirement" in name
        or "constraint" in name
        or any(p.lower().startswith("requirements") for p in PurePosixPath(path).parent.parts)
    ):
        return "requirements"  # requirements*.txt, dev-requirements.in, requirements/base.txt
    return None


def parse_dependency_file(path: str, data: bytes, kind: FileKind | None = None) -> Manifest:
    """Parse ``data`` as the dependency file ``path`` names (or as ``kind``)."""
    kind = kind or file_kind(path)
    limit = MAX_LOCK_FILE_BYTES.get(kind or "", MAX_FILE_BYTES)
    if len(data) > limit:
        raise DependencySyntaxError(f"{path}: too large to analyse ({len(data)} bytes > {limit})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DependencySyntaxError(f"{path}: not UTF-8 ({error.reason})") from None
    parsers: dict[FileKind, Callable[[str, str], Manifest]] = {
        "requirements": parse_requirements,
        "pyproject": parse_pyproject,
        "package.json": parse_package_json,
        "package-lock": parse_package_lock,
        "uv.lock": lambda t, p: _python_lock(t, p, "uv.lock"),
        "poetry.lock": lambda t, p: _python_lock(t, p, "poetry.lock"),
        "yarn.lock": parse_yarn_lock,
        "pipfile": parse_pipfile,
        "pipfile.lock": parse_pipfile_lock,
        "pnpm-lock": parse_pnpm_lock,
        "pip-config": parse_pip_config,
        "installer-config": parse_installer_config,
    }
    if kind is None:
        raise DependencySyntaxError(f"{path}: not a known dependency file")
    try:
        return parsers[kind](text, path)
    except DependencySyntaxError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError, IndexError, RecursionError) as error:
        # An unexpected shape (a table where a string belongs, ...): unparsable, not a crash.
        raise DependencySyntaxError(
            f"{path}: unexpected structure ({type(error).__name__})"
        ) from None
