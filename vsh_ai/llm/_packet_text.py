"""How the evidence packet writes what it shows: names a character cannot break, numbered
diffs, the context of changed config keys, nodes and blobs in a few words."""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Callable, Iterator, Sequence

from .._evidence import Node
from ..analysis._config import (
    MISSING,
    ConfigSyntaxError,
    config_changes,
    detect_format,
    parse_config,
)
from ..analysis._config_context import key_context
from ._sharing import redact_secrets

__all__ = (
    "blob_id",
    "config_context",
    "hides_a_change",
    "node_text",
    "numbered",
    "numbered_diff",
    "paths_text",
    "show_name",
    "show_path",
)

_CONTEXT_LINES = 3
_SHOWN_PATHS = 5

_ESCAPED_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"))


def _escape(char: str) -> str:
    if char == " " or unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char
    return json.dumps(char)[1:-1]  # \uXXXX (a surrogate pair beyond the BMP)


def show_name(name: str) -> str:
    """A name as a one-line JSON string that no character can break, reorder or disguise.

    ``json.dumps`` escapes quotes, backslashes and C0 controls; everything else that a
    terminal, a tokenizer or ``str.splitlines`` could treat as a line break or a direction
    change (NEL, LS, PS, bidi controls, ...) is escaped too. The result decodes as JSON
    to the original name.
    """
    return "".join(_escape(char) for char in json.dumps(name, ensure_ascii=False))


def show_path(path: str) -> str:
    """A path for agent-facing text: secrets redacted, then escaped (see :func:`show_name`)."""
    return show_name(redact_secrets(path)[0])


def paths_text(paths: Sequence[str], show: Callable[[str], str] = show_path) -> str:
    shown = ", ".join(show(p) for p in paths[:_SHOWN_PATHS])
    more = len(paths) - _SHOWN_PATHS
    return shown + (f" and {more} more" if more > 0 else "")


def blob_id(node: Node | None) -> str:
    blob = node.blob if node is not None else None
    return f"blob {blob[:16]}" if blob else "blob not hashed"


def node_text(node: Node | None) -> str:
    if node is None:
        return "absent"
    return f"{node.kind} {node.size} B mode {node.mode & 0o7777:04o}"


def _span(start: int, end: int) -> str:
    """A unified-diff range: 1-based start and length (an empty range names the line before)."""
    return f"{start},0" if end == start else f"{start + 1},{end - start}"


def numbered_diff(before: str, after: str) -> Iterator[str]:
    """Hunks of a unified diff where every line carries its old and new line number."""
    old = before.splitlines()
    new = after.splitlines()
    old_eol = before.endswith("\n") or not before
    new_eol = after.endswith("\n") or not after
    matcher = difflib.SequenceMatcher(None, old, new)
    for group in matcher.get_grouped_opcodes(_CONTEXT_LINES):
        first, last = group[0], group[-1]
        yield f"@@ -{_span(first[1], last[2])} +{_span(first[3], last[4])} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for k in range(i2 - i1):
                    yield f"{i1 + k + 1:>6} {j1 + k + 1:>6}   {old[i1 + k]}"
                continue
            for k in range(i1, i2):
                yield f"{k + 1:>6} {'':>6} - {old[k]}"
                if k == len(old) - 1 and not old_eol:
                    yield "\\ No newline at end of file (before)"
            for k in range(j1, j2):
                yield f"{'':>6} {k + 1:>6} + {new[k]}"
                if k == len(new) - 1 and not new_eol:
                    yield "\\ No newline at end of file (after)"


def hides_a_change(before: str, after: str, shown_before: str, shown_after: str) -> bool:
    """True when redaction makes a changed line look unchanged in the diff the model reads.

    Redaction keeps line counts, so lines correspond one to one; every block the redacted
    diff shows (or omits) as equal must be equal in the real text too.
    """
    old, new = before.splitlines(), after.splitlines()
    shown_old, shown_new = shown_before.splitlines(), shown_after.splitlines()
    if (len(old), len(new)) != (len(shown_old), len(shown_new)):
        return True
    matcher = difflib.SequenceMatcher(None, shown_old, shown_new)
    return any(
        tag == "equal" and old[i1:i2] != new[j1:j2] for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    )


_CONTEXT_KEYS = 20
_CONTEXT_TEXT = 160


def config_context(
    path: str, before: bytes | None, after: bytes | None, before_text: str, after_text: str
) -> list[str]:
    """Per changed key of a config file: its line, comments and neighbours as the shared
    (redacted) text has them; empty for files that are not config or do not parse."""
    fmt = detect_format(path)
    if fmt == "auto" or after is None:
        return []
    try:
        old = MISSING if before is None else parse_config(before, fmt, path)
        changes = config_changes(old, parse_config(after, fmt, path))
    except ConfigSyntaxError:
        return []
    out: list[str] = []
    for change in changes[:_CONTEXT_KEYS]:
        removed = change.after is MISSING
        context = key_context(before_text if removed else after_text, change.key)
        if not context.line:
            continue
        side = "before" if removed else "after"
        out.append(f"  | {change.key} ({side} line {context.line}: {context.text[:_CONTEXT_TEXT]})")
        out.extend(f"  |   comment: {comment[:_CONTEXT_TEXT]}" for comment in context.comments)
        if context.neighbours:
            nearby = "; ".join(n[: _CONTEXT_TEXT // 2] for n in context.neighbours)
            out.append(f"  |   nearby: {nearby[: _CONTEXT_TEXT * 2]}")
    if len(changes) > _CONTEXT_KEYS:
        out.append(f"  | ... and {len(changes) - _CONTEXT_KEYS} more changed keys (see the diff)")
    return out


def numbered(text: str) -> Iterator[str]:
    for number, line in enumerate(text.splitlines(), start=1):
        yield f"{number:>6}   {line}"
