"""``allow_placeholder_tests``: new tests whose secret-named settings hold placeholders."""

from __future__ import annotations

import ast
from typing import Literal

from pydantic import Field

from ..analysis._python_annotations import Proof
from ..analysis._secret_values import _key_kind, _words, is_placeholder
from ._proofs import AllowTestAdditions

__all__ = ("AllowPlaceholderTests",)

_SETTERS = frozenset(("setenv", "setattr", "setitem", "setdefault", "putenv"))
_DUMMY_WORDS = frozenset(("test", "testing", "dummy", "fake", "example", "placeholder", "mock"))


def _dummy(value: str) -> bool:
    """A placeholder, or a value made of words that say it is not real (``test-key``)."""
    if is_placeholder(value):
        return True
    words = _words(value)
    return bool(words) and all(w.isalpha() for w in words) and any(w in _DUMMY_WORDS for w in words)


def dummy_settings_problem(after: bytes) -> str | None:
    """None when every secret-named value the tests set is a dummy; else the first line
    that sets a real-looking one (``monkeypatch.setenv("API_TOKEN", "...")``,
    ``os.environ["DB_PASSWORD"] = "..."``, ``setattr(client, "STRIPE_KEY", "...")``)."""
    try:
        tree = ast.parse(after)
    except (SyntaxError, ValueError, RecursionError):
        return "it is not valid Python"
    for node in ast.walk(tree):
        pairs: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _SETTERS and len(node.args) >= 2:
                key_at = 1 if name in ("setattr", "setitem") and len(node.args) >= 3 else 0
                pairs.append((node.args[key_at], node.args[key_at + 1]))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript):
                    pairs.append((target.slice, node.value))
        for key, value in pairs:
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            if _key_kind(key.value) is None:
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                if not _dummy(value.value):
                    return f"line {value.lineno} sets {key.value} to a real-looking value"
            elif not (isinstance(value, ast.Constant) and value.value is None):
                return f"line {value.lineno} sets {key.value} to a computed value"
    return None


class AllowPlaceholderTests(AllowTestAdditions):
    """Claims new test functions (``allow_test_additions``'s proof) whose secret-named
    environment variables, attributes and items are set to placeholders or obvious
    dummies (``"test-key"``, ``"<token>"``, ``""``), never real-looking or computed values.
    """

    type: Literal["allow_placeholder_tests"] = "allow_placeholder_tests"  # type: ignore[assignment]
    paths: tuple[str, ...] = Field(
        default=("tests/**/test_*.py", "**/test_*.py", "**/*_test.py"),
        description="Root-anchored globs of the test modules claimed.",
    )

    def _prove(self, before: bytes | None, after: bytes) -> Proof:
        proof = super()._prove(before, after)
        if not proof.ok:
            return proof
        problem = dummy_settings_problem(after)
        if problem is not None:
            return Proof(False, f"{problem}; use a placeholder such as 'test-key'")
        return Proof(True, f"{proof.reason}, secret-named settings hold placeholders")
