"""Module renames: the dotted name a path imports as, re-export shims, equality modulo a rename.

A module moved from ``pkg.core`` to ``pkg.engine`` is a pure rename when the moved bytes
are unchanged, every changed importer is the same code once ``pkg.engine`` is read back
as ``pkg.core`` (:func:`equal_modulo_renames`: ``import``/``from`` statements, relative
imports of the same package, dotted attribute chains and string constants such as
``mock.patch("pkg.engine.clamp")``), and files the change does not show still work: the
old path keeps a **re-export shim** (:func:`shim_gaps`) that imports every name the module
binds at top level (``from pkg.engine import *`` covers the public ones, or those in a
literal ``__all__``; private names and the rest must be imported by name). A deprecation
warning and a docstring may stay in the shim; nothing else.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ("equal_modulo_renames", "module_name", "package_of", "shim_gaps")

_WARNINGS = frozenset({"DeprecationWarning", "FutureWarning", "PendingDeprecationWarning"})


def module_name(path: str) -> str | None:
    """``src/pkg/core.py`` -> ``pkg.core`` (``src/`` is a source root); None for
    ``__init__.py`` and names that are no identifiers."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[0] == "src" and len(parts) > 1:
        parts = parts[1:]
    if parts[-1] == "__init__" or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def package_of(path: str) -> str | None:
    """The package a file's relative imports start from (``src/pkg/a.py`` -> ``pkg``)."""
    if path.endswith("/__init__.py"):
        name = module_name(path[: -len("/__init__.py")] + ".py")
        return name
    name = module_name(path)
    return None if name is None else name.rpartition(".")[0]


def _renamed(name: str, renames: dict[str, str]) -> str:
    for new, old in renames.items():
        if name == new or name.startswith(new + "."):
            return old + name[len(new) :]
    return name


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _absolute(level: int, module: str | None, package: str | None) -> str | None:
    if level == 0:
        return module
    if package is None:
        return None
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


class _ReadBack(ast.NodeTransformer):
    """Rewrite every reference to a new module name back to its old one."""

    def __init__(self, renames: dict[str, str], package: str | None) -> None:
        self.renames = renames
        self.package = package

    def visit_Import(self, node: ast.Import) -> ast.Import:
        for alias in node.names:
            alias.name = _renamed(alias.name, self.renames)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        absolute = _absolute(node.level, node.module, self.package)
        if absolute is None:
            return node
        moved = _renamed(absolute, self.renames)
        if moved != absolute:  # from pkg.engine import x / from .engine import x
            if node.level == 0:
                node.module = moved
            else:
                base = _absolute(node.level, None, self.package) or ""
                if not moved.startswith(base + "." if base else ""):
                    return node
                node.module = moved[len(base) + 1 :] if base else moved
            return node
        for alias in node.names:  # from pkg import engine / from . import engine
            full = f"{absolute}.{alias.name}" if absolute else alias.name
            back = _renamed(full, self.renames)
            if back != full and back.rpartition(".")[0] == absolute:
                alias.name = back.rpartition(".")[2]
                if alias.asname == alias.name:  # `engine as core` binds what `core` did
                    alias.asname = None
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        self.generic_visit(node)
        dotted = _dotted(node)
        if dotted is not None and dotted in self.renames:
            replacement = ast.parse(self.renames[dotted], mode="eval").body
            return ast.copy_location(replacement, node)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        if isinstance(node.value, str):
            node.value = _renamed(node.value, self.renames)
        return node


def equal_modulo_renames(
    old: ast.Module, new: ast.Module, renames: dict[str, str], package: str | None
) -> bool:
    """Whether ``new`` is ``old`` once every ``renames`` key (a new module name) is read
    back as its value (the old name). Neither tree is modified."""
    back = _ReadBack(renames, package).visit(_clone(new))
    return ast.dump(old) == ast.dump(back)


def _clone(node: Any) -> Any:
    """A copy of a syntax tree's fields (what ``ast.dump`` compares; positions dropped),
    several times faster than ``copy.deepcopy``: leaves (str, int, bytes, None, constant
    tuples) are immutable and shared."""
    if isinstance(node, ast.AST):
        kind = type(node)
        copied = kind.__new__(kind)
        for name in node._fields:
            if hasattr(node, name):
                setattr(copied, name, _clone(getattr(node, name)))
        return copied
    if isinstance(node, list):
        return [_clone(item) for item in node]
    return node


def _bound(tree: ast.Module) -> set[str]:
    """Names a module binds at top level (defs, classes, assignments, imports)."""
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    names.add(alias.asname or alias.name.split(".")[0])
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return names


def _literal_all(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return set(value) if all(isinstance(v, str) for v in value) else None
    return None


def _warning(node: ast.stmt) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    call = node.value
    if _dotted(call.func) != "warnings.warn":
        return False
    parts = [*call.args, *(k.value for k in call.keywords)]
    return all(
        isinstance(p, ast.Constant) or (isinstance(p, ast.Name) and p.id in _WARNINGS)
        for p in parts
    )


def shim_gaps(shim: ast.Module, module: ast.Module, new: str, package: str | None) -> str | None:
    """Why ``shim`` (the old path's new text) does not re-export everything ``module``
    (the moved module, now importable as ``new``) binds; None when it does."""
    star = False
    named: set[str] = set()
    for index, node in enumerate(shim.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Import) and [a.name for a in node.names] == ["warnings"]:
            continue
        if _warning(node):
            continue
        if isinstance(node, ast.ImportFrom):
            if _absolute(node.level, node.module, package) != new:
                return f"line {node.lineno} imports from another module than {new}"
            for alias in node.names:
                if alias.name == "*":
                    star = True
                elif alias.asname not in (None, alias.name):
                    return f"line {node.lineno} re-exports {alias.name} under another name"
                else:
                    named.add(alias.name)
            continue
        return f"line {node.lineno} is not a re-export (only imports from {new} are)"
    bound = _bound(module)
    exported = _literal_all(module)
    if star:
        if exported is not None:
            covered = exported
        elif any(
            isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)
            and "__all__" in {t.id for t in ast.walk(n) if isinstance(t, ast.Name)}
            for n in module.body
        ):
            covered = set()  # an __all__ built at run time: only names count
        else:
            covered = {n for n in bound if not n.startswith("_")}
    else:
        covered = set()
    missing = sorted(bound - covered - named)
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        return f"the old module's {shown} would no longer be importable from it"
    return None
