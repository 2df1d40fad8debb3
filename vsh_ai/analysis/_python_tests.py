"""Checks in tests that cannot fail: tautologies and swallowed assertion errors.

:func:`tautology` says why an ``assert`` test or an ``assert*`` call always holds
(``assert True``, ``assert x == x``, ``assert (a, b)``, ``self.assertTrue(1)``);
:func:`swallowed` says why a ``try``/``with`` block makes the checks inside unable to
fail a test (``except AssertionError: pass``, ``except Exception`` without a re-raise,
``contextlib.suppress(AssertionError)``). Reasons name forms, never string contents.
"""

from __future__ import annotations

import ast

__all__ = (
    "has_check",
    "is_test_module",
    "is_test_scope",
    "patches",
    "real_check",
    "swallowed",
    "tautology",
)

_SWALLOWING = frozenset({"AssertionError", "Exception", "BaseException", "builtins.AssertionError"})
_ALWAYS_EQUAL_OPS = (ast.Eq, ast.Is, ast.LtE, ast.GtE)
_CHECK_ATTRS = frozenset({"raises", "warns", "fail", "approx", "deprecated_call"})
_SAME_ARGS = frozenset(
    {
        "assertEqual",
        "assertEquals",
        "assertIs",
        "assertLessEqual",
        "assertGreaterEqual",
        "assertAlmostEqual",
        "assertCountEqual",
        "assertListEqual",
        "assertDictEqual",
        "assertSetEqual",
        "assertTupleEqual",
        "assertSequenceEqual",
        "assertMultiLineEqual",
    }
)


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def is_test_scope(scope: str) -> bool:
    """True for a qualname inside a ``test*`` function or a ``Test*`` class."""
    return any(part.startswith(("test", "Test")) for part in scope.split("."))


def _always_true(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant):
        return "a constant that is always true" if node.value else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
        return "a non-empty literal (always true; a parenthesised `assert (x, msg)`?)"
    if isinstance(node, ast.Dict) and node.keys:
        return "a non-empty literal (always true)"
    if isinstance(node, ast.JoinedStr) and any(
        isinstance(v, ast.Constant) and v.value for v in node.values
    ):
        return "a non-empty string (always true)"
    if isinstance(node, (ast.Lambda, ast.GeneratorExp)):
        return "a function or generator object (always true)"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = node.operand
        if isinstance(inner, ast.Constant) and not inner.value:
            return "`not` of a constant that is always false"
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        for value in node.values:
            if _always_true(value):
                return "an `or` with an operand that is always true"
    if (
        isinstance(node, ast.BoolOp)
        and isinstance(node.op, ast.And)
        and all(_always_true(value) for value in node.values)
    ):
        return "an `and` of operands that are always true"
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], _ALWAYS_EQUAL_OPS)
        and _dump(node.left) == _dump(node.comparators[0])
        and _plain(node.left)
    ):
        return "a comparison of an expression with itself"
    if (
        isinstance(node, ast.Call)
        and _dotted(node.func) == "isinstance"
        and len(node.args) == 2
        and _dotted(node.args[1]) in ("object", "builtins.object")
    ):
        return "isinstance(..., object), which always holds"
    return None


_PLAIN = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Slice)


def _plain(node: ast.AST) -> bool:
    """An expression that reads the same value twice in a row: names, constants,
    attributes, subscripts, literals of them, and calls of such with at least one such
    argument (``key(1.0, 2.0)``: a deterministic function of the same values). A call
    with no arguments (``time.time()``) or one that builds a fresh object among its
    arguments (``key(object(), 1)``, which tests that ``key`` ignores it) is not, nor is an
    ``await`` or a comprehension."""
    if isinstance(node, ast.Call):
        arguments = [*node.args, *(k.value for k in node.keywords)]
        return (
            bool(arguments) and _plain_value(node.func) and all(_plain_value(a) for a in arguments)
        )
    return _plain_value(node)


def _plain_value(node: ast.AST) -> bool:
    return all(isinstance(n, (*_PLAIN, ast.expr_context, ast.keyword)) for n in ast.walk(node))


def tautology(kind: str, node: ast.AST) -> str | None:
    """Why the check ``node`` always holds (``kind``: "assert" test or "call"), or None."""
    if kind == "assert":
        return _always_true(node)
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    name = node.func.attr
    args = node.args
    if name in ("assertTrue", "assert_") and args:
        return _always_true(args[0])
    if name == "assertFalse" and args and isinstance(args[0], ast.Constant):
        return None if args[0].value else "assertFalse of a constant that is always false"
    if (
        name in _SAME_ARGS
        and len(args) >= 2
        and _dump(args[0]) == _dump(args[1])
        and _plain(args[0])
    ):
        return "a comparison of an expression with itself"
    if name in ("assertIsNotNone",) and args and isinstance(args[0], ast.Constant):
        return None if args[0].value is None else "a constant that is never None"
    return None


def _names_caught(handler: ast.ExceptHandler) -> list[str]:
    if handler.type is None:
        return ["a bare except"]
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return [_dotted(t) for t in types]


def has_check(nodes: list[ast.stmt]) -> bool:
    """True when the statements hold an ``assert`` or a check call (``self.assert*``)."""
    for stmt in nodes:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Assert):
                return True
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                attr = sub.func.attr
                if attr.startswith("assert") or attr == "fail":
                    return True
    return False


def _reraises(body: list[ast.stmt]) -> bool:
    return any(isinstance(sub, ast.Raise) for stmt in body for sub in ast.walk(stmt))


