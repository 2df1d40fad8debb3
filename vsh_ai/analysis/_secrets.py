"""The one secret detector: rules, protected reads, redaction, intent and path names use it.

Built on detect-secrets: its regex detectors (recompiled for RE2), its keyword list and
its entropy measure, plus patterns of our own for what it lacks. Every pattern is RE2
(linear time); Python loops only walk matches or lines with bounded work each.
Decoding passes (:mod:`._decode`) rescan text with hex, base64 (wrapped or url-safe),
``\\xNN`` escapes, URL-percent encoding and concatenated string pieces decoded in place,
and ROT13 for whole tokens, so a secret found in plain form is also found encoded.

Work per call is capped at :data:`MAX_SCAN_CHARS`; content beyond it is reported as a
finding of kind :data:`UNSCANNED` (so rules fail closed and redaction hides it).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import replace
from threading import Lock
from typing import Any

from ._decode import (
    Rewrite,
    char_codes,
    decode_runs,
    join_pieces,
    matches_nothing,
    percent_decode,
    rot13,
)
from ._secret_context import contextual as _contextual
from ._secret_context import line_starts as _line_starts
from ._secret_tokens import tokens as _tokens
from ._secret_values import UNSCANNED, SecretFinding, is_placeholder

__all__ = (
    "MAX_SCAN_CHARS",
    "UNSCANNED",
    "SecretFinding",
    "contains_secret",
    "find_secret",
    "find_secrets",
    "is_placeholder",
    "redact_text",
    "secret_lines",
)

MAX_SCAN_CHARS = 4 * 1024 * 1024
"""Characters scanned per call; the rest is one :data:`UNSCANNED` finding (fail closed)."""

_CONTEXT = 256  # characters rescanned either side of a decoded part
_DEPTH = 2  # decoding passes nest this deep (base64 of hex of split pieces, ...)


def _plain(text: str) -> list[SecretFinding]:
    return _tokens(text) + _contextual(text)


# ---------------------------------------------------------------------------
# Decoding passes and the public API.


def _scan(text: str, depth: int) -> list[SecretFinding]:
    if matches_nothing(text):  # no pattern nor decoding pass can find anything as written
        return _tokens(rot13(text), "rot13")
    found = _plain(text)
    found += _tokens(rot13(text), "rot13")
    if depth <= 0:
        return found
    encoded, keys = decode_runs(text)
    found += [SecretFinding("private key", s, e, encoding) for (s, e), encoding in keys]
    plain = _Spans(found)
    for rewrite in (encoded, join_pieces(text), percent_decode(text), char_codes(text)):
        if rewrite is None:
            continue
        # Rescan only around what was decoded (the rest was scanned as it is), all the
        # windows in one text so the fixed cost of a scan is paid once per rewrite.
        windows = rewrite.windows(_CONTEXT)
        joined, offsets = _concatenated(rewrite.text, windows)
        for inner in _scan(joined, depth - 1):
            number = bisect_right(offsets, inner.start) - 1
            low, high = windows[number]
            start = low + inner.start - offsets[number]
            end = min(low + inner.end - offsets[number], high)
            for finding in _mapped(rewrite, [replace(inner, start=start, end=end)]):
                if not plain.inside(finding.kind, finding.start, finding.end):
                    found.append(finding)
    return found


class _Spans:
    """Is a finding of ``kind`` inside ``[start, end]``? In log time, not by a scan of all.

    Per kind: findings sorted by start, and a sparse table of the least end over any run
    of them; the findings starting in ``[start, end]`` are one run, and one of them ends by
    ``end`` exactly when the least end of that run does.
    """

    __slots__ = ("_kinds",)

    def __init__(self, found: list[SecretFinding]) -> None:
        spans: dict[str, list[tuple[int, int]]] = {}
        for finding in found:
            spans.setdefault(finding.kind, []).append((finding.start, finding.end))
        self._kinds: dict[str, tuple[list[int], list[list[int]]]] = {}
        for kind, pairs in spans.items():
            pairs.sort()
            table = [[end for _, end in pairs]]
            width = 1
            while 2 * width <= len(pairs):
                row = table[-1]
                table.append([min(row[i], row[i + width]) for i in range(len(row) - width)])
                width *= 2
            self._kinds[kind] = ([start for start, _ in pairs], table)

    def inside(self, kind: str, start: int, end: int) -> bool:
        known = self._kinds.get(kind)
        if known is None:
            return False
        starts, table = known
        low, high = bisect_left(starts, start), bisect_right(starts, end)
        if low >= high:
            return False
        level = (high - low).bit_length() - 1
        row = table[level]
        return min(row[low], row[high - (1 << level)]) <= end


def _concatenated(text: str, windows: list[tuple[int, int]]) -> tuple[str, list[int]]:
    """The windows of ``text`` joined by blank lines, and where each starts in the result."""
    parts: list[str] = []
    offsets: list[int] = []
    position = 0
    for low, high in windows:
        offsets.append(position)
        parts.append(text[low:high])
        position += high - low + 2
    return "\n\n".join(parts), offsets


def _mapped(rewrite: Rewrite, inner: list[SecretFinding]) -> list[SecretFinding]:
    out: list[SecretFinding] = []
    for finding in inner:
        start, end, label = rewrite.source_span(finding.start, finding.end)
        if label is None and finding.encoding is None:
            continue  # verbatim text: the plain scan already saw it
        encoding = "+".join(e for e in (label, finding.encoding) if e)
        out.append(replace(finding, start=start, end=end, encoding=encoding or None))
    return out


def _normalised(found: list[SecretFinding]) -> tuple[SecretFinding, ...]:
    """Sorted by position; a finding inside an earlier (wider) one's span is dropped."""
    out: list[SecretFinding] = []
    reach = -1
    for finding in sorted(found, key=lambda f: (f.start, -f.end, f.encoding or "")):
        if finding.end <= reach:
            continue  # inside the kept finding that reaches furthest (it starts earlier)
        out.append(finding)
        reach = finding.end
    return tuple(out)


