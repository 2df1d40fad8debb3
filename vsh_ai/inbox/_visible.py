"""Characters an approver cannot see, made visible on every inbox page.

Bidi overrides and isolates (U+202A-U+202E, U+2066-U+2069) reorder what a browser draws,
so ``invoice\\u202etxt.exe`` reads ``invoiceexe.txt`` and a changed line reads differently
from the code it holds (Trojan Source, CVE-2021-42574); zero-width, tag and other format or
control characters hide text. Every value the inbox's templates print passes through
:func:`visible` (the Jinja environment's ``finalize``), which writes each such character
as a visible ``⟨U+202E⟩``; :func:`has_hidden` lets a view mark the line that held one.
"""

from __future__ import annotations

import re

from markupsafe import Markup

__all__ = ("has_hidden", "visible")

_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def _escape(match: re.Match[str]) -> str:
    return f"⟨U+{ord(match.group(0)):04X}⟩"


def has_hidden(text: str) -> bool:
    """Whether ``text`` holds a bidi, invisible or control character (newline and tab
    excepted)."""
    return _HIDDEN.search(text) is not None


def visible(value: object) -> object:
    """``value`` with each hidden character written as ``⟨U+XXXX⟩`` (HTML already built
    stays HTML: the escape holds no markup); other values pass unchanged."""
    if isinstance(value, Markup):
        return Markup(_HIDDEN.sub(_escape, str(value)))
    if isinstance(value, str):
        return _HIDDEN.sub(_escape, value)
    return value
