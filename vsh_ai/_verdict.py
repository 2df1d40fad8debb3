"""Verdict: what one judge decided about one transaction, and why."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = (
    "Decision",
    "FailureCategory",
    "Usage",
    "Verdict",
    "WrongVerdict",
    "json_safe",
    "plain_data",
    "plain_verdict",
    "type_name",
)

Decision = Literal["approve", "review", "reject", "abstain"]

FailureCategory = Literal[
    "exception",
    "timeout",
    "cancelled",
    "wrong_type",
    "capacity",
    "incomplete_evidence",
    "provider_error",
    "invalid_output",
    "inconsistent_verdict",
    "over_budget",
    "unshared_content",
    "binary_content",
]


def json_safe(value: object, *, depth: int = 0) -> Any:
    """``value`` as plain JSON data: anything else becomes its type name in angle brackets.

    Verdict details travel into tool results, approval metadata and eval reports; one
    unserialisable value must not turn a decided (possibly committed) call into a crash.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > 32:
        return "<nested too deeply>"
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [json_safe(v, depth=depth + 1) for v in items]
    try:
        dumped = value.model_dump(mode="json")  # type: ignore[attr-defined]
    except Exception:
        return f"<{type(value).__name__}>"
    try:
        json.dumps(dumped)
    except (TypeError, ValueError):
        return f"<{type(value).__name__}>"
    return dumped


class Usage(BaseModel):
    """Model usage for one decision (LLM judges); zero for deterministic judges."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Verdict(BaseModel):
    """``approve | review | reject | abstain`` with actionable feedback and its author.

    ``reason`` is written for the agent whose work is judged: say what to change.
    ``failure`` is set when the verdict is a fail-closed outcome rather than a judgement.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Decision
    reason: str
    judge: str = Field(description="Id of the judge or rule that decided.")
    failure: FailureCategory | None = None
    cited: tuple[str, ...] = ()
    usage: Usage | None = None
    latency_s: float | None = None
    model: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("details", mode="after")
    @classmethod
    def _json_details(cls, details: dict[str, Any]) -> dict[str, Any]:
        safe: dict[str, Any] = json_safe(details)
        return safe

    @classmethod
    def approve(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="approve", reason=reason, judge=judge, **extra)

    @classmethod
    def review(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="review", reason=reason, judge=judge, **extra)

    @classmethod
    def reject(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="reject", reason=reason, judge=judge, **extra)

    @classmethod
    def abstain(cls, reason: str, *, judge: str, **extra: Any) -> Verdict:
        return cls(decision="abstain", reason=reason, judge=judge, **extra)

    @classmethod
    def failed(cls, category: FailureCategory, reason: str, *, judge: str) -> Verdict:
        """A fail-closed outcome: always ``review``, never approval."""
        return cls(decision="review", reason=reason, judge=judge, failure=category)

    @property
    def is_final(self) -> bool:
        """``abstain`` lets the next judge decide; anything else is an opinion."""
        return self.decision != "abstain"


# -- a judge's answer is data --------------------------------------------------------------
#
# What a judge returns is an object of the judge's making: a ``Verdict`` subclass can run
# code on any attribute read (``__getattribute__``, properties, ``model_copy``, ``is_final``).
# ``plain_verdict`` reads the stored fields once, straight from the instance dictionary
# through descriptors taken from ``BaseModel`` and ``type`` themselves (no lookup on the
# judge's class), checks each value by exact type, and builds a new ``Verdict`` from copies.
# Nothing of the judge's object is called, before or after.

_INSTANCE_DICT = BaseModel.__dict__["__dict__"]
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_NAME = type.__dict__["__name__"]
_DECISIONS = frozenset(get_args(Decision))
_FAILURES = frozenset(get_args(FailureCategory))
_USAGE_FIELDS = ("requests", "input_tokens", "output_tokens")
_PLAIN_NODES = 1_000_000


class WrongVerdict(TypeError):
    """A judge returned something that is not a well-formed :class:`Verdict`.

    ``what`` says it in a few words for feedback (``"str, not a Verdict"``).
    """

    def __init__(self, message: str, *, what: str = "an invalid Verdict") -> None:
        super().__init__(message)
        self.what = what


def type_name(value: object) -> str:
    """The name of ``value``'s class, read without running anything of that class."""
    name = _TYPE_NAME.__get__(type(value))
    return name if type(name) is str else "object"


def _stored(value: object, model: type[BaseModel]) -> dict[str, object] | None:
    """The stored fields of a ``model`` instance (subclasses included) as a new plain dict.

    None when ``value`` is not one: wrong class, a replaced instance dict, a key that is not
    exactly ``str``. Iterating an exact ``dict`` and comparing exact ``str`` keys run no
    user code.
    """
    mro = _TYPE_MRO.__get__(type(value))
    if type(mro) is not tuple or not any(klass is model for klass in mro):
        return None
    try:
        raw = _INSTANCE_DICT.__get__(value)
    except TypeError:
        return None
    if type(raw) is not dict:
        return None
    out: dict[str, object] = {}
    for key, item in dict.items(raw):
        if type(key) is not str:
            return None
        out[key] = item
    return out


