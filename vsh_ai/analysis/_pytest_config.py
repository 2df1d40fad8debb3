"""What a change to pytest's configuration does to test collection and selection.

:func:`pytest_options` reads pytest's options from ``pyproject.toml``
(``[tool.pytest.ini_options]`` or ``[tool.pytest]``), ``pytest.ini``/``.pytest.ini``
and ``tox.ini`` (``[pytest]``) and ``setup.cfg`` (``[tool:pytest]``).
:func:`collection_changes` names what a new version adds that runs fewer tests or
lets failures pass: ``addopts`` selecting or stopping (``-k``, ``-m``, ``--deselect``,
``--ignore``, ``-x``, ``--lf``, plugins disabled), ``testpaths`` or ``python_files``/
``python_classes``/``python_functions`` patterns dropped, ``norecursedirs`` growing
over tests, ``xfail_strict`` turned off, ``filterwarnings = error`` dropped.
"""

from __future__ import annotations

import configparser
import shlex
from pathlib import PurePosixPath

from .. import _toml

__all__ = ("PYTEST_CONFIG_NAMES", "collection_changes", "pytest_options")

PYTEST_CONFIG_NAMES = frozenset(
    {"pyproject.toml", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg"}
)
_SECTIONS = {
    "pytest.ini": "pytest",
    ".pytest.ini": "pytest",
    "tox.ini": "pytest",
    "setup.cfg": "tool:pytest",
}
_DEFAULTS: dict[str, tuple[str, ...]] = {
    "python_files": ("test_*.py", "*_test.py"),
    "python_classes": ("Test",),
    "python_functions": ("test",),
}
_VALUE_FLAGS = {
    "-k": "selects tests by keyword (-k)",
    "-m": "selects tests by marker (-m)",
    "--deselect": "deselects tests (--deselect)",
    "--ignore": "ignores test paths (--ignore)",
    "--ignore-glob": "ignores test paths (--ignore-glob)",
    "--maxfail": "stops after a number of failures (--maxfail)",
    "--confcutdir": "stops loading conftest files (--confcutdir)",
    "--rootdir": "moves the root directory (--rootdir)",
    "-c": "reads another configuration file (-c)",
    "-p": "disables a plugin (-p no:...)",
}
_FLAGS = {
    "-x": "stops at the first failure (-x)",
    "--exitfirst": "stops at the first failure (--exitfirst)",
    "--lf": "runs only the tests that failed last time (--lf)",
    "--last-failed": "runs only the tests that failed last time (--last-failed)",
    "--sw": "runs from the last failure on (--sw)",
    "--stepwise": "runs from the last failure on (--stepwise)",
    "--co": "only collects, runs nothing (--co)",
    "--collect-only": "only collects, runs nothing (--collect-only)",
    "--continue-on-collection-errors": "passes despite collection errors",
    "--noconftest": "ignores conftest.py files (--noconftest)",
    "--suppress-no-test-exit-code": "passes when no test ran",
}
_HARMLESS_PLUGINS = frozenset({"no:cacheprovider", "no:warnings", "no:randomly", "no:doctest"})

Options = dict[str, tuple[str, ...]]


def _words(value: object) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    text = str(value)
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return tuple(text.split())


def pytest_options(path: str, data: bytes | None) -> Options | None:
    """pytest's options in one config file (None: none there, or unreadable)."""
    if data is None:
        return None
    name = PurePosixPath(path).name.lower()
    text = data.decode("utf-8", "replace")
    if name == "pyproject.toml":
        try:
            tool = _toml.loads(text).get("tool", {})
        except _toml.TOMLDecodeError:
            return None
        pytest = tool.get("pytest", {}) if isinstance(tool, dict) else {}
        if not isinstance(pytest, dict):
            return None
        table = pytest.get("ini_options", pytest)
        if not isinstance(table, dict):
            return None
        return {k: _words(v) for k, v in table.items() if not isinstance(v, dict)}
    section = _SECTIONS.get(name)
    if section is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    if not parser.has_section(section):
        return None
    return {k: _words(v) for k, v in parser.items(section)}


def _selections(words: tuple[str, ...]) -> set[tuple[str, str]]:
    """(flag, value) of every selecting or stopping option in an ``addopts`` list."""
    out: set[tuple[str, str]] = set()
    index = 0
    while index < len(words):
        word = words[index]
        flag, equals, value = word.partition("=")
        if flag in _FLAGS:
            out.add((flag, ""))
        elif flag in _VALUE_FLAGS:
            if not equals and index + 1 < len(words):
                index += 1
                value = words[index]
            out.add((flag, value))
        elif word.startswith("-") and not word.startswith("--") and len(word) > 2:
            if word[:2] in _VALUE_FLAGS:
                out.add((word[:2], word[2:]))
            elif word[1:].isalpha() and "x" in word[1:]:
                out.add(("-x", ""))
        index += 1
    return out


def _addopts(old: tuple[str, ...], new: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for flag, value in sorted(_selections(new) - _selections(old)):
        if flag == "-p" and (value in _HARMLESS_PLUGINS or not value.startswith("no:")):
            continue
        why = _FLAGS.get(flag) or _VALUE_FLAGS[flag]
        if why not in found:
            found.append(why)
    return found


def collection_changes(path: str, before: bytes | None, after: bytes | None) -> list[str]:
    """What the new version of a pytest config adds that runs fewer tests (reasons)."""
    old = pytest_options(path, before) or {}
    new = pytest_options(path, after)
    if new is None:
        return []
    reasons = [f"addopts {why}" for why in _addopts(old.get("addopts", ()), new.get("addopts", ()))]
    if "testpaths" in new:
        dropped = [p for p in old.get("testpaths", ()) if p not in new["testpaths"]]
        if dropped:
            reasons.append(f"testpaths no longer include {', '.join(dropped[:3])}")
        elif "testpaths" not in old:
            reasons.append(f"testpaths now limit collection to {', '.join(new['testpaths'][:3])}")
    for key, default in _DEFAULTS.items():
        if key in new:
            dropped = [p for p in old.get(key, default) if p not in new[key]]
            if dropped:
                reasons.append(f"{key} no longer match {', '.join(dropped[:3])}")
    added_dirs = [d for d in new.get("norecursedirs", ()) if d not in old.get("norecursedirs", ())]
    if any("test" in d.lower() or d.strip("*./") == "" for d in added_dirs):
        reasons.append("norecursedirs now skip test directories")
    if old.get("xfail_strict", ("false",))[0].lower() in ("true", "1") and new.get(
        "xfail_strict", ("false",)
    )[0].lower() not in ("true", "1"):
        reasons.append("xfail_strict turned off (unexpected passes no longer fail)")
    if "error" in old.get("filterwarnings", ()) and "error" not in new.get("filterwarnings", ()):
        reasons.append("filterwarnings no longer turn warnings into errors")
    return reasons
