"""What a config file says around a key: its line, the comments next to it, its neighbours.

:func:`key_context` finds the line that sets a key path (any format: ``key = v``,
``key: v``, ``"key": v``, ``a.b.key=v``; among several, the one under the key's parents)
and gathers the comment block right above it, its inline comment and the nearby key
lines. :func:`commented_option` says whether a file documents a key as a commented-out
line (``# timeout_s = 30``). :func:`comment_warning` reads those comments for a warning
about a new value: a sentence naming the value together with what it exposes or forbids
(``debug logs request bodies and headers``), or a capacity the value exceeds (``hosts
have 8 GB``, ``at most 64``). Everything here is a heuristic that can only add a review
or context: it never proves a change allowed.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

from ._config_keys import _segments
from ._quantities import size_bytes

__all__ = (
    "KeyContext",
    "comment_warning",
    "commented_option",
    "commented_value",
    "key_context",
    "stated_unit",
)

_COMMENT = re.compile(r"^\s*(?:#|;|//|!)")
_INLINE = re.compile(r"\s(?:#|//|;)\s?(.*)$")
_MAX_ABOVE = 8
_MAX_HITS = 16  # lines setting a name, scored against the key's parents
_MAX_WALK = 200  # lines walked back from a hit to find its parents
_MAX_SPELLED = 200
_MAX_COMMENT = 2000
_NEIGHBOURS = 3
_MAX_LINES = 20_000


@dataclass(frozen=True, slots=True)
class KeyContext:
    """Where a key is set (1-based line, 0 when not found) and what surrounds it."""

    key: str
    line: int
    text: str
    comments: tuple[str, ...]
    neighbours: tuple[str, ...]


def _names(key: str) -> tuple[str, ...]:
    try:
        segments = _segments(key, False)
    except ValueError:
        return ()
    return tuple(str(s[1]) for s in segments if s[0] == "key")


_DEFINES = re.compile(r"""^\s*(?:export\s+|-\s+)?["']?([^"'=:\s\[\]{}]+)["']?\s*[:=]""")


@dataclass(frozen=True, slots=True)
class _Index:
    lines: list[str]
    by_name: dict[str, list[int]]


@lru_cache(maxsize=64)
def _index(text: str) -> _Index:
    """Each line's defined key name (lower case; a dotted name also by its last part)."""
    lines = text.splitlines()[:_MAX_LINES]
    by_name: dict[str, list[int]] = {}
    for number, line in enumerate(lines):
        if _COMMENT.match(line):
            continue
        match = _DEFINES.match(line)
        if match is None:
            continue
        name = match.group(1).lower()
        by_name.setdefault(name, []).append(number)
        if "." in name:
            by_name.setdefault(name.rsplit(".", 1)[1], []).append(number)
    return _Index(lines, by_name)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _score(lines: list[str], at: int, parents: tuple[str, ...]) -> int:
    """How well ``parents`` name the enclosing lines of ``at`` (headers, less indent):
    each parent found counts, the nearer ones (the key's own table first) for more."""
    if not parents:
        return 0
    weight = {p.lower(): 2**depth for depth, p in enumerate(parents)}
    found: set[str] = set()
    depth = _indent(lines[at])
    for word in re.findall(r"[\w-]+", lines[at].split("=")[0].split(":")[0].lower())[:-1]:
        if word in weight:
            found.add(word)  # a dotted name: a.b.key = 1
    for index in range(at - 1, max(-1, at - _MAX_WALK), -1):
        line = lines[index]
        stripped = line.strip()
        if not stripped or _COMMENT.match(line):
            continue
        header = stripped.startswith("[") and stripped.endswith("]")
        if header or _indent(line) < depth:
            for word in re.findall(r"[\w-]+", stripped.split("=")[0].split(":")[0].lower()):
                if word in weight:
                    found.add(word)
            if not header:
                depth = _indent(line)
    return sum(weight[word] for word in found)


