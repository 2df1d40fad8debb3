"""What a new version of a Python module adds or takes away (:func:`code_changes`).

Lines are paired with difflib opcodes (:func:`line_diff`), so an edited line is a
modification, not an added line; checks are paired per scope to find weakened ones.
"""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from ._python_facts import CodeFact, ModuleFacts, _dotted, _signature, module_facts
from ._python_names import _COMMENT_PREFIX

__all__ = ("LineDiff", "code_changes", "iter_python_facts", "line_diff")


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
    # Definitions: a test renamed with its code unchanged (still collected) moved, not gone.
    renames: dict[str, str] = {}
    if before is not None and after is not None and old_facts.error is None:
        renames = _test_renames(before, after, old_facts.definitions, new_facts.definitions)
    moved = {name: _moved(name, renames) for name in old_facts.definitions}
    arrived = {moved[name] for name in old_facts.definitions if moved[name] != name}
    for name, line in old_facts.definitions.items():
        if moved[name] not in new_facts.definitions:
            facts.append(CodeFact("definition_removed", line, name, "removed"))
    for name, line in new_facts.definitions.items():
        if name not in old_facts.definitions and name not in arrived:
            facts.append(CodeFact("definition_added", line, name, _where(line, lines)))
    if before is not None and after is not None:
        facts.extend(_renamed_out(before, after, old_facts.definitions, new_facts.definitions))
    # Assertions: fewer per function, or paired and weaker.
    for scope, old_checks in old_facts.assertions.items():
        new_checks = new_facts.assertions.get(_moved(scope, renames), ())
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


def _is_test_name(qualname: str) -> bool:
    return qualname.rsplit(".", 1)[-1].startswith(("test", "Test"))


def _bodies(tree: ast.Module, wanted: set[str]) -> dict[str, str]:
    """Dumps of the bodies of the definitions named ``wanted`` (qualnames)."""
    found: dict[str, str] = {}
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, scope = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{scope}.{child.name}" if scope else child.name
                if name in wanted and name not in found:
                    found[name] = ast.dump(ast.Module(child.body, []), include_attributes=False)
                stack.append((child, name))
            elif not isinstance(child, ast.expr):
                stack.append((child, scope))
    return found


def _shapes(tree: ast.Module, wanted: set[str]) -> dict[str, str]:
    """Dumps of the definitions named ``wanted`` (qualnames) with their name blanked:
    decorators, arguments and body, so two are equal only when nothing but the name moved."""
    found: dict[str, str] = {}
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, scope = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{scope}.{child.name}" if scope else child.name
                if name in wanted and name not in found:
                    kept = child.name
                    child.name = ""
                    try:
                        found[name] = ast.dump(child, include_attributes=False)
                    finally:
                        child.name = kept
                stack.append((child, name))
            elif not isinstance(child, ast.expr):
                stack.append((child, scope))
    return found


def _test_renames(
    before: str | bytes, after: str | bytes, old: dict[str, int], new: dict[str, int]
) -> dict[str, str]:
    """Old -> new qualname of tests renamed within their scope to another collected test
    name (``test_recieve`` -> ``test_receive``), decorators, arguments and body unchanged.
    Each old and new name pairs at most once; an ambiguous body pairs nothing."""
    removed = [n for n in old if n not in new and _is_test_name(n)]
    added = [n for n in new if n not in old and _is_test_name(n)]
    if not removed or not added:
        return {}
    try:
        old_shapes = _shapes(ast.parse(before), set(removed))
        new_shapes = _shapes(ast.parse(after), set(added))
    except (SyntaxError, ValueError):
        return {}
    by_shape: dict[tuple[str, str], list[str]] = {}
    for name in added:
        if name in new_shapes:
            by_shape.setdefault((name.rpartition(".")[0], new_shapes[name]), []).append(name)
    olds: dict[tuple[str, str], list[str]] = {}
    for name in removed:
        if name in old_shapes:
            olds.setdefault((name.rpartition(".")[0], old_shapes[name]), []).append(name)
    renames: dict[str, str] = {}
    for shape, names in olds.items():
        targets = by_shape.get(shape, [])
        if len(names) == 1 and len(targets) == 1:
            renames[names[0]] = targets[0]
    return renames


def _moved(name: str, renames: dict[str, str]) -> str:
    """``name`` after ``renames`` (a renamed class moves its methods with it)."""
    for old, new in renames.items():
        if name == old:
            return new
        if name.startswith(old + "."):
            return new + name[len(old) :]
    return name


def _renamed_out(
    before: str | bytes, after: str | bytes, old: dict[str, int], new: dict[str, int]
) -> list[CodeFact]:
    """Tests renamed out of pytest's ``test*``/``Test*`` pattern, the body unchanged."""
    removed = [n for n in old if n not in new and _is_test_name(n)]
    added = [n for n in new if n not in old and not _is_test_name(n)]
    if not removed or not added:
        return []
    old_tree, new_tree = ast.parse(before), ast.parse(after)
    old_bodies, new_bodies = _bodies(old_tree, set(removed)), _bodies(new_tree, set(added))
    facts: list[CodeFact] = []
    for name in removed:
        parent = name.rpartition(".")[0]
        for other in added:
            if other.rpartition(".")[0] == parent and new_bodies.get(other) == old_bodies.get(name):
                detail = f"{name} renamed to {other}, which pytest does not collect"
                facts.append(CodeFact("collection", new[other], detail, "modified"))
                break
    return facts


def _text(source: str | bytes | None) -> str:
    if source is None:
        return ""
    if isinstance(source, bytes):
        return source.decode("utf-8", "replace")
    return source


def iter_python_facts(
    pairs: Iterable[tuple[str, bytes | None, bytes | None]],
) -> Iterator[tuple[str, CodeFact]]:
    """``(path, fact)`` for each (path, before, after) triple."""
    for path, before, after in pairs:
        for fact in code_changes(before, after):
            yield path, fact
