"""Proof that an edit only extracted, inlined or renamed single-use local variables.

:func:`local_variable_refactor` normalises both versions by inlining every local
temporary that is assigned once (``x = E``) and read exactly once, in the very next
statement, at a point nothing with side effects is evaluated before (``return
dict(x)``, ``y = f(x, 1)``), then compares the ASTs without docstrings. Equal ASTs
mean the edit only introduced, removed or renamed such temporaries: ``E`` runs once,
at the same moment, either way. Not inlined (so any such edit stays unproven): module
or class scope (a name there is an attribute others can read), names declared
``global``/``nonlocal`` or used in a nested function, lambda or comprehension, reads
inside a loop condition, a later ``and``/``or`` operand or a conditional expression
branch, and functions that can see their own locals (``locals()``, ``vars()``,
``eval``, ``exec``, frame access). Parameter renames count only when the intent names
both names (:func:`._python_rename.undo_parameter_renames`).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Set as AbstractSet

from ._python_annotations import Proof
from ._python_facts import CodeFact, _parse, _without_gc
from ._python_layout import strip_docstrings
from ._python_rename import undo_parameter_renames

__all__ = ("local_variable_refactor",)

_INTROSPECTION = frozenset(
    {"locals", "vars", "eval", "exec", "dir", "_getframe", "currentframe", "f_locals"}
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_DEFERRED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BUILTIN_NAMES = frozenset(dir(builtins))


def _ordered_children(node: ast.AST) -> list[ast.AST] | None:
    """Children in evaluation order, for the node types a read may sit under."""
    if isinstance(node, ast.Call):
        return [node.func, *node.args, *node.keywords]
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, (ast.Return, ast.Expr, ast.Await, ast.keyword, ast.Starred)):
        return [node.value] if node.value is not None else []
    if isinstance(node, ast.Assign):
        return [node.value]  # evaluated before any target
    if isinstance(node, (ast.Attribute, ast.UnaryOp)):
        return [node.value if isinstance(node, ast.Attribute) else node.operand]
    if isinstance(node, ast.Subscript):
        return [node.value, node.slice]
    if isinstance(node, (ast.Tuple, ast.List)):
        return list(node.elts)
    if isinstance(node, ast.If):
        return [node.test]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.iter]
    if isinstance(node, ast.BoolOp):
        return [node.values[0]]  # later operands may not run
    if isinstance(node, ast.IfExp):
        return [node.test]
    return None


def _first_read(
    node: ast.AST, name: str, pure: tuple[AbstractSet[str], ...]
) -> tuple[ast.AST, str] | None:
    """(parent, field) of the read of ``name`` if everything evaluated before it is pure.

    Pure: constants, and names ``E`` cannot rebind (the function's own locals, builtins,
    module functions, classes and imports bound once and never declared ``global``).
    """
    children = _ordered_children(node)
    if children is None:
        return None
    for child in children:
        if isinstance(child, ast.Name) and child.id == name:
            return node, _field_of(node, child)
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(child)):
            return _first_read(child, name, pure)
        if not (
            isinstance(child, ast.Constant)
            or (isinstance(child, ast.Name) and any(child.id in names for names in pure))
        ):
            return None
    return None


def _field_of(parent: ast.AST, child: ast.AST) -> str:
    for field, value in ast.iter_fields(parent):
        if value is child or (isinstance(value, list) and any(v is child for v in value)):
            return field
    return ""


def _replace(parent: ast.AST, field: str, old: ast.AST, new: ast.expr) -> None:
    value = getattr(parent, field)
    if isinstance(value, list):
        value[:] = [new if v is old else v for v in value]
    else:
        setattr(parent, field, new)


def _function_names(function: ast.AST) -> tuple[dict[str, int], set[str], set[str]]:
    """Name counts in a function's own scope, names it must not touch, its locals."""
    counts: dict[str, int] = {}
    blocked: set[str] = set()
    local: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(c, False) for c in ast.iter_child_nodes(function)]
    while stack:
        node, nested = stack.pop()
        if isinstance(node, ast.Name):
            counts[node.id] = counts.get(node.id, 0) + 1
            if nested:
                blocked.add(node.id)
            elif isinstance(node.ctx, ast.Store):
                local.add(node.id)
            if node.id in _INTROSPECTION:
                blocked.add("*")
        elif isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION:
            blocked.add("*")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            blocked.update(node.names)
        elif isinstance(node, ast.arg):
            blocked.add(node.arg)
            local.add(node.arg)
        elif isinstance(node, (ast.NamedExpr, ast.Yield, ast.YieldFrom)):
            blocked.add("*")  # an expression that rebinds names or suspends: not inlined
        inner = nested or isinstance(node, (*_SCOPES, *_DEFERRED))
        stack.extend((c, inner) for c in ast.iter_child_nodes(node))
    return counts, blocked, local - blocked


