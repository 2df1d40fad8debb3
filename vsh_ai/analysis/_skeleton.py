"""Skeletons of path names: the spelling a protected-path check compares.

A name is protected by what it looks like, not by its code points: ``config/.еnv`` (a
Cyrillic е), ``.ＥＮＶ`` (fullwidth), ``.e\u200bnv`` (a zero-width space) and ``.énv``
are all ``.env`` to a person. The skeleton is NFKC, then casefold, without invisible
format characters and combining marks, with the common cross-script lookalikes of Latin
letters and digits (Unicode's confusables for Cyrillic, Greek, Armenian and others, the
prototypes UTS #39 gives) replaced by the Latin letter they imitate.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

__all__ = ("skeleton",)

# Lookalike -> the ASCII character it imitates (lower case: the skeleton is casefolded).
# fmt: off
_LOOKALIKES = {
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i",
    "ј": "j", "к": "k", "ӏ": "l", "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s",
    "т": "t", "ц": "u", "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "з": "3", "б": "6", "ъ": "b",
    "ь": "b", "г": "r", "п": "n", "ш": "w", "л": "n", "ɡ": "g", "ԍ": "g", "ү": "y", "ӧ": "o",
    "ӓ": "a", "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w", "ϲ": "c", "ϳ": "j", "ζ": "z",
    "μ": "u", "σ": "o", "ς": "s", "օ": "o", "ս": "u", "ց": "g", "հ": "h", "ո": "n", "ւ": "l",
    "զ": "q", "ı": "i", "ȷ": "j", "ł": "l", "ɩ": "i", "ɪ": "i", "ʟ": "l", "ᴀ": "a", "ᴄ": "c",
    "ᴅ": "d", "ᴇ": "e", "ᴋ": "k", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s",
    "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z", "ǀ": "l", "ⅼ": "l", "ℓ": "l",
    "∣": "l", "│": "l", "｜": "l", "ø": "o", "ð": "d", "đ": "d", "ħ": "h", "ŧ": "t", "ƅ": "b",
    "ɑ": "a", "ɒ": "a", "ɛ": "e", "ɜ": "3", "ɵ": "o", "ɸ": "o", "ʋ": "u", "ʐ": "z", "ꞵ": "b",
    "․": ".", "‧": ".", "·": ".", "•": ".", "∙": ".", "⋅": ".", "。": ".", "｡": ".", "‐": "-",
    "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-", "﹣": "-", "⁄": "/", "∕": "/",
    "╱": "/", "⧸": "/", "＿": "_",
}
# fmt: on
_INVISIBLE_CATEGORIES = frozenset(("Cf", "Mn", "Me", "Cc"))


@lru_cache(maxsize=8192)
def skeleton(name: str) -> str:
    """The skeleton of ``name`` (see the module docs); ASCII names only casefold."""
    if name.isascii():
        return name.casefold()
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name).casefold())
    out = []
    for char in text:
        if unicodedata.category(char) in _INVISIBLE_CATEGORIES and char not in "\n\t/":
            continue
        out.append(_LOOKALIKES.get(char, char))
    return unicodedata.normalize("NFKC", "".join(out)).casefold()
