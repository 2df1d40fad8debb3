"""The diff an approver reads: the renderer's unified diff as numbered, highlighted rows.

The text comes from :func:`~vsh_ai.toolset._render.render_diff` (stored in the binding,
secrets already redacted); this module only lays it out: one row per line, old and new
line numbers, Pygments highlighting by file name, and pages of :data:`PAGE_ROWS` rows so a
diff of any size stays a page a browser draws at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from markupsafe import Markup, escape
from pygments import highlight  # type: ignore[import-untyped,unused-ignore]
from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped,unused-ignore]
from pygments.lexer import Lexer  # type: ignore[import-untyped,unused-ignore]
from pygments.lexers import TextLexer, get_lexer_for_filename  # type: ignore[import-untyped,unused-ignore]
from pygments.util import ClassNotFound  # type: ignore[import-untyped,unused-ignore]

from ._visible import has_hidden

__all__ = ("PAGE_ROWS", "DiffPage", "DiffRow", "diff_page", "diff_rows", "pygments_css")

PAGE_ROWS = 400
"""Rows of diff per page."""

RowKind = Literal["file", "hunk", "add", "del", "ctx", "note"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class DiffRow:
    kind: RowKind
    text: str
    file: str = ""
    old: int | None = None
    new: int | None = None


@dataclass(frozen=True)
class DiffPage:
    rows: tuple[tuple[DiffRow, Markup], ...]
    number: int
    pages: int
    total_rows: int


def diff_rows(diff: str) -> list[DiffRow]:
    """The rows of a unified diff (several files, each ``--- a/..`` ``+++ b/..`` headed);
    lines that are not diff syntax (the renderer's one-line notes) are ``note`` rows.
    Inside a hunk its line counts decide, so a removed ``-- x`` is never a file header."""
    rows: list[DiffRow] = []
    file, old, new, old_left, new_left = "", 0, 0, 0, 0
    lines = diff.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if old_left > 0 or new_left > 0:
            if line.startswith("+") and new_left > 0:
                rows.append(DiffRow("add", line[1:], file, None, new))
                new, new_left = new + 1, new_left - 1
                continue
            if line.startswith("-") and old_left > 0:
                rows.append(DiffRow("del", line[1:], file, old, None))
                old, old_left = old + 1, old_left - 1
                continue
            if line.startswith(" ") and old_left > 0 and new_left > 0:
                rows.append(DiffRow("ctx", line[1:], file, old, new))
                old, new, old_left, new_left = old + 1, new + 1, old_left - 1, new_left - 1
                continue
            old_left = new_left = 0  # not what the hunk announced: show it as a note
        if line.startswith("--- ") and index < len(lines) and lines[index].startswith("+++ "):
            before, after = line[4:], lines[index][4:]
            file = after[2:] if after.startswith("b/") else before.removeprefix("a/")
            rows.append(DiffRow("file", f"{before} → {after}", file))
            index += 1
            continue
        hunk = _HUNK.match(line)
        if hunk is not None and file:
            old, new = int(hunk[1]), int(hunk[3])
            old_left = 1 if hunk[2] is None else int(hunk[2])
            new_left = 1 if hunk[4] is None else int(hunk[4])
            rows.append(DiffRow("hunk", line, file))
            continue
        rows.append(DiffRow("note", line, file))
    return rows


def diff_page(diff: str, number: int) -> DiffPage:
    """Page ``number`` (1-based, clamped) of ``diff``, each code row highlighted."""
    rows = diff_rows(diff)
    pages = max(1, -(-len(rows) // PAGE_ROWS))
    number = min(max(1, number), pages)
    shown = rows[(number - 1) * PAGE_ROWS : number * PAGE_ROWS]
    return DiffPage(tuple(zip(shown, _highlighted(shown), strict=True)), number, pages, len(rows))


def _highlighted(rows: list[DiffRow]) -> list[Markup]:
    """Each row's text as HTML: code rows highlighted per file in one Pygments pass."""
    out: list[Markup | None] = [None] * len(rows)
    by_file: dict[str, list[int]] = {}
    for position, row in enumerate(rows):
        if row.kind in ("add", "del", "ctx"):
            by_file.setdefault(row.file, []).append(position)
        else:
            out[position] = escape(row.text)
    formatter = HtmlFormatter(nowrap=True)
    for name, positions in by_file.items():
        text = "\n".join(rows[p].text for p in positions) + "\n"
        html = highlight(text, _lexer(name), formatter).split("\n")
        for offset, position in enumerate(positions):
            out[position] = (
                Markup(html[offset]) if offset < len(html) else escape(rows[position].text)
            )
    return [_marked(rows[p], m if m is not None else Markup("")) for p, m in enumerate(out)]


_HIDDEN_MARK = Markup(
    '<span class="hidden-chars" title="this line holds bidi or invisible characters, shown '
    'as ⟨U+XXXX⟩: it may read differently in an editor">⚠ hidden characters</span> '
)


def _marked(row: DiffRow, html: Markup) -> Markup:
    """``html`` headed by a warning when the row holds a bidi or invisible character (the
    page's ``finalize`` then writes each one as ``⟨U+XXXX⟩``)."""
    return _HIDDEN_MARK + html if has_hidden(row.text) else html


def _lexer(name: str) -> Lexer:
    try:
        return get_lexer_for_filename(name, stripnl=False, stripall=False, ensurenl=True)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=True)


def pygments_css() -> str:
    """The highlighting style (served with the page's own stylesheet)."""
    return str(HtmlFormatter(style="default").get_style_defs(".code"))
