"""Is a Python edit exactly "a hard-coded secret replaced by an environment lookup"?

Both versions are parsed (``ast``) and normalised: every string literal the shared secret
detector flags in the old source, every placeholder literal (``""``, ``"changeme"``,
``"<your-key>"``, ...), every use of a name the new version reads from the environment
instead (``STRIPE_KEY``) and every environment lookup (``os.environ[...]``,
``os.environ.get(..., placeholder)``, ``os.getenv(..., placeholder)``, ``lookup or ""``, a
call to an added helper that only reads the environment) becomes one stand-in, and
``import os`` / ``from os import ...`` go. The edit is proven when the normalised modules
are statement for statement equal, except for old statements that assigned or imported
the secret (removed) and added helpers whose body only reads the environment, compares,
raises with a message naming the variable (never its value) and returns. Comments are
invisible to ``ast``: the read rule and ``no_secrets`` judge what they hold.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable

from ._config import ConfigSyntaxError, flatten, parse_config, typed_equal
from ._secret_values import _key_kind, is_placeholder
from ._secrets import find_secrets

__all__ = ("config_reference_problem", "secret_removal_problem")

_ABSENT = object()

_STAND_IN = "vsh-ai:environment-or-placeholder"
_ERRORS = frozenset(
    ("RuntimeError", "KeyError", "ValueError", "LookupError", "EnvironmentError", "OSError")
)


def secret_removal_problem(before: str, after: str, secrets: list[str] | None = None) -> str | None:
    """None when ``after`` is ``before`` with secrets replaced by environment lookups or
    placeholders (see the module docs); else why not, in a sentence fragment.

    ``secrets``: the secret texts to look for (those on the lines the change removed, say);
    by default every secret the detector finds in ``before``.
    """
    try:
        old, new = ast.parse(before), ast.parse(after)
    except (SyntaxError, ValueError, RecursionError):
        return "it is not valid Python on both sides"
    spans = _secret_spans(before) if secrets is None else _occurrences(before, secrets)
    looked_up = _looked_up(new)
    if not spans and not any(
        (isinstance(n, ast.Name) and n.id in looked_up) or _has_fallback(n) for n in ast.walk(old)
    ):
        return "the old version holds no hard-coded secret it replaces"
    try:
        helpers = {f.name for f in new.body if isinstance(f, ast.FunctionDef) and _env_only(f)}
        moved = _moved(old, new)
        normalise_old = _Normalise(before, spans, set(), looked_up, moved)
        normalise_old.kept = frozenset(_dump(n) for n in ast.walk(new) if _has_fallback(n))
        old_body = [_dump(normalise_old.visit(s)) for s in _kept(old.body)]
        new_body = [
            _dump(_Normalise(None, [], helpers, looked_up, moved).visit(s)) for s in _kept(new.body)
        ]
    except RecursionError:
        return "it is nested too deeply to compare"
    old_statements, new_statements = _kept(old.body), _kept(new.body)
    matcher = difflib.SequenceMatcher(a=old_body, b=new_body, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for statement, dumped in zip(old_statements[i1:i2], old_body[i1:i2], strict=True):
            if not _removable(statement, dumped, looked_up):
                return f"it changes line {statement.lineno} beyond replacing a secret"
        for statement in new_statements[j1:j2]:
            if not (isinstance(statement, ast.FunctionDef) and statement.name in helpers):
                return (
                    f"line {statement.lineno} of the new version is not an environment lookup "
                    "in place of a secret"
                )
    return None


def _kept(body: Iterable[ast.stmt]) -> list[ast.stmt]:
    """Module statements without ``import os`` / ``from os import ...``."""
    out: list[ast.stmt] = []
    for statement in body:
        if isinstance(statement, ast.Import) and all(a.name == "os" for a in statement.names):
            continue
        if isinstance(statement, ast.ImportFrom) and statement.module == "os":
            continue
        out.append(statement)
    return out


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False)


def _secret_spans(text: str) -> list[tuple[int, int]]:
    return [(f.start, f.end) for f in find_secrets(text)]


def _occurrences(text: str, secrets: list[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for secret in dict.fromkeys(s for s in secrets if s):
        start = text.find(secret)
        while start >= 0:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
    return spans


def _looked_up(module: ast.Module) -> set[str]:
    """Names of the environment variables the module reads (string keys)."""
    out: set[str] = set()
    for node in ast.walk(module):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript) and _environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Call) and _lookup_call(node):
            key = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            key = node.args[0]  # a helper's argument: counted only if the helper is env-only
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.add(key.value)
    return out


def _secret_name(name: str) -> bool:
    return _key_kind(name) is not None


def _removable(statement: ast.stmt, dumped: str, looked_up: set[str]) -> bool:
    """An old statement that only assigned a secret or imported names now looked up."""
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return _STAND_IN in dumped and all(
            isinstance(t, ast.Name) and (_secret_name(t.id) or t.id in looked_up) for t in targets
        )
    if isinstance(statement, ast.ImportFrom):
        return all((a.asname or a.name) in looked_up for a in statement.names)
    return False


class _Normalise(ast.NodeTransformer):
    """Secrets, placeholders, environment lookups and the names they replace -> a stand-in."""

    def __init__(
        self,
        text: str | None,
        spans: list[tuple[int, int]],
        helpers: set[str],
        looked_up: set[str],
        moved: frozenset[str] = frozenset(),
    ) -> None:
        self._offsets = _line_offsets(text) if text is not None else []
        # The old version: a hard-coded fallback of a secret-named lookup counts as the
        # secret (it is one, whether the detector flags it or not); never in the new one.
        self._old = text is not None
        self.kept: frozenset[str] = frozenset()  # fallbacks the new version still has
        self._spans = spans
        self._helpers = helpers
        self._looked_up = looked_up
        self._moved = moved

    def visit_Assign(self, node: ast.Assign) -> ast.stmt:
        target = _single_name(node)
        if target is not None and target in self._moved:
            return ast.copy_location(
                ast.Assign([node.targets[0]], self._stand_in(node.value)), node
            )
        return self.generic_visit(node)  # type: ignore[return-value]

    def _stand_in(self, node: ast.expr) -> ast.expr:
        return ast.copy_location(ast.Constant(_STAND_IN), node)

    def visit_Constant(self, node: ast.Constant) -> ast.expr:
        if isinstance(node.value, str) and (is_placeholder(node.value) or self._secret(node)):
            return self._stand_in(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self._looked_up:
            return self._stand_in(node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        if _environ(node.value) and _env_key(node.slice):
            return self._stand_in(node)
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if self._old and _fallback_lookup(node) and _dump(node) not in self.kept:
            return self._stand_in(node)  # the old version's hard-coded fallback: removed
        if _lookup_call(node) or (
            isinstance(node.func, ast.Name)
            and node.func.id in self._helpers
            and not node.keywords
            and all(_env_key(a) for a in node.args)
        ):
            return self._stand_in(node)
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        if self._old and _has_fallback(node) and _dump(node) not in self.kept:
            return self._stand_in(node)  # `getenv("SECRET_KEY") or "dev-key"` in the old version
        visited = self.generic_visit(node)
        if (
            isinstance(visited, ast.BoolOp)
            and isinstance(visited.op, ast.Or)
            and all(isinstance(v, ast.Constant) and v.value == _STAND_IN for v in visited.values)
        ):
            return self._stand_in(node)  # lookup or "" (or a placeholder)
        return visited  # type: ignore[return-value]

    def _secret(self, node: ast.Constant) -> bool:
        if not self._spans or node.end_lineno is None or node.end_col_offset is None:
            return False
        start = self._offsets[node.lineno - 1] + node.col_offset
        end = self._offsets[node.end_lineno - 1] + node.end_col_offset
        return any(s < end and start < e for s, e in self._spans)


_CONVERSIONS = frozenset(("int", "float", "str", "bool"))


def _single_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return target.id
    return None


def _moved(old: ast.Module, new: ast.Module) -> frozenset[str]:
    """Module constants now read from the environment under their own name.

    ``NAME = <literal>`` became ``NAME = os.environ.get("NAME", d)`` (or ``[...]``,
    ``os.getenv``, wrapped in ``int``/``float``/``str``/``bool``) where ``d`` is a
    placeholder or, for a name and value that are not secrets, the old value itself
    (``TOKEN_CACHE_SIZE = int(os.getenv("TOKEN_CACHE_SIZE", "512"))``): nothing new is
    written, and a secret's value never survives as a default.
    """
    constants: dict[str, ast.Constant] = {}
    for statement in old.body:
        name = _single_name(statement)
        if (
            name is not None
            and isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Constant)
        ):
            constants[name] = statement.value
    out: set[str] = set()
    for statement in new.body:
        name = _single_name(statement)
        if name is None or name not in constants or not isinstance(statement, ast.Assign):
            continue
        if _env_value(statement.value, name, constants[name]):
            out.add(name)
    return frozenset(out)


def _env_value(node: ast.expr, name: str, old: ast.Constant) -> bool:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _CONVERSIONS
        and len(node.args) == 1
        and not node.keywords
    ):
        node = node.args[0]
    key: ast.expr | None = None
    default: ast.expr | None = None
    if isinstance(node, ast.Subscript) and _environ(node.value):
        key = node.slice
    elif isinstance(node, ast.Call) and not node.keywords and 1 <= len(node.args) <= 2:
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "get" and _environ(func.value)) or (
            isinstance(func, ast.Attribute)
            and func.attr == "getenv"
            and isinstance(func.value, ast.Name)
            and func.value.id == "os"
        ):
            key = node.args[0]
            default = node.args[1] if len(node.args) == 2 else None
    if not (isinstance(key, ast.Constant) and key.value == name):
        return False
    value = old.value
    if default is None or _placeholder_default(default):
        # the value left the code: only a secret's removal is this allowance's business
        return _secret_name(name) or (isinstance(value, str) and _secret_value(name, value))
    if not isinstance(default, ast.Constant) or _secret_name(name):
        return False
    same = default.value == value or (
        isinstance(default.value, str)
        and not isinstance(value, str)
        and default.value == str(value)
    )
    return same and not find_secrets(str(value))


_CREDENTIAL_URL = re.compile(r"^[A-Za-z][\w+.\-]*://[^/@\s]+@")


def _secret_value(name: str, value: str) -> bool:
    """A literal holding a credential the detector may not flag: a URL with user info
    (a Sentry DSN embeds its key so) or one the detector flags."""
    return bool(_CREDENTIAL_URL.match(value) or find_secrets(f"{name} = {value!r}"))


def _line_offsets(text: str) -> list[int]:
    """Character offset of each line's start (ast columns are UTF-8 bytes: ASCII-safe;
    a non-ASCII line shifts, which can only fail to match, never match wrongly)."""
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def _environ(node: ast.expr) -> bool:
    """``os.environ`` or ``environ``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _env_key(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(
        node, ast.Name
    )


def _placeholder_default(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and (
        node.value is None or (isinstance(node.value, str) and is_placeholder(node.value))
    )


def _lookup_call(node: ast.Call) -> bool:
    """``os.environ.get(k[, d])``, ``os.getenv(k[, d])``, ``getenv``; ``d`` a placeholder."""
    func = node.func
    environ_get = isinstance(func, ast.Attribute) and func.attr == "get" and _environ(func.value)
    getenv = (
        isinstance(func, ast.Attribute)
        and func.attr == "getenv"
        and isinstance(func.value, ast.Name)
        and func.value.id == "os"
    ) or (isinstance(func, ast.Name) and func.id == "getenv")
    if not (environ_get or getenv) or node.keywords or not 1 <= len(node.args) <= 2:
        return False
    return _env_key(node.args[0]) and all(_placeholder_default(a) for a in node.args[1:])


def _secret_lookup_key(node: ast.expr) -> bool:
    """Whether ``node`` reads a secret-named variable (``SECRET_KEY``) from the environment."""
    key: ast.expr | None = None
    if isinstance(node, ast.Subscript) and _environ(node.value):
        key = node.slice
    elif isinstance(node, ast.Call) and _lookup_call(node):
        key = node.args[0]
    return isinstance(key, ast.Constant) and isinstance(key.value, str) and _secret_name(key.value)


def _has_fallback(node: ast.AST) -> bool:
    """A secret-named lookup with a hard-coded default, in either spelling."""
    if isinstance(node, ast.Call):
        return _fallback_lookup(node)
    return (
        isinstance(node, ast.BoolOp)
        and isinstance(node.op, ast.Or)
        and isinstance(node.values[0], ast.Call | ast.Subscript)
        and _secret_lookup_key(node.values[0])
        and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values[1:])
    )


def _fallback_lookup(node: ast.Call) -> bool:
    """``os.getenv("SECRET_KEY", "literal")`` / ``os.environ.get(...)``: a secret-named
    lookup with a hard-coded string default."""
    if len(node.args) != 2 or node.keywords:
        return False
    default = node.args[1]
    if not (isinstance(default, ast.Constant) and isinstance(default.value, str)):
        return False
    bare = ast.Call(node.func, node.args[:1], [])
    return _lookup_call(bare) and _secret_lookup_key(bare)


def _env_only(function: ast.FunctionDef) -> bool:
    """A helper that reads the environment, compares, raises naming only its parameters,
    and returns: it cannot print, send or store anything."""
    if function.decorator_list or function.args.vararg or function.args.kwarg:
        return False
    parameters = {a.arg for a in (*function.args.posonlyargs, *function.args.args)}
    if function.args.kwonlyargs or function.args.defaults or function.returns is not None:
        return False
    bound = set(parameters)
    body = list(function.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring
    return bool(body) and _plain_statements(body, parameters, bound)


def _plain_statements(body: list[ast.stmt], parameters: set[str], bound: set[str]) -> bool:
    for statement in body:
        if isinstance(statement, ast.Assign):
            if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
                return False
            if not _plain_value(statement.value, bound):
                return False
            bound.add(statement.targets[0].id)
        elif isinstance(statement, ast.If):
            if not _plain_test(statement.test, bound):
                return False
            if not _plain_statements(statement.body, parameters, bound):
                return False
            if not _plain_statements(statement.orelse, parameters, bound):
                return False
        elif isinstance(statement, ast.Raise):
            if statement.cause is not None or not _plain_error(statement.exc, parameters):
                return False
        elif isinstance(statement, ast.Return):
            if statement.value is not None and not _plain_value(statement.value, bound):
                return False
        else:
            return False
    return True


def _plain_value(node: ast.expr, bound: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in bound
    if isinstance(node, ast.Subscript):
        return _environ(node.value) and _env_key(node.slice)
    if isinstance(node, ast.Call):
        return _lookup_call(node)
    return isinstance(node, ast.Constant) and _placeholder_default(node)


def _plain_test(node: ast.expr, bound: set[str]) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _plain_test(node.operand, bound)
    if isinstance(node, ast.Compare):
        return all(_plain_test(n, bound) for n in (node.left, *node.comparators))
    if isinstance(node, ast.BoolOp):
        return all(_plain_test(n, bound) for n in node.values)
    if isinstance(node, ast.Name):
        return node.id in bound
    return isinstance(node, ast.Constant)


def _plain_error(node: ast.expr | None, parameters: set[str]) -> bool:
    """``RuntimeError("...")`` or ``KeyError(f"{name} is not set")``: parameters only."""
    if node is None or not isinstance(node, ast.Call) or node.keywords:
        return False
    if not isinstance(node.func, ast.Name) or node.func.id not in _ERRORS:
        return False
    for arg in node.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            continue
        if isinstance(arg, ast.Name) and arg.id in parameters:
            continue
        if isinstance(arg, ast.JoinedStr) and all(
            isinstance(v, ast.Constant)
            or (
                isinstance(v, ast.FormattedValue)
                and isinstance(v.value, ast.Name)
                and v.value.id in parameters
                and v.format_spec is None
            )
            for v in arg.values
        ):
            continue
        return False
    return True


def config_reference_problem(path: str, before: bytes, after: bytes) -> str | None:
    """None when the config file ``after`` is ``before`` with each secret value replaced
    by a reference or placeholder (``${STRIPE_KEY}``, ``<set-me>``, ``""``) or its key
    removed, and nothing else changed; else why not, in a sentence fragment."""
    try:
        old = flatten(parse_config(before, "auto", path))
        new = flatten(parse_config(after, "auto", path))
    except (ConfigSyntaxError, ValueError, RecursionError):
        return "it does not parse as the same config format on both sides"
    text = before.decode("utf-8", "replace")
    secrets = [text[f.start : f.end] for f in find_secrets(text)]
    if not secrets:
        return "the old version holds no hard-coded secret"
    replaced = 0
    for key in dict.fromkeys([*old, *new]):
        was, now = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if was is not _ABSENT and now is not _ABSENT and typed_equal(was, now):
            continue
        if not (isinstance(was, str) and any(s in was for s in secrets)):
            return f"{key} changes, and it held no secret"
        if now is not _ABSENT and not (isinstance(now, str) and is_placeholder(now)):
            return f"{key} gets a value that is not a reference or placeholder"
        replaced += 1
    return None if replaced else "no secret value is replaced"
