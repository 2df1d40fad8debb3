"""Checks a file's key changes against ``may_change`` constraints (one per file)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from .. import _toml
from .._evidence import Evidence
from ..analysis._config import (
    ConfigSyntaxError,
    TypedSet,
    config_changes,
    flatten,
)
from ..analysis._config_context import (
    commented_option,
    commented_value,
    key_context,
    stated_unit,
)
from ..analysis._config_types import KeyChange
from ..analysis._config_words import canonical_key
from ..analysis._memo import analysis_of
from ..analysis._quantities import DURATION_UNITS, SIZE_UNITS, duration_seconds, in_unit, size_bytes
from ._constraints import (
    _BOOLEANS,
    _INTEGER,
    _NUMBER,
    _STRING_FORMATS,
    ConstraintType,
    KeyConstraint,
    _num,
    _version_problem,
    quantity,
    short,
)
from ._content import compile_re2
from ._key_patterns import list_diff, pattern_matches, split_key, subtree

__all__ = ("Checker", "key_changes")


def key_changes(evidence: Evidence, before: Any, after: Any) -> tuple[KeyChange, ...]:
    """``config_changes(before, after)`` of two parsed trees, once per decision: the keep,
    allowance and value rules compare the same parses (shared by :func:`parse_config`)."""
    return analysis_of(evidence).remember_for(
        "config-changes", before, after, lambda: config_changes(before, after)
    )


class Checker:
    """Checks key changes against ``may_change`` (one instance per claimed file)."""

    def __init__(
        self,
        constraints: dict[str, KeyConstraint],
        fmt: str,
        before: Any,
        after: Any,
        missing: object,
    ) -> None:
        self.constraints = constraints
        self.fmt = fmt
        self.before = before
        self.after = after
        self.missing = missing
        self.checked: dict[str, tuple[bool, str]] = {}
        self.before_text = ""  # the old file's text: options documented there as comments
        self.explain = True  # say what was proven (False: only failures need words)

    def _match(self, key: str) -> tuple[str, str, KeyConstraint] | None:
        """(pattern, matched key or ancestor, constraint).

        A list constraint on an ancestor whose length changed decides first (its
        indices shifted, so per-item patterns would compare different items); then the
        key itself; then the nearest list/table/any constraint on an ancestor.
        """
        parts = split_key(key)
        ancestors = [key[:end] for end, _ in reversed(parts[:-1])]
        for ancestor in reversed(ancestors):
            for pattern, constraint in self.constraints.items():
                if constraint.type == "list" and pattern_matches(pattern, ancestor):
                    segments = [s for _, s in split_key(ancestor)]
                    old = subtree(self.before, segments, self.missing)
                    new = subtree(self.after, segments, self.missing)
                    if not (isinstance(old, list) and isinstance(new, list)) or len(old) != len(
                        new
                    ):
                        return pattern, ancestor, constraint
        for pattern, constraint in self.constraints.items():
            if pattern_matches(pattern, key):
                return pattern, key, constraint
        for ancestor in ancestors:
            for pattern, constraint in self.constraints.items():
                if constraint.type in ("list", "table", "any") and pattern_matches(
                    pattern, ancestor
                ):
                    return pattern, ancestor, constraint
        return None

    def check(self, key: str, before: Any, after: Any) -> tuple[bool, str]:
        found = self._match(key)
        if found is None:
            return False, (
                f"{key} changed ({self._show(before)} -> {self._show(after)}) but this "
                "work may not change it; restore its value"
            )
        _pattern, where, constraint = found
        if where != key:  # a list or table constraint covers the whole value at ``where``
            if where in self.checked:
                return self.checked[where]
            segments = [s for _, s in split_key(where)]
            before = subtree(self.before, segments, self.missing)
            after = subtree(self.after, segments, self.missing)
            result = self._value(where, before, after, constraint)
            self.checked[where] = result
            return result
        return self._value(key, before, after, constraint)

    def bounds(self, key: str, before: Any, after: Any) -> str | None:
        """Why a present ``after`` value breaks the constraint its key matches, or None
        (unmatched keys, additions and removals are not this question)."""
        if after is self.missing:
            return None
        found = self._match(key)
        if found is None or found[1] != key:
            return None
        constraint = _relaxed(found[2])
        ok, text = self._value(key, before, after, constraint)
        return None if ok else text

    def _unit(self, key: str, constraint: KeyConstraint) -> str | None:
        """The unit a bare number of ``key`` is read in: the one its name carries
        (``connect_timeout_ms``: the pattern's), else the one the host's own comment next
        to it states (``# How long to wait (ms).``), else the constraint's."""
        kind = constraint.type
        if kind not in ("duration", "size") or not self.before_text:
            return constraint.unit
        last = canonical_key(key).rsplit(".", 1)[-1].rsplit("_", 1)[-1]
        if last in (DURATION_UNITS if kind == "duration" else SIZE_UNITS):
            return constraint.unit
        stated = stated_unit(key_context(self.before_text, key).comments, kind)
        return stated or constraint.unit

    def _show(self, value: Any) -> str:
        return "absent" if value is self.missing else short(value)

    def _value(
        self, key: str, before: Any, after: Any, constraint: KeyConstraint
    ) -> tuple[bool, str]:
        describe = constraint.describe  # only when a message needs it (hot for many keys)
        if before is self.missing and after is self.missing:
            return True, f"{key} unchanged"
        uncommented = False
        if before is self.missing and not constraint.may_add and self.before is not self.missing:
            if not (self.before_text and commented_option(self.before_text, key)):
                return False, f"{key} was added but may only be changed, not added"
            uncommented = True  # `# timeout_s = 30` documented it: setting it is a change
        if after is self.missing:
            if not constraint.may_remove:
                return False, f"{key} was removed; keep it (it may only change as {describe()})"
            return True, f"{key} removed"
        unit = self._unit(key, constraint)
        value, error = self._coerce(after, constraint.type, unit)
        if error:
            return False, f"{key} = {short(after)} is not {error}; it must be {describe()}"
        old: Any = self.missing
        if uncommented and constraint.type in _NUMERIC:
            # `# max-queries = 0` documents the value in force: the relative bound and the
            # spelling compare with it (None when the comment holds no readable value).
            documented = _documented(commented_value(self.before_text, key), self.fmt)
            before = self.missing if documented is None else documented
        if before is not self.missing:
            old, old_error = self._coerce(before, constraint.type, unit)
            if old_error:
                old = self.missing
        problem = None
        if old is not self.missing and constraint.type in ("duration", "size"):
            problem = _respelled(before, after, constraint.type)
        if problem is None:
            problem = self._problem(value, old, constraint, new_key=before is self.missing)
        if problem:
            return False, f"{key} = {short(after)} {problem}; it must be {describe()}"
        how = "uncomments the documented option, " if uncommented else ""
        if not self.explain:
            return True, ""
        return True, f"{key} {self._show(before)} -> {short(after)} ({how}{describe()})"

    def _coerce(
        self, value: Any, kind: ConstraintType, unit: str | None = None
    ) -> tuple[Any, str | None]:
        if kind in ("duration", "size"):
            return _quantity(value, kind, unit)
        if self.fmt in _STRING_FORMATS and isinstance(value, str):
            text = value.strip()
            if kind == "integer":
                return (int(text), None) if _INTEGER.fullmatch(text) else (None, "an integer")
            if kind == "number":
                if _NUMBER.fullmatch(text):
                    number = float(text)
                    return (int(number) if _INTEGER.fullmatch(text) else number), None
                return None, "a number"
            if kind == "boolean":
                parsed = _BOOLEANS[self.fmt].get(text.lower())
                return (parsed, None) if parsed is not None else (None, "a boolean")
        ok = {
            "string": isinstance(value, str),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "boolean": isinstance(value, bool),
            "list": isinstance(value, list | tuple),
            "table": isinstance(value, Mapping),
            "any": True,
        }[kind]
        if not ok:
            return None, f"a {kind}"
        if isinstance(value, float) and not math.isfinite(value):
            return None, "a finite number"
        return value, None

    def _item_problem(self, item: Any, constraint: KeyConstraint) -> str | None:
        value, error = self._coerce(item, constraint.type, constraint.unit)
        if error:
            return f"is not {error} ({short(item)})"
        return self._problem(value, self.missing, constraint)

    def _table_problem(self, table: Any, keys: dict[str, KeyConstraint]) -> str | None:
        """Why a whole table is not claimed by ``keys`` (every leaf must be), or None."""
        nested = Checker(keys, self.fmt, self.missing, table, self.missing)
        try:
            leaves = flatten(table)
        except ConfigSyntaxError as error:
            return f"has ambiguous keys ({error})"
        for key, leaf in leaves.items():
            ok, text = nested.check(key, self.missing, leaf)
            if not ok:
                return f"has {text}"
        return None

    def _problem(
        self, value: Any, old: Any, constraint: KeyConstraint, *, new_key: bool = False
    ) -> str | None:
        kind = constraint.type
        if kind in _NUMERIC:
            if constraint.min is not None and value < constraint.min:
                return f"is below {quantity(constraint.min, kind)}"
            if constraint.max is not None and value > constraint.max:
                return f"is above {quantity(constraint.max, kind)}"
            # A key the constraint lets appear has no current value: its absolute bounds
            # are the whole claim. A present value that did not read is no such case.
            fresh = new_key and constraint.may_add
            relative = None if fresh else _relative_problem(value, old, constraint, self.missing)
            if relative:
                return relative
        if kind == "string" and constraint.direction is not None:
            if old is self.missing:
                return "has no earlier version to compare with"
            moved = _version_problem(old, value, constraint.direction)
            if moved:
                return moved
        numeric = kind in _NUMERIC and old is not self.missing
        if numeric and constraint.direction is not None:
            if constraint.direction == "increase" and value < old:
                return f"decreases from {old}"
            if constraint.direction == "decrease" and value > old:
                return f"increases from {old}"
        if kind == "boolean" and constraint.only_to is not None and value != constraint.only_to:
            return f"may only become {str(constraint.only_to).lower()}"
        items = list(value) if kind == "list" else [value]
        if kind == "list":
            if constraint.min is not None and len(items) < constraint.min:
                return f"has {len(items)} items (at least {_num(constraint.min)})"
            if constraint.max is not None and len(items) > constraint.max:
                return f"has {len(items)} items (at most {_num(constraint.max)})"
            before = list(old) if isinstance(old, list | tuple) else []
            added, removed = list_diff(before, items)
            if added and not constraint.may_add:
                return f"adds {short(added[0])}"
            if removed and not constraint.may_remove:
                return f"removes or reorders {short(removed[0])}"
            if constraint.items is not None:
                for item in added:
                    problem = self._item_problem(item, constraint.items)
                    if problem:
                        return f"adds an item that {problem}"
        if kind == "table" and constraint.keys is not None:
            problem = self._table_problem(value, constraint.keys)
            if problem:
                return problem
        allowed_values = constraint.allowed
        if allowed_values is not None:
            allowed = TypedSet(allowed_values)
            for item in items:
                if item not in allowed:
                    return f"{'has' if kind == 'list' else 'is'} {short(item)}, not allowed"
        if constraint.pattern is not None:
            compiled = compile_re2(constraint.pattern)
            for item in items:
                if not isinstance(item, str) or compiled.fullmatch(item) is None:
                    return f"{'has' if kind == 'list' else 'is'} {short(item)}, not matching"
        return None


_NUMERIC = ("integer", "number", "duration", "size")
# A capital M after a number, outside ISO 8601 (PT10M): months to some duration parsers.
_MONTHS = re.compile(r"[0-9]\s*M(?![a-zA-Z])")


def _documented(raw: str | None, fmt: str) -> Any:
    """A commented-out value as the format reads it: text in string formats (INI, .env,
    .properties), else a TOML/JSON-style scalar (``0``, ``"10s"``); None when unreadable."""
    if raw is None or not raw:
        return None
    if fmt in _STRING_FORMATS:
        return raw
    try:
        value = _toml.loads(f"v = {raw}")["v"]
    except _toml.TOMLDecodeError:
        return None
    return value if isinstance(value, str | int | float) and not isinstance(value, bool) else None


def _months(text: str) -> bool:
    """A short duration with a capital ``M`` unit, ISO 8601's ``PT10M`` aside."""
    stripped = text.strip()
    if len(stripped) > 64 or stripped[:1] in ("P", "p"):
        return False
    return _MONTHS.search(stripped) is not None


def _quantity(value: Any, kind: str, unit: str | None) -> tuple[Any, str | None]:
    """A duration (seconds) or size (bytes) from a string with units or a bare number."""
    base = unit or ("s" if kind == "duration" else "B")
    if isinstance(value, bool):
        return None, f"a {kind}"
    number: float | None = None
    if isinstance(value, int | float):
        number = in_unit(float(value), base, kind)
    elif isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            number = in_unit(float(text), base, kind)
        else:
            number = duration_seconds(text) if kind == "duration" else size_bytes(text)
    if isinstance(value, str) and kind == "duration" and _months(value):
        return None, (
            "a duration read the same everywhere ('M' is months in some parsers and "
            "minutes in others; write 'm' or 'min')"
        )
    if number is None or not math.isfinite(number):
        spelled = "'30s', '1h30m', '500ms'" if kind == "duration" else "'512MB', '4 GiB'"
        return None, f"a {kind} ({spelled} or a number in {base})"
    return number, None


def _spelling(value: Any) -> str:
    """How a quantity is spelled: a number, a number in quotes, or text with units."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a floating-point number"
    if isinstance(value, str):
        text = value.strip()
        if _INTEGER.fullmatch(text):
            return "a bare number in quotes"
        if _NUMBER.fullmatch(text):
            return "a bare decimal in quotes"
        return "a quantity with units"
    return "another kind of value"


def _respelled(before: Any, after: Any, kind: str) -> str | None:
    """Why a duration/size whose spelling changed kind is not proven, or None.

    Dropping or adding the unit (``"500ms"`` -> ``500``), quotes (``30`` -> ``"30"``),
    or an integer turning into a float (``30`` -> ``3e1``) changes how loaders read it:
    a bare number is seconds to one, milliseconds or nanoseconds to another."""
    old, new = _spelling(before), _spelling(after)
    if old == new:
        return None
    return (
        f"changes how the value is spelled ({old} {short(before)} -> {new}); loaders read "
        f"a bare number in different units, so the new {kind} is not proven to mean what "
        "the old one did; keep the spelling kind"
    )


def _relative_problem(
    value: float, old: Any, constraint: KeyConstraint, missing: object
) -> str | None:
    """Why ``value`` is too far from the current value ``old`` (factor, step), or None."""
    if constraint.factor is None and constraint.step is None:
        return None
    if old is missing:
        return "has no current value to compare with (the bound is relative to it)"
    if old == 0 and constraint.zero_unlimited and value != 0:
        return None  # no limit -> a bounded one (min/max already hold): a tightening
    kind = constraint.type
    if constraint.step is not None and abs(value - old) > constraint.step:
        return (
            f"moves {quantity(abs(value - old), kind)} from {quantity(old, kind)} "
            f"(at most {quantity(constraint.step, kind)})"
        )
    factor = constraint.factor
    if factor is not None:
        if old == 0 or value == 0 or (old < 0) != (value < 0):
            if value != old:
                return f"changes from {quantity(old, kind)}, which no factor of it reaches"
        elif not (1 / factor <= value / old <= factor):
            return (
                f"is {_num(round(max(value / old, old / value), 2))} times the current "
                f"{quantity(old, kind)} (at most {_num(factor)} times)"
            )
    return None


_RELAXED: dict[int, tuple[KeyConstraint, KeyConstraint]] = {}


def _relaxed(constraint: KeyConstraint) -> KeyConstraint:
    """``constraint`` with additions and removals allowed (a bound on present values),
    made once per constraint object (by identity: an enum table is not hashable)."""
    known = _RELAXED.get(id(constraint))
    if known is not None and known[0] is constraint:
        return known[1]
    relaxed = constraint.model_copy(update={"may_add": True, "may_remove": True})
    if len(_RELAXED) < 4096:
        _RELAXED[id(constraint)] = (constraint, relaxed)
    return relaxed
