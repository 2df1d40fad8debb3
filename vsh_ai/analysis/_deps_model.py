"""Typed records of dependency files (Dependency, LockEntry, Manifest), limits, markers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import Any, Literal

from packaging.markers import InvalidMarker, Marker

from ._deps_ranges import Ecosystem, npm_exact, pep440_exact

FileKind = Literal[
    "requirements",
    "pyproject",
    "package.json",
    "package-lock",
    "uv.lock",
    "poetry.lock",
    "yarn.lock",
    "pnpm-lock",
    "pipfile",
    "pipfile.lock",
    "pip-config",
    "installer-config",
]
LOCK_KINDS: frozenset[str] = frozenset(
    {"package-lock", "uv.lock", "poetry.lock", "yarn.lock", "pnpm-lock", "pipfile.lock"}
)
NPM_KINDS: frozenset[str] = frozenset({"package.json", "package-lock", "yarn.lock", "pnpm-lock"})

_NPM_SECTIONS = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
_NPM_OVERRIDES = ("overrides", "resolutions", "pnpm.overrides")

# Larger dependency files are not analysed (unparsable -> unproven -> review): parsing
# both versions stays under about a second for the slowest shapes of each kind (about
# 3 s/MiB for requirement lines, 2 s/MiB for TOML locks, 0.8 s/MiB for package-lock).
MAX_FILE_BYTES = 192 << 10
MAX_LOCK_FILE_BYTES: dict[str, int] = {
    "package-lock": 1 << 20,
    "uv.lock": 512 << 10,
    "poetry.lock": 512 << 10,
    "yarn.lock": 768 << 10,
    "pipfile.lock": 512 << 10,
    "pnpm-lock": 256 << 10,  # YAML: about 0.7 s of CPU per MiB and side (libyaml)
}
MAX_REQUIREMENT_LINES = 10_000  # pip requirement lines in one file (each is a PEP 508 parse)
MAX_NPM_RANGES = 2_000
"""Version ranges in one package.json, ``||`` alternatives counted apart: each is parsed
(node-semver) and compared with the other side's (about 0.1 ms each); a manifest with more
is not analysed (reviewed). Real manifests hold tens to a few hundred."""


class DependencySyntaxError(ValueError):
    """A manifest or lock file that cannot be parsed (the message says where)."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """One declared dependency.

    ``name`` is normalised (PEP 503 for Python; npm names as written). ``spec`` is the
    version part (PEP 440 specifier or npm range) or "" when a ``source`` replaces it.
    ``source`` is None for the default index, else the URL, path, git or alias spec,
    or the ``[tool.uv.sources]``/poetry source that redirects the name.
    """

    ecosystem: Ecosystem
    section: str
    name: str
    spec: str
    extras: tuple[str, ...] = ()
    marker: str | None = None
    source: str | None = None
    hashes: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    line: int | None = None
    raw: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.section, self.name)

    @property
    def pin(self) -> str | None:
        """The exact version this dependency is pinned to (``==X`` / npm ``X``), else None."""
        if self.source is not None:
            return None
        if self.ecosystem == "npm":
            return npm_exact(self.spec)
        return pep440_exact(self.spec)


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One resolved package in a lock file."""

    key: str
    name: str
    version: str | None
    source: str | None
    integrity: tuple[str, ...] = ()
    install_script: bool = False
    fields: str = ""  # canonical JSON of everything else in the entry
    # Where the files come from, exactly: npm's ``resolved`` URL (with its ``#commit``),
    # the sdist/wheel URLs or file names of a Python lock, yarn/pnpm tarballs and commits.
    artifacts: tuple[str, ...] = ()
    # (file, hash) pairs of a Python lock (poetry/uv): which file each hash is for.
    file_hashes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed dependency file: dependencies, installer options, and everything else."""

    path: str
    kind: FileKind
    ecosystem: Ecosystem
    dependencies: tuple[Dependency, ...] = ()
    options: tuple[str, ...] = ()
    scripts: Mapping[str, str] = field(default_factory=dict)
    rest: Mapping[str, str] = field(default_factory=dict)
    locked: Mapping[str, LockEntry] = field(default_factory=dict)

    @property
    def is_lock(self) -> bool:
        return self.kind in LOCK_KINDS

    def by_key(self) -> dict[tuple[str, str], Dependency]:
        found: dict[tuple[str, str], Dependency] = {}
        last: dict[tuple[str, str], int] = {}  # the last '#n' given to a repeated key
        for dep in self.dependencies:
            key = dep.key
            if key in found:  # the same name twice (e.g. per-marker pins) stays distinct
                n = last.get(key, 1)  # '#2'..'#n' are taken already: resume (linear time)
                while (dep.section, f"{dep.name}#{n}") in found or n == 1:
                    n += 1
                last[key] = n
                key = (dep.section, f"{dep.name}#{n}")
            found[key] = dep
        return found

    def names(self) -> set[str]:
        return {dep.name for dep in self.dependencies}


# -- flattened tables ----------------------------------------------------------------


def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):  # an empty table is no setting: it flattens to nothing
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = json.dumps(value, sort_keys=True, default=str)


def _flat(data: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    _flatten(dict(data), "", out)
    return out


def _pop(data: dict[str, Any], dotted: str) -> Any:
    """Remove and return ``a.b.c`` from nested dicts (None when absent)."""
    *parents, last = dotted.split(".")
    node: Any = data
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node.pop(last, None) if isinstance(node, dict) else None


def _source_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# -- markers --------------------------------------------------------------------------

_PLATFORMS = (
    {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"},
    {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"},
    {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"},
)
_IMPLEMENTATIONS = (
    {"implementation_name": "cpython", "platform_python_implementation": "CPython"},
    {"implementation_name": "pypy", "platform_python_implementation": "PyPy"},
)
_MACHINES = ("x86_64", "aarch64")
_PYTHONS = tuple(f"3.{minor}" for minor in range(8, 16))


def _environments(platforms: Sequence[str] = ()) -> Iterable[dict[str, str]]:
    chosen = [p for p in _PLATFORMS if not platforms or p["sys_platform"] in platforms]
    for python, plat, impl, machine in product(_PYTHONS, chosen, _IMPLEMENTATIONS, _MACHINES):
        yield {
            **plat,
            **impl,
            "platform_machine": machine,
            "python_version": python,
            "python_full_version": f"{python}.0",
            "implementation_version": f"{python}.0",
            "platform_release": "",
            "platform_version": "",
        }


@lru_cache(maxsize=4096)
def marker_never_holds(marker: str, *, platforms: tuple[str, ...] = ()) -> bool:
    """True when a PEP 508 marker is false on every supported Python (3.8-3.15, 3 OSes).

    ``; python_version < "3"`` silently drops a package; markers on ``extra`` are left
    to the extra's own semantics (False here). ``platforms`` (``sys_platform`` values,
    e.g. ``("linux",)``) limits the environments tried.
    """
    try:
        parsed = Marker(marker)
    except InvalidMarker:
        return True  # unparseable: pip refuses it, the package is not installed
    if "extra" in marker:
        return False
    try:
        return not any(parsed.evaluate(env) for env in _environments(platforms))
    except Exception:
        return True
