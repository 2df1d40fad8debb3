"""Facts about Python source from its AST (:mod:`ast`; nothing is ever executed).

:func:`code_changes` compares two versions of a module and returns :class:`CodeFact`
records for what the new version *adds* or *takes away*: calls that run processes,
evaluate strings, import dynamically, download, deserialise or open sockets (resolved
through imports and aliases: ``from subprocess import run as r``, ``import os as o``,
``__import__("subprocess")``, ``importlib.import_module``, ``getattr(os, "system")``);
tests skipped or deselected whatever the alias (``from pytest import mark as m``,
``pytestmark``, ``collect_ignore``, ``pytest_*`` hooks); assertions removed or weakened;
definitions removed; a module emptied or commented out. Source that does not parse is
the fact ``unparsable``, never harmless; so is a module over 256 KiB or with more than
500 risky calls (:data:`MAX_RISKY_FACTS`: not compared call by call; one fact per kind
found is reported with it). Lines are paired with difflib opcodes, so an
edited line is a modification, not an added line.

:func:`is_tooling_code` names files that tools execute (conftest.py, setup.py,
docs/conf.py, CI workflows, package.json scripts, ...) wherever they live.
"""

from __future__ import annotations

import ast
import difflib
import gc
import io
import re
import tokenize
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from pathlib import PurePosixPath
from typing import Literal, ParamSpec, TypeVar, get_args

__all__ = (
    "CALL_CATEGORIES",
    "FLAGGED_FACTS",
    "MAX_ANALYSED_BYTES",
    "MAX_RISKY_FACTS",
    "CodeFact",
    "FactKind",
    "LineDiff",
    "ModuleFacts",
    "code_changes",
    "code_tokens",
    "docstring_free_dump",
    "is_python_source",
    "is_tooling_code",
    "line_diff",
    "module_facts",
)

FactKind = Literal[
    "unparsable",
    "process",
    "eval",
    "dynamic_import",
    "download",
    "deserialise",
    "socket",
    "native",
    "skip",
    "test_hook",
    "collection",
    "assertion_removed",
    "assertion_weakened",
    "definition_removed",
    "definition_added",
    "emptied",
    "commented_out",
    "unreachable",
]
# Everything but additions of plain definitions is worth a human's look by default.
FLAGGED_FACTS: tuple[FactKind, ...] = tuple(
    kind for kind in get_args(FactKind) if kind != "definition_added"
)

