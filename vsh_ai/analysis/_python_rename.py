"""Parameter renames that the intent names, undone so the rest can be compared.

:func:`undo_parameter_renames` pairs the functions of two versions in order (same
name, same parameter kinds and count) and, for each parameter whose name changed,
renames it back in the new version when the rename is *consistent* (every use inside
the function follows, the new name was unused in the old function and the old name
is unused in the new one) and *named*: both names appear as words in ``named`` (the
intent's words; the intent can only narrow what is proven). Not undone: functions
behind decorators other than ``staticmethod``/``classmethod``/``property``-like ones
(a decorator may read the signature) and functions that read their own locals.
Callers passing the old name as a keyword are outside the file: that is why only a
rename the intent asks for is considered.
"""

from __future__ import annotations

import ast

from ._python_annotations import _decorator_safe

__all__ = ("undo_parameter_renames",)

_INTROSPECTION = frozenset({"locals", "vars", "eval", "exec", "_getframe", "currentframe"})
_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _params(function: _Function) -> list[list[ast.arg]]:
    args = function.args
    return [
        args.posonlyargs,
        args.args,
        args.kwonlyargs,
        [args.vararg] if args.vararg else [],
        [args.kwarg] if args.kwarg else [],
    ]


def _names(function: _Function) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
    return found


def _functions(tree: ast.Module) -> list[_Function]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def undo_parameter_renames(old: ast.Module, new: ast.Module, named: frozenset[str]) -> int:
    """Rename named, consistent parameter renames in ``new`` back; how many were undone."""
    old_functions, new_functions = _functions(old), _functions(new)
    if len(old_functions) != len(new_functions) or not named:
        return 0
    undone = 0
    for before, after in zip(old_functions, new_functions, strict=True):
        if before.name != after.name or not all(_decorator_safe(d) for d in after.decorator_list):
            continue
        old_params, new_params = _params(before), _params(after)
        if [len(p) for p in old_params] != [len(p) for p in new_params]:
            continue
        pairs = {
            b.arg: a.arg
            for old_group, new_group in zip(old_params, new_params, strict=True)
            for a, b in zip(old_group, new_group, strict=True)
            if a.arg != b.arg
        }
        if not pairs:
            continue
        old_names, new_names = _names(before), _names(after)
        if old_names & _INTROSPECTION or new_names & _INTROSPECTION:
            continue
        if any(
            new_name in old_names
            or old_name in new_names
            or new_name.lower() not in named
            or old_name.lower() not in named
            for new_name, old_name in pairs.items()
        ):
            continue
        for node in ast.walk(after):
            if isinstance(node, ast.Name) and node.id in pairs:
                node.id = pairs[node.id]
            elif isinstance(node, ast.arg) and node.arg in pairs:
                node.arg = pairs[node.arg]
        undone += len(pairs)
    return undone
