"""Python code rules: flag risky additions, prove comment/docstring-only edits allowed.

:class:`PythonRisks` is a denial over facts from :mod:`vsh_ai.analysis._python` (the
AST, never patterns over text): new process, eval, dynamic-import, download,
deserialisation, socket or native calls resolved through any alias; skipped or
deselected tests and pytest hooks; assertions removed or weakened; definitions removed;
modules emptied or commented out; code that does not parse. :class:`AllowPythonDocs`
is an allowance that claims an edit only when the module's AST, docstrings removed, is
identical: comments, docstrings and formatting changed, nothing else. Other source edits
stay unproven: rules cannot prove them safe, so they escalate.
"""

from __future__ import annotations

import re
import tokenize
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence, is_binary
from .._verdict import Verdict
from ..analysis._python import (
    FLAGGED_FACTS,
    CodeFact,
    FactKind,
    code_changes,
    is_python_source,
    is_tooling_code,
)
from ..analysis._python_names import in_flat_package
from ._base import Action, Allowance, Claim, GlobFields, Rule, net_changes
from ._glob import check_globs, matching
from ._intent import claimed_scope
from ._python_memo import memo_dump, memo_tokens
from ._renames import reexport_shims

if TYPE_CHECKING:
    from ..analysis._changes import NetChange

__all__ = ("AllowPythonDocs", "PythonRisks")

_DESCRIBE: dict[str, str] = {
    "unparsable": "code that does not parse",
    "process": "a new process call",
    "eval": "new evaluation of strings as code",
    "dynamic_import": "a new dynamic import",
    "download": "a new network download or request",
    "deserialise": "new unsafe deserialisation",
    "socket": "a new raw socket",
    "native": "new native library loading",
    "skip": "a test skipped or marked xfail",
    "test_hook": "a new or changed pytest hook",
    "collection": "tests excluded from collection",
    "assertion_removed": "assertions removed",
    "assertion_weakened": "an assertion weakened",
    "definition_removed": "a definition removed",
    "definition_added": "a definition added",
    "emptied": "the module emptied",
    "commented_out": "code commented out",
    "unreachable": "code that can never run (after a return or raise)",
    "patched": "a test replaces code or state other tests use, without undoing it "
    "(every test that runs after it checks the replacement)",
}
_SHEBANG = b"#!"


def _describe(path: str, fact: CodeFact) -> str:
    where = f"{path}:{fact.line}" if fact.line else path
    return f"{where}: {_DESCRIBE.get(fact.kind, fact.kind)} ({fact.detail})"


class PythonRisks(Rule):
    """Flags what changed Python code adds or takes away (AST facts, any alias).

    Files matching ``globs`` (default every ``.py`` file at any depth) and scripts whose
    shebang names python are analysed. Each fact in ``facts`` gets ``actions[kind]`` or
    ``action`` (review by default); reasons name the file, the line and the resolved
    call, never string contents. Deleted modules report their removed definitions.
    ``tooling_action = "reject"`` rejects any fact in code that tools run on their own
    (conftest.py, setup.py, docs/conf.py, noxfile.py, ``*.pth``, ...). Deleting files that
    match ``deleted_outputs`` (build output copied from the source) reports nothing.
    """

    type: Literal["python_risks"] = "python_risks"
    glob_fields: ClassVar[GlobFields] = (("globs", False), ("deleted_outputs", False))
    globs: tuple[str, ...] = Field(
        default=("**/*.py", "**/*.pyw", "**/*.pth"),
        description="Root-anchored globs of the Python files analysed.",
    )
    deleted_outputs: tuple[str, ...] = Field(
        default=(),
        description="Root-anchored globs of build-output files (setuptools' build/lib*/**) "
        "that are copies of the source: deleting them removes no definition. Their other "
        "changes are analysed as usual.",
    )
    action: Action = "review"
    facts: tuple[FactKind, ...] = Field(
        default=FLAGGED_FACTS, description="The fact kinds flagged (others are ignored)."
    )
    actions: dict[FactKind, Action] = Field(
        default_factory=dict, description="Per-fact actions overriding `action`."
    )
    tooling_action: Action | None = Field(
        default=None,
        description="Action for facts in files tools execute (conftest.py, setup.py, "
        "docs/conf.py, ...) when more severe than the fact's own.",
    )

    _check_globs = field_validator("globs")(lambda globs: check_globs(globs))
    _check_outputs = field_validator("deleted_outputs")(lambda globs: check_globs(globs))

    def check(self, evidence: Evidence, /) -> Verdict | None:
        found: dict[Action, list[str]] = {"reject": [], "review": []}
        for change in net_changes(evidence):
            path, kind = change.path, change.kind
            if kind == "metadata_change" or (kind == "rename" and change.after is None):
                continue  # a rename's source end: its destination is analysed
            if kind == "delete" and matching(self.deleted_outputs, path) is not None:
                continue  # a build output's copy of the source goes; the source stays
            if kind == "rename":
                before = evidence.before_bytes(change.partner) if change.partner else None
            else:
                before = evidence.before_bytes(path) if kind in ("modify", "delete") else None
            after = evidence.after_bytes(path) if kind != "delete" else None
            if matching(self.globs, path) is None and not is_python_source(path, after or before):
                continue
            if any(data is not None and is_binary(data) for data in (before, after)):
                found[self.actions.get("unparsable", self.action)].append(
                    f"{path}: binary content in a Python file cannot be analysed"
                )
                continue
            seen: set[tuple[str, int | None]] = set()
            moved = kind == "modify" and path in reexport_shims(evidence)
            for fact in code_changes(before, after):
                if moved and fact.kind == "definition_removed":
                    continue  # moved to the new module this file now re-exports
                # Code the analysers cannot read is never harmless, whatever `facts` lists.
                flagged = fact.kind in self.facts or fact.kind == "unparsable"
                if not flagged or (fact.kind, fact.line) in seen:
                    continue
                seen.add((fact.kind, fact.line))
                decision = self.actions.get(fact.kind, self.action)
                if self.tooling_action == "reject" and is_tooling_code(path):
                    decision = "reject"
                found[decision].append(_describe(path, fact))
        order: tuple[Action, ...] = ("reject", "review")
        for decision in order:
            reasons = found[decision]
            if reasons:
                more = f" And {len(reasons) - 8} more." if len(reasons) > 8 else ""
                return self.verdict(
                    decision,
                    "Python changes need a human: "
                    + "; ".join(reasons[:8])
                    + f".{more} Keep tests, assertions and definitions; do not add code that "
                    "runs processes, evaluates strings, downloads or deserialises.",
                    facts=reasons[:50],
                )
        return None


