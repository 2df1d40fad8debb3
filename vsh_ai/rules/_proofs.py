"""Allowances that prove everyday Python edits harmless, each with its own proof.

- :class:`AllowPythonAnnotations`: only type annotations changed, where they cannot
  change behaviour (:func:`vsh_ai.analysis._python_annotations.annotation_only`);
- :class:`AllowTestAdditions`: a test module only gained test functions with real
  checks (:func:`vsh_ai.analysis._python_proofs.test_additions`);
- :class:`AllowVersionBump`: a module-level ``__version__`` string raised
  (:func:`vsh_ai.analysis._python_proofs.version_bump`);
- :class:`AllowLocalRefactors`: single-use local variables extracted, inlined or
  renamed (:func:`vsh_ai.analysis._python_refactor.local_variable_refactor`).

Each claims a change in its ``paths`` only when its proof holds; otherwise it refuses
with the proof's reason (the change stays unproven unless another allowance proves it).
Denials such as ``python_risks`` still run on the same code.
"""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence, is_binary
from ..analysis._python_annotations import Proof, annotation_only
from ..analysis._python_bandit import bandit_findings
from ..analysis._python_compare import line_diff
from ..analysis._python_names import in_flat_package, is_tooling_code
from ..analysis._python_proofs import test_additions, version_bump
from ..analysis._python_refactor import local_variable_refactor
from ._base import Allowance, Claim, GlobFields
from ._glob import check_globs, matching
from ._python_memo import memo_proof

if TYPE_CHECKING:
    from ..analysis._changes import NetChange

__all__ = (
    "PROOF_MAX_BYTES",
    "AllowLocalRefactors",
    "AllowPythonAnnotations",
    "AllowTestAdditions",
    "AllowVersionBump",
)

_SHEBANG = b"#!"
# The proofs walk both ASTs several times in pure Python: beyond this size a decision
# could take longer than a second, so larger modules stay unproven (a review).
PROOF_MAX_BYTES = 48 * 1024
_WORD = re.compile(r"[a-z_][a-z0-9_]*")


def _first_line(data: bytes) -> bytes:
    return data.split(b"\n", 1)[0] if data.startswith(_SHEBANG) else b""


class _PythonProof(Allowance):
    """Shared claim logic: scope, text on both sides, same shebang, then the proof."""

    # Case-insensitive: the proofs read content, so TEST_CORE.PY is proven like test_core.py.
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
    _what: ClassVar[str] = ""
    _creates: ClassVar[bool] = False

    _check_paths = field_validator("paths")(lambda globs: check_globs(globs))

    def _prove(self, before: bytes | None, after: bytes) -> Proof:
        raise NotImplementedError

    def _prove_for(self, evidence: Evidence, before: bytes | None, after: bytes) -> Proof:
        return self._prove(before, after)

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        path = change.path
        if matching(self.paths, path, ignore_case=True) is None and not (
            self.flat_packages and in_flat_package(path)
        ):
            return None
        allowed = ("modify", "create") if self._creates else ("modify",)
        if change.kind not in allowed:
            return Claim(False, f"{path}: a {change.kind}; only {self._what} are claimed")
        before = evidence.before_bytes(path) if change.kind == "modify" else None
        after = evidence.after_bytes(path)
        if after is None or is_binary(after) or (before is not None and is_binary(before)):
            return Claim(False, f"{path} is not text")
        if _first_line(before or b"") != _first_line(after):
            return Claim(False, f"{path}: the shebang line changed")
        size = max(len(before or b""), len(after))
        if size > PROOF_MAX_BYTES:
            return Claim(
                False,
                f"{path}: over the {PROOF_MAX_BYTES} bytes these proofs read "
                "(bounded time per decision); larger modules need a human",
            )
        proof = self._prove_for(evidence, before, after)
        if not proof.ok:
            return Claim(False, f"{path}: not {self._what}: {proof.reason}")
        return Claim(True, f"{path}: {proof.reason}")