def _inline_body(
    body: list[ast.stmt],
    counts: dict[str, int],
    blocked: set[str],
    pure: tuple[AbstractSet[str], ...],
) -> bool:
    changed = False
    index = 0
    while index < len(body) - 1:
        stmt, following = body[index], body[index + 1]
        target = (
            stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        )
        if (
            isinstance(stmt, ast.Assign)
            and isinstance(target, ast.Name)
            and target.id not in blocked
            and counts.get(target.id) == 2  # this store and one read
        ):
            found = _first_read(following, target.id, pure)  # one read: never a prefix
            if found is not None:
                parent, field = found
                read = next(
                    v
                    for v in ast.iter_child_nodes(parent)
                    if isinstance(v, ast.Name) and v.id == target.id
                )
                _replace(parent, field, read, stmt.value)
                del body[index]
                counts[target.id] = 0
                changed = True
                continue
        index += 1
    for stmt in body:
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                changed |= _inline_body(inner, counts, blocked, pure)
        for handler in getattr(stmt, "handlers", []):
            changed |= _inline_body(handler.body, counts, blocked, pure)
    return changed


def _stable_globals(tree: ast.Module) -> set[str]:
    """Module names bound once, by a def, class or import, and never declared global."""
    counts: dict[str, int] = {}
    declared: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 2  # assigned somewhere: not stable
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[stmt.name] = counts.get(stmt.name, 0) + 1
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                counts[name] = counts.get(name, 0) + 1
    return {name for name, count in counts.items() if count == 1} - declared


def _normalise(tree: ast.Module) -> int:
    inlined = 0
    stable = _stable_globals(tree) | _BUILTIN_NAMES  # once per module, shared
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            counts, blocked, local = _function_names(node)
            if "*" in blocked:
                continue
            before = sum(counts.values())
            _inline_body(node.body, counts, blocked, (local, stable))
            inlined += before - sum(counts.values())
    return inlined


@_without_gc
def local_variable_refactor(
    before: bytes, after: bytes, named: frozenset[str] = frozenset()
) -> Proof:
    """Whether the versions differ only in single-use local temporaries (see module doc).

    ``named``: lower-cased words of the intent; a parameter rename whose old and new
    names are both among them is undone first (:mod:`._python_rename`).
    """
    old_tree, new_tree = _parse(before), _parse(after)
    if isinstance(old_tree, CodeFact) or isinstance(new_tree, CodeFact):
        return Proof(False, "does not parse")
    try:
        renamed = undo_parameter_renames(old_tree, new_tree, named)
        inlined = renamed + _normalise(old_tree) + _normalise(new_tree)
        same = ast.dump(strip_docstrings(old_tree), include_attributes=False) == ast.dump(
            strip_docstrings(new_tree), include_attributes=False
        )
    except (RecursionError, MemoryError):
        return Proof(False, "too deeply nested to compare")
    if not inlined or not same:
        return Proof(False, "the code changed beyond extracting or inlining local variables")
    what = f"; {renamed} parameters renamed as the intent asks" if renamed else ""
    return Proof(True, f"only single-use local variables extracted, inlined or renamed{what}")
