"""Who approved or denied: a principal is short printable text, recorded and shown as data."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic_ai import ToolDenied

__all__ = (
    "PRINCIPAL_MAX_CHARS",
    "InvalidPrincipal",
    "check_principal",
    "denial",
    "parse_denial",
    "quoted",
)

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


_DENIAL = re.compile(
    r'^Denied by a person \(principal (?P<principal>"(?:[^"\\]|\\.)*")\)\.'
    r'(?: Their note, quoted as data: (?P<note>"(?:[^"\\]|\\.)*"))?$'
)


def denial(principal: str, note: str = "") -> ToolDenied:
    """A ``ToolDenied`` whose message names who denied and quotes their note as data.

    Pass it in ``DeferredToolResults(approvals={call_id: denial("alice", "too broad")})``:
    the toolset records the principal and the note with the denial, and the worker model
    sees both only as quoted strings.
    """
    from pydantic_ai import ToolDenied  # here: the inbox checks principals without the agent

    name = check_principal(principal)
    text = f"Denied by a person (principal {quoted(name)})."
    if note:
        text += f" Their note, quoted as data: {quoted(note[:2000])}"
    return ToolDenied(text)


def parse_denial(message: str) -> tuple[str, str] | None:
    """``(principal, note)`` of a message :func:`denial` wrote, else None."""
    match = _DENIAL.match(message)
    if match is None:
        return None
    principal = json.loads(match.group("principal"))
    note = json.loads(match.group("note")) if match.group("note") else ""
    return principal, note
