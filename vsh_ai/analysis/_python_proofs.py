"""Proofs that a Python edit is everyday, harmless work: tests added, a version bumped.

:func:`test_additions` proves a test module only gained test functions that check
something (existing statements unchanged, in order; new ``test*`` functions with a
check that can fail, no skip, no swallowed failure, no name redefined; new imports of
process, network or code-loading modules only if the file already imports them).
:func:`version_bump` proves the only change is a module-level ``__version__`` string
raised to a higher version (compared with :mod:`packaging`).
"""

from __future__ import annotations

import ast
import difflib

from packaging.version import InvalidVersion, Version

from ._python_annotations import Proof
from ._python_facts import CodeFact, _parse, _without_gc
from ._python_layout import strip_docstrings
from ._python_names import CALL_CATEGORIES
from ._python_tests import patches, real_check, swallowed, tautology

__all__ = ("Proof", "test_additions", "version_bump")

_VERSION_NAMES = frozenset({"__version__", "VERSION", "__VERSION__"})
_RISKY_TOPS = frozenset(
    module.split(".")[0] for table in CALL_CATEGORIES.values() for module in table
) | {"os", "sys", "shutil", "builtins", "importlib"}
_SAFE_DECORATORS = frozenset(
    {"parametrize", "asyncio", "anyio", "usefixtures", "filterwarnings", "timeout", "slow"}
)


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _bound(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    return {
        n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _imported_tops(tree: ast.Module) -> set[str]:
    tops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    return tops


def _decorator_ok(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    parts: list[str] = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    names = list(reversed(parts))
    return len(names) >= 2 and names[-2] == "mark" and names[-1] in _SAFE_DECORATORS


def _new_test(stmt: ast.stmt) -> str | None:
    """Why ``stmt`` is not a new test function that checks something (None: it is)."""
    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"line {stmt.lineno}: a new {type(stmt).__name__} statement, not a test function"
    name = stmt.name
    if not name.startswith("test"):
        return f"line {stmt.lineno}: {name} is not a test function (test*)"
    if not all(_decorator_ok(d) for d in stmt.decorator_list):
        return f"line {stmt.lineno}: {name} has a decorator other than pytest.mark.parametrize"
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assert) and tautology("assert", node.test):
            return f"line {node.lineno}: {name} asserts something that always holds"
        if isinstance(node, ast.Call) and tautology("call", node):
            return f"line {node.lineno}: {name} checks something that always holds"
        if isinstance(node, (ast.Try, ast.TryStar, ast.With, ast.AsyncWith)) and swallowed(node):
            return f"line {node.lineno}: {name} swallows the failures of its checks"
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)):
            return f"line {node.lineno}: {name} uses {type(node).__name__.lower()}"
        if isinstance(node, ast.Attribute) and node.attr in (
            "skip",
            "xfail",
            "importorskip",
            "skipTest",
        ):
            return f"line {node.lineno}: {name} skips itself"
    if not any(real_check(s) for s in stmt.body):
        return f"{name} has no check that can fail (an assert or pytest.raises)"
    return None


def _new_import(stmt: ast.stmt, known: set[str]) -> str | None:
    if isinstance(stmt, ast.ImportFrom) and stmt.level:
        return None  # a sibling test helper module: imported by the tests already run
    if isinstance(stmt, ast.ImportFrom):
        tops = {(stmt.module or "").split(".")[0]}
        if any(a.name == "*" for a in stmt.names):
            return f"line {stmt.lineno}: a star import"
    elif isinstance(stmt, ast.Import):
        tops = {a.name.split(".")[0] for a in stmt.names}
    else:
        return ""
    for top in tops:
        if top in known or top not in _RISKY_TOPS:
            continue
        return f"line {stmt.lineno}: a new import of {top} (process, network or code loading)"
    return None


def _same_header(old: ast.ClassDef, new: ast.ClassDef) -> bool:
    """The same class statement but for its body (name, bases, keywords, decorators)."""
    return _dump(ast.ClassDef(old.name, old.bases, old.keywords, [], old.decorator_list)) == _dump(
        ast.ClassDef(new.name, new.bases, new.keywords, [], new.decorator_list)
    )


def _more_names(old: ast.ImportFrom, new: ast.ImportFrom) -> list[str] | None:
    """The names ``new`` adds to the same ``from module import ...`` (None: not that)."""
    if (old.module, old.level) != (new.module, new.level):
        return None
    before = {(a.name, a.asname) for a in old.names}
    after = {(a.name, a.asname) for a in new.names}
    if not before <= after or any(name == "*" for name, _ in after):
        return None
    return sorted(asname or name for name, asname in after - before)


