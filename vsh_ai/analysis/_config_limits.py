"""Limits a config file's own comments state for a key, and whether a value keeps them.

:func:`unkept_limit` reads the comments next to a changed key (the block right above it
and its inline comment, as :func:`~vsh_ai.analysis._config_context.key_context` gathers
them) for a stated bound: ``max 64``, ``at most 8``, ``under 200``, ``below nginx's 60 s
proxy_read_timeout``, ``≤ 4 GiB``, ``between 1 and 32``, ``at least 2``. A bound is kept
only when the new value provably keeps it: both sides are bare numbers, or both are sizes
or both durations (compared in bytes or seconds; a number's unit comes from its key,
``timeout_s``, ``cache_mb``). A formula (``2 × vCPU + 1``, ``workers * pool``), a
relation to another value (``less than read_timeout``) or a bound in another unit cannot
be checked, so it is never proven kept. Like every comment heuristic this only adds a
review; it never proves a change allowed.
"""

from __future__ import annotations

import re

from ._config_words import canonical_key
from ._quantities import DURATION_UNITS, SIZE_UNITS, duration_seconds, in_unit, size_bytes

__all__ = ("unkept_limit",)

_MAX_COMMENT = 2000
_CLAUSE = re.compile(r"[;!?]|[.,:](?=\s|$)|\s[-–—]\s")
_NUMBER = r"([0-9]+(?:\.[0-9]+)?)\s*([a-zµ%]+\b|%)?"
_FILLER = r"(?:[\s(]*(?:the|a|an|of|is|be|=|:|[\w.-]+['’]s))*[\s(]*"
_UPPER = (
    r"max(?:imum)?|at\s+most|up\s+to|no\s+more\s+than|not\s+more\s+than|"
    r"(?:must|should|may)\s+not\s+exceed|(?:never|not)\s+(?:above|exceed|over)|"
    r"limit(?:ed)?\s+(?:to|of|is)|under|below|less\s+than|lower\s+than|smaller\s+than|"
    r"fewer\s+than|<=|≤|<"
)
_LOWER = (
    r"min(?:imum)?|at\s+least|no\s+less\s+than|no\s+fewer\s+than|not\s+below|"
    r"never\s+below|greater\s+than|more\s+than|higher\s+than|>=|≥|>"
)
_AMBIGUOUS = r"above|over|exceed(?:s|ing)?|cap(?:ped)?\s+(?:at|to)"
_BOUND = re.compile(
    rf"(?i)(?<![\w<>=≤≥])(?:(?P<upper>{_UPPER})|(?P<lower>{_LOWER})|(?P<other>{_AMBIGUOUS}))"
    rf"(?![\w])(?P<rest>.*)"
)
_BETWEEN = re.compile(
    rf"(?i)\b(?:between|from|range|valid|allowed)\b{_FILLER}{_NUMBER}\s*"
    rf"(?:and|to|-|–|\.\.)\s*{_NUMBER}"
)
_LEADING = re.compile(rf"(?i)^{_FILLER}{_NUMBER}")
# A formula or a name of another value: nothing this module can evaluate.
_FORMULA = re.compile(r"(?i)×|\b[\w.]+\s*\*\s*[\w(]|\b\d+\s*x\s*[a-z]|\b[a-z]\w*\s+x\s+[a-z]")
_OTHER_NAME = re.compile(r"(?i)^[\s(]*(?:the\s+|[\w.-]+['’]s\s+)*[a-z][\w.]*(?:_|\.)[\w.]*")
_QUANTITY_WORD = re.compile(
    r"(?i)^[\s(]*(?:the\s+|[\w.-]+['’]s\s+)*(?:v?cpus?|cores?|ram|memory|heap|"
    r"connections?|workers?|threads?|timeouts?|limits?|quotas?|capacity)\b"
)

# What a clause with arithmetic may be instead of a limit: a default, an example, a unit.
_DESCRIPTIVE = re.compile(
    r"(?i)\b(?:defaults?(?:\s+(?:is|to|value))?|e\.g|for\s+example|example|"
    r"in\s+(?:bytes|kib|mib|gib|kb|mb|gb|seconds|secs|ms|milliseconds|minutes))\b"
)
_CONSTANT_PRODUCT = re.compile(r"[\s#(]*[0-9]+(?:\s*[*×x]\s*[0-9]+)+[\s)]*(?:bytes?)?\s*")
# Advice words: a formula next to one of them is a rule the file asks to keep.
_ADVICE = re.compile(
    r"(?i)\b(?:recommend(?:ed|s)?|should|must|keep|never|rule\s+of\s+thumb|"
    r"limit|exceed|budget|at\s+most|up\s+to)\b"
)