_PROCESS = {
    "subprocess": {
        "run",
        "call",
        "check_call",
        "check_output",
        "Popen",
        "getoutput",
        "getstatusoutput",
    },
    "os": {
        "system",
        "popen",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "spawnl",
        "spawnle",
        "spawnlp",
        "spawnlpe",
        "spawnv",
        "spawnve",
        "spawnvp",
        "spawnvpe",
        "posix_spawn",
        "posix_spawnp",
        "startfile",
        "fork",
        "forkpty",
    },
    "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "commands": {"getoutput", "getstatusoutput"},
    "platform": {"popen"},
    "posix": {"system", "popen", "execv", "execve", "posix_spawn", "fork"},
    "nt": {"system", "popen", "execv", "execve", "startfile"},
}
_EVAL = {
    "builtins": {"eval", "exec", "compile", "execfile"},
    "code": {"interact", "InteractiveInterpreter", "InteractiveConsole"},
    "runpy": {"run_path", "run_module"},
}
_DYNAMIC = {
    "builtins": {"__import__"},
    "importlib": {"import_module", "__import__", "reload"},
    "importlib.util": {"spec_from_file_location", "module_from_spec"},
    "imp": {"load_source", "load_module"},
}
_DOWNLOAD = {
    "urllib.request": {
        "urlretrieve",
        "urlopen",
        "Request",
        "build_opener",
        "URLopener",
        "FancyURLopener",
    },
    "urllib": {"urlretrieve", "urlopen"},
    "urllib2": {"urlopen", "Request"},
    "requests": {"get", "post", "put", "patch", "delete", "head", "request", "Session", "session"},
    "httpx": {
        "get",
        "post",
        "put",
        "patch",
        "delete",
        "head",
        "request",
        "stream",
        "Client",
        "AsyncClient",
    },
    "http.client": {"HTTPConnection", "HTTPSConnection"},
    "aiohttp": {"ClientSession", "request"},
    "urllib3": {"PoolManager", "request", "HTTPConnectionPool", "HTTPSConnectionPool"},
    "ftplib": {"FTP", "FTP_TLS"},
    "wget": {"download"},
    "pycurl": {"Curl"},
    "smtplib": {"SMTP", "SMTP_SSL"},
    "telnetlib": {"Telnet"},
    "paramiko": {"SSHClient", "Transport"},
    "xmlrpc.client": {"ServerProxy"},
}
_DESERIALISE = {
    "pickle": {"load", "loads", "Unpickler"},
    "_pickle": {"load", "loads", "Unpickler"},
    "cPickle": {"load", "loads", "Unpickler"},
    "dill": {"load", "loads"},
    "cloudpickle": {"load", "loads"},
    "marshal": {"load", "loads"},
    "shelve": {"open"},
    "yaml": {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"},
    "jsonpickle": {"decode"},
    "joblib": {"load"},
    "torch": {"load"},
    "pandas": {"read_pickle"},
}
_SOCKET = {
    "socket": {"socket", "create_connection", "create_server", "socketpair", "fromfd"},
    "ssl": {"wrap_socket"},
    "asyncio": {"open_connection", "start_server"},
}
_NATIVE = {
    "ctypes": {"CDLL", "PyDLL", "WinDLL", "OleDLL", "cdll.LoadLibrary", "windll.LoadLibrary"},
    "cffi": {"FFI"},
}

CALL_CATEGORIES: dict[FactKind, dict[str, set[str]]] = {
    "process": _PROCESS,
    "eval": _EVAL,
    "dynamic_import": _DYNAMIC,
    "download": _DOWNLOAD,
    "deserialise": _DESERIALISE,
    "socket": _SOCKET,
    "native": _NATIVE,
}
_CATEGORY_OF: dict[str, FactKind] = {
    f"{module}.{attr}": kind
    for kind, table in CALL_CATEGORIES.items()
    for module, attrs in table.items()
    for attr in attrs
}
_SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}
_BUILTINS = {"eval", "exec", "compile", "__import__", "getattr", "execfile", "open"}
_SKIPS = {
    "pytest.mark.skip",
    "pytest.mark.skipif",
    "pytest.mark.xfail",
    "pytest.skip",
    "pytest.xfail",
    "pytest.importorskip",
    "pytest.skip.Exception",
    "unittest.skip",
    "unittest.skipIf",
    "unittest.skipUnless",
    "unittest.expectedFailure",
    "unittest.SkipTest",
    "unittest.case.skip",
    "unittest.case.skipIf",
    "unittest.case.skipUnless",
    "unittest.case.SkipTest",
    "_pytest.outcomes.skip",
    "nose.SkipTest",
    "nose.tools.nottest",
}
_CHECK_CALLS = {"fail", "raises", "warns", "approx"}
_COLLECTION_NAMES = {"collect_ignore", "collect_ignore_glob", "__test__"}
_TOOLING_NAMES = {
    "conftest.py",
    "setup.py",
    "noxfile.py",
    "tasks.py",
    "fabfile.py",
    "dodo.py",
    "sitecustomize.py",
    "usercustomize.py",
    "hatch_build.py",
    "manage.py",
    "package.json",
    "makefile",
    "gnumakefile",
    "tox.ini",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    "justfile",
    "dockerfile",
}
_COMMENT_PREFIX = re.compile(r"^\s*#\s?")


def is_tooling_code(path: str) -> bool:
    """True for files that build, test or CI tools execute, wherever they live.

    ``conftest.py``, ``setup.py``, ``noxfile.py``, ``tasks.py``, ``sitecustomize.py``,
    ``*.pth`` (run at interpreter start), ``docs/conf.py`` (Sphinx), CI workflows and
    actions, ``package.json`` (npm scripts), Makefiles, ``tox.ini``, pre-commit configs.
    """
    parts = PurePosixPath(path.lower()).parts
    if not parts:
        return False
    name = parts[-1]
    if name in _TOOLING_NAMES or name.endswith(".pth"):
        return True
    if name == "conf.py" and any(
        p in ("doc", "docs", "documentation", "sphinx") for p in parts[:-1]
    ):
        return True
    if len(parts) >= 3 and parts[0] == ".github" and parts[1] in ("workflows", "actions"):
        return True
    return parts[0] in (".circleci", ".gitlab-ci.yml", ".buildkite") or name == ".gitlab-ci.yml"


def is_python_source(path: str, data: bytes | None = None) -> bool:
    """``*.py``/``*.pyw``/``*.pyi``/``*.pth`` files, or a script whose shebang names python."""
    if path.lower().endswith((".py", ".pyw", ".pyi", ".pth")):
        return True
    if data is None:
        return False
    first = data[:200].split(b"\n", 1)[0]
    return first.startswith(b"#!") and b"python" in first


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
_Check = tuple[str, ast.AST, int]


