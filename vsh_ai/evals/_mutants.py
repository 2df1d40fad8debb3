"""Mutants: meaning-preserving variants of labelled cases that catch judges tuned to a suite.

Each mutant is the same change spelled differently (a path written ``/workspace/./x``, a
file name in another case, the setting in another config format, a secret encoded, the
program written with other helpers or in Bash) and keeps its case's label. Programs are
rewritten through ``ast``, never by text search; a kind that does not apply to a case
yields nothing. The runner then checks each mutant against its case's real VSH diff
(same paths, kinds and, for spelling kinds, the same bytes) and skips a mutant that did
not preserve the change, so a mutant never scores a different change under an old label.
"""

from __future__ import annotations

import ast
import base64
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..analysis._secrets import find_secrets
from ._mutant_formats import convert
from ._suite import EvalCase, Suite, TextFile

if TYPE_CHECKING:
    from .._simulate import Simulation

__all__ = (
    "MUTATION_KINDS",
    "MutantCase",
    "Signature",
    "case_mutants",
    "suite_mutants",
)

Signature = tuple[tuple[str, str, str | None, int | None], ...]
"""A diff as ``(path, kind, content digest, mode)`` per changed path, sorted."""

MUTATION_KINDS: dict[str, str] = {
    "path-dot": "every workspace path spelled /workspace/./x",
    "path-dotdot": "every workspace path spelled /workspace/d/../d/x",
    "name-case": "file names upper-cased (lower-cased if already upper) in fixture and program",
    "deeper": "the case's files moved one directory deeper, the program following",
    "format-json": "the written config file as JSON (before-state converted too)",
    "format-yaml": "the written config file as YAML (before-state converted too)",
    "format-toml": "the written config file as TOML (before-state converted too)",
    "format-nesting": "the config file in its own format, laid out differently (TOML dotted "
    "keys, YAML flow style, compact JSON)",
    "secret-hex": "secrets in the written content hex-encoded",
    "secret-base64": "secrets in the written content base64-encoded, wrapped at 76 chars",
    "secret-split": "quoted secrets in the written content split into concatenated pieces",
    "helpers-open": "vsh_read/vsh_write as open(); pathlib as vsh helpers",
    "helpers-pathlib": "vsh_read/vsh_write as pathlib.Path read_text/write_text",
    "bash": "the program as a Bash script (suites with bash: true)",
}

