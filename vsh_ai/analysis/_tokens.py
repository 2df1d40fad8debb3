"""Opaque tokens and credential words in the lines a change adds (allowances ask these).

``opaque_line``: the first added line holding a token mixing letters and digits (a key, a
hash or an encoding of one?); ``credential_line``: the first added line naming a
credential with a literal value after it. Lines are the memo's added lines (counted once
per decision, shared by every rule that asks).
"""

from __future__ import annotations

import re

from .._evidence import Evidence, is_binary
from ._decode import compile_re2
from ._memo import analysis_of
from ._public import pgp_public_lines, public_spans
from ._secrets import is_placeholder

__all__ = ("added_lines", "credential_line", "credential_value", "opaque_line")

_OPAQUE_LENGTH = 12
_OPAQUE = re.compile(r"[A-Za-z0-9+=_-]{12,}")
# An environment assignment written as one token (compose `environment:` lists, `.env`
# lines): the upper-case name is a name, not part of the value. Names without digits only
# (a base32 or base64 value has digits), and never an empty value (`QUJD...R0g=` padding).
_ENV_ASSIGNMENT = re.compile(r"[A-Z][A-Z_]*[A-Z]=(?=[^=])")


def added_lines(evidence: Evidence, path: str, data: bytes) -> tuple[tuple[int, str], ...]:
    """``(number, line)`` of each line the change at ``path`` adds (more copies than
    before), counted once per decision and shared by every rule that asks.

    ``data``: the new bytes of ``path`` (its after-bytes, ``b""`` when it has none), text.
    ValueError when the old side is binary.
    """
    memo = analysis_of(evidence)
    if evidence.change(path) is None:
        return tuple(enumerate(memo.lines(data), start=1))
    lines = memo.new_lines(path)
    if lines is None:  # a binary side; callers checked the new one, so it is the old one
        memo.lines(evidence.before_bytes(path))  # raises ValueError
        raise ValueError("binary content has no lines to compare")
    return lines


def opaque_line(evidence: Evidence, path: str, data: bytes, *, known: str = "") -> int | None:
    """The first added line holding an opaque token (letters and digits mixed), or None.

    Public values are not opaque (:mod:`._public`: UUIDs, labelled checksums, commit ids,
    SSH and PGP public keys), nor are structured names whose parts are words and short
    numbers (``x86_64-linux-gnu``, ``ubuntu-22.04``, ``python3-11``). Tokens found in
    ``known`` (the file's old text, say) are not new: they are skipped too.
    """
    if is_binary(data):
        return 1
    armour: set[int] | None = None
    for number, line in added_lines(evidence, path, data):
        spans: list[tuple[int, int]] | None = None
        for match in _OPAQUE.finditer(line):
            token = match.group(0)
            assigned = _ENV_ASSIGNMENT.match(token)
            if assigned is not None:  # `- REQUEST_TIMEOUT=60`: only the value can be opaque
                token = token[assigned.end() :]
                if len(token) < _OPAQUE_LENGTH:
                    continue
            if not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
                continue
            if _STRUCTURED.fullmatch(token) or (known and token in known):
                continue
            if spans is None:
                spans = public_spans(line)
            if any(s <= match.start() and match.end() <= e for s, e in spans):
                continue
            if armour is None:
                armour = pgp_public_lines(analysis_of(evidence).text(data))
            if number in armour:
                continue
            return number
    return None


# Lower-case words and short numbers joined by separators: names, not values (a generated
# value mixes cases, letters and digits within its parts).
_STRUCTURED = re.compile(
    r"(?:[a-z]+[0-9]{0,2}|[0-9]{1,4})(?:[-_.=+](?:[a-z]+[0-9]{0,2}|[0-9]{1,4}))*"
)


_CREDENTIAL_WORD = compile_re2(
    r"(?i)(?:^|[^A-Za-z0-9_])(?:passwords?|passwd|passphrase|pwd|pass|secrets?|tokens?|"
    r"api[ _-]?keys?|access[ _-]?keys?|private[ _-]?keys?|credentials?)(?:[^A-Za-z0-9_]|$)"
)
_FILLER = frozenset(("is", "was", "are", "were", "be", "set", "to", "=", ":", "-", "/", "of"))
_VALUE_TOKEN = re.compile(r"[^\s`'\"|,;()\[\]]+")
_ENV_NAME = re.compile(r"\$?\{?[A-Z][A-Z0-9_]*\}?")
_WORD_HEAD = re.compile(r"[$]?[{]?[A-Za-z0-9_]+[}]?")
_LOOKUP = re.compile(r"(?i)environ|getenv|process\.env|secrets?\.|vault|keyring")


def credential_value(rest: str) -> bool:
    """Whether the text after a credential word starts with a literal value."""
    tokens = _VALUE_TOKEN.findall(rest[:200])
    for token in tokens[:4]:
        word = token.strip(".:=!?*-").lstrip("@/")
        if not word or word.lower() in _FILLER:
            continue
        head = _WORD_HEAD.match(word)
        if head is not None and _ENV_NAME.fullmatch(head.group(0)):
            return False  # an upper-case name: `PASSWORD@HOST`, `${DB_PASSWORD}`
        if len(word) < 4 or is_placeholder(word) or _LOOKUP.search(word):
            return False
        return (head.group(0) if head is not None else word).lower() not in _PROSE
    return False


# Words after a credential word that start prose, not a value ("the token is read from").
_PROSE_WORDS = """
    from with that this your their each every when must should will would never only field
    fields value values variable variables environment manager store vault file files rotation
    policy length reset change required optional here there into using used stored handling
    instead above below section before after which where because read kept loaded passed sent
    generated provided given configured defined managed injected fetched rotated expires
    expired valid invalid missing empty hashed encrypted always also then than like such what
    have does goes and nor setting settings option options password passwords token tokens
    secret secrets key keys credential credentials name names hash hashes prompt prompts
    come comes live lives belong belongs need needs stay stays
"""
_PROSE = frozenset(_PROSE_WORDS.split())


def credential_line(evidence: Evidence, path: str, data: bytes) -> int | None:
    """The first added line naming a credential with a literal value after it, or None."""
    for number, line in added_lines(evidence, path, data):
        for match in _CREDENTIAL_WORD.finditer(line[:4096]):
            if credential_value(line[match.end() :]):
                return number
    return None