def _added_tests(
    old_stmts: list[ast.stmt],
    new_stmts: list[ast.stmt],
    old_dumps: list[str],
    new_dumps: list[str],
    known: set[str],
    added: list[str],
    spans: list[tuple[int, int]],
    depth: int = 0,
) -> str | None:
    """Why ``new_stmts`` are not ``old_stmts`` with only new tests inserted (None: they
    are). A class statement may gain test methods the same way (a ``unittest`` case), and
    a ``from m import a`` may gain names (``a, b``) the new tests use."""
    bound: set[str] = set().union(*(_bound(s) for s in old_stmts)) if old_stmts else set()
    matcher = difflib.SequenceMatcher(None, old_dumps, new_dumps, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1 and depth < 4:
            for old, new in zip(old_stmts[i1:i2], new_stmts[j1:j2], strict=True):
                if isinstance(old, ast.ClassDef) and isinstance(new, ast.ClassDef):
                    if not _same_header(old, new):
                        return f"line {old.lineno}: class {old.name} itself changed"
                    old_body = [b for b in old.body if not isinstance(b, ast.Pass)]
                    new_body = [b for b in new.body if not isinstance(b, ast.Pass)]
                    why = _added_tests(
                        old_body,
                        new_body,
                        [_dump(b) for b in old_body],
                        [_dump(b) for b in new_body],
                        known,
                        added,
                        spans,
                        depth + 1,
                    )
                    if why is not None:
                        return why
                    continue
                if isinstance(old, ast.ImportFrom) and isinstance(new, ast.ImportFrom):
                    gained = _more_names(old, new)
                    if gained is not None and not set(gained) & bound:
                        bound |= set(gained)
                        continue
                return f"line {old.lineno}: existing code changed or removed"
            continue
        if tag != "insert":
            line = old_stmts[i1].lineno if i1 < len(old_stmts) else 0
            return f"line {line}: existing code changed or removed"
        for stmt in new_stmts[j1:j2]:
            why = _new_import(stmt, known)
            if why == "":
                why = _new_test(stmt)
            if why is not None:
                return why
            names = _bound(stmt)
            clash = sorted(names & bound)
            if clash:
                return f"line {stmt.lineno}: {clash[0]} is defined again"
            bound |= names
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                added.append(stmt.name)
                first = min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
                spans.append((first, stmt.end_lineno or stmt.lineno))
    return None


@_without_gc
def test_additions(before: bytes | None, after: bytes) -> Proof:
    """Whether ``after`` is ``before`` with only new test functions (and their imports).

    ``before`` None: a new test module, whose imports may name only safe modules.
    """
    old_tree = _parse(before) if before is not None else ast.Module([], [])
    new_tree = _parse(after)
    if isinstance(old_tree, CodeFact) or isinstance(new_tree, CodeFact):
        return Proof(False, "does not parse")
    try:
        old_body = strip_docstrings(old_tree).body if old_tree.body else []
        new_body = strip_docstrings(new_tree).body
        old_dumps = [_dump(s) for s in old_body if not isinstance(s, ast.Pass)]
        old_stmts = [s for s in old_body if not isinstance(s, ast.Pass)]
        new_stmts = [s for s in new_body if not isinstance(s, ast.Pass)]
        new_dumps = [_dump(s) for s in new_stmts]
    except (RecursionError, MemoryError):
        return Proof(False, "too deeply nested to compare")
    known = _imported_tops(old_tree)
    added: list[str] = []
    spans: list[tuple[int, int]] = []
    why = _added_tests(old_stmts, new_stmts, old_dumps, new_dumps, known, added, spans)
    if why is not None:
        return Proof(False, why)
    if not added:
        return Proof(False, "no test function was added")
    for node, what in patches(new_tree):
        line = getattr(node, "lineno", 0)
        if any(first <= line <= last for first, last in spans):
            return Proof(False, f"line {line}: a new test {what}, which other tests then see")
    return Proof(True, f"only new tests with real checks ({', '.join(added[:5])})", tuple(spans))


def _versions(tree: ast.Module) -> list[tuple[ast.Constant, str]]:
    found: list[tuple[ast.Constant, str]] = []
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        value = getattr(stmt, "value", None)
        if (
            len(targets) == 1
            and isinstance(targets[0], ast.Name)
            and targets[0].id in _VERSION_NAMES
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
        ):
            found.append((value, value.value))
    return found


@_without_gc
def version_bump(before: bytes, after: bytes) -> Proof:
    """Whether the only change raises a module-level ``__version__`` string."""
    old_tree, new_tree = _parse(before), _parse(after)
    if isinstance(old_tree, CodeFact) or isinstance(new_tree, CodeFact):
        return Proof(False, "does not parse")
    old, new = _versions(old_tree), _versions(new_tree)
    if len(old) != len(new) or not old:
        return Proof(False, "no module-level __version__ string on both sides")
    bumps: list[str] = []
    for (old_node, old_text), (new_node, new_text) in zip(old, new, strict=True):
        if old_text == new_text:
            continue
        try:
            lower, higher = Version(old_text), Version(new_text)
        except InvalidVersion:
            return Proof(False, "a version string that is not a PEP 440 version")
        if higher <= lower:
            return Proof(False, f"the version goes from {lower} to {higher}, not up")
        bumps.append(f"{lower} -> {higher}")
        old_node.value = new_node.value = ""
    if not bumps:
        return Proof(False, "the version did not change")
    try:
        same = _dump(strip_docstrings(old_tree)) == _dump(strip_docstrings(new_tree))
    except (RecursionError, MemoryError):
        return Proof(False, "too deeply nested to compare")
    if not same:
        return Proof(False, "code other than the version string changed")
    return Proof(True, f"only the version is raised ({', '.join(bumps)})")