@dataclass(slots=True)
class _Index:
    """One traversal of a module: nodes to learn aliases from and to look at, scopes."""

    learn: list[ast.AST] = field(default_factory=list)
    look: list[ast.AST] = field(default_factory=list)
    definitions: dict[str, int] = field(default_factory=dict)
    checks: dict[str, list[tuple[int, int, _Check]]] = field(default_factory=dict)


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


def _parse(source: str | bytes) -> ast.Module | CodeFact:
    size = len(source.encode("utf-8", "replace") if isinstance(source, str) else source)
    if size > MAX_ANALYSED_BYTES:
        return CodeFact(
            "unparsable", None, f"too large to analyse ({size} bytes > {MAX_ANALYSED_BYTES})"
        )
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


@lru_cache(maxsize=256)
def module_facts(source: str | bytes) -> ModuleFacts:
    """Definitions, risky calls, skips/hooks and assertions of one module version.

    A module nested too deeply to analyse is reported like one that does not parse.
    """
    try:
        with _gc_paused():
            return _module_facts(source)
    except (RecursionError, MemoryError) as error:
        return ModuleFacts(
            CodeFact("unparsable", None, f"too deeply nested ({type(error).__name__})")
        )


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


# -- line pairing --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LineDiff:
    """Lines of the new version that are new, and pairs (old, new) that were edited."""

    added: frozenset[int]
    modified: dict[int, int]  # new line -> old line
    removed: frozenset[int]  # old lines with no counterpart


_PAIRING_LIMIT = 4_000_000  # lines x lines beyond which edits are paired by position


def line_diff(before: str, after: str) -> LineDiff:
    """Pair lines with difflib opcodes: a ``replace`` block pairs lines one to one.

    Common leading and trailing lines are matched first (linear); the middle goes to
    :class:`difflib.SequenceMatcher`, unless it is so large that pairing by position is
    used instead (bounded time on adversarial input).
    """
    old, new = before.splitlines(), after.splitlines()
    head = 0
    limit = min(len(old), len(new))
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    old_mid, new_mid = old[head : len(old) - tail], new[head : len(new) - tail]
    opcodes: Sequence[tuple[str, int, int, int, int]]
    if len(old_mid) * len(new_mid) > _PAIRING_LIMIT:
        opcodes = [("replace", 0, len(old_mid), 0, len(new_mid))]
    else:
        opcodes = difflib.SequenceMatcher(None, old_mid, new_mid).get_opcodes()
    added: set[int] = set()
    removed: set[int] = set()
    modified: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in opcodes:
        i1, i2, j1, j2 = i1 + head, i2 + head, j1 + head, j2 + head
        if tag == "insert":
            added.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            removed.update(range(i1 + 1, i2 + 1))
        elif tag == "replace":
            pairs = min(i2 - i1, j2 - j1)
            for k in range(pairs):
                if old[i1 + k] != new[j1 + k]:  # positional pairs may be equal lines
                    modified[j1 + k + 1] = i1 + k + 1
            added.update(range(j1 + pairs + 1, j2 + 1))
            removed.update(range(i1 + pairs + 1, i2 + 1))
    return LineDiff(frozenset(added), modified, frozenset(removed))


# -- comparing versions --------------------------------------------------------------

_LOOSER_OPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Eq: (ast.NotEq, ast.IsNot, ast.In, ast.NotIn, ast.Lt, ast.LtE, ast.Gt, ast.GtE),
    ast.Is: (ast.IsNot, ast.NotEq, ast.Eq),
    ast.Lt: (ast.LtE, ast.NotEq),
    ast.Gt: (ast.GtE, ast.NotEq),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
    ast.LtE: (ast.NotEq,),
    ast.GtE: (ast.NotEq,),
}


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    return None


def _truthy_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and bool(node.value)