def _text(value: object) -> str:
    if type(value) is not str:
        raise WrongVerdict(f"expected text, got {type_name(value)}")
    return value


def _optional_text(value: object, allowed: frozenset[str] | None = None) -> str | None:
    if value is None:
        return None
    text = _text(value)
    if allowed is not None and text not in allowed:
        raise WrongVerdict(f"unknown value {text[:40]!r}")
    return text


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise WrongVerdict(f"expected a count, got {type_name(value)}")
    return value


def _usage(value: object) -> Usage | None:
    if value is None:
        return None
    fields = _stored(value, Usage)
    if fields is None:
        raise WrongVerdict(f"usage is {type_name(value)}, not Usage")
    counts = {name: _count(fields.get(name, 0)) for name in _USAGE_FIELDS}
    return Usage(**counts)


def _latency(value: object) -> float | None:
    if value is None:
        return None
    if type(value) is not float and type(value) is not int:
        raise WrongVerdict(f"latency is {type_name(value)}, not a number")
    seconds = float(value)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise WrongVerdict("latency is not a finite, non-negative number")
    return seconds


def _cited(value: object) -> tuple[str, ...]:
    if type(value) is not tuple and type(value) is not list:
        raise WrongVerdict(f"cited is {type_name(value)}, not a tuple")
    return tuple(_text(item) for item in value)


def plain_verdict(value: object) -> Verdict:
    """A new, plain :class:`Verdict` holding copies of ``value``'s stored fields.

    Raises :class:`WrongVerdict` for anything that is not a well-formed verdict: another
    type, a decision or failure outside the known sets (``model_construct`` skips
    validation), an approval carrying a failure category, or any field whose value is not
    exactly of its type (``str`` subclasses, ``bool`` counts, NaN latency...). ``details``
    becomes :func:`plain_data`. No method or property of ``value`` runs.
    """
    fields = _stored(value, Verdict)
    if fields is None:
        what = f"{type_name(value)}, not a Verdict"
        raise WrongVerdict(what, what=what)
    for required in ("decision", "reason", "judge"):
        if required not in fields:
            raise WrongVerdict(f"the verdict has no {required}")
    decision = _optional_text(fields["decision"], _DECISIONS)
    failure = _optional_text(fields.get("failure"), _FAILURES)
    if decision == "approve" and failure is not None:
        raise WrongVerdict(f"an approval with failure {failure!r}")
    details = fields.get("details", {})
    if type(details) is not dict:
        raise WrongVerdict(f"details is {type_name(details)}, not a dict")
    return Verdict(
        decision=cast(Decision, decision),
        reason=_text(fields["reason"]),
        judge=_text(fields["judge"]),
        failure=cast("FailureCategory | None", failure),
        cited=_cited(fields.get("cited", ())),
        usage=_usage(fields.get("usage")),
        latency_s=_latency(fields.get("latency_s")),
        model=_optional_text(fields.get("model")),
        details=plain_data(details),
    )


def plain_data(value: object) -> Any:
    """``value`` as plain JSON data built only from exact builtin types, running no user code.

    Like :func:`json_safe`, but stricter: ``str``/``int``/``float`` subclasses become their
    builtin values (through the builtin's own method, not the subclass's), containers are
    walked only when they are exactly ``dict``/``list``/``tuple``/``set``/``frozenset``, and
    anything else (models included) becomes ``"<TypeName>"``. Depth and size are bounded.
    """
    budget = [_PLAIN_NODES]
    return _plain(value, 0, budget)


def _plain(value: object, depth: int, budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        return "<too large>"
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        number = cast(float, value)
        return number if math.isfinite(number) else str(number)
    # Subclasses of the builtins, converted by the builtin's own method. ``issubclass`` on
    # the real type: ``isinstance`` would read the object's ``__class__`` on a miss.
    if issubclass(kind, str):
        return str.__str__(cast(str, value))
    if issubclass(kind, int):
        return int.__int__(cast(int, value))
    if issubclass(kind, float):
        number = float.__float__(cast(float, value))
        return number if math.isfinite(number) else str(number)
    if depth > 32:
        return "<nested too deeply>"
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in dict.items(cast("dict[object, object]", value)):
            out[_plain_key(key)] = _plain(item, depth + 1, budget)
        return out
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        items = [_plain(item, depth + 1, budget) for item in cast("Iterable[object]", value)]
        if kind is set or kind is frozenset:
            items.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return items
    return f"<{type_name(value)}>"


def _plain_key(key: object) -> str:
    if type(key) is str:
        return key
    if key is None or type(key) is bool or type(key) is int or type(key) is float:
        return json.dumps(key)
    if issubclass(type(key), str):
        return str.__str__(cast(str, key))
    return f"<{type_name(key)}>"
