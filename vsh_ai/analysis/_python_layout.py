"""Python source modulo layout: docstring-free ASTs and code tokens.

Two versions with equal :func:`docstring_free_dump` and :func:`code_tokens` differ
only in comments, docstrings, blank lines and spacing.
"""

from __future__ import annotations

import ast
import io
import tokenize
from bisect import bisect_right
from typing import TypeVar

from ._python_facts import CodeFact, _parse, _without_gc

__all__ = ("code_tokens", "docstring_free_dump", "strip_docstrings")

_T = TypeVar("_T", bound=ast.AST)


def strip_docstrings(tree: _T) -> _T:
    """Remove docstrings in place (an emptied body becomes ``pass``) and forget how string
    constants were prefixed (``u"x"`` is ``"x"`` in Python 3); returns ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.kind is not None:
            node.kind = None
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                body = body[1:]
            node.body = body or [ast.Pass()]
    return tree


def _docstring_spans(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and first.end_lineno is not None
                and first.end_col_offset is not None
            ):
                spans.append(
                    ((first.lineno, first.col_offset), (first.end_lineno, first.end_col_offset))
                )
    return spans


_LAYOUT_TOKENS = frozenset(
    (
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    )
)


@_without_gc
def code_tokens(source: str | bytes) -> tuple[tuple[int, str], ...] | None:
    """The module's code tokens as written, without comments, docstrings or layout.

    Two versions with the same code tokens differ only in comments, docstrings,
    blank lines and spacing: a quote-style or spelling sweep through the code itself
    changes the tokens even where the AST stays the same. None: unparsable.
    """
    tree = _parse(source)
    if isinstance(tree, CodeFact):
        return None
    spans = sorted(_docstring_spans(tree))  # docstrings never overlap
    starts = [start for start, _ in spans]
    data = source if isinstance(source, bytes) else source.encode("utf-8")
    out: list[tuple[int, str]] = []
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type in _LAYOUT_TOKENS:
                continue
            if token.type == tokenize.STRING:
                # inside the last docstring that starts at or before it (bisect: a scan of
                # every docstring per string was quadratic, 42 s for a red team's module)
                at = bisect_right(starts, token.start) - 1
                if at >= 0 and token.start < spans[at][1]:
                    continue
            out.append((token.type, token.string))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return tuple(out)


@_without_gc
def docstring_free_dump(source: str | bytes) -> str | None:
    """The module's AST without docstrings, positions or comments (None: unparsable).

    Parsing bytes honours a ``coding:`` cookie, so a changed cookie that changes what
    the code means changes the dump too.
    """
    tree = _parse(source)
    if isinstance(tree, CodeFact):
        return None
    try:
        return ast.dump(strip_docstrings(tree), include_attributes=False)
    except (RecursionError, MemoryError):
        return None
