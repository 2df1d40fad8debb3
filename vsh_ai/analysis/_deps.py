"""Dependency manifests and lock files parsed into typed records, and compared.

Python requirements and pyproject dependencies are parsed with :mod:`packaging`
(PEP 440 versions and specifiers, PEP 508 names, extras, markers and URLs); npm ranges
with ``node-semver`` (a port of npm's own range grammar), Poetry constraints by
poetry-core's rules. Lock files (package-lock v1-v3, ``uv.lock``, ``poetry.lock``,
``yarn.lock``, ``pnpm-lock.yaml``) become name -> entry maps that can be checked against a
manifest. Nothing here decides: :mod:`vsh_ai.rules._deps` does, with these facts.

This module gathers the public names of the focused modules:

- :mod:`._deps_ranges`: versions and ranges as unions of intervals (subset, lowest bound)
- :mod:`._deps_model`: Dependency, LockEntry, Manifest, size limits, markers
- :mod:`._deps_pip`: requirement files, pip.conf, installer configs
- :mod:`._deps_pyproject`: pyproject.toml (PEP 621, groups, Poetry, uv sources)
- :mod:`._deps_npm`: package.json, package-lock.json
- :mod:`._deps_files`: uv.lock, poetry.lock, and :func:`parse_dependency_file` by name
- :mod:`._deps_yarn`: yarn.lock (classic and Berry), pnpm-lock.yaml
- :mod:`._deps_pipenv`: Pipfile, Pipfile.lock
- :mod:`._deps_compare`: manifest and lock comparisons
- :mod:`._deps_integrity`: hashes, tarballs and sources of the same or a new version
- :mod:`._deps_intervals`, :mod:`._deps_pep440`: the interval model behind the ranges

Parsing time is bounded: files over :data:`MAX_FILE_BYTES` (192 KiB; lock files up to
:data:`MAX_LOCK_FILE_BYTES`, 512 KiB to 1 MiB), with more than 10,000 requirement
lines, or a package.json with more than :data:`MAX_NPM_RANGES` version ranges raise
:class:`DependencySyntaxError`. Requirement strings and version ranges are parsed once per
process (memoised), so the two versions of an edit share the work for unchanged lines.
"""

from __future__ import annotations

from ._deps_compare import (
    DependencyChange,
    LockChange,
    ManifestDiff,
    compare_locks,
    compare_manifests,
    lock_entry_for,
    lock_mismatches,
)
from ._deps_files import file_kind, parse_dependency_file
from ._deps_integrity import Finding, hash_owners, lock_resolution, requirement_hashes
from ._deps_intervals import Relation
from ._deps_model import (
    LOCK_KINDS,
    MAX_FILE_BYTES,
    MAX_LOCK_FILE_BYTES,
    MAX_NPM_RANGES,
    MAX_REQUIREMENT_LINES,
    NPM_KINDS,
    Dependency,
    DependencySyntaxError,
    FileKind,
    LockEntry,
    Manifest,
    marker_never_holds,
)
from ._deps_pip import parse_requirements
from ._deps_ranges import (
    Ecosystem,
    floor_major,
    is_newer,
    major_of,
    npm_exact,
    npm_range_subset,
    pep440_exact,
    pep440_subset,
    relate_ranges,
    satisfies,
)

__all__ = (
    "LOCK_KINDS",
    "MAX_FILE_BYTES",
    "MAX_LOCK_FILE_BYTES",
    "MAX_NPM_RANGES",
    "MAX_REQUIREMENT_LINES",
    "NPM_KINDS",
    "Dependency",
    "DependencyChange",
    "DependencySyntaxError",
    "Ecosystem",
    "FileKind",
    "Finding",
    "LockChange",
    "LockEntry",
    "Manifest",
    "ManifestDiff",
    "Relation",
    "compare_locks",
    "compare_manifests",
    "file_kind",
    "floor_major",
    "hash_owners",
    "is_newer",
    "lock_entry_for",
    "lock_mismatches",
    "lock_resolution",
    "major_of",
    "marker_never_holds",
    "npm_exact",
    "npm_range_subset",
    "parse_dependency_file",
    "parse_requirements",
    "pep440_exact",
    "pep440_subset",
    "relate_ranges",
    "requirement_hashes",
    "satisfies",
)


def benchmark_text(text: str) -> object:
    """What a decision does with ``text`` as a requirements file (benchmarks/analysis.py)."""
    manifest = parse_requirements(text, strict=False)
    return compare_manifests(manifest, manifest)