def _weakened(old: ast.AST, new: ast.AST) -> str | None:
    """Why the check ``new`` is weaker than ``old`` (None: not provably weaker)."""
    if _truthy_constant(new) and not _truthy_constant(old):
        return "replaced by a constant that always holds"
    if (
        isinstance(old, ast.Compare)
        and not isinstance(new, ast.Compare)
        and _signature(new) == _signature(old.left)
    ):
        return "a comparison reduced to a truth test"
    if (
        isinstance(old, ast.Compare)
        and isinstance(new, ast.Compare)
        and len(old.ops) == len(new.ops) == 1
        and _signature(old.left) == _signature(new.left)
    ):
        old_op, new_op = type(old.ops[0]), type(new.ops[0])
        if old_op is not new_op and new_op in _LOOSER_OPS.get(old_op, ()):
            return "a comparison loosened"
        a, b = _number(old.comparators[0]), _number(new.comparators[0])
        up = old_op in (ast.Lt, ast.LtE) and a is not None and b is not None and b > a
        down = old_op in (ast.Gt, ast.GtE) and a is not None and b is not None and b < a
        if old_op is new_op and (up or down):
            return "a bound loosened"
    if (
        isinstance(old, ast.Call)
        and isinstance(new, ast.Call)
        and _dotted(old.func) == _dotted(new.func)
    ):
        for name in ("rel", "abs", "atol", "rtol", "delta", "places"):
            a_kw = next((k.value for k in old.keywords if k.arg == name), None)
            b_kw = next((k.value for k in new.keywords if k.arg == name), None)
            if a_kw is not None and b_kw is not None:
                a, b = _number(a_kw), _number(b_kw)
                if (
                    a is not None
                    and b is not None
                    and ((name == "places" and b < a) or (name != "places" and b > a))
                ):
                    return f"the tolerance {name} widened"
    for sub_old, sub_new in zip(ast.walk(old), ast.walk(new), strict=False):
        if isinstance(sub_old, ast.Call) and isinstance(sub_new, ast.Call) and sub_old is not old:
            reason = (
                _weakened(sub_old, sub_new)
                if _dotted(sub_old.func) == _dotted(sub_new.func)
                else None
            )
            if reason:
                return reason
    return None


def _where(line: int | None, lines: LineDiff) -> Literal["added", "modified", "module"]:
    if line is None:
        return "module"
    if line in lines.added:
        return "added"
    return "modified" if line in lines.modified else "module"


def _commented_out(before: str, after: str, lines: LineDiff) -> int:
    """How many removed code lines reappear as comments in the new version."""
    old, new = before.splitlines(), after.splitlines()
    removed_code = Counter(
        old[i - 1].strip()
        for i in (*lines.removed, *lines.modified.values())
        if old[i - 1].strip() and not old[i - 1].lstrip().startswith("#")
    )
    count = 0
    for j in (*lines.added, *lines.modified):
        text = new[j - 1]
        if text.lstrip().startswith("#"):
            code = _COMMENT_PREFIX.sub("", text).strip()
            if removed_code[code] > 0:
                removed_code[code] -= 1
                count += 1
    return count


def code_changes(before: str | bytes | None, after: str | bytes | None) -> tuple[CodeFact, ...]:
    """What the new version of a module adds or takes away (see the module docs).

    ``before`` None: a new module (everything in it is added); ``after`` None: deleted.
    """
    try:
        return _code_changes(before, after)
    except (RecursionError, MemoryError) as error:
        return (CodeFact("unparsable", None, f"too deeply nested ({type(error).__name__})"),)


