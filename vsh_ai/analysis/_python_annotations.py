"""Proof that an edit changed only type annotations that cannot change behaviour.

:func:`annotation_only` strips annotations (argument, return and variable annotations,
typing-only imports, ``if TYPE_CHECKING:`` import blocks) from both versions and
compares what is left, docstrings aside. Every annotation that differs must then be
harmless where it is:

- a plain type expression (names, attributes, subscripts, ``|``, literals): a call,
  lambda or walrus in an annotation is code, and runs when the definition does;
- not read at runtime: no field of a class with bases, decorators or a metaclass
  (pydantic, dataclasses, attrs, TypedDict, NamedTuple, Enum, SQLAlchemy, ...), no
  function behind a decorator that may inspect it (only ``staticmethod``,
  ``property``, ``functools.cache`` and similar are trusted);
- evaluable: without ``from __future__ import annotations`` every name it uses is a
  builtin or bound at module level before the definition (else the import fails);
- never a bare ``x: T`` inside a function that makes a global ``x`` local;
- made of types: builtins that are types, classes, imports, ``TypeVar``-like objects
  and aliases of those (a reader may call an annotation: ``eval`` is no type hint);
- not an existing class-body or module-level annotation changed or removed: those are
  stored in ``__annotations__``, where another module may read them (a per-file proof
  cannot see that reader); adding a missing one is fine.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Container, Iterator
from dataclasses import dataclass, field

from ._python_facts import CodeFact, _parse, _without_gc

__all__ = ("Proof", "annotation_only")

_TYPING_MODULES = frozenset({"typing", "typing_extensions", "collections.abc", "types"})
_SAFE_DECORATORS = frozenset(
    {
        "staticmethod",
        "classmethod",
        "property",
        "abstractmethod",
        "abc.abstractmethod",
        "cache",
        "lru_cache",
        "cached_property",
        "functools.cache",
        "functools.lru_cache",
        "functools.cached_property",
        "overload",
        "typing.overload",
        "override",
        "typing.override",
        "typing_extensions.override",
        "final",
        "typing.final",
    }
)
_PLAIN_BASES = frozenset(
    {"object", "Exception", "BaseException", "ABC", "abc.ABC", "Generic", "typing.Generic"}
)
_BUILTIN_NAMES = frozenset(dir(builtins))
_FIELD = "a field annotation"
_TYPE_FACTORIES = frozenset(
    {"TypeVar", "ParamSpec", "TypeVarTuple", "NewType", "TypeAliasType", "NamedTuple", "TypedDict"}
)
# Libraries that read annotations at runtime (a function handed to one of them from this
# module behaves by its annotations), and the calls that read them.
_RUNTIME_READERS = frozenset(
    {
        "pydantic",
        "pydantic_settings",
        "fastapi",
        "typer",
        "cyclopts",
        "jsonargparse",
        "attrs",
        "attr",
        "dataclasses",
        "msgspec",
        "cattrs",
        "beartype",
        "typeguard",
        "strawberry",
        "sqlmodel",
        "sqlalchemy",
        "marshmallow_dataclass",
        "ninja",
        "litestar",
        "injector",
        "dependency_injector",
        "hydra",
    }
)
_READING_NAMES = frozenset(
    {"get_type_hints", "get_annotations", "signature", "__annotations__", "singledispatch"}
)


@dataclass(frozen=True, slots=True)
class Proof:
    """``ok``: the edit is proven harmless; ``reason`` says what was proven or why not."""

    ok: bool
    reason: str
    spans: tuple[tuple[int, int], ...] = ()  # lines (first, last) of new code, if any
    beyond: bool = False  # not ok because code other than what is proven changed (a fact)


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return "<expr>"


def _decorator_safe(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = _dotted(target)
    if name in _SAFE_DECORATORS:
        return True
    # @x.setter / @x.getter / @x.deleter of a property.
    return isinstance(decorator, ast.Attribute) and decorator.attr in (
        "setter",
        "getter",
        "deleter",
    )


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _impure(node: ast.AST) -> str | None:
    """Why ``node`` is not a plain type expression (None: it is)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            try:
                inner = ast.parse(node.value.strip(), mode="eval").body
            except SyntaxError:
                return "a string annotation that is not an expression"
            return _impure(inner)
        return None
    if isinstance(node, ast.Name):
        return None
    if isinstance(node, ast.Attribute):
        return _impure(node.value)
    if isinstance(node, ast.Subscript):
        return _impure(node.value) or _impure(node.slice)
    if isinstance(node, (ast.Tuple, ast.List)):
        return next((why for e in node.elts if (why := _impure(e))), None)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _impure(node.left) or _impure(node.right)
    if isinstance(node, ast.Starred):
        return _impure(node.value)
    return f"an annotation holds code ({type(node).__name__})"


