"""What a changed config key may become: :class:`KeyConstraint` and its value helpers."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..analysis._quantities import duration_seconds, in_unit, size_bytes
from ._content import compile_re2
from ._glob import check_globs
from ._key_patterns import name_glob

__all__ = ("ConstraintType", "KeyConstraint", "globs_given", "quantity", "short")

ConstraintType = Literal[
    "string", "integer", "number", "duration", "size", "boolean", "list", "table", "any"
]
_NUMERIC = ("integer", "number", "duration", "size")
_BASE_UNIT = {"duration": "s", "size": "B"}

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_BOOLEANS: dict[str, dict[str, bool]] = {
    "ini": {"1": True, "yes": True, "true": True, "on": True}
    | {"0": False, "no": False, "false": False, "off": False},
    "env": {"1": True, "yes": True, "true": True, "on": True}
    | {"0": False, "no": False, "false": False, "off": False},
    "properties": {"true": True, "false": False},
}
_STRING_FORMATS = frozenset(_BOOLEANS)


def globs_given(globs: tuple[str, ...]) -> tuple[str, ...]:
    if not globs:
        raise ValueError("give at least one glob in `paths`")
    return check_globs(globs)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class KeyConstraint(BaseModel):
    """What a changed config key may become.

    ``type`` is required. ``min``/``max`` bound numbers (list length for lists);
    ``duration`` and ``size`` are numbers too, read from strings with units (``"10s"``,
    ``"1h30m"``, ``"4 GiB"``, ``"512m"``) or as bare numbers in ``unit`` (default seconds /
    bytes), and compared as seconds / bytes; their ``min``/``max``/``step`` may be written
    with units (``max = "1h"``). ``factor`` bounds a number relative to its current value
    (new/old within [1/factor, factor]) and ``step`` absolutely (``|new - old| <= step``);
    both need a current value. ``enum`` lists allowed values (typed: ``true`` is not
    ``1``) or, as a table, names each allowed value's meaning. ``pattern`` is an RE2 full
    match for strings; ``direction`` restricts numbers to increase or decrease (for
    strings: a version, ``name@v1.2`` or ``1.2.3``, whose name stays and whose version
    only moves that way; a value that is not such a version is not claimed);
    ``only_to`` restricts booleans to one value; ``may_add``/``may_remove`` allow the key
    (or list items) to appear or disappear. ``zero_unlimited`` says a current value of 0
    means "no limit" for this key (a timeout that never fires, an unbounded connection
    count): a finite value within ``min``/``max`` tightens it, so the relative bound does
    not apply to it (N -> 0, lifting the limit, still has to pass ``min``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: ConstraintType
    min: float | None = None
    max: float | None = None
    factor: float | None = Field(
        default=None, gt=1, description="New/old must lie within [1/factor, factor]."
    )
    step: float | None = Field(default=None, ge=0, description="|new - old| at most this.")
    unit: str | None = Field(
        default=None, description="duration/size: the unit of bare numbers (ms, s, MB, ...)."
    )
    enum: tuple[Any, ...] | dict[str, str] | None = Field(
        default=None, description="Allowed values: a list, or a table value -> its meaning."
    )
    pattern: str | None = Field(default=None, description="RE2 full match for strings.")
    direction: Literal["increase", "decrease"] | None = None
    only_to: bool | None = Field(default=None, description="Booleans may only become this.")
    may_add: bool = False
    may_remove: bool = False
    zero_unlimited: bool = Field(
        default=False,
        description="A current value of 0 means no limit: any value within min/max tightens it.",
    )
    items: KeyConstraint | None = Field(
        default=None, description="list: what each added item must be (else any item)."
    )
    keys: dict[str, KeyConstraint] | None = Field(
        default=None,
        description="table: every key of the table must match one of these patterns.",
    )

    @model_validator(mode="before")
    @classmethod
    def _quantities(cls, data: Any) -> Any:
        """``min``/``max``/``step`` of a duration or size written with units -> base units."""
        if not isinstance(data, dict) or data.get("type") not in ("duration", "size"):
            return data
        kind = data["type"]
        unit = data.get("unit") or _BASE_UNIT[kind]
        if not isinstance(unit, str) or in_unit(1.0, unit, kind) is None:
            raise ValueError(f"unit {unit!r} is not a {kind} unit")
        out = dict(data)
        for name in ("min", "max", "step"):
            value = out.get(name)
            if isinstance(value, str):
                parsed = duration_seconds(value) if kind == "duration" else size_bytes(value)
                if parsed is None:
                    raise ValueError(f"{name} = {value!r} is not a {kind} ('10s', '4 GiB')")
                out[name] = parsed
            elif isinstance(value, int | float) and not isinstance(value, bool):
                out[name] = in_unit(float(value), unit, kind)
        return out

    @field_validator("pattern")
    @classmethod
    def _re2(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            compile_re2(pattern)
        return pattern

    @model_validator(mode="after")
    def _consistent(self) -> KeyConstraint:
        if (self.min is not None or self.max is not None) and self.type not in (
            *_NUMERIC,
            "list",
        ):
            raise ValueError(
                f"min/max apply to integer, number or list (or duration, size), not {self.type}"
            )
        if (self.factor is not None or self.step is not None) and self.type not in _NUMERIC:
            raise ValueError("factor/step apply to integer, number, duration or size")
        if self.unit is not None and self.type not in ("duration", "size"):
            raise ValueError("unit applies to duration and size")
        if self.zero_unlimited and (self.type not in _NUMERIC or self.min is None or self.min <= 0):
            raise ValueError(
                "zero_unlimited applies to integer, number, duration or size keys with a "
                "min above 0 (so lifting the limit, N -> 0, is never within bounds)"
            )
        if self.direction is not None and self.type not in (*_NUMERIC, "string"):
            raise ValueError(
                "direction applies to numbers or (version) strings; for booleans use "
                "only_to = true|false"
            )
        if self.only_to is not None and self.type != "boolean":
            raise ValueError("only_to applies to booleans")
        if self.items is not None and self.type != "list":
            raise ValueError("items applies to lists")
        if self.keys is not None:
            if self.type != "table":
                raise ValueError("keys applies to tables")
            for pattern in self.keys:
                name_glob(pattern)
        if self.pattern is not None and self.type not in ("string", "list"):
            raise ValueError("pattern applies to strings (or lists of strings)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    @property
    def allowed(self) -> tuple[Any, ...] | None:
        """The enum's allowed values (a table's keys), or None."""
        if isinstance(self.enum, dict):
            return tuple(self.enum)
        return self.enum

    def meaning(self, value: Any) -> str:
        """What the enum table says ``value`` means ('' when it says nothing)."""
        return self.enum.get(value, "") if isinstance(self.enum, dict) else ""

    def describe(self) -> str:
        parts: list[str] = [self.type]
        if self.min is not None or self.max is not None:
            low = "" if self.min is None else quantity(self.min, self.type)
            high = "" if self.max is None else quantity(self.max, self.type)
            parts.append(f"within {low}..{high}")
        if self.factor is not None:
            parts.append(f"at most {_num(self.factor)}x up or down from the current value")
        if self.step is not None:
            parts.append(f"at most {quantity(self.step, self.type)} from the current value")
        if self.zero_unlimited:
            parts.append("(0 is no limit: any bounded value may replace it)")
        if self.enum is not None:
            parts.append("one of " + ", ".join(short(v) for v in self.allowed or ()))
        if self.pattern is not None:
            parts.append(f"matching {self.pattern!r}")
        if self.direction is not None:
            parts.append(f"{self.direction} only")
        if self.only_to is not None:
            parts.append(f"only to {str(self.only_to).lower()}")
        return " ".join(parts)


def quantity(value: float, kind: str) -> str:
    """A bound as people write it: ``1h``, ``30s``, ``64GiB``; plain numbers as numbers."""
    units = {
        "duration": ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"), (1e-3, "ms")),
        "size": ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"), (1, "B")),
    }.get(kind)
    if not units or value == 0:
        return _num(value)
    for factor, name in units:
        if abs(value) >= factor:
            return f"{_num(round(value / factor, 3))}{name}"
    return f"{_num(value)}{units[-1][1]}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_VERSION = re.compile(r"(?P<name>.*[@:])?[vV]?(?P<version>[0-9]+(?:\.[0-9]+)*)")


def _version(text: Any) -> tuple[str, tuple[int, ...]] | None:
    match = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    return match.group("name") or "", tuple(int(p) for p in match.group("version").split("."))


def _version_problem(old: Any, new: Any, direction: str) -> str | None:
    """Why ``old`` -> ``new`` is not a version move in ``direction`` (None when it is)."""
    before, after = _version(old), _version(new)
    if before is None or after is None:
        return f"is not a version comparable with {short(old)} (name@vX.Y or X.Y.Z)"
    if before[0] != after[0]:
        return f"changes the name from {before[0][:-1]!r}"
    width = max(len(before[1]), len(after[1]))
    a = before[1] + (0,) * (width - len(before[1]))
    b = after[1] + (0,) * (width - len(after[1]))
    if (direction == "increase" and b <= a) or (direction == "decrease" and b >= a):
        return f"does not {direction} the version from {short(old)}"
    return None