def _code_changes(before: str | bytes | None, after: str | bytes | None) -> tuple[CodeFact, ...]:
    old_text = _text(before)
    new_text = _text(after)
    lines = line_diff(old_text, new_text)
    facts: list[CodeFact] = []
    new_facts = module_facts(after) if after is not None else ModuleFacts()
    old_facts = module_facts(before) if before is not None else ModuleFacts()
    if new_facts.error is not None:
        error = new_facts.error
        facts.append(CodeFact("unparsable", error.line, error.detail, _where(error.line, lines)))
        # Too many risky calls to compare: still name each kind found (a rule that flags
        # only some kinds must see them), once, at its first line.
        counts = Counter(kind for kind, _, _, _ in new_facts.risky)
        for kind, _, _, line in new_facts.risky:
            if counts[kind]:
                facts.append(
                    CodeFact(kind, line, f"{counts[kind]} found, not compared", _where(line, lines))
                )
                counts[kind] = 0
        return tuple(facts)
    if old_facts.error is not None and after is not None:
        facts.append(
            CodeFact(
                "unparsable",
                old_facts.error.line,
                "the previous version could not be analysed "
                f"({old_facts.error.detail}); nothing could be compared",
            )
        )
    # New risky calls, skips and hooks: those beyond the old version's count.
    seen = Counter(
        (kind, detail, sig) for kind, detail, sig, _ in (() if old_facts.error else old_facts.risky)
    )
    for kind, detail, sig, line in new_facts.risky:
        if seen[(kind, detail, sig)] > 0:
            seen[(kind, detail, sig)] -= 1
            continue
        facts.append(CodeFact(kind, line, detail, _where(line, lines)))
    # Definitions.
    for name, line in old_facts.definitions.items():
        if name not in new_facts.definitions:
            facts.append(CodeFact("definition_removed", line, name, "removed"))
    for name, line in new_facts.definitions.items():
        if name not in old_facts.definitions:
            facts.append(CodeFact("definition_added", line, name, _where(line, lines)))
    # Assertions: fewer per function, or paired and weaker.
    for scope, old_checks in old_facts.assertions.items():
        new_checks = new_facts.assertions.get(scope, ())
        if len(new_checks) < len(old_checks):
            line = new_facts.definitions.get(scope) or old_checks[0][2]
            facts.append(
                CodeFact(
                    "assertion_removed",
                    line,
                    f"{scope}: {len(old_checks)} -> {len(new_checks)} checks",
                    "removed",
                )
            )
        old_sigs = [_signature(c[1]) for c in old_checks]
        new_sigs = [_signature(c[1]) for c in new_checks]
        if len(old_sigs) * len(new_sigs) > _PAIRING_LIMIT:
            continue  # counted above; too many to pair within budget
        matcher = difflib.SequenceMatcher(None, old_sigs, new_sigs)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "replace":
                continue
            for k in range(min(i2 - i1, j2 - j1)):
                why = _weakened(old_checks[i1 + k][1], new_checks[j1 + k][1])
                if why:
                    line = new_checks[j1 + k][2]
                    facts.append(
                        CodeFact("assertion_weakened", line, f"{scope}: {why}", _where(line, lines))
                    )
    if after is not None and before is not None:
        if new_facts.statements == 0 and old_facts.statements > 0:
            facts.append(CodeFact("emptied", 1, f"{old_facts.statements} statements -> none"))
        commented = _commented_out(old_text, new_text, lines)
        if commented >= 2:
            facts.append(
                CodeFact("commented_out", None, f"{commented} code lines turned into comments")
            )
    return tuple(facts)


def _text(source: str | bytes | None) -> str:
    if source is None:
        return ""
    if isinstance(source, bytes):
        return source.decode("utf-8", "replace")
    return source


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                body = body[1:]
            node.body = body or [ast.Pass()]
    return tree


def _docstring_spans(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and first.end_lineno is not None
                and first.end_col_offset is not None
            ):
                spans.append(
                    ((first.lineno, first.col_offset), (first.end_lineno, first.end_col_offset))
                )
    return spans


_LAYOUT_TOKENS = frozenset(
    (
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    )
)


@_without_gc
def code_tokens(source: str | bytes) -> tuple[tuple[int, str], ...] | None:
    """The module's code tokens as written, without comments, docstrings or layout.

    Two versions with the same code tokens differ only in comments, docstrings,
    blank lines and spacing: a quote-style or spelling sweep through the code itself
    changes the tokens even where the AST stays the same. None: unparsable.
    """
    tree = _parse(source)
    if isinstance(tree, CodeFact):
        return None
    spans = _docstring_spans(tree)
    data = source if isinstance(source, bytes) else source.encode("utf-8")
    out: list[tuple[int, str]] = []
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type in _LAYOUT_TOKENS:
                continue
            if token.type == tokenize.STRING and any(a <= token.start < b for a, b in spans):
                continue
            out.append((token.type, token.string))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return tuple(out)


@_without_gc
def docstring_free_dump(source: str | bytes) -> str | None:
    """The module's AST without docstrings, positions or comments (None: unparsable).

    Parsing bytes honours a ``coding:`` cookie, so a changed cookie that changes what
    the code means changes the dump too.
    """
    tree = _parse(source)
    if isinstance(tree, CodeFact):
        return None
    try:
        return ast.dump(_strip_docstrings(tree), include_attributes=False)
    except (RecursionError, MemoryError):
        return None


def iter_python_facts(
    pairs: Iterable[tuple[str, bytes | None, bytes | None]],
) -> Iterator[tuple[str, CodeFact]]:
    """``(path, fact)`` for each (path, before, after) triple."""
    for path, before, after in pairs:
        for fact in code_changes(before, after):
            yield path, fact


def benchmark_text(text: str) -> object:
    """What a decision does with ``text`` as a new module (benchmarks/analysis.py)."""
    module_facts.cache_clear()
    return code_changes(None, text)
