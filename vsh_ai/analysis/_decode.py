"""Decoding passes for the secret detector: rewrite text with encoded parts decoded in place.

Each pass returns a :class:`Rewrite` (the new text plus a map back to the source) or None
when it changed nothing. Every pass is one linear scan with an RE2 pattern, and a decoded
part is never longer than its source, so scanning a rewrite costs no more than the source.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote

import re2  # type: ignore[import-untyped]

__all__ = (
    "PASSES",
    "Rewrite",
    "char_codes",
    "compile_re2",
    "could_match",
    "decode_base64",
    "finditer",
    "gate",
    "looks_like_private_key",
    "matches_nothing",
    "possible",
    "printable",
    "rot13",
)


def compile_re2(pattern: str) -> Any:
    """An RE2 regex (linear time); a pattern RE2 cannot compile raises ``re2.error``."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


Span = tuple[int, int]
T = TypeVar("T")
_GROUPS: dict[int, dict[str, int]] = {}  # group names of module-level regexes, by id


_LAST: tuple[str, bytes] = ("", b"")  # the last text matched, as ASCII bytes
_STANDIN = "vsh-ai-ascii-standin"


def _standin(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeEncodeError)
    run = error.object[error.start : error.end]
    return (
        "".join(
            "a" if c.isalpha() else "0" if c.isdigit() else " " if c.isspace() else "\x7f"
            for c in run
        ),
        error.end,
    )


codecs.register_error(_STANDIN, _standin)


def _ascii_bytes(text: str) -> bytes:
    """``text`` as ASCII bytes of the same length: offsets in bytes are offsets in text.

    Non-ASCII characters become a stand-in of their class (letter ``a``, digit ``0``,
    space, else DEL), so RE2 runs on bytes without per-match offset conversion.
    """
    global _LAST
    last = _LAST  # one tuple read and one tuple write: safe across threads
    if last[0] is text:
        return last[1]
    data = text.encode("ascii", _STANDIN)
    _LAST = (text, data)
    return data


# -- the gate: which of many patterns match anywhere in a text, in one RE2 pass -------
#
# A scan runs dozens of patterns over each text, and for nearly every text nearly none of
# them match; each pattern's own pass has a fixed cost (the binding, the iterator), paid
# per pattern and per text. Patterns registered with :func:`gate` are compiled into one
# RE2 set; the first :func:`finditer` of a text runs the set once, and a gated pattern
# the set says matches nowhere in that text yields nothing without its own pass. Exact:
# a match inside any window of a text is a match in the text (RE2 sees the whole text
# as context). The set also holds a pattern that always matches (at the end of the
# text): RE2 reports a set it could not finish (its DFA out of memory) as no match at
# all, so a result without that pattern means "unknown" and every pattern runs.

#
# One set is fast on ordinary text (tens of nanoseconds a byte), but RE2 builds a set's
# DFA state by state as the text needs them, each state from every pattern of the set, and
# never gives up on a set that keeps needing new states (as it does for one regex). On
# high-entropy text (random tokens, JWT-like runs, random words) one set of 64 patterns
# cost 0.4-2.5 us per byte: over 10 s for a decision a red team built. Sets of four
# patterns cost about 0.1 us per byte there, and twice one set's cost on ordinary text.
# So a text of 16 KiB or more always goes to the sets of four (their fixed cost per call
# is nothing beside its length), and shorter texts go to the one set while it is fast: when
# a window of them (4 KiB or more) cost it over 250 ns a byte, the next MiB goes to the
# sets of four, then the one set is tried again. Either way the answer is the same; only
# the time differs (an attack pays one window at the slow rate per MiB).

_GATED: dict[int, int] = {}  # id(regex) -> its index in the set (module-level regexes only)
_GATE_PATTERNS: list[Any] = []  # the regexes themselves, so their ids stay theirs
_GATE_SET: Any = None
_ALWAYS = -1  # index of the always-matching pattern
_GATE_MEMORY = 64 << 20  # for the one set; a set of four gets 4 MiB
_GATE_GROUP = 4  # patterns per set when the one set is slow
_WINDOW_BYTES = 4096
_SLOW_NS_PER_BYTE = 250
_GROUPED_BYTES = 1 << 20
_LARGE_BYTES = 16 << 10  # a text this long always goes to the sets of four
_LAST_HITS: tuple[bytes, frozenset[int] | None] = (b"", None)


