"""Key names as words: ``readTimeoutMs``, ``read-timeout-ms`` and ``READ_TIMEOUT_MS`` are
the words ``read timeout ms``, so one vocabulary fits snake, kebab, camel and upper case.

:func:`words` splits a name; :func:`snake` joins them (``read_timeout_ms``);
:func:`canonical_key` snake-cases every mapping key of a key path; :func:`word_match` says
whether a key holds a word *built on* a stem (``check`` in ``health_check``,
``checks``, ``skipcheck``), as opposed to merely containing its letters
(``checkout``, ``skipverification``: a review, never a proof either way).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from ._config_keys import _join, _segments

__all__ = ("WordMatch", "canonical_key", "snake", "word_match", "words")

_SPLIT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Common words that begin with a security stem but name something else (a `*check*`
# pattern is about checks, not a shop's checkout; `*token*` not a text tokenizer).
_OTHER_WORDS_TEXT = """
    checkout checkouts author authors authored tokenizer tokenizers tokenize tokenized
    tokenizing passenger passengers passage passages passive hostel publication
    publications publish published publisher
"""
_OTHER_WORDS = frozenset(_OTHER_WORDS_TEXT.split())


@lru_cache(maxsize=65536)
def words(name: str) -> tuple[str, ...]:
    """Lower-case words of a key name (separators, case changes and digits split it)."""
    return tuple(part.lower() for part in _SPLIT.findall(name))


@lru_cache(maxsize=65536)
def snake(name: str) -> str:
    """``name`` as snake case words; a name with no letters or digits stays as it is."""
    parts = words(name)
    return "_".join(parts) if parts else name


@lru_cache(maxsize=65536)
def canonical_key(key: str) -> str:
    """The key path with every mapping key snake-cased (``Server.readTimeoutMs`` ->
    ``server.read_timeout_ms``); the key itself when it does not parse."""
    try:
        segments = _segments(key, False)
    except ValueError:
        return key
    return _join(
        tuple(
            ("key", snake(segment[1])) if segment[0] == "key" else segment for segment in segments
        )
    )


WordMatch = Literal["word", "letters", "other"]


def word_match(stem: str, key: str) -> WordMatch:
    """How ``key`` holds ``stem``: ``word`` when a word starts with it (``checks``,
    ``verification``) or ends in it (``mtls``, ``skipcheck``); ``other`` when it is only
    inside common words that name something else (``checkout``, ``tokenizer``); else
    ``letters`` (inside a longer word: ``skipverification``, which a rule should review)."""
    stem = stem.lower()
    if not stem:
        return "letters"
    if "_" in stem or "-" in stem:  # several words: a run of whole words in one name
        run = snake(stem)
        found = re.search(rf"(?:^|[._]){re.escape(run)}", canonical_key(key))
        return "word" if found is not None else "letters"
    try:
        segments = _segments(key, False)
    except ValueError:
        return "letters"
    letters = False
    for segment in segments:
        if segment[0] != "key":
            continue
        name = segment[1].lower()
        for word in words(segment[1]) or (name,):
            if word in _OTHER_WORDS:
                name = name.replace(word, " ")
            elif word.startswith(stem) or word.endswith(stem):
                return "word"
        letters = letters or stem in name
    return "letters" if letters else "other"