class AllowPythonDocs(Allowance):
    """Claims edits of Python files that change only comments, docstrings and formatting.

    A modify of a file matching ``paths`` is claimed when both versions parse and their
    ASTs are identical once docstrings are removed (comments are not in the AST), and
    the first line (a shebang decides which interpreter runs the file) is unchanged,
    and the code is written the same way (the same tokens; strings quoted differently
    only when the intent asks for formatting, else a sweep beyond the request).
    Everything else is refused with the reason: source edits are not provable here.
    """

    type: Literal["allow_python_docs"] = "allow_python_docs"
    # Case-insensitive: the proof reads content, so CORE.PY is proven like core.py.
    glob_fields: ClassVar[GlobFields] = (("paths", True),)
    paths: tuple[str, ...] = Field(
        default=("**/*.py",), description="Root-anchored globs of the Python files claimed."
    )
    flat_packages: bool = Field(
        default=False,
        description="Also claim modules of package folders at the repository root (flat "
        "layouts: slugify/core.py), never scripts, docs, tooling, CI, build or data folders.",
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(lambda globs: check_globs(globs))

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        path = change.path
        if matching(self.paths, path, ignore_case=True) is None and not (
            self.flat_packages and in_flat_package(path)
        ):
            return None
        if change.kind != "modify":
            return Claim(
                False, f"{path}: a {change.kind}; only comment and docstring edits are claimed"
            )
        before, after = evidence.before_bytes(path), evidence.after_bytes(path)
        if before is None or after is None or is_binary(before) or is_binary(after):
            return Claim(False, f"{path} is not text on both sides")
        first_before = before.split(b"\n", 1)[0] if before.startswith(_SHEBANG) else b""
        first_after = after.split(b"\n", 1)[0] if after.startswith(_SHEBANG) else b""
        if first_before != first_after:
            return Claim(False, f"{path}: the shebang line changed")
        old, new = memo_dump(evidence, before), memo_dump(evidence, after)
        if old is None or new is None:
            return Claim(False, f"{path} does not parse; it cannot be proven unchanged")
        if _doctests(before) != _doctests(after):
            return Claim(
                False,
                f"{path}: doctest examples changed (`>>>` lines run under pytest "
                "--doctest-modules); they are code, and source edits need a human",
            )
        if old != new:
            return Claim(
                False,
                f"{path}: the code itself changed (not only comments, docstrings or "
                "blank lines and spacing); source edits need a human",
            )
        old_tokens, new_tokens = memo_tokens(evidence, before), memo_tokens(evidence, after)
        if old_tokens != new_tokens:
            # A quote-style sweep (same AST: every string keeps its value) is the request
            # itself only when the intent asks for formatting; otherwise it is a sweep.
            asked = "formatting" in claimed_scope(evidence.intent)
            if _unprefixed(old_tokens) == _unprefixed(new_tokens) and _PREFIX_ASKED.search(
                evidence.intent or ""
            ):
                return Claim(True, f"{path}: only redundant u'' string prefixes dropped, as asked")
            if not asked or _quotes_only(old_tokens) != _quotes_only(new_tokens):
                return Claim(
                    False,
                    f"{path}: the code itself changed (not only comments, docstrings or "
                    "blank lines and spacing); source edits need a human",
                )
            return Claim(True, f"{path}: only the quote style of strings changed, as asked")
        return Claim(True, f"{path}: only comments, docstrings or spacing changed")


_PREFIX_ASKED = re.compile(r"(?i)\bprefix(?:es)?\b")


def _unprefixed(
    tokens: tuple[tuple[int, str], ...] | None,
) -> tuple[tuple[int, str], ...] | None:
    """The tokens with a string's ``u`` prefix dropped (it means nothing in Python 3)."""
    if tokens is None:
        return None
    return tuple(
        (kind, text[1:] if kind == tokenize.STRING and text[:1] in "uU" else text)
        for kind, text in tokens
    )


def _quotes_only(
    tokens: tuple[tuple[int, str], ...] | None,
) -> tuple[tuple[int, str], ...] | None:
    """The tokens with string spellings blanked: with the AST unchanged, every string
    still has its value, so only how it is quoted or escaped differs."""
    if tokens is None:
        return None
    return tuple((kind, "" if kind == tokenize.STRING else text) for kind, text in tokens)


def _doctests(source: bytes) -> list[str]:
    """The doctest prompts of a module, in order (docstrings and comments alike)."""
    text = source.decode("utf-8", "replace")
    return [
        line.strip()
        for line in text.splitlines()
        if line.lstrip().startswith((">>>", "... ")) or line.strip() == "..."
    ]