class _Sets:
    """The gated patterns in RE2 sets of ``group``, matched as one set would be: ``Match``
    gives the global indices of the patterns that match, with :data:`_ALWAYS` only when
    every set finished (else the caller treats the result as unknown)."""

    def __init__(self, patterns: list[str], group: int, memory: int) -> None:
        self.sets: list[tuple[Any, int, int]] = []  # (set, first global index, its \z index)
        for first in range(0, len(patterns), group):
            options = re2.Options()
            options.log_errors = False
            options.max_mem = memory
            built = re2.Set.SearchSet(options)
            for pattern in patterns[first : first + group]:
                built.Add(pattern)
            always = built.Add(r"\z")
            built.Compile()
            self.sets.append((built, first, always))

    def Match(self, data: bytes) -> list[int] | None:  # RE2's name for a set's match
        found = [_ALWAYS]
        for built, first, always in self.sets:
            hits = built.Match(data)
            if not hits or always not in hits:
                return None  # this set could not finish: unknown
            found.extend(first + hit for hit in hits if hit != always)
        return found


class _Gate:
    """One set while it is fast, sets of four while it is not (see above)."""

    def __init__(self, patterns: list[str]) -> None:
        self.one = _Sets(patterns, max(1, len(patterns)), _GATE_MEMORY)
        self.groups = _Sets(patterns, _GATE_GROUP, _GATE_MEMORY // 16)
        self.grouped_left = 0  # bytes still to match with the sets of four
        self.window = (0, 0)  # bytes and nanoseconds the one set took lately

    def Match(self, data: bytes) -> list[int] | None:  # as _Sets.Match
        if len(data) >= _LARGE_BYTES:  # one call: the sets' fixed cost is nothing here
            return self.groups.Match(data)
        if self.grouped_left > 0:
            self.grouped_left -= len(data)
            return self.groups.Match(data)
        started = time.perf_counter_ns()
        found = self.one.Match(data)
        spent = time.perf_counter_ns() - started
        size, took = self.window
        size, took = size + len(data), took + spent
        if size >= _WINDOW_BYTES:
            if took > _SLOW_NS_PER_BYTE * size:
                self.grouped_left = _GROUPED_BYTES
            size, took = 0, 0
        self.window = (size, took)  # one tuple write: a race only changes which sets run
        return found


def gate(regexes: Iterable[Any]) -> None:
    """Add module-level RE2 regexes to the gate (rebuilt once with every one added)."""
    global _GATE_SET, _LAST_HITS
    for regex in regexes:
        if id(regex) not in _GATED:
            _GATED[id(regex)] = len(_GATE_PATTERNS)
            _GATE_PATTERNS.append(regex)
    try:
        built = _Gate([regex.pattern for regex in _GATE_PATTERNS])
    except re2.error:  # cannot build it: no gate, every pattern runs (slower, same result)
        _GATED.clear()
        _GATE_SET = None
        return
    _GATE_SET, _LAST_HITS = built, (b"", None)


def _gate_hits(data: bytes) -> frozenset[int] | None:
    """Indices of the gated patterns that match somewhere in ``data``; None: unknown."""
    global _LAST_HITS
    last = _LAST_HITS  # one tuple read and one tuple write: safe across threads
    if last[0] is data:
        return last[1]
    found = _GATE_SET.Match(data) if _GATE_SET is not None else None
    hits = frozenset(found) if found and _ALWAYS in found else None
    _LAST_HITS = (data, hits)
    return hits


def could_match(regexes: Iterable[Any], text: str) -> bool:
    """False only when the gate knows that none of ``regexes`` matches anywhere in ``text``."""
    hits = _gate_hits(_ascii_bytes(text))
    if hits is None:
        return True
    for regex in regexes:
        index = _GATED.get(id(regex))
        if index is None or index in hits:
            return True
    return False


def possible(items: Sequence[T], text: str, regex_of: Callable[[T], Any]) -> Sequence[T]:
    """``items`` (in order) but those whose gated regex matches nowhere in ``text``."""
    hits = _gate_hits(_ascii_bytes(text))
    if hits is None:
        return items
    gated = _GATED
    return [
        item for item in items if (index := gated.get(id(regex_of(item)))) is None or index in hits
    ]


def matches_nothing(text: str) -> bool:
    """True when the gate knows that no gated pattern matches anywhere in ``text``."""
    hits = _gate_hits(_ascii_bytes(text))
    return hits is not None and len(hits) == 1  # only the always-matching pattern


def finditer(
    regex: Any, text: str, pos: int = 0, endpos: int | None = None
) -> Iterator[tuple[Span, dict[str, Span]]]:
    """``(match span, {group name: span})`` for each match, in character offsets."""
    index = _GROUPS.get(id(regex))
    if index is None:
        index = _GROUPS[id(regex)] = dict(regex.groupindex)
    data = _ascii_bytes(text)
    gated = _GATED.get(id(regex))
    if gated is not None:
        hits = _gate_hits(data)
        if hits is not None and gated not in hits:
            return  # the set saw no match anywhere in this text
    for match in regex.finditer(data, pos, len(data) if endpos is None else endpos):
        # The binding's span(n) re-counts the groups per call; its spans list is the same
        # data (google-re2 >= 1.1), read directly when present.
        spans = getattr(match, "_spans", None)
        if spans is None:
            spans = [match.span(n) for n in range(regex.groups + 1)]
        yield spans[0], {name: spans[number] for name, number in index.items()}


Segment = tuple[int, int, int, int, str | None]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """``text`` rebuilt from a source; ``segments`` map it back.

    Each segment is ``(new_start, new_end, old_start, old_end, label)``: a segment with
    label None is a verbatim copy (offsets map one to one); a labelled one (the encoding
    it decoded) maps to its whole source span.
    """

    text: str
    segments: tuple[Segment, ...]
    starts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """Each segment's start in ``text`` (for bisect): computed once, not per lookup."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "starts", tuple(segment[0] for segment in self.segments))

    def windows(self, context: int) -> list[tuple[int, int]]:
        """Spans of ``text`` around the decoded parts (``context`` characters either side)."""
        out: list[tuple[int, int]] = []
        for new_start, new_end, _, _, label in self.segments:
            if label is None:
                continue
            low, high = max(new_start - context, 0), min(new_end + context, len(self.text))
            if out and low <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], high))
            else:
                out.append((low, high))
        return out

    def source_span(self, start: int, end: int) -> tuple[int, int, str | None]:
        """The source span that ``text[start:end]`` came from, and the first label in it."""
        if not self.segments:
            return start, end, None
        starts = self.starts
        first = max(bisect_right(starts, start) - 1, 0)
        last = max(bisect_right(starts, max(end - 1, start)) - 1, first)
        ns, _, os_, _, label = self.segments[first]
        old_start = os_ + (start - ns) if label is None else os_
        ns, _, os_, oe, last_label = self.segments[last]
        old_end = min(os_ + (end - ns), oe) if last_label is None else oe
        labels = [s[4] for s in self.segments[first : last + 1] if s[4] is not None]
        return old_start, max(old_end, old_start), labels[0] if labels else None


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self.parts: list[str] = []
        self.segments: list[Segment] = []
        self.new = 0
        self.old = 0

    def replace(self, start: int, end: int, text: str, label: str) -> None:
        if start < self.old:
            return  # overlaps a previous replacement: keep the first
        self._copy(start)
        self.parts.append(text)
        self.segments.append((self.new, self.new + len(text), start, end, label))
        self.new += len(text)
        self.old = end

    def _copy(self, upto: int) -> None:
        if upto > self.old:
            self.parts.append(self.source[self.old : upto])
            self.segments.append((self.new, self.new + upto - self.old, self.old, upto, None))
            self.new += upto - self.old
            self.old = upto

    def result(self) -> Rewrite | None:
        if not any(s[4] is not None for s in self.segments):
            return None
        self._copy(len(self.source))
        return Rewrite("".join(self.parts), tuple(self.segments))


def printable(text: str) -> bool:
    """Mostly printable text (what a decoded secret looks like), not random bytes."""
    if not text:
        return False
    bad = sum(1 for c in text if not (c.isprintable() or c in "\n\r\t"))
    return bad * 20 <= len(text)


def looks_like_private_key(data: bytes) -> bool:
    """DER of a private key (PKCS#1/#8, EC, DSA) or an OpenSSH key, armour or not."""
    if data.startswith(b"openssh-key-v1\x00") or data.startswith(b"PuTTY-User-Key-File"):
        return True
    if len(data) < 16 or data[0] != 0x30:
        return False
    # SEQUENCE { INTEGER version (0 or 1), ... }: certificates and public keys start
    # with a nested SEQUENCE instead.
    size = data[1]
    offset = 2 + (size & 0x7F if size & 0x80 else 0)
    return data[offset : offset + 2] == b"\x02\x01" and data[offset + 2] in (0, 1)


def decode_base64(token: str) -> bytes | None:
    """Standard or URL-safe base64 (padding optional), or None."""
    raw = "".join(token.split()).rstrip("=")
    if len(raw) % 4 == 1:
        return None
    altchars = b"-_" if ("-" in raw or "_" in raw) else None
    try:
        return base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        return None


def _text_of(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if printable(text) else None


# Literal pieces joined by +, commas, dots, ||, }{ or plain adjacency:
# Python/JS/Go "a" + "b", 'a' 'b', f"a" f"b", "".join(["a", "b"]), PHP 'a' . 'b',
# SQL 'a' || 'b', shell "a""b", f"{'a'}{'b'}", over several lines inside parentheses.
_LITERAL = r"""(?:[fFbBrRuU]{0,2}(?:"[^"\n]*"|'[^'\n]*'|`[^`\n]*`))"""
_JOINER = r"(?:[\s+,.|]{0,16}|\}\{)"
_PIECES = compile_re2(_LITERAL + "(?:" + _JOINER + _LITERAL + ")+")
# Python's re for the pieces inside a group RE2 already found: this pattern is linear
# (no nested quantifier; an attempt from a quote ends at the next same quote or newline,
# and a failed attempt means no later quote of that kind on the line pairs either), and
# re's per-match cost is a tenth of the RE2 binding's for a group of many short pieces.
_ONE_LITERAL = re.compile(r"""("[^"\n]*"|'[^'\n]*'|`[^`\n]*`)""")


_SEAMS = re.compile(r"""["'`](?:[\s+,.|]{0,16}|\}\{)[fFbBrRuU]{0,2}["'`]""")
_SPACE = re.compile(r"\s")
_DIGIT = re.compile(r"[0-9]")


def _worth_joining(joined: str) -> bool:
    """Pieces of one secret: no whitespace, and digits, mixed case or some length."""
    if len(joined) < 8 or _SPACE.search(joined):
        return False
    mixed = joined.lower() != joined and joined.upper() != joined
    return len(joined) >= 24 or mixed or _DIGIT.search(joined) is not None


def join_pieces(text: str) -> Rewrite | None:
    """Concatenated string literals replaced by one double-quoted literal.

    A last piece followed by ``:`` or ``=`` is a key (``{"a": "b", "c": "d"}``), not a
    continuation, so it is left out (joiners never hold ``:`` or ``=``, so only the last
    piece of a group can be a key).
    """
    out = _Builder(text)
    for (start, end), _ in finditer(_PIECES, text):
        after = text[end : end + 8].lstrip(" \t")
        if after[:1] in (":", "=") and not after.startswith("=="):
            pieces = _ONE_LITERAL.findall(text, start, end)
            end = text.rindex(pieces.pop(), start, end)
            while end > start and text[end - 1] in " \t\r\n+,.|}{fFbBrRuU":
                end -= 1
            if len(pieces) < 2:
                continue
            joined = "".join(piece[1:-1] for piece in pieces)
        else:  # the common case, in C: drop each closing quote, joiner and opening quote
            group = text[start:end].lstrip("fFbBrRuU")
            joined = _SEAMS.sub("", group)[1:-1]
        if _worth_joining(joined):
            out.replace(start, end, '"' + joined + '"', "split")
    return out.result()


# Base64 wrapped over lines (each line only base64, optionally quoted or continued with
# a backslash), single runs of base64/base64url, hex runs and \xNN escapes.
# No capture groups: RE2 then finds even a 1 MiB run with its DFA alone.
_ENCODED = compile_re2(
    r"[A-Za-z0-9+/]{16,}={0,2}[\"']?[ \t,+\\]*\r?\n"
    r"(?:[ \t]*[\"']?[A-Za-z0-9+/]{16,}={0,2}[\"']?[ \t,+\\]*\r?\n)*"
    r"[ \t]*[\"']?[A-Za-z0-9+/]+={0,2}"
    r"|(?:\\x[0-9A-Fa-f]{2}){8,}"
    r"|[A-Za-z0-9+/_\-]{16,}={0,2}"
)


def _clean_line(line: str) -> str:
    """A wrapped line without its quotes and joiners (a final base64 ``+`` is kept)."""
    line = line.strip(" \t\r\\,)")
    if line.endswith("+") and line[:-1].endswith((" ", "\t", '"', "'")):
        line = line[:-1].rstrip(" \t\\")
    return line.strip("\"' \t")


def _decode_one(
    out: _Builder, keys: list[tuple[Span, str]], start: int, end: int, source: str
) -> bool:
    """Decode one run (wrapped, escaped, hex or base64); True when it decoded to something."""
    candidates: list[tuple[str, bytes | None]] = []
    if source.startswith("\\x"):
        candidates.append(("hex", bytes.fromhex(source.replace("\\x", ""))))
    elif "\n" in source:
        joined = "".join(_clean_line(line) for line in source.split("\n"))
        candidates.append(("base64", decode_base64(joined)))
    else:
        core = source.rstrip("=")
        if len(core) % 2 == 0 and not core.strip("0123456789abcdefABCDEF"):
            candidates.append(("hex", bytes.fromhex(core)))
        url = "-" in source or "_" in source
        candidates.append(("base64url" if url else "base64", decode_base64(source)))
    for encoding, data in candidates:
        if data is None:
            continue
        if looks_like_private_key(data):
            keys.append(((start, end), encoding))
            return True
        decoded = _text_of(data)
        if decoded is not None:
            out.replace(start, end, decoded, encoding)
            return True
    return False


def decode_runs(text: str) -> tuple[Rewrite | None, list[tuple[Span, str]]]:
    """Hex and base64 runs decoded in place when they decode to text.

    Also returns the spans of runs that decode to private-key DER (``(span, encoding)``).
    """
    out = _Builder(text)
    keys: list[tuple[Span, str]] = []
    for (start, end), _ in finditer(_ENCODED, text):
        source = text[start:end]
        if "\n" not in source:
            _decode_one(out, keys, start, end, source)
            continue
        # Wrapped base64: all lines, else all but the last (which may be a word that
        # only looks like base64), else each line's run on its own.
        if _decode_one(out, keys, start, end, source):
            continue
        head_end = start + source.rindex("\n")
        if _decode_one(out, keys, start, head_end, text[start:head_end]):
            continue
        position = start
        for line in source.split("\n"):
            stripped = _clean_line(line)
            if len(stripped) >= 16:
                offset = position + line.index(stripped)
                _decode_one(out, keys, offset, offset + len(stripped), stripped)
            position += len(line) + 1
    return out.result(), keys


_PERCENT = compile_re2(r"[^\s\"'<>]*%[0-9A-Fa-f]{2}[^\s\"'<>]*")


_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")  # fixed-length lookahead: linear


def _unquote(source: str) -> str:
    """Percent-decoding in C (``\\xNN`` escapes) when every ``%`` starts an escape."""
    try:
        source = _LONE_PERCENT.sub("%25", source)  # a % that starts no escape stays a %
        escaped = source.replace("\\", "\\\\").replace("%", "\\x").encode("utf-8")
        data: bytes = codecs.escape_decode(escaped)[0]
        return data.decode("utf-8", errors="replace")
    except (ValueError, UnicodeError):
        return unquote(source, errors="replace")


def percent_decode(text: str) -> Rewrite | None:
    """URL-percent-encoded runs decoded in place."""
    out = _Builder(text)
    for (start, end), _ in finditer(_PERCENT, text):
        source = text[start:end]
        decoded = _unquote(source)
        if decoded != source:
            out.replace(start, end, decoded, "url")
    return out.result()


# Eight or more character codes in a row: ``[103, 104, 112]``, ``chr(103) + chr(104)``,
# ``0x67, 0x68`` (a secret spelled as numbers, joined back at run time).
_CODE = r"(?:chr\(|\\x)?(?:0[xX][0-9A-Fa-f]{2}|[0-9]{2,3})\)?"
_CODES = compile_re2(r"(?:" + _CODE + r"[ \t]*[,+][ \t]*){7,}" + _CODE)
_NUMBER = re.compile(r"0[xX]([0-9A-Fa-f]{2})|([0-9]{2,3})")


def char_codes(text: str) -> Rewrite | None:
    """Runs of character codes decoded in place (printable ASCII only, else left alone)."""
    out = _Builder(text)
    for (start, end), _ in finditer(_CODES, text):
        codes = [
            int(hex_, 16) if hex_ else int(dec) for hex_, dec in _NUMBER.findall(text, start, end)
        ]
        if all(32 <= code < 127 for code in codes):
            out.replace(start, end, "".join(map(chr, codes)), "char codes")
    return out.result()


_ROT13 = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    b"NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)


def rot13(text: str) -> str:
    """ROT13 (same length, same offsets: findings map back one to one).

    Non-ASCII characters come back as their stand-ins (see :func:`finditer`).
    """
    return _ascii_bytes(text).translate(_ROT13).decode("ascii")


gate((_PIECES, _ENCODED, _PERCENT, _CODES))

PASSES: tuple[Callable[[str], Rewrite | None], ...] = (join_pieces, percent_decode, char_codes)
"""Rewriting passes besides :func:`decode_runs` (which also reports key DER)."""