def _names(node: ast.AST) -> set[str]:
    """The first names of every chain an annotation evaluates (not inside strings)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


@dataclass(slots=True)
class _Site:
    dump: str
    problem: str | None  # why a change here is not harmless (None: harmless)
    line: int
    stored: bool = False  # a class-body or module-level annotation (``__annotations__``)
    code: bool = False  # the problem is code where a type belongs (a fact, not a doubt)
    field: bool = False  # an annotation of a class with bases or decorators


@dataclass(slots=True)
class _Stripper:
    """Removes annotations in place; records each site with its context."""

    future: bool
    first_bound: dict[str, int]  # name -> top-level statement (1-based) that binds it first
    types: frozenset[str]  # module names known to be types (classes, imports, TypeVars)
    sites: dict[tuple[str, ...], _Site] = field(default_factory=dict)
    typing_names: set[str] = field(default_factory=set)
    top: int = 0

    def site(
        self,
        key: tuple[str, ...],
        node: ast.expr,
        problem: str | None,
        evaluated: bool = True,
        stored: bool = False,
    ) -> None:
        impure = _impure(node) if evaluated else None
        if impure is None and evaluated:
            builtin = _not_a_type(node, self.types, self.first_bound)
            impure = builtin if builtin is not None and "the builtin" in builtin else None
        code = impure is not None  # code where a type belongs: a fact, reported first
        why = impure or problem
        if why is None and evaluated and not self.future:
            unknown = sorted(
                n
                for n in _names(node)
                if n not in _BUILTIN_NAMES and self.first_bound.get(n, self.top) >= self.top
            )
            if unknown:
                why = f"an annotation names {unknown[0]}, not bound when the definition runs"
        if why is None and evaluated:
            why = _not_a_type(node, self.types, self.first_bound)
        while key in self.sites:  # the same name defined twice: keep both
            key = (*key, "+")
        field = problem is not None and problem.startswith(_FIELD)
        self.sites[key] = _Site(
            ast.dump(node), why, getattr(node, "lineno", 0), stored, code, field
        )

    def body(self, stmts: list[ast.stmt], scope: tuple[str, ...], kind: str) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        if kind != "block" and stmts and _is_docstring(stmts[0]):
            if kind == "module":
                self.top += 1
            stmts = stmts[1:]  # docstrings may change alongside annotations
        for stmt in stmts:
            if kind == "module":
                self.top += 1
            kept = self.stmt(stmt, scope, kind)
            if kept is not None:
                out.append(kept)
        return out or [ast.Pass()]

    def stmt(self, stmt: ast.stmt, scope: tuple[str, ...], kind: str) -> ast.stmt | None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and kind == "module":
            return self.imports(stmt)
        if isinstance(stmt, ast.If) and kind == "module" and _type_checking_imports(stmt):
            for s in stmt.body:
                if isinstance(s, (ast.Import, ast.ImportFrom)):
                    self.typing_names.update(a.asname or a.name.split(".")[0] for a in s.names)
            return None
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self.function(stmt, scope)
        if isinstance(stmt, ast.ClassDef):
            plain = (
                not stmt.decorator_list
                and not stmt.keywords
                and all(_dotted(b) in _PLAIN_BASES for b in stmt.bases)
            )
            inner = (*scope, f"class {stmt.name}")
            kind = "class" if plain else "fields" if _defines_fields(stmt) else "model"
            stmt.body = self.body(stmt.body, inner, kind)
            return stmt
        if isinstance(stmt, ast.AnnAssign):
            return self.ann_assign(stmt, scope, kind)
        inner_kind = "block" if kind == "module" else kind
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(stmt, name, None)
            if isinstance(children, list) and children and isinstance(children[0], ast.stmt):
                setattr(stmt, name, self.body(children, scope, inner_kind))
            elif isinstance(children, list):
                for child in children:
                    if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                        child.body = self.body(child.body, scope, inner_kind)
        return stmt

    def imports(self, stmt: ast.Import | ast.ImportFrom) -> ast.stmt | None:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__" and not stmt.level:
            stmt.names = [a for a in stmt.names if a.name != "annotations"]
            return stmt if stmt.names else None
        if isinstance(stmt, ast.ImportFrom):
            typing = stmt.module in _TYPING_MODULES and not stmt.level
            typing = typing and all(a.name != "*" for a in stmt.names)
        else:
            typing = all(a.name in _TYPING_MODULES for a in stmt.names)
        if not typing:
            return stmt
        self.typing_names.update(a.asname or a.name.split(".")[0] for a in stmt.names)
        return None

    def function(
        self, stmt: ast.FunctionDef | ast.AsyncFunctionDef, scope: tuple[str, ...]
    ) -> ast.stmt:
        inner = (*scope, f"def {stmt.name}")
        problem = None
        if not all(_decorator_safe(d) for d in stmt.decorator_list):
            problem = f"{stmt.name} has a decorator that may read its annotations"
        args = stmt.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None and arg.annotation is not None:
                self.site((*inner, f"arg {arg.arg}"), arg.annotation, problem)
                arg.annotation = None
        if stmt.returns is not None:
            self.site((*inner, "return"), stmt.returns, problem)
            stmt.returns = None
        stmt.body = self.body(stmt.body, inner, "function")
        return stmt

    def ann_assign(self, stmt: ast.AnnAssign, scope: tuple[str, ...], kind: str) -> ast.stmt | None:
        target = ast.dump(stmt.target)
        problem = None
        if kind == "fields":
            problem = f"{_FIELD} of a class whose decorator or base defines fields from it"
        elif kind == "model":
            problem = "an annotation in a class whose bases or decorators may read it"
        elif kind == "function" and stmt.value is None and isinstance(stmt.target, ast.Name):
            problem = f"a bare annotation makes {stmt.target.id} local to the function"
        elif stmt.value is None and _impure(stmt.target) is not None:
            problem = "an annotated target that is evaluated"
        # Annotations of local variables are never evaluated; class-body and module-level
        # ones are stored in ``__annotations__``, where any other module may read them.
        local = kind == "function"
        self.site((*scope, f"var {target}"), stmt.annotation, problem, not local, not local)
        if stmt.value is None:
            return None
        return ast.copy_location(ast.Assign(targets=[stmt.target], value=stmt.value), stmt)


_FIELD_MAKERS = frozenset(
    {
        "dataclass",
        "define",
        "frozen",
        "mutable",
        "attrs",
        "s",
        "BaseModel",
        "BaseSettings",
        "TypedDict",
        "NamedTuple",
        "SQLModel",
        "Struct",
        "Schema",
    }
)


def _defines_fields(stmt: ast.ClassDef) -> bool:
    """A class whose decorator or base turns its annotations into fields (dataclasses,
    attrs, pydantic, TypedDict, NamedTuple, msgspec, ...)."""
    for node in (*stmt.decorator_list, *stmt.bases):
        target = node.func if isinstance(node, ast.Call) else node
        if _dotted(target).rsplit(".", 1)[-1] in _FIELD_MAKERS:
            return True
    return False


def _type_checking_imports(stmt: ast.If) -> bool:
    """``if TYPE_CHECKING:`` holding only imports (never runs)."""
    return (
        _dotted(stmt.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        and not stmt.orelse
        and all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass)) for s in stmt.body)
    )


def _module_level(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at module level (inside if/try/with blocks too, not defs)."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.TryStar, ast.With)):
            for name in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(stmt, name, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _module_level(handler.body)


def _type_names(tree: ast.Module) -> frozenset[str]:
    """Module names known to be types: classes, imports (a module, or a name another
    module defines: what it is cannot be seen here, but a builtin function never is),
    ``TypeVar``-like objects and aliases built of such names."""
    types: set[str] = set()
    for stmt in _module_level(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            types.update(a.asname or a.name.split(".")[0] for a in stmt.names)
        elif isinstance(stmt, ast.ClassDef):
            types.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            if isinstance(value, ast.Call):
                ok = _dotted(value.func).rsplit(".", 1)[-1] in _TYPE_FACTORIES
            else:
                ok = _impure(value) is None and _not_a_type(value, frozenset(types)) is None
            if ok:
                types.update(t.id for t in targets if isinstance(t, ast.Name))
        elif type(stmt).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12)
            name = getattr(stmt, "name", None)
            if isinstance(name, ast.Name):
                types.add(name.id)
    return frozenset(types)


def _not_a_type(
    node: ast.AST, types: frozenset[str] | set[str], bound: Container[str] = ()
) -> str | None:
    """Why an annotation may name something other than a type (None: only types).

    Whatever reads annotations may call them (``cls.__annotations__[name](value)``): a
    builtin function such as ``eval`` or a module name bound to something not known to
    be a type is not a hint. A name bound nowhere (a forward reference under ``from
    __future__ import annotations``) refers to nothing that could run.
    """
    stack = [node]
    while stack:
        sub = stack.pop()
        if isinstance(sub, ast.Name):
            name = sub.id
            if name in types:
                continue
            if name in bound:
                return f"an annotation names {name}, which is not known to be a type"
            if name in _BUILTIN_NAMES and not isinstance(getattr(builtins, name), type):
                return f"an annotation names the builtin {name}, which is not a type"
            continue
        if isinstance(sub, ast.Attribute):
            stack.append(_chain_root(sub))
            continue
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                stack.append(ast.parse(sub.value.strip(), mode="eval").body)
            except SyntaxError:
                return "a string annotation that is not an expression"
            continue
        if isinstance(sub, ast.Subscript) and _dotted(sub.value).endswith("Literal"):
            stack.append(sub.value)  # Literal["a"]: strings there are values, not types
            continue
        stack.extend(ast.iter_child_nodes(sub))
    return None


def _chain_root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _scan(tree: ast.Module) -> tuple[dict[str, int], str | None]:
    """One walk: where each module name is first bound (top-level statement, 1-based;
    ``if TYPE_CHECKING:`` binds nothing at runtime), and a runtime annotation reader."""
    first: dict[str, int] = {}
    reader: str | None = None
    for index, stmt in enumerate(tree.body, 1):
        binds = not (isinstance(stmt, ast.If) and _dotted(stmt.test).endswith("TYPE_CHECKING"))
        names: list[str] = []
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.extend(a.asname or a.name.split(".")[0] for a in node.names)
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""] * (not node.level)
                )
                reader = reader or next(
                    (m for m in modules if m.split(".")[0] in _RUNTIME_READERS), None
                )
            elif isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Store):
                    names.append(node.id)
                if node.id in _READING_NAMES:
                    reader = reader or node.id
            elif isinstance(node, ast.Attribute) and node.attr in _READING_NAMES:
                reader = reader or node.attr
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(stmt.name)
        if binds:
            for name in names:
                first.setdefault(name, index)
    return first, reader


def _future(tree: ast.Module) -> bool:
    return any(
        isinstance(s, ast.ImportFrom)
        and s.module == "__future__"
        and any(a.name == "annotations" for a in s.names)
        for s in tree.body
    )


def _strip(tree: ast.Module, first_bound: dict[str, int]) -> tuple[str, _Stripper]:
    stripper = _Stripper(_future(tree), first_bound, _type_names(tree))
    tree.body = stripper.body(tree.body, (), "module")
    return ast.dump(tree, include_attributes=False), stripper


@_without_gc
def annotation_only(before: bytes, after: bytes) -> Proof:
    """Whether ``after`` differs from ``before`` only in harmless annotations."""
    old_tree, new_tree = _parse(before), _parse(after)
    if isinstance(old_tree, CodeFact) or isinstance(new_tree, CodeFact):
        return Proof(False, "does not parse")
    try:
        old_first, old_reader = _scan(old_tree)
        new_first, new_reader = _scan(new_tree)
        reader = old_reader or new_reader
        old_dump, old = _strip(old_tree, old_first)
        new_dump, new = _strip(new_tree, new_first)
    except (RecursionError, MemoryError):
        return Proof(False, "too deeply nested to compare")
    if old_dump != new_dump:
        return Proof(
            False, "code other than annotations, comments and docstrings changed", beyond=True
        )
    if reader is not None:
        return _read_at_runtime(reader, old, new)
    changed_typing = new.typing_names ^ old.typing_names
    used = (
        {n.id for t in (old_tree, new_tree) for n in ast.walk(t) if isinstance(n, ast.Name)}
        if changed_typing
        else set()
    )
    shadowing = sorted(changed_typing & used)
    if shadowing:
        return Proof(False, f"a changed typing import binds {shadowing[0]}, which the code uses")
    toggled = old.future != new.future
    changed = 0
    for key in old.sites.keys() | new.sites.keys():
        a, b = old.sites.get(key), new.sites.get(key)
        if not toggled and a is not None and b is not None and a.dump == b.dump:
            continue
        changed += 1
        for site in (a, b):
            if site is not None and site.problem is not None:
                return Proof(False, f"line {site.line}: {site.problem}", beyond=site.code)
        if a is not None and a.stored:
            # Changed or removed (adding a missing one is fine): other modules may read it.
            line = b.line if b is not None else a.line
            return Proof(
                False,
                f"line {line}: an existing class-body or module-level annotation changed; it "
                "is stored in __annotations__, where other modules may read it at runtime",
            )
    if not changed and not (new.typing_names - old.typing_names):
        return Proof(False, "no annotation changed")
    return Proof(True, f"only type annotations changed ({changed} changed)")


def _read_at_runtime(reader: str, old: _Stripper, new: _Stripper) -> Proof:
    """Never proven where a library reads annotations at runtime; a fact (``beyond``)
    when a changed annotation is code, or a field of a class in such a module."""
    why = f"the module uses {reader}, which reads annotations at runtime"
    for key in old.sites.keys() | new.sites.keys():
        a, b = old.sites.get(key), new.sites.get(key)
        if a is not None and b is not None and a.dump == b.dump:
            continue
        for site in (a, b):
            if site is not None and site.code and site.problem is not None:
                return Proof(False, f"line {site.line}: {site.problem}", beyond=True)
        field = next((s for s in (b, a) if s is not None and s.field), None)
        if field is not None:
            return Proof(
                False,
                f"line {field.line}: {why}: a class field's annotation changed (it defines "
                "the field, not only its hint)",
                beyond=True,
            )
    return Proof(False, why)