# Findings by the sha256 of the text scanned (its UTF-8 bytes, lone surrogates kept:
# one text, one key) and the scan limit. A rule, the read rule, redaction and the LLM
# packet asking about the same bytes get one scan between them, whichever Evidence object
# (or copy of one) holds them: the key is the content itself, never a blob id an evidence
# claims (a forged evidence could pair a known id with other bytes).
_FOUND: OrderedDict[tuple[bytes, int], tuple[SecretFinding, ...]] = OrderedDict()
_FOUND_LOCK = Lock()
_FOUND_ENTRIES = 8192
_FOUND_FINDINGS = 1 << 18  # findings held in all (a text dense with secrets holds many)
_found_held = 0


def find_secrets(text: str) -> tuple[SecretFinding, ...]:
    """Every secret in ``text`` (multi-line aware, decoding passes included), by position.

    Beyond :data:`MAX_SCAN_CHARS`, the rest is one :data:`UNSCANNED` finding. Results are
    remembered by content digest (a bounded cache): the same text is scanned once.
    """
    global _found_held
    key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), MAX_SCAN_CHARS)
    with _FOUND_LOCK:
        known = _FOUND.get(key)
        if known is not None:
            _FOUND.move_to_end(key)
            return known
    head = text[:MAX_SCAN_CHARS]
    found = _scan(head, _DEPTH)
    if len(text) > MAX_SCAN_CHARS:
        found.append(SecretFinding(UNSCANNED, MAX_SCAN_CHARS, len(text)))
    result = _normalised(found)
    if len(result) <= _FOUND_FINDINGS:
        with _FOUND_LOCK:
            if key not in _FOUND:
                _FOUND[key] = result
                _found_held += len(result)
                while len(_FOUND) > _FOUND_ENTRIES or _found_held > _FOUND_FINDINGS:
                    _found_held -= len(_FOUND.popitem(last=False)[1])
    return result


def clear_cache() -> None:
    """Forget remembered findings (benchmarks measure cold decisions with it)."""
    global _found_held
    with _FOUND_LOCK:
        _FOUND.clear()
        _found_held = 0


def find_secret(text: str) -> str | None:
    """The kind of the first secret in ``text``, or None."""
    found = find_secrets(text)
    return found[0].kind if found else None


def contains_secret(data: bytes | str) -> bool:
    """True when ``data`` holds a secret (bytes are read as UTF-8, bad bytes replaced)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return bool(find_secrets(text))


def secret_lines(text: str) -> tuple[int, ...]:
    """1-based numbers of the lines where findings start."""
    starts = _line_starts(text)
    return tuple(sorted({bisect_right(starts, f.start) for f in find_secrets(text)}))


def _masked(text: str, findings: tuple[SecretFinding, ...], mask: str) -> str:
    spans: list[list[Any]] = []
    for finding in findings:
        if spans and finding.start < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], finding.end)
        else:
            spans.append([finding.start, finding.end, finding.kind])
    parts: list[str] = []
    position = 0
    for start, end, kind in spans:
        parts.append(text[position:start])
        label = mask.format(kind=kind)
        pieces = text[start:end].split("\n")
        parts.append("\n".join(label if piece.strip() else piece for piece in pieces))
        position = end
    parts.append(text[position:])
    return "".join(parts)


def redact_text(
    text: str, *, mask: str = "[REDACTED:{kind}]"
) -> tuple[str, tuple[SecretFinding, ...]]:
    """``text`` with every detected secret replaced by ``mask`` (line count kept).

    Returns the redacted text and the findings in the original text. The result holds
    no detected secret: masking repeats until a rescan finds nothing, and as a last
    resort whole lines holding findings are masked.
    """
    findings = find_secrets(text)
    redacted = text
    current = findings
    for _ in range(4):
        if not current:
            return redacted, findings
        redacted = _masked(redacted, current, mask)
        current = find_secrets(redacted)
    lines = redacted.split("\n")
    for number in secret_lines(redacted):
        lines[number - 1] = mask.format(kind="secret")
    return "\n".join(lines), findings
