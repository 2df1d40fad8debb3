"""Facts about one version of a Python module, from its AST (nothing is executed).

:func:`module_facts` walks a module once and returns its definitions, its risky calls
resolved through imports and aliases (:class:`_Resolver`), skips, pytest hooks and
assertions per scope. Source over :data:`MAX_ANALYSED_BYTES` or that does not parse
is the fact ``unparsable``.
"""

from __future__ import annotations

import ast
import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from typing import Literal, ParamSpec, TypeVar

from ._python_names import (
    _BUILTINS,
    _CATEGORY_OF,
    _CHECK_CALLS,
    _COLLECTION_NAMES,
    _SAFE_YAML_LOADERS,
    _SKIPS,
    FactKind,
)
from ._python_tests import is_test_module, is_test_scope, patches, swallowed, tautology

__all__ = (
    "MAX_ANALYSED_BYTES",
    "MAX_DECISION_TOKENS",
    "MAX_RISKY_FACTS",
    "CodeFact",
    "ModuleFacts",
    "module_facts",
    "python_budget",
    "remembered_facts",
)


# -- facts ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CodeFact:
    """One finding: ``kind``, the line in the new version (old version for removals), detail.

    ``detail`` holds resolved dotted names and counts only, never string literals from
    the code (which may hold secrets).
    """

    kind: FactKind
    line: int | None
    detail: str
    where: Literal["added", "modified", "removed", "module"] = "module"


