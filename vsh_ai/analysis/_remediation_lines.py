"""Is an edit of a JavaScript/TypeScript, Go, Ruby, Java/Kotlin, C#, PHP or Rust file exactly
"a hard-coded secret replaced by an environment lookup"?

There is no parser here for each language, so the proof is by lines, and narrow: the
changed lines pair one for one (:func:`vsh_ai.analysis._diff.line_opcodes`), and each new
line is its old line with one quoted string literal replaced by an environment lookup of
that language (``process.env.HMAC_SECRET``, ``os.Getenv("JWT_SECRET")``,
``ENV.fetch("API_TOKEN")``, ``System.getenv("DB_PASSWORD")``, ...), where

- the variable's name names a secret (``*_SECRET``, ``*_TOKEN``, ``*PASSWORD*``, ``*_KEY``:
  the detector's own key vocabulary), and
- the literal is one: the detector flags it, or it is an opaque value (letters and digits
  mixed, at least 12 characters, no spaces), never a word or a placeholder.

Besides those lines only the language's import of its environment module may be added
(Go's ``import "os"`` or an ``"os"`` line in an import block, Rust's ``use std::env;``) and
blank lines. Anything else (a second change on the line, a default that keeps the literal,
``|| 'the-old-key'``) is not proven. A TypeScript cast or non-null mark after the lookup
(``as string``, ``!``) and an empty-string default (``?? ""``) are part of the lookup.
"""

from __future__ import annotations

import re

from ._diff import line_opcodes
from ._secret_values import _key_kind
from ._secrets import UNSCANNED, find_secrets

__all__ = ("LOOKUP_SUFFIXES", "line_lookup_problem")

LOOKUP_SUFFIXES = (
    ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".go", ".rb", ".java",
    ".kt", ".kts", ".cs", ".php", ".rs",
)  # fmt: skip
"""File name endings this proof covers (other languages are not proven)."""

_ID = r"[A-Za-z_][A-Za-z0-9_]*"
_LOOKUPS = (
    # JavaScript / TypeScript, with an optional cast, non-null mark or empty default
    rf"""process\.env(?:\.(?P<name1>{_ID})|\[\s*(?P<q2>["'`])(?P<name2>{_ID})(?P=q2)\s*\])"""
    r"""(?:\s+as\s+string|!)?(?:\s*(?:\?\?|\|\|)\s*(?:""|''|``))?(?:\s+as\s+string)?""",
    rf"""os\.Getenv\(\s*"(?P<name3>{_ID})"\s*\)""",  # Go
    rf"""ENV(?:\.fetch\(\s*|\[\s*)(?P<q4>["'])(?P<name4>{_ID})(?P=q4)\s*[\])]""",  # Ruby
    rf"""System\.getenv\(\s*"(?P<name5>{_ID})"\s*\)""",  # Java, Kotlin
    rf"""Environment\.GetEnvironmentVariable\(\s*"(?P<name6>{_ID})"\s*\)""",  # C#
    rf"""getenv\(\s*(?P<q7>["'])(?P<name7>{_ID})(?P=q7)\s*\)""",  # PHP
    rf"""(?:std::)?env::var\(\s*"(?P<name8>{_ID})"\s*\)(?:\?|\.expect\("[^"]*"\))?""",  # Rust
)
_LOOKUP = re.compile("|".join(f"(?:{p})" for p in _LOOKUPS))
_LITERAL = re.compile(r"""(?P<q>["'`])(?P<body>(?:(?!(?P=q))[^\\\n]|\\.){1,512})(?P=q)""")
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_.-]{12,}")
_ADDED_OK = re.compile(r"""\s*(?:import\s+"os"|"os"|use\s+std::env;|)\s*""")
_MAX_LINES = 20_000


def line_lookup_problem(before: str, after: str) -> str | None:
    """None when ``after`` is ``before`` with secret literals replaced by environment
    lookups, line by line (see the module docs); else why not, in a sentence fragment."""
    old, new = before.splitlines(), after.splitlines()
    if len(old) > _MAX_LINES or len(new) > _MAX_LINES:
        return "it is too long to compare line by line"
    pairing = line_opcodes(old, new)
    if not pairing.exact:
        return "its lines cannot be paired exactly"
    replaced = 0
    for tag, i1, i2, j1, j2 in pairing.opcodes:
        if tag == "equal":
            continue
        if tag == "delete":
            return f"it removes line {i1 + 1}"
        if tag == "insert":
            extra = next((j for j in range(j1, j2) if not _ADDED_OK.fullmatch(new[j])), None)
            if extra is not None:
                return f"line {extra + 1} of the new version is not an environment lookup"
            continue
        if i2 - i1 != j2 - j1:
            return f"lines {i1 + 1}-{i2} are not replaced one for one"
        for offset in range(i2 - i1):
            if not _replaces_secret(old[i1 + offset], new[j1 + offset]):
                return f"line {j1 + offset + 1} changes more than a secret to a lookup"
            replaced += 1
    return None if replaced else "it replaces no hard-coded secret"


def _replaces_secret(old: str, new: str) -> bool:
    """Whether ``new`` is ``old`` with one secret literal replaced by a secret lookup."""
    for lookup in _LOOKUP.finditer(new):
        name = next(v for k, v in lookup.groupdict().items() if k.startswith("name") and v)
        if _key_kind(name) is None:
            continue
        prefix, suffix = new[: lookup.start()], new[lookup.end() :]
        if not (old.startswith(prefix) and old.endswith(suffix)):
            continue
        if len(prefix) + len(suffix) > len(old):
            continue
        start, end = len(prefix), len(old) - len(suffix)
        literal = _LITERAL.fullmatch(old[start:end])
        if literal is not None and _secret_literal(old, start, end, literal.group("body")):
            return True
    return False


def _secret_literal(line: str, start: int, end: int, body: str) -> bool:
    """The detector flags the literal on its line, or it is an opaque value."""
    if any(f.kind != UNSCANNED and f.start < end and start < f.end for f in find_secrets(line)):
        return True
    return bool(
        _OPAQUE.fullmatch(body)
        and any(c.isdigit() for c in body)
        and any(c.isalpha() for c in body)
        and any(c.isupper() for c in body)
        and any(c.islower() for c in body)
    )