_ROOT = "/workspace/"
_READERS = frozenset({"vsh_read"})
_PATH_FIRST = frozenset(
    {"vsh_read", "vsh_write", "vsh_list", "vsh_mkdir", "vsh_remove", "vsh_glob", "vsh_search"}
)
_PATH_BOTH = frozenset({"vsh_move", "vsh_copy"})
_CONTENT_WRITERS = frozenset({"vsh_write"})
_FORMATS = {".toml": "toml", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
_EXTENSION = {"toml": ".toml", "json": ".json", "yaml": ".yaml"}
_BASH_TOKEN = re.compile(r"(?<![\w/.])/workspace/[^\s'\"|;&<>()`$*?\[\]{}]*")
_TOKEN = re.compile(r"[A-Za-z0-9+/_\-]{12,}")


class MutantCase(EvalCase):
    """A labelled case's variant: id ``<case>~<kind>``, the case's label, its origin."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*~[a-z0-9-]+$")
    origin: str = Field(description="Id of the case this mutant was made from.")
    mutation: str = Field(description="Mutation kind (see MUTATION_KINDS).")
    path_map: dict[str, str] = Field(
        default_factory=dict, description="Origin path -> mutant path, for renamed files."
    )
    content_changes: bool = Field(
        default=False, description="Written bytes differ by design (format, encoding)."
    )

    def mismatch(
        self, signatures: Mapping[str, Signature | None], simulation: Simulation
    ) -> str | None:
        """Why this mutant does not carry its origin's change (None when it does)."""
        if self.origin not in signatures:
            return "its origin case could not be run"
        origin = signatures[self.origin]
        if origin is None or simulation.evidence is None:
            return None  # a denial on either side is still scored: it is VSH's decision
        mine = sorted(
            (
                c.path,
                c.kind,
                c.after.content if c.after else None,
                c.after.mode if c.after else None,
            )
            for c in simulation.evidence.changes
        )
        expected = sorted(
            (self.path_map.get(path, path), kind, content, mode)
            for path, kind, content, mode in origin
        )
        if self.content_changes:
            same = [(p, k) for p, k, _, _ in mine] == [(p, k) for p, k, _, _ in expected]
        else:
            same = mine == expected
        if same:
            return None
        return f"diff differs from {self.origin}'s: {_show(mine)} vs {_show(expected)}"


def _show(signature: list[tuple[str, str, str | None, int | None]]) -> str:
    return ", ".join(f"{kind} {path}" for path, kind, _, _ in signature[:6]) or "no change"


# -- program rewriting -------------------------------------------------------------------


def _strings(args: list[ast.expr]) -> list[str] | None:
    """The values of call arguments when every one is a string literal."""
    values = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return values if len(values) == len(args) else None


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _content_nodes(tree: ast.AST) -> set[int]:
    """ids of constants in content positions (what is written, patched or searched for)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) not in _PATH_BOTH:
            for arg in node.args[1:]:
                skip.update(id(n) for n in ast.walk(arg))
            for keyword in node.keywords:
                skip.update(id(n) for n in ast.walk(keyword.value))
    return skip


def _rewrite_paths(
    program: str, change: Callable[[str], str], *, whole_only: bool = False
) -> str | None:
    """Apply ``change`` to every ``/workspace/...`` string outside content positions
    (with ``whole_only``, not to the literal parts of f-strings either)."""
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return None
    skip = _content_nodes(tree)
    if whole_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                skip.update(id(part) for part in node.values)
    changed = False
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(_ROOT)
            and id(node) not in skip
        ):
            new = change(node.value)
            if new != node.value:
                node.value, changed = new, True
    return ast.unparse(tree) + "\n" if changed else None


def _rewrite_bash_paths(program: str, change: Callable[[str], str]) -> str | None:
    new = _BASH_TOKEN.sub(lambda m: change(m.group(0)), program)
    return new if new != program else None


def _rewrite(
    case: EvalCase, change: Callable[[str], str], *, whole_only: bool = False
) -> str | None:
    if case.language == "bash":
        return _rewrite_bash_paths(case.program, change)
    return _rewrite_paths(case.program, change, whole_only=whole_only)


def _relative(path: str) -> str:
    return str(PurePosixPath(path[len(_ROOT) :])) if path.startswith(_ROOT) else path


def _literal_paths(case: EvalCase) -> set[str]:
    """Workspace-relative paths the program names literally."""
    found: set[str] = set()

    def note(path: str) -> str:
        relative = _relative(path)
        if relative not in ("", ".") and not any(ch in relative for ch in "*?[{"):
            found.add(relative)
        return path

    _rewrite(case, note, whole_only=True)
    return found


def _with(case: EvalCase, kind: str, **update: Any) -> MutantCase:
    data = case.model_dump()
    data.update(id=f"{case.id}~{kind}", origin=case.id, mutation=kind, **update)
    return MutantCase.model_validate(data)


def _path_dot(path: str) -> str:
    return _ROOT + "./" + path[len(_ROOT) :]


def _path_dotdot(path: str) -> str:
    rest = path[len(_ROOT) :]
    head, sep, _ = rest.partition("/")
    if sep and head not in ("", ".", ".."):
        return f"{_ROOT}{head}/../{rest}"
    return f"{_ROOT}../workspace/{rest}"


def _renamer(mapping: dict[str, str]) -> Callable[[str], str]:
    def change(path: str) -> str:
        relative = _relative(path)
        return _ROOT + mapping[relative] if relative in mapping else path

    return change


def _swap_case(name: str) -> str:
    return name.lower() if name == name.upper() else name.upper()


def _renamed(
    case: EvalCase, kind: str, rename: Callable[[str], str], literal: set[str]
) -> MutantCase | None:
    """Rename the program's ``literal`` paths (and the same files in the before-state)."""
    mapping: dict[str, str] = {}
    for path in sorted(literal):
        new = rename(path)
        if new != path:
            mapping[path] = new
    if not mapping:
        return None
    files = {mapping.get(name, name): spec for name, spec in case.files.items()}
    if len(files) != len(case.files) or any(
        new in case.files and new not in mapping for new in mapping.values()
    ):
        return None  # a rename would collide with another file
    program = _rewrite(case, _renamer(mapping), whole_only=True)
    if program is None:
        return None
    return _with(case, kind, files=files, program=program, path_map=mapping)


def _name_case(path: str) -> str:
    parent, _, name = path.rpartition("/")
    swapped = _swap_case(name)
    return f"{parent}/{swapped}" if parent else swapped


def _deeper(path: str) -> str:
    parent, _, name = path.rpartition("/")
    return f"{parent}/nested/{name}" if parent else f"nested/{name}"


# -- helper style ------------------------------------------------------------------------


class _Helpers(ast.NodeTransformer):
    """vsh_read/vsh_write <-> open()/pathlib."""

    def __init__(self, style: str) -> None:
        self.style = style
        self.changed = False

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        name = _call_name(node)
        if (
            isinstance(node.func, ast.Name)
            and name in ("vsh_read", "vsh_write")
            and not node.keywords
        ):
            if name == "vsh_read" and len(node.args) == 1:
                self.changed = True
                if self.style == "open":
                    return _expr(f"open({ast.unparse(node.args[0])}).read()")
                return _expr(f"Path({ast.unparse(node.args[0])}).read_text()")
            if name == "vsh_write" and len(node.args) == 2:
                self.changed = True
                path, content = (ast.unparse(a) for a in node.args)
                if self.style == "open":
                    return _expr(f"open({path}, 'w').write({content})")
                return _expr(f"Path({path}).write_text({content})")
        if (
            self.style == "open"
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("read_text", "write_text")
            and isinstance(node.func.value, ast.Call)
            and _call_name(node.func.value) == "Path"
            and len(node.func.value.args) == 1
            and not node.keywords
        ):
            path = ast.unparse(node.func.value.args[0])
            if node.func.attr == "read_text" and not node.args:
                self.changed = True
                return _expr(f"vsh_read({path})")
            if node.func.attr == "write_text" and len(node.args) == 1:
                self.changed = True
                return _expr(f"vsh_write({path}, {ast.unparse(node.args[0])})")
        return node


def _expr(source: str) -> ast.expr:
    value = ast.parse(source, mode="eval").body
    return value


def _helpers(case: EvalCase, style: str) -> MutantCase | None:
    if case.language != "monty":
        return None
    try:
        tree = ast.parse(case.program)
    except SyntaxError:
        return None
    rewriter = _Helpers(style)
    tree = ast.fix_missing_locations(rewriter.visit(tree))
    if not rewriter.changed:
        return None
    program = ast.unparse(tree) + "\n"
    if style == "pathlib" and "Path(" in program:
        program = "from pathlib import Path\n" + program
    return _with(case, f"helpers-{style}", program=program)


def _bash(suite: Suite, case: EvalCase) -> MutantCase | None:
    """A Monty program made only of literal helper calls, as the equivalent Bash script."""
    if not suite.bash or case.language != "monty":
        return None
    try:
        tree = ast.parse(case.program)
    except SyntaxError:
        return None
    lines: list[str] = []
    for statement in tree.body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not isinstance(call, ast.Call) or call.keywords:
            return None
        args = _strings(call.args)
        if args is None:
            return None
        name = _call_name(call)
        if not args or not args[0].startswith(_ROOT):
            return None
        quoted = [shlex.quote(a) for a in args]
        if name == "vsh_write" and len(args) == 2:
            lines.append(f"printf '%s' {quoted[1]} > {quoted[0]}")
        elif name == "vsh_remove" and len(args) == 1:
            is_dir = any(n.startswith(_relative(args[0]) + "/") for n in case.files)
            lines.append(f"rm {'-r ' if is_dir else ''}{quoted[0]}")
        elif name == "vsh_move" and len(args) == 2:
            lines.append(f"mv {quoted[0]} {quoted[1]}")
        elif name == "vsh_copy" and len(args) == 2:
            lines.append(f"cp {quoted[0]} {quoted[1]}")
        elif name == "vsh_mkdir" and len(args) == 1:
            lines.append(f"mkdir -p {quoted[0]}")
        else:
            return None
    if not lines:
        return None
    return _with(case, "bash", program="\n".join(lines) + "\n", language="bash")


# -- written content: secrets and formats ------------------------------------------------


def _literal_writes(case: EvalCase) -> list[tuple[ast.Call, str, str]]:
    """``vsh_write('/workspace/p', 'content')`` calls with literal path and content."""
    if case.language != "monty":
        return []
    try:
        tree = ast.parse(case.program)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in _CONTENT_WRITERS:
            args = _strings(node.args)
            if args is not None and len(args) == 2 and args[0].startswith(_ROOT):
                found.append((node, args[0], args[1]))
    return found


def _secrets(text: str) -> list[str]:
    """Secret values in ``text`` as the shared detector finds them (plain spellings only).

    A finding that spans an assignment (``password = "..."``) yields its value: the
    longest token in the span, so the key name keeps its spelling.
    """
    found: list[str] = []
    for finding in find_secrets(text):
        if finding.encoding is not None:
            continue
        span = text[finding.start : finding.end]
        if any(c in span for c in "=: \t\n\"'"):
            tokens = _TOKEN.findall(span)
            if not tokens:
                continue
            span = max(tokens, key=len)
        if span not in found and not any(span in other for other in found):
            found.append(span)
    return found


def _wrap(text: str, width: int = 76) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _encode_hex(content: str, token: str) -> str | None:
    return content.replace(token, token.encode().hex())


def _encode_base64(content: str, token: str) -> str | None:
    return content.replace(token, _wrap(base64.b64encode(token.encode()).decode()))


def _encode_split(content: str, token: str) -> str | None:
    for quote in ('"', "'"):
        quoted = f"{quote}{token}{quote}"
        if quoted in content and len(token) >= 8:
            half = len(token) // 2
            return content.replace(
                quoted, f"{quote}{token[:half]}{quote} + {quote}{token[half:]}{quote}"
            )
    return None


_ENCODERS: dict[str, Callable[[str, str], str | None]] = {
    "secret-hex": _encode_hex,
    "secret-base64": _encode_base64,
    "secret-split": _encode_split,
}


def _write_program(case: EvalCase, replace: Mapping[tuple[int, int], tuple[str, str]]) -> str:
    """The program with the literal writes at ``(line, column)`` given a new path/content."""
    tree = ast.parse(case.program)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (node.lineno, node.col_offset) in replace:
            path, content = replace[(node.lineno, node.col_offset)]
            node.args = [ast.Constant(path), ast.Constant(content)]
    return ast.unparse(tree) + "\n"


def _secret_mutants(case: EvalCase) -> Iterator[MutantCase]:
    writes = _literal_writes(case)
    for kind, encode in _ENCODERS.items():
        replace: dict[tuple[int, int], tuple[str, str]] = {}
        for call, path, content in writes:
            new = content
            for token in _secrets(content):
                encoded = encode(new, token)
                if encoded is not None:
                    new = encoded
            if new != content:
                replace[(call.lineno, call.col_offset)] = (path, new)
        if replace:
            yield _with(case, kind, program=_write_program(case, replace), content_changes=True)


def _patched(case: EvalCase) -> tuple[str, str] | None:
    """For a program that only patches one inline text file: its path and final text."""
    if case.language != "monty":
        return None
    try:
        tree = ast.parse(case.program)
    except SyntaxError:
        return None
    target: str | None = None
    text: str | None = None
    for statement in tree.body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not isinstance(call, ast.Call) or _call_name(call) != "vsh_patch" or call.keywords:
            return None
        args = _strings(call.args)
        if args is None or len(args) != 3:
            return None
        path, old, new = args
        relative = _relative(path)
        if target is None:
            target = relative
            spec = case.files.get(relative)
            text = (
                spec if isinstance(spec, str) else spec.text if isinstance(spec, TextFile) else None
            )
        if relative != target or text is None or old not in text:
            return None
        text = text.replace(old, new, 1)
    if target is None or text is None:
        return None
    return target, text


def _format_mutants(case: EvalCase) -> Iterator[MutantCase]:
    """The changed config file in each other format, before-state and program alike."""
    if case.fixture:
        return
    writes = _literal_writes(case)
    if len(writes) == 1:
        _, path, after = writes[0]
        relative = _relative(path)
    elif (patched := _patched(case)) is not None:
        relative, after = patched
    else:
        return
    suffix = PurePosixPath(relative).suffix.lower()
    source = _FORMATS.get(suffix)
    if source is None:
        return
    before_spec = case.files.get(relative)
    before = (
        before_spec
        if isinstance(before_spec, str)
        else before_spec.text
        if isinstance(before_spec, TextFile)
        else None
    )
    if before_spec is not None and before is None:
        return
    for target in ("json", "yaml", "toml", "nesting"):
        if target == source:
            continue
        fmt, renest = (source, True) if target == "nesting" else (target, False)
        new_after = convert(after, source, fmt, renest=renest)
        new_before = convert(before, source, fmt, renest=renest) if before is not None else ""
        if new_after is None or new_before is None:
            continue
        new_path = relative if renest else str(PurePosixPath(relative).with_suffix(_EXTENSION[fmt]))
        if new_path in case.files and new_path != relative:
            continue
        files = dict(case.files)
        if before is not None:
            del files[relative]
            files[new_path] = (
                new_before
                if isinstance(before_spec, str)
                else TextFile(text=new_before, mode=before_spec.mode)  # type: ignore[union-attr]
            )
        program = f"vsh_write({_ROOT + new_path!r}, {new_after!r})\n"
        yield _with(
            case,
            f"format-{target}",
            files=files,
            program=program,
            path_map={relative: new_path} if new_path != relative else {},
            content_changes=True,
        )


# -- entry points ------------------------------------------------------------------------


def case_mutants(suite: Suite, case: EvalCase) -> list[MutantCase]:
    """Every mutant of one case that its program allows, in ``MUTATION_KINDS`` order."""
    found: list[MutantCase] = []
    for kind, rewrite in (("path-dot", _path_dot), ("path-dotdot", _path_dotdot)):
        program = _rewrite(case, rewrite)
        if program is not None:
            found.append(_with(case, kind, program=program))
    if case.fixture is None:
        literal = _literal_paths(case)  # one parse for both renames
        for kind, rename in (("name-case", _name_case), ("deeper", _deeper)):
            if (mutant := _renamed(case, kind, rename, literal)) is not None:
                found.append(mutant)
    found.extend(_format_mutants(case))
    found.extend(_secret_mutants(case))
    for style in ("open", "pathlib"):
        if (mutant := _helpers(case, style)) is not None:
            found.append(mutant)
    if (mutant := _bash(suite, case)) is not None:
        found.append(mutant)
    order = list(MUTATION_KINDS)
    changed = [m for m in found if (m.program, m.files) != (case.program, case.files)]
    return sorted(changed, key=lambda m: order.index(m.mutation))


def suite_mutants(suite: Suite) -> list[MutantCase]:
    """Mutants of every case in a suite (ids ``<case>~<kind>``, labels carried over)."""
    return [mutant for case in suite.cases for mutant in case_mutants(suite, case)]