_Quantity = tuple[str, float]  # ("number" | "size" | "duration" | "unknown", amount)


def _limit(number: str, unit: str | None) -> _Quantity:
    amount = float(number)
    if not unit:
        return ("number", amount)
    unit = unit.lower()
    if unit in SIZE_UNITS and unit not in ("m", "b") and not unit.startswith("byte"):
        return ("size", amount * SIZE_UNITS[unit])
    if unit in ("b", "byte", "bytes"):
        return ("size", amount)
    if unit in DURATION_UNITS and unit != "m":
        return ("duration", amount * DURATION_UNITS[unit])
    if unit == "m" or not unit.isalpha():
        return ("unknown", amount)  # m (MiB or minutes?), %: not comparable
    return ("number", amount)  # a count of something: 200 connections, 2 replicas


def _value(key: str, value: object) -> _Quantity | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        last = canonical_key(key).rsplit(".", 1)[-1].rsplit("_", 1)[-1]
        if last in ("bytes", "byte"):
            return ("size", float(value))
        if last in SIZE_UNITS and last not in ("k", "m", "g", "t", "b"):
            size = in_unit(float(value), last, "size")
            return None if size is None else ("size", size)
        if last in DURATION_UNITS and last not in ("m", "d", "w"):
            seconds = in_unit(float(value), last, "duration")
            return None if seconds is None else ("duration", seconds)
        return ("number", float(value))
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?[0-9]+(?:\.[0-9]+)?", text):
            return _value(key, float(text))
        size = size_bytes(text)
        if size is not None:
            return ("size", size)
        seconds = duration_seconds(text)
        if seconds is not None:
            return ("duration", seconds)
    return None


def _keeps(value: _Quantity, bound: _Quantity, direction: str) -> bool:
    if value[0] != bound[0] or value[0] == "unknown":
        return False
    if direction == "upper":
        return value[1] <= bound[1]
    return value[1] >= bound[1]


def _describes(clause: str) -> bool:
    """A comment that describes the default, an example or the unit with arithmetic
    (``default: cpu core count * 2``, ``in bytes, 2 * 1024 * 1024``, ``# 256 * 1024``) and
    states no bound or advice: it says what a value means, not what it may be."""
    if _BOUND.search(clause) or _BETWEEN.search(clause) or _ADVICE.search(clause):
        return False
    return bool(_DESCRIPTIVE.search(clause) or _CONSTANT_PRODUCT.fullmatch(clause))


def _clause_kept(clause: str, value: _Quantity, describes: bool) -> bool:
    """False when ``clause`` states a bound ``value`` is not proven to keep (``describes``:
    its comment only describes the default, an example or the unit)."""
    if _FORMULA.search(clause):
        return describes
    between = _BETWEEN.search(clause)
    if between is not None:
        low = _limit(between.group(1), between.group(2) or between.group(4))
        high = _limit(between.group(3), between.group(4) or between.group(2))
        if not (_keeps(value, low, "lower") and _keeps(value, high, "upper")):
            return False
    for match in _BOUND.finditer(clause):
        rest = match.group("rest")
        number = _LEADING.match(rest)
        if match.group("other") is not None:
            if number is not None or _OTHER_NAME.match(rest) or _QUANTITY_WORD.match(rest):
                return False  # a bound of unclear direction: not provable
            continue
        direction = "upper" if match.group("upper") is not None else "lower"
        if number is not None:
            if not _keeps(value, _limit(number.group(1), number.group(2)), direction):
                return False
            continue
        word = match.group(0)[: len(match.group(0)) - len(rest)].strip().lower()
        if word.startswith(("max", "min")):
            continue  # "max connections per pool" names the key, not a bound
        if _OTHER_NAME.match(rest) or _QUANTITY_WORD.match(rest):
            return False  # bounded by another value
    return True


def unkept_limit(comments: tuple[str, ...], key: str, value: object) -> str | None:
    """The comment stating a limit, formula or relation that ``value`` (the new value of
    ``key``) is not proven to keep, or None (see the module docs)."""
    quantity = _value(key, value)
    if quantity is None:
        return None
    for comment in comments:
        text = comment[:_MAX_COMMENT]
        describes = _describes(text)
        for clause in _CLAUSE.split(text):
            if clause.strip() and not _clause_kept(clause, quantity, describes):
                return comment
    return None
