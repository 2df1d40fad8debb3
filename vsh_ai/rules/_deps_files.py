"""Shared by the dependency rules: the files they read, each side parsed once, siblings."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Literal

import re2  # type: ignore[import-untyped]

from .._evidence import Evidence
from ..analysis._deps import (
    LOCK_KINDS,
    NPM_KINDS,
    DependencyChange,
    DependencySyntaxError,
    Manifest,
    ManifestDiff,
    compare_manifests,
    file_kind,
    parse_dependency_file,
)
from ..analysis._memo import analysis_of
from ..analysis._secrets import redact_text

if TYPE_CHECKING:
    pass


DEPENDENCY_FILES: tuple[str, ...] = (
    "**/pyproject.toml",
    "**/*requirements*.txt",
    "**/*requirements*.in",
    "**/*constraints*.txt",
    "**/requirements/**/*.txt",
    "**/requirements/**/*.in",
    "**/Pipfile",
    "**/Pipfile.lock",
    "**/package.json",
    "**/package-lock.json",
    "**/npm-shrinkwrap.json",
    "**/uv.lock",
    "**/poetry.lock",
    "**/yarn.lock",
    "**/pnpm-lock.yaml",
)
_RISK_FILES = (
    *DEPENDENCY_FILES,
    "**/pip.conf",
    "**/pip.ini",
    "**/uv.toml",
    "**/bunfig.toml",
    "**/.yarnrc.yml",
    "**/.yarnrc",
    "**/.condarc",
)

# npm lifecycle scripts that run on install (or on `npm install` of a git dependency).
_INSTALL_SCRIPTS = frozenset(
    {
        "preinstall",
        "install",
        "postinstall",
        "prepare",
        "preprepare",
        "postprepare",
        "prepublish",
        "prepack",
        "postpack",
        "dependencies",
    }
)
# Security tooling the authorization says must not be removed.
_SECURITY_TOOLS = frozenset(
    {
        "pip-audit",
        "safety",
        "bandit",
        "semgrep",
        "detect-secrets",
        "trufflehog",
        "pysa",
        "audit-ci",
        "better-npm-audit",
        "snyk",
        "eslint-plugin-security",
        "npm-audit-resolver",
        "retire",
        "gitleaks",
        "osv-scanner",
        "cyclonedx-bom",
        "cyclonedx-py",
        "pyup-tools",
        "ossaudit",
        "jake",
    }
)
_ADDING = re.compile(
    r"(?i)\b(add|adds|adding|added|introduc\w*|new (package|dependency)|install)\b"
)
# user:password@ or token@ in a URL: masked in reasons, which reach the agent and logs.
# RE2 (linear time): the text is untrusted and unbounded.
_URL_CREDENTIALS = re2.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@")


def _shown(text: str, limit: int = 80) -> str:
    """``text`` for a reason: URL credentials masked (``https://***@host``), then bounded."""
    masked: str = _URL_CREDENTIALS.sub(r"\1***@", text)
    masked = redact_text(masked)[0]  # the shared detector: tokens in queries, aliases, ...
    return masked if len(masked) <= limit else masked[: limit - 1] + "…"


def _parse_side(evidence: Evidence, path: str, side: Literal["before", "after"]) -> Manifest | None:
    """One side of ``path`` parsed, once per decision (the analysis memo; errors re-raise)."""
    data = evidence.before_bytes(path) if side == "before" else evidence.after_bytes(path)
    if data is None:
        return None
    return analysis_of(evidence).remember(
        ("manifest", path, data), lambda: parse_dependency_file(path, data)
    )


def _parse_renamed(evidence: Evidence, path: str, source: str) -> Manifest | None:
    """The rename source's old bytes read as ``path``'s kind (None: not that kind)."""
    data = evidence.before_bytes(source)
    if data is None:
        return None
    try:
        return parse_dependency_file(path, data)
    except DependencySyntaxError:
        return None


def _empty(path: str) -> Manifest | None:
    kind = file_kind(path)
    if kind is None:
        return None
    ecosystem: Literal["pypi", "npm"] = "npm" if kind in NPM_KINDS else "pypi"
    return Manifest(path, kind, ecosystem)


def _folders(evidence: Evidence) -> dict[PurePosixPath, tuple[str, ...]]:
    """Changed paths by their directory, in the order of the changes."""
    folders: dict[PurePosixPath, list[str]] = {}
    for change in evidence.changes:
        folders.setdefault(PurePosixPath(change.path).parent, []).append(change.path)
    return {folder: tuple(paths) for folder, paths in folders.items()}


def _siblings(evidence: Evidence, path: str, ecosystem: str, *, locks: bool) -> list[str]:
    """Changed dependency files of the same ecosystem in the same directory."""
    folders = analysis_of(evidence).remember(("folders",), lambda: _folders(evidence))
    found = []
    for other in folders.get(PurePosixPath(path).parent, ()):
        if other == path:
            continue
        kind = file_kind(other)
        if kind is None or kind in ("pip-config", "installer-config"):
            continue
        is_lock = kind in LOCK_KINDS
        npm = kind in NPM_KINDS
        if is_lock == locks and npm == (ecosystem == "npm"):
            found.append(other)
    return found


def _manifest_diff(evidence: Evidence, before: Manifest, after: Manifest) -> ManifestDiff:
    """``compare_manifests(before, after)``, once per decision: the allowance, its lock
    check and the risk rule all ask about the same two parses (the analysis memo)."""
    return analysis_of(evidence).remember_for(
        "manifest-diff", before, after, lambda: compare_manifests(before, after)
    )


def _dep_changes(evidence: Evidence, before: Manifest, after: Manifest) -> list[DependencyChange]:
    return list(_manifest_diff(evidence, before, after).changes)
