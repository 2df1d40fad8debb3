"""Module renames the intent names, with a re-export shim and every changed import updated.

:class:`AllowModuleRenames` proves a move of ``pkg/core.py`` to ``pkg/engine.py`` when:

1. the intent names both modules (their last names, as words: it can only narrow);
2. the moved bytes are unchanged (the new path's bytes are the old path's before-bytes);
3. the old path is left as a re-export shim of the new module that keeps every name the
   module binds importable (:func:`vsh_ai.analysis._python_modules.shim_gaps`): files
   this change does not show may still import the old name, and rules cannot see them;
4. every other changed Python file in ``paths`` is the same code once the new name is
   read back as the old one (:func:`~vsh_ai.analysis._python_modules.equal_modulo_renames`).

A move without a shim stays unproven with that reason (a human checks the importers).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence, is_binary
from ..analysis._memo import analysis_of
from ..analysis._python_modules import equal_modulo_renames, module_name, package_of, shim_gaps
from ._base import Allowance, Claim, GlobFields, net_changes
from ._glob import check_globs, matching
from ._proofs import PROOF_MAX_BYTES

if TYPE_CHECKING:
    from ..analysis._changes import NetChange

__all__ = ("AllowModuleRenames", "reexport_shims")

_WORD = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass
class _Plan:
    claimed: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def _tree(data: bytes | None) -> ast.Module | None:
    if data is None or is_binary(data) or len(data) > PROOF_MAX_BYTES:
        return None
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError):
        return None


def reexport_shims(evidence: Evidence) -> frozenset[str]:
    """Modified Python files left as complete re-export shims of a module moved out of
    them (their definitions moved, they were not removed): once per evidence."""
    return analysis_of(evidence).remember(("reexport_shims",), lambda: _shims(evidence))


def _shims(evidence: Evidence) -> frozenset[str]:
    changes = {c.path: c for c in net_changes(evidence)}
    found: set[str] = set()
    for change in changes.values():
        source = AllowModuleRenames._source(change, changes)
        new = module_name(change.path)
        if source is None or change.kind != "create" or new is None:
            continue
        shim = _tree(evidence.after_bytes(source))
        module = _tree(evidence.after_bytes(change.path))
        if shim and module and shim_gaps(shim, module, new, package_of(source)) is None:
            found.add(source)
    return frozenset(found)


class AllowModuleRenames(Allowance):
    """Module renames the intent names: bytes moved unchanged, a re-export shim left at
    the old path, and every changed importer equal modulo the rename."""

    type: Literal["allow_module_renames"] = "allow_module_renames"
    glob_fields: ClassVar[GlobFields] = (("paths", True),)
    paths: tuple[str, ...] = Field(
        default=("**/*.py",), description="Root-anchored globs of the Python files claimed."
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(lambda globs: check_globs(globs))

    def _in_scope(self, path: str) -> bool:
        return path.endswith(".py") and matching(self.paths, path, ignore_case=True) is not None

    def _plan(self, evidence: Evidence) -> _Plan:
        return analysis_of(evidence).remember(
            ("module_renames", self.paths), lambda: self._make_plan(evidence)
        )

    def _make_plan(self, evidence: Evidence) -> _Plan:
        plan = _Plan()
        changes = {c.path: c for c in net_changes(evidence)}
        words = frozenset(_WORD.findall((evidence.intent or "").lower()))
        renames: dict[str, str] = {}
        for change in changes.values():
            if not self._in_scope(change.path):
                continue
            source = self._source(change, changes)
            if source is None:
                continue
            old, new = module_name(source), module_name(change.path)
            if old is None or new is None or old == new:
                continue
            pair = (source, change.path)
            if not {old.rsplit(".", 1)[-1].lower(), new.rsplit(".", 1)[-1].lower()} <= words:
                why = f"the intent does not name the rename of {old} to {new}"
            elif change.kind == "rename":
                why = (
                    f"{source} moved to {change.path} without a re-export shim at the old path: "
                    f"files this change does not show may still import {old}"
                )
            else:
                gap = shim_gaps(
                    _tree(evidence.after_bytes(source)) or ast.Module([], []),
                    _tree(evidence.after_bytes(change.path)) or ast.Module([], []),
                    new,
                    package_of(source),
                )
                why = "" if gap is None else f"{source} is no complete re-export shim: {gap}"
                if _tree(evidence.after_bytes(source)) is None:
                    why = f"{source} is not readable Python after the change"
            if why:
                plan.refused.update(dict.fromkeys(pair, why))
                continue
            renames[new] = old
            reason = f"module {old} renamed to {new} as the intent says, a re-export shim left"
            plan.claimed.update(dict.fromkeys(pair, reason))
        if not renames:
            return plan
        for change in changes.values():
            path = change.path
            if change.kind != "modify" or path in plan.claimed or not self._in_scope(path):
                continue
            before, after = _tree(evidence.before_bytes(path)), _tree(evidence.after_bytes(path))
            if before is None or after is None:
                continue
            if equal_modulo_renames(before, after, renames, package_of(path)):
                plan.claimed[path] = f"{path}: only its imports of the renamed module changed"
            else:
                plan.refused[path] = f"{path}: changes beyond the imports of the renamed module"
        return plan

    @staticmethod
    def _source(change: NetChange, changes: dict[str, NetChange]) -> str | None:
        """The old path of a module moved to ``change.path`` (a rename's source, or the
        modified file whose before-bytes this new file holds)."""
        if change.kind == "rename" and change.after is not None and change.partner:
            return change.partner
        if change.kind == "create":
            for origin in change.copied_from:
                other = changes.get(origin)
                if other is not None and other.kind == "modify":
                    return origin
        return None

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        if not self._in_scope(change.path):
            return None
        plan = self._plan(evidence)
        if change.path in plan.claimed:
            return Claim(True, plan.claimed[change.path])
        if change.path in plan.refused:
            return Claim(False, plan.refused[change.path])
        return None