def swallowed(node: ast.AST) -> str | None:
    """Why failures of the checks inside ``node`` (a try or with) cannot fail a test."""
    if isinstance(node, (ast.Try, ast.TryStar)) and has_check(node.body):
        for handler in node.handlers:
            caught = _names_caught(handler)
            broad = [c for c in caught if c == "a bare except" or c in _SWALLOWING]
            if broad and not _reraises(handler.body):
                what = broad[0] if broad[0] == "a bare except" else f"except {broad[0]}"
                return f"assertion failures swallowed by {what} without a re-raise"
    if isinstance(node, (ast.With, ast.AsyncWith)) and has_check(node.body):
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call):
                continue
            name = _dotted(call.func)
            last = name.rsplit(".", 1)[-1]
            caught = [_dotted(a) for a in call.args]
            if last == "suppress" and any(c in _SWALLOWING for c in caught):
                return "assertion failures suppressed by contextlib.suppress"
            if last == "raises" and any(
                c in ("AssertionError", "builtins.AssertionError") for c in caught
            ):
                return "pytest.raises(AssertionError) makes the test pass only when its checks fail"
    return None


def real_check(node: ast.AST) -> bool:
    """True when ``node`` (a test body statement) holds a check that can fail."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assert) and tautology("assert", sub.test) is None:
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            attr = sub.func.attr
            if attr in _CHECK_ATTRS and _dotted(sub.func).split(".", 1)[0] in ("pytest", "self"):
                return True
            if attr.startswith("assert") and tautology("call", sub) is None:
                return True
    return False


# Attributes whose replacement rewrites code or namespaces other tests run through.
_CODE_ATTRS = frozenset(
    {"__code__", "__globals__", "__defaults__", "__kwdefaults__", "__dict__", "__builtins__"}
)
_SETTERS = frozenset({"setattr", "delattr", "builtins.setattr", "builtins.delattr"})
_PATCH_CALLS = frozenset({"setattr", "delattr", "setitem", "delitem"})


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _autouse(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in func.decorator_list:
        if isinstance(decorator, ast.Call) and _dotted(decorator.func).endswith("fixture"):
            for keyword in decorator.keywords:
                value = keyword.value
                if keyword.arg == "autouse" and not (
                    isinstance(value, ast.Constant) and not value.value
                ):
                    return True
    return False


def is_test_module(tree: ast.Module) -> bool:
    """A module that defines tests or fixtures, or imports a test framework."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name.startswith(("test", "Test")):
                return True
        elif isinstance(stmt, ast.Import):
            if any(a.name.split(".")[0] in ("pytest", "unittest") for a in stmt.names):
                return True
        elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").split(".")[0] in (
            "pytest",
            "unittest",
        ):
            return True
    return False


def patches(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """Where test code replaces objects other tests use, without a per-test undo.

    Assignments (or ``del``) to attributes or items of an imported module or object, of
    a builtin, ``sys.modules``, or of ``__code__``/``__dict__``/``__globals__``/...;
    ``setattr``/``delattr`` on those; ``MonkeyPatch()`` made by hand, ``patch(...).start()``
    and monkeypatching inside an ``autouse`` fixture (it applies to every test). Each
    entry is the node and what it replaces. A ``monkeypatch`` fixture used in a test
    (undone after that test) and ``with patch(...)`` blocks are not patches.
    """
    imported: set[str] = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imported.update(a.asname or a.name.split(".")[0] for a in stmt.names)
    shared = imported | {"builtins", "__builtins__"}
    found: list[tuple[ast.AST, str]] = []

    def outer(target: ast.AST) -> str | None:
        if isinstance(target, ast.Attribute) and target.attr in _CODE_ATTRS:
            return _dotted(target) or target.attr
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            inner: ast.expr = target
            while isinstance(inner, (ast.Attribute, ast.Subscript)):
                if isinstance(inner, ast.Attribute) and inner.attr in _CODE_ATTRS:
                    return _dotted(inner) or inner.attr
                inner = inner.value
            root = _root(target)
            if isinstance(root, ast.Name) and root.id in shared:
                if isinstance(target, ast.Subscript):
                    return f"{_dotted(target.value) or root.id}[...]"
                return _dotted(target) or root.id
        return None

    autouse_nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _autouse(node):
            autouse_nodes.update(id(sub) for sub in ast.walk(node))
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for part in ast.walk(target):
                what = outer(part) if isinstance(part, (ast.Attribute, ast.Subscript)) else None
                if what is not None and isinstance(getattr(part, "ctx", None), ast.Store | ast.Del):
                    found.append((node, f"replaces {what}"))
                    break
        if not isinstance(node, ast.Call):
            continue
        called = _dotted(node.func)
        last = called.rsplit(".", 1)[-1]
        if called in _SETTERS and node.args:
            root = _root(node.args[0])
            if isinstance(root, ast.Name) and (root.id in shared or outer(node.args[0])):
                found.append((node, f"{last}({_dotted(node.args[0]) or root.id}, ...)"))
        elif last == "MonkeyPatch":
            found.append((node, "a MonkeyPatch made by hand (not undone after the test)"))
        elif (
            last == "start"
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Call)
            and "patch" in _dotted(node.func.value.func).split(".")
        ):
            found.append((node, "patch(...).start() (not undone after the test)"))
        elif last in _PATCH_CALLS and id(node) in autouse_nodes and "." in called:
            found.append((node, f"{called} in an autouse fixture (applies to every test)"))
    return found