@dataclass(frozen=True, slots=True)
class ModuleFacts:
    """What one version of a module contains (for comparison)."""

    error: CodeFact | None = None
    definitions: dict[str, int] = field(default_factory=dict)  # qualname -> line
    risky: tuple[tuple[FactKind, str, str, int], ...] = ()  # (kind, detail, signature, line)
    assertions: dict[str, tuple[tuple[str, ast.AST, int], ...]] = field(default_factory=dict)
    statements: int = 0


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Resolver:
    """Resolves names through imports, aliases, dynamic imports and getattr."""

    def __init__(self, learn: list[ast.AST]) -> None:
        self.aliases: dict[str, str] = {}
        self.star: list[str] = []
        self.shadowed: set[str] = set()
        # Two passes so later aliases of aliases resolve (a = os; b = a).
        for _ in range(2):
            for node in learn:
                self._learn(node)

    def _learn(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    self.aliases.setdefault(top, top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    self.star.append(node.module)
                else:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if value is None:
                return
            resolved = self.resolve(value)
            for target in targets:
                if isinstance(target, ast.Name):
                    if resolved is not None:
                        self.aliases[target.id] = resolved
                    elif target.id in _BUILTINS:
                        self.shadowed.add(target.id)
                elif isinstance(target, ast.Attribute) and resolved is not None:
                    dotted = _dotted(target)  # self.run = subprocess.run
                    if dotted is not None:
                        self.aliases[dotted] = resolved
        elif (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.name in _BUILTINS
        ):
            self.shadowed.add(node.name)

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to (``o.system`` -> ``os.system``)."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in _BUILTINS and node.id not in self.shadowed:
                return f"builtins.{node.id}"
            for module in self.star:
                if f"{module}.{node.id}" in _CATEGORY_OF:
                    return f"{module}.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted is not None and dotted in self.aliases:
                return self.aliases[dotted]
            base = self.resolve(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            first = _const_str(node.args[0]) if node.args else None
            if func in ("builtins.__import__", "importlib.import_module", "importlib.__import__"):
                return first
            if func == "builtins.getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                name = _const_str(node.args[1])
                if base is not None and name is not None:
                    return f"{base}.{name}"
            return None
        if isinstance(node, ast.Subscript):  # sys.modules["os"] / vars(builtins)["eval"]
            key = _const_str(node.slice)
            base = _dotted(node.value)
            if key is not None and base in ("sys.modules",):
                return key
            if key is not None and base in ("__builtins__", "builtins.__dict__"):
                return f"builtins.{key}"
        return None


def _category(name: str) -> FactKind | None:
    return _CATEGORY_OF.get(name)


def _signature(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _yaml_is_safe(call: ast.Call, resolver: _Resolver) -> bool:
    for keyword in call.keywords:
        if keyword.arg == "Loader":
            loader = resolver.resolve(keyword.value) or _dotted(keyword.value) or ""
            return loader.rsplit(".", 1)[-1] in _SAFE_YAML_LOADERS
    if len(call.args) >= 2:
        loader = resolver.resolve(call.args[1]) or _dotted(call.args[1]) or ""
        return loader.rsplit(".", 1)[-1] in _SAFE_YAML_LOADERS
    return False


def _is_skip(name: str | None) -> bool:
    if name is None:
        return False
    return name in _SKIPS or any(
        name.startswith(s + ".")
        for s in ("pytest.mark.skip", "pytest.mark.skipif", "pytest.mark.xfail")
    )


def _mentions_skip(node: ast.AST, resolver: _Resolver) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Name, ast.Attribute)) and _is_skip(resolver.resolve(sub)):
            return True
        if isinstance(sub, ast.Call) and _is_skip(resolver.resolve(sub.func)):
            return True
    return False


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LEARN = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.NamedExpr, *_DEFS)
_LOOK = (ast.Call, ast.Raise, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, *_DEFS)
_BLOCKS = (ast.Try, ast.TryStar, ast.With, ast.AsyncWith)
_Check = tuple[str, ast.AST, int]


@dataclass(slots=True)
class _Index:
    """One traversal of a module: nodes to learn aliases from and to look at, scopes."""

    learn: list[ast.AST] = field(default_factory=list)
    look: list[ast.AST] = field(default_factory=list)
    definitions: dict[str, int] = field(default_factory=dict)
    checks: dict[str, list[tuple[int, int, _Check]]] = field(default_factory=dict)
    blocks: list[tuple[str, ast.AST]] = field(default_factory=list)  # try/with in tests


def _index(tree: ast.Module) -> _Index:
    """Walk the tree once (iteratively: deep nesting cannot overflow the stack)."""
    index = _Index()
    stack: list[tuple[ast.AST, str, bool]] = [(tree, "<module>", False)]
    while stack:
        node, scope, in_check = stack.pop()
        for child in ast.iter_child_nodes(node):
            child_scope, child_in_check = scope, in_check
            if isinstance(child, _LEARN):
                index.learn.append(child)
            if isinstance(child, _LOOK):
                index.look.append(child)
            if isinstance(child, _BLOCKS) and is_test_scope(scope):
                index.blocks.append((scope, child))
            if isinstance(child, _DEFS):
                name = child.name if scope == "<module>" else f"{scope}.{child.name}"
                index.definitions.setdefault(name, child.lineno)
                child_scope, child_in_check = name, False
            elif isinstance(child, ast.Assert) and not in_check:
                entry = ("assert", child.test, child.lineno)
                index.checks.setdefault(scope, []).append((child.lineno, child.col_offset, entry))
                child_in_check = True
            elif isinstance(child, ast.Call) and not in_check:
                called = _dotted(child.func) or ""
                last = called.rsplit(".", 1)[-1]
                if "." in called and (last.startswith("assert") or last in _CHECK_CALLS):
                    entry = ("call", child, child.lineno)
                    index.checks.setdefault(scope, []).append(
                        (child.lineno, child.col_offset, entry)
                    )
                    child_in_check = True
            stack.append((child, child_scope, child_in_check))
    return index


MAX_ANALYSED_BYTES = 256 * 1024  # larger sources are "unparsable": bounded time per decision
MAX_RISKY_FACTS = 500  # more risky calls in one module are "unparsable": too many to compare


MAX_DECISION_TOKENS = 100_000
"""Words and symbols (about Python's tokens) of the distinct sources one rule-set decision
parses, all files and both sides together: parsing, tokenizing and walking cost about
3 us per token, and the byte bound alone let dense code (nested brackets, one-line
functions; five modules of 95 KB) cost 4 s. Sources past the budget are unparsable."""
_TOKENISH = re.compile(rb"\w+|[^\w\s]")  # counts each bracket, operator and word once


class _Budget:
    """The tokens left for one decision's Python sources, and the sources it admitted."""

    __slots__ = ("left", "seen")

    def __init__(self, tokens: int) -> None:
        self.left = tokens
        self.seen: set[bytes] = set()

    def admit(self, data: bytes) -> bool:
        if data in self.seen:
            return True
        count = len(_TOKENISH.findall(data))
        if count > self.left:
            return False
        self.left -= count
        self.seen.add(data)
        return True


_BUDGET: ContextVar[_Budget | None] = ContextVar("vsh_ai_python_budget", default=None)


@contextmanager
def python_budget(tokens: int = MAX_DECISION_TOKENS) -> Iterator[None]:
    """Bound the Python source parsed inside (one decision; an enclosing budget stays the
    one that counts)."""
    if _BUDGET.get() is not None:
        yield
        return
    token = _BUDGET.set(_Budget(tokens))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _over_budget(data: bytes) -> CodeFact | None:
    """The refusal of ``data`` when the current decision's budget has no room for it."""
    budget = _BUDGET.get()
    if budget is None or budget.admit(data):
        return None
    return CodeFact(
        "unparsable",
        None,
        f"more Python source than one decision analyses (about {MAX_DECISION_TOKENS:,} "
        "words and symbols across its files)",
    )


def _parse(source: str | bytes) -> ast.Module | CodeFact:
    data = source.encode("utf-8", "replace") if isinstance(source, str) else source
    size = len(data)
    if size > MAX_ANALYSED_BYTES:
        return CodeFact(
            "unparsable", None, f"too large to analyse ({size} bytes > {MAX_ANALYSED_BYTES})"
        )
    refused = _over_budget(data)
    if refused is not None:
        return refused
    try:
        return ast.parse(source)
    except SyntaxError as error:
        return CodeFact("unparsable", error.lineno, f"syntax error: {error.msg}")
    except (ValueError, RecursionError, MemoryError) as error:
        return CodeFact("unparsable", None, f"cannot be parsed: {type(error).__name__}")


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a module's AST is built and read.

    An AST is hundreds of thousands of acyclic objects (freed by reference counting);
    each allocation burst made the collector walk every live object of the process,
    which doubled the time of a 256 KiB module and grew with the process's heap.
    The collector is re-enabled afterwards only if it was enabled before.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _without_gc(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``function`` with the cyclic collector paused (see :func:`_gc_paused`)."""

    @wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with _gc_paused():
            return function(*args, **kwargs)

    return wrapper


def module_facts(source: str | bytes) -> ModuleFacts:
    """Definitions, risky calls, skips/hooks and assertions of one module version.

    A module nested too deeply to analyse is reported like one that does not parse, and so
    is one the current decision's budget has no room for (that refusal is never
    remembered: the next decision analyses the module afresh).
    """
    data = source.encode("utf-8", "replace") if isinstance(source, str) else source
    refused = _over_budget(data) if len(data) <= MAX_ANALYSED_BYTES else None
    return ModuleFacts(refused) if refused is not None else remembered_facts(source)


@lru_cache(maxsize=256)
def remembered_facts(source: str | bytes) -> ModuleFacts:
    """:func:`module_facts` without the decision's budget, remembered per source."""
    token = _BUDGET.set(None)  # the budget was asked before; a remembered answer is budget-free
    try:
        with _gc_paused():
            return _module_facts(source)
    except (RecursionError, MemoryError) as error:
        return ModuleFacts(
            CodeFact("unparsable", None, f"too deeply nested ({type(error).__name__})")
        )
    finally:
        _BUDGET.reset(token)


def _neutered(
    index: _Index,
    risky: list[tuple[FactKind, str, str, int]],
    sign: Callable[[ast.AST], str],
) -> None:
    """Checks in tests that cannot fail: tautologies and swallowed assertion errors."""
    for scope, found in index.checks.items():
        if not is_test_scope(scope):
            continue
        for _, _, (kind, node, line) in found:
            why = tautology(kind, node)
            if why is not None:
                risky.append(("tautology", f"{scope}: {why}", f"{scope}:{sign(node)}", line))
    for scope, block in index.blocks:
        why = swallowed(block)
        if why is not None:
            line = getattr(block, "lineno", 0)
            risky.append(("swallowed", f"{scope}: {why}", f"{scope}:{sign(block)}", line))


def _test_bodies(tree: ast.Module) -> Iterator[tuple[str, list[ast.stmt]]]:
    """The module body and each ``Test*`` class body (where pytest collects tests)."""
    yield "", tree.body
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            yield f"{stmt.name}.", stmt.body


def _module_facts(source: str | bytes) -> ModuleFacts:
    tree = _parse(source)
    if isinstance(tree, CodeFact):
        return ModuleFacts(error=tree)
    index = _index(tree)
    resolver = _Resolver(index.learn)
    risky: list[tuple[FactKind, str, str, int]] = []

    def sign(node: ast.AST) -> str:  # only the first MAX_RISKY_FACTS: dumps are costly
        return _signature(node) if len(risky) < MAX_RISKY_FACTS else ""

    for node in index.look:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            # A risky function passed along (Thread(target=os.system), map(os.system, ..),
            # partial(subprocess.run, ..)) runs as surely as one called here.
            for argument in (*node.args, *(k.value for k in node.keywords)):
                if isinstance(argument, (ast.Name, ast.Attribute)):
                    passed = resolver.resolve(argument)
                    passed_kind = _category(passed) if passed is not None else None
                    if passed_kind is not None and passed is not None:
                        risky.append((passed_kind, passed, sign(node), line))
            name = resolver.resolve(node.func)
            if name is not None:
                kind = _category(name)
                if (
                    kind == "deserialise"
                    and name.startswith("yaml.load")
                    and _yaml_is_safe(node, resolver)
                ):
                    kind = None
                if kind is not None:
                    risky.append((kind, name, sign(node), line))
                if _is_skip(name):
                    risky.append(("skip", name, sign(node), line))
            if isinstance(node.func, ast.Attribute) and node.func.attr == "skipTest":
                risky.append(("skip", "skipTest", sign(node), line))
            if (
                name is None
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr",)
                and len(node.args) >= 2
            ):
                base = resolver.resolve(node.args[0])
                if (
                    base is not None
                    and _const_str(node.args[1]) is None
                    and base.split(".")[0]
                    in ("os", "subprocess", "builtins", "importlib", "pickle", "socket")
                ):
                    risky.append(
                        ("dynamic_import", f"getattr({base}, <computed>)", sign(node), line)
                    )
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                if _mentions_skip(decorator, resolver):
                    risky.append(
                        (
                            "skip",
                            f"decorator on {node.name}",
                            sign(decorator),
                            decorator.lineno,
                        )
                    )
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # A test that returns or raises before its later statements never runs them.
                for statement in node.body[:-1]:
                    if isinstance(statement, (ast.Return, ast.Raise)):
                        detail = f"{node.name}: code after line {statement.lineno}"
                        signature = f"{node.name}:{sign(statement)}"
                        risky.append(("unreachable", detail, signature, statement.lineno))
                        break
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                "pytest_"
            ):
                risky.append(("test_hook", node.name, node.name, node.lineno))
        elif isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = resolver.resolve(target) or _dotted(target) or ""
            if _is_skip(name) or name.rsplit(".", 1)[-1] == "SkipTest":
                risky.append(("skip", f"raise {name}", sign(node), line))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = _dotted(target)
                if (
                    name == "pytestmark"
                    and node.value is not None
                    and _mentions_skip(node.value, resolver)
                ):
                    risky.append(("skip", "pytestmark", sign(node), line))
                elif name in _COLLECTION_NAMES or (name or "").endswith(".__test__"):
                    risky.append(("collection", name or "", sign(node), line))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and _dotted(func.value) in _COLLECTION_NAMES:
                risky.append(("collection", f"{_dotted(func.value)}.{func.attr}", sign(node), line))
    _neutered(index, risky, sign)
    for scope, stmts in _test_bodies(tree):
        seen: set[str] = set()
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith(
                "test"
            ):
                if stmt.name in seen:
                    detail = (
                        f"{scope}{stmt.name} defined again: the earlier test is never collected"
                    )
                    risky.append(("collection", detail, f"again:{scope}{stmt.name}", stmt.lineno))
                seen.add(stmt.name)
    if is_test_module(tree):
        for node, what in patches(tree):
            risky.append(("patched", what, sign(node), getattr(node, "lineno", 0)))
    body = [
        s for s in tree.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    meaningful = [s for s in body if not isinstance(s, ast.Pass)]
    checks = {
        scope: tuple(entry for _, _, entry in sorted(found, key=lambda c: (c[0], c[1])))
        for scope, found in index.checks.items()
    }
    definitions = dict(sorted(index.definitions.items(), key=lambda item: item[1]))
    risky.sort(key=lambda r: r[3])
    error = None
    if len(risky) > MAX_RISKY_FACTS:
        error = CodeFact(
            "unparsable",
            risky[0][3],
            f"too many risky calls to compare ({len(risky)} > {MAX_RISKY_FACTS})",
        )
    return ModuleFacts(error, definitions, tuple(risky), checks, len(meaningful))