def key_context(text: str, key: str) -> KeyContext:
    """The line setting ``key`` in ``text``, its comments and its neighbouring key lines."""
    index = _index(text)
    lines = index.lines
    names = _names(key)
    hits = index.by_name.get(names[-1].lower(), []) if names else []
    if not hits:
        return KeyContext(key, 0, "", (), ())
    candidates = set(hits[:_MAX_HITS])
    if len(names) > 1:  # and the first setting after each line naming the parent
        for parent in index.by_name.get(names[-2].lower(), [])[:_MAX_HITS]:
            after = bisect.bisect_right(hits, parent)
            if after < len(hits):
                candidates.add(hits[after])
    if len(candidates) == 1:  # nothing to choose between: no enclosing lines to score
        (at,) = candidates
    else:
        at = max(sorted(candidates), key=lambda i: (_score(lines, i, names[:-1]), -i))
    comments: list[str] = []
    for above in range(at - 1, max(-1, at - 1 - _MAX_ABOVE), -1):
        if not _COMMENT.match(lines[above]):
            break
        comments.append(_COMMENT.sub("", lines[above]).strip())
    comments.reverse()
    inline = _INLINE.search(lines[at])
    if inline and inline.group(1).strip():
        comments.append(inline.group(1).strip())
    neighbours = [
        lines[i].strip()
        for i in range(max(0, at - _NEIGHBOURS), min(len(lines), at + _NEIGHBOURS + 1))
        if i != at and lines[i].strip() and not _COMMENT.match(lines[i])
    ]
    return KeyContext(key, at + 1, lines[at].strip(), tuple(comments), tuple(neighbours))


_DURATION_WORDS = {
    "ns": "ns", "nanoseconds": "ns", "us": "us", "µs": "us", "microseconds": "us",
    "ms": "ms", "msec": "ms", "msecs": "ms", "millis": "ms", "millisecond": "ms",
    "milliseconds": "ms", "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min", "h": "h", "hour": "h",
    "hours": "h", "day": "d", "days": "d",
}  # fmt: skip
_SIZE_WORDS = {
    "b": "B", "byte": "B", "bytes": "B", "kb": "KB", "kib": "KiB", "kilobytes": "KB",
    "mb": "MB", "mib": "MiB", "megabytes": "MB", "gb": "GB", "gib": "GiB", "gigabytes": "GB",
}  # fmt: skip
_UNIT_WORD = r"(µs|[a-z]+)"
# How a comment names the unit of the value it documents: "(ms)", "in milliseconds",
# "unit: seconds", or a comment that is only the unit ("# seconds").
_STATED = (
    re.compile(rf"(?i)\(\s*(?:in\s+)?{_UNIT_WORD}\s*\)"),
    re.compile(rf"(?i)\b(?:in|units?:?)\s+{_UNIT_WORD}\b"),
    re.compile(rf"(?i)^\s*{_UNIT_WORD}\s*\.?\s*$"),
)


def stated_unit(comments: tuple[str, ...], kind: str) -> str | None:
    """The one unit of ``kind`` ("duration" or "size") that ``comments`` name for their
    value (``(ms)``, ``in bytes``, ``# seconds``), or None (none, or several that differ).

    Read it from the host's own file (the before-state), never from what a program wrote:
    a comment an agent adds would otherwise choose the unit its value is judged in.
    """
    words = _DURATION_WORDS if kind == "duration" else _SIZE_WORDS
    found: set[str] = set()
    for comment in comments:
        if len(comment) > _MAX_COMMENT:
            continue
        for pattern in _STATED:
            for match in pattern.finditer(comment):
                unit = words.get(match.group(1).lower())
                single = len(match.group(1)) == 1
                if unit is not None and not (single and pattern is _STATED[1]):
                    found.add(unit)
    return found.pop() if len(found) == 1 else None


def commented_option(text: str, key: str) -> bool:
    """True when ``text`` documents ``key`` as a commented-out setting (``# key = 30``)."""
    names = _names(key)
    if not names:
        return False
    documented = _commented_names(text)
    return names[-1].lower() in documented or ".".join(names).lower() in documented