_ASSIGNED = re.compile(r"^\s*[A-Za-z_]\w*\s*=(?!=)")
_DEF = re.compile(r"^\s*(async\s+)?def\s")


def _first_difference(old: bytes, new: bytes) -> int:
    """Length of the common prefix (binary search over slices: C-speed comparisons)."""
    low, high = 0, min(len(old), len(new))
    while low < high:
        middle = (low + high + 1) // 2
        if old[:middle] == new[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


_MARKS = (b":", b"|", b"[", b"->")
_STARTS = (b":", b"->", b"from ", b"import ", b"if TYPE_CHECKING")


def _may_be_annotations(old: bytes, new: bytes) -> bool:
    """Cheap necessary condition: the first change can belong to an annotation.

    Only a prefilter (a False here leaves the edit unproven, never approves): an
    annotation edit's first difference follows ``:``, ``->``, ``|`` or ``[``, starts
    one, or is an import line.
    """
    at = _first_difference(old, new)
    if at == min(len(old), len(new)):
        return True
    before = old[:at].rstrip()
    line_start = old.rfind(b"\n", 0, at) + 1
    rests = (old[at:].lstrip(b" \t"), new[at:].lstrip(b" \t"), old[line_start:].lstrip())
    return before.endswith(_MARKS) or any(rest.startswith(_STARTS) for rest in rests)


def _may_be_refactor(before: bytes, after: bytes) -> bool:
    """Cheap necessary condition: an added or removed assignment line, or a changed def.

    Only a prefilter: a False here leaves the edit unproven. A def line only added or
    only removed is a new or deleted function, which no local-variable refactor makes
    (a parameter rename modifies the line).
    """
    lines = line_diff(before.decode("utf-8", "replace"), after.decode("utf-8", "replace"))
    old, new = (
        before.decode("utf-8", "replace").splitlines(),
        after.decode("utf-8", "replace").splitlines(),
    )
    modified = [new[j - 1] for j in lines.modified]
    modified += [old[i - 1] for i in lines.modified.values()]
    if any(_ASSIGNED.match(text) or _DEF.match(text) for text in modified):
        return True
    touched = [new[j - 1] for j in lines.added] + [old[i - 1] for i in lines.removed]
    return any(_ASSIGNED.match(text) for text in touched)


class AllowPythonAnnotations(_PythonProof):
    """Claims Python edits that change only type annotations that cannot change behaviour.

    Not fields of pydantic/dataclass/attrs/TypedDict/NamedTuple/Enum/ORM classes (any
    class with bases, decorators or a metaclass), not functions behind decorators that
    may read them, not modules that use a library reading annotations at runtime; each
    changed annotation is a plain type expression (a call in one is code) whose names
    exist when it is evaluated. Comments, docstrings and layout may change alongside.
    """

    type: Literal["allow_python_annotations"] = "allow_python_annotations"
    _what: ClassVar[str] = "annotation-only edits"

    def _prove(self, before: bytes | None, after: bytes) -> Proof:
        if before is None:
            return Proof(False, "a new file")
        return annotation_only(before, after)

    def _prove_for(self, evidence: Evidence, before: bytes | None, after: bytes) -> Proof:
        if before is None:
            return Proof(False, "a new file")
        if not _may_be_annotations(before, after):
            return Proof(False, "the first change is not part of an annotation")
        return memo_proof(
            evidence, "annotations", lambda: annotation_only(before, after), before, after
        )


class AllowTestAdditions(_PythonProof):
    """Claims test modules that only gain test functions with checks that can fail.

    Existing statements stay as they were, in order; each new statement is a ``test*``
    function (no decorator but harmless ``pytest.mark`` ones such as ``parametrize``)
    with an assert or ``pytest.raises`` that can fail, no skip, no swallowed failure
    and no redefined name, or an import (process, network or code-loading modules only
    if the file imports them already), and Bandit finds nothing of medium severity or
    worse in the new functions. New test modules are claimed on the same terms, as are
    new empty modules (``__init__.py``) and new folders where test modules would be.
    Files tools run on their own (``conftest.py``) are never claimed.
    """

    type: Literal["allow_test_additions"] = "allow_test_additions"
    paths: tuple[str, ...] = Field(
        default=("tests/**/*.py", "**/test_*.py", "**/*_test.py"),
        description="Root-anchored globs of the test modules claimed.",
    )
    _what: ClassVar[str] = "added tests"
    _creates: ClassVar[bool] = True

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        path = change.path
        made = change.after if change.kind == "create" else None
        if made is not None and made.kind == "directory":
            # A new folder for new test modules (what it holds is claimed file by file).
            if matching(self.paths, f"{path}/test_x.py", ignore_case=True) is None:
                return None
            return Claim(True, f"{path}: a new folder for test modules")
        if matching(self.paths, path, ignore_case=True) and is_tooling_code(path):
            return Claim(False, f"{path}: tools run this file; test additions only")
        return super().claim(evidence, change)

    def _prove(self, before: bytes | None, after: bytes) -> Proof:
        if before is None and not after.strip():
            return Proof(True, "an empty module (a package marker)")
        proof = test_additions(before, after)
        if not proof.ok:
            return proof
        # Bandit as a second opinion on the new code only (its cost grows with its input).
        lines = after.decode("utf-8", "replace").splitlines()
        # Each span dedented: a test method of a class is indented in its file.
        new_code = "\n".join(textwrap.dedent("\n".join(lines[a - 1 : b])) for a, b in proof.spans)
        new_code += "\n"
        found = bandit_findings(new_code)
        if found:
            named = ", ".join(sorted({f"{test_id} {name}" for test_id, name, _ in found}))
            return Proof(False, f"Bandit flags the new tests ({named})")
        return proof


class AllowVersionBump(_PythonProof):
    """Claims Python edits that only raise a module-level ``__version__`` string."""

    type: Literal["allow_version_bump"] = "allow_version_bump"
    paths: tuple[str, ...] = Field(
        default=("**/__init__.py", "**/_version.py", "**/version.py", "**/__about__.py"),
        description="Root-anchored globs of the modules that hold the version.",
    )
    _what: ClassVar[str] = "version bumps"

    def _prove(self, before: bytes | None, after: bytes) -> Proof:
        if before is None:
            return Proof(False, "a new file")
        return version_bump(before, after)


class AllowLocalRefactors(_PythonProof):
    """Claims Python edits that only extract, inline or rename single-use local variables.

    Both versions are normalised by inlining every local temporary assigned once and
    read once in the next statement where nothing with side effects runs before the
    read (:func:`vsh_ai.analysis._python_refactor.local_variable_refactor`); the edit is
    claimed when the normalised ASTs are equal: the same code runs in the same order.
    A parameter renamed consistently counts only when the (untrusted) intent names both
    the old and the new name: callers outside the file may pass it by keyword, so only a
    rename that was asked for is proven, never one the intent does not mention.
    """

    type: Literal["allow_local_refactors"] = "allow_local_refactors"
    _what: ClassVar[str] = "local-variable refactors"

    def _prove(self, before: bytes | None, after: bytes) -> Proof:
        return self._refactor(before, after, frozenset())

    def _prove_for(self, evidence: Evidence, before: bytes | None, after: bytes) -> Proof:
        if before is None:
            return Proof(False, "a new file")
        if not _may_be_refactor(before, after):
            return Proof(False, "no local variable assigned, removed or renamed")
        words = frozenset(_WORD.findall((evidence.intent or "").lower()))
        return self._refactor(before, after, words)

    @staticmethod
    def _refactor(before: bytes | None, after: bytes, words: frozenset[str]) -> Proof:
        if before is None:
            return Proof(False, "a new file")
        return local_variable_refactor(before, after, words)
