"""Who approved or denied: a principal is short printable text, recorded and shown as data."""

from __future__ import annotations

import json
import unicodedata

__all__ = ("PRINCIPAL_MAX_CHARS", "InvalidPrincipal", "check_principal", "quoted")

PRINCIPAL_MAX_CHARS = 200

# Unicode categories refused anywhere in a principal: controls (NUL, ESC, newlines, ...),
# format characters (bidi overrides and isolates, zero-width joiners), line and paragraph
# separators (U+2028, U+2029), private use, surrogates and unassigned code points.
_REFUSED_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"))


class InvalidPrincipal(ValueError):
    """A principal that is empty, too long, or holds a control, separator or bidi character."""


def check_principal(principal: object, *, where: str = "principal") -> str:
    """``principal`` if it is printable text fit to record as an approver's name.

    Refused (:class:`InvalidPrincipal`, saying what to fix): anything but a string, an
    empty or all-blank name, more than :data:`PRINCIPAL_MAX_CHARS` characters, and any
    control, format (bidi override, zero-width), line/paragraph separator, private-use or
    unassigned character. Never silently cleaned: a name that must be cleaned is not the
    name the approver's system sent.
    """
    if not isinstance(principal, str):
        raise InvalidPrincipal(
            f"{where} must be a string naming who decided, got {type(principal).__name__}"
        )
    if not principal.strip():
        raise InvalidPrincipal(f"{where} is empty: name who decided (e.g. 'alice')")
    if len(principal) > PRINCIPAL_MAX_CHARS:
        raise InvalidPrincipal(
            f"{where} has {len(principal)} characters; at most {PRINCIPAL_MAX_CHARS} are accepted"
        )
    for index, char in enumerate(principal):
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise InvalidPrincipal(
                f"{where} holds U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')}) at "
                f"character {index}: control, separator and bidi characters are refused; "
                "send printable text only"
            )
    return principal


def quoted(text: str) -> str:
    """``text`` as a JSON string literal: quoted, with every control and separator
    escaped, so text an approver wrote reaches a model as data, never as bare text."""
    return json.dumps(text, ensure_ascii=True)