def commented_value(text: str, key: str) -> str | None:
    """The value text a commented-out setting of ``key`` documents (``# key = 30`` ->
    ``"30"``), or None: no such line, or lines that document it with different values (in
    different tables, say)."""
    names = _names(key)
    if not names:
        return None
    wanted = {names[-1].lower(), ".".join(names).lower()}
    found: set[str] = set()
    for line in _index(text).lines:
        if not _COMMENT.match(line):
            continue
        body = _COMMENT.sub("", line, count=1).lstrip("#;/! \t")
        match = _DEFINES.match(body)
        if match is not None and match.group(1).lower() in wanted:
            found.add(body[match.end() :].strip())
    return found.pop() if len(found) == 1 else None


@lru_cache(maxsize=64)
def _commented_names(text: str) -> frozenset[str]:
    names: set[str] = set()
    for line in _index(text).lines:
        if _COMMENT.match(line):
            match = _DEFINES.match(_COMMENT.sub("", line, count=1).lstrip("#;/! \t"))
            if match is not None:
                names.add(match.group(1).lower())
    return frozenset(names)


_WARNING = re.compile(
    r"(?i)\b(?:bod(?:y|ies)|headers?|payloads?|pii|personal|secrets?|passwords?|tokens?|"
    r"credentials?|sensitive|never|do\s+not|don'?t|must\s+not|not\s+(?:for|in)\s+prod\w*|"
    r"unsafe|insecure|leaks?|exposes?|dangerous|careful|warning|caution|avoid|forbidden)\b"
)
_CLAUSE = re.compile(r"[;()!?]|[.,:](?=\s|$)|\s[-–—]\s")  # not the dots of a.b.c
_SIZE_STATED = re.compile(r"(?i)\b([0-9]+(?:\.[0-9]+)?)\s*([kmgt]i?b)\b")
_CAPACITY_WORDS = re.compile(
    r"(?i)\b(?:ram|memory|mem|hosts?|nodes?|machines?|servers?|pods?|containers?|have|has|"
    r"max(?:imum)?|at\s+most|up\s+to|no\s+more\s+than|exceed|limit(?:ed)?|capacity|only)\b"
)
_AT_MOST = re.compile(
    r"(?i)\b(?:max(?:imum)?|at\s+most|up\s+to|no\s+more\s+than|must\s+not\s+exceed|"
    r"limit(?:ed)?\s+to|never\s+above|not\s+above)\s*(?:is|of|=|:)?\s*([0-9]+(?:\.[0-9]+)?)"
    r"(?![0-9.])(?!\s*(?:%|[kmgt]i?b\b))"
)


def comment_warning(
    comments: tuple[str, ...], value: object, size: float | None = None
) -> str | None:
    """The comment that warns about ``value``, or states a capacity it exceeds, or None.

    ``value`` is the new value as written; ``size`` its size in bytes when it is one (a
    stated ``8 GB`` of hosts or memory is then a capacity); a bare number is compared with
    a stated ``max``/``at most``/``up to`` number.
    """
    if not comments:
        return None
    spelled = str(value).strip().lower() if isinstance(value, str | int | float) else ""
    named = 0 < len(spelled) <= _MAX_SPELLED and not _NUMERIC.fullmatch(spelled)
    forms = _SWITCHED.get(spelled, (spelled,)) if named else ()
    if isinstance(value, bool):
        forms = _SWITCHED[str(value).lower()]
    alternatives = "|".join(re.escape(form) for form in forms)
    word = re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])") if forms else None
    number = (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    )
    for comment in comments:
        for clause in _CLAUSE.split(comment[:_MAX_COMMENT]):
            if word is not None and word.search(clause.lower()) and _WARNING.search(clause):
                return comment
            if size is not None and _CAPACITY_WORDS.search(clause):
                for match in _SIZE_STATED.finditer(clause):
                    limit = size_bytes(match.group(1) + match.group(2))
                    if limit is not None and size > limit:
                        return comment
            if number is not None and size is None:
                for match in _AT_MOST.finditer(clause):
                    if number > float(match.group(1)):
                        return comment
    return None


_NUMERIC = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
# A boolean is named by its value or by what switching it does ("enabling this exposes").
_SWITCHED: dict[str, tuple[str, ...]] = {
    "true": ("true", "enable", "enabled", "enabling", "turn on", "turning on", "switch on"),
    "false": ("false", "disable", "disabled", "disabling", "turn off", "turning off"),
}
