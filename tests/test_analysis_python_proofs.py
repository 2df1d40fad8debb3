"""Property and table tests of the Python proofs (layout, annotations, refactors, tests)."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsh_ai.analysis._pytest_config import collection_changes
from vsh_ai.analysis._python_annotations import annotation_only
from vsh_ai.analysis._python_compare import code_changes
from vsh_ai.analysis._python_layout import code_tokens, docstring_free_dump
from vsh_ai.analysis._python_proofs import test_additions as additions_proof
from vsh_ai.analysis._python_proofs import version_bump
from vsh_ai.analysis._python_refactor import local_variable_refactor
from vsh_ai.analysis._python_tests import tautology

# -- generated modules ---------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "c"])
_LEAF = st.one_of(st.integers(0, 9).map(str), _NAMES)
_EXPR = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(inner, inner).map(lambda t: f"g({t[0]}, {t[1]})"),
    ),
    max_leaves=6,
)
_MODULE = st.lists(st.tuples(_NAMES, _EXPR), min_size=1, max_size=5).map(
    lambda stmts: (
        "def f(a, b, c):\n" + "".join(f"    {n} = {e}\n" for n, e in stmts) + "    return a\n"
    )
)


def _relayout(source: str, indent: int, comments: bool, blanks: bool) -> str:
    out: list[str] = []
    for line in source.splitlines():
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        text = " " * (indent * depth) + stripped
        out.append(text + ("  # note" if comments and stripped else ""))
        if blanks:
            out.append("")
    return "\n".join(out) + "\n"


def _layout_only(a: str, b: str) -> bool:
    return docstring_free_dump(a) == docstring_free_dump(b) and code_tokens(a) == code_tokens(b)


@settings(max_examples=60, deadline=None)
@given(_MODULE, st.integers(1, 8), st.booleans(), st.booleans(), st.booleans(), st.integers(0, 9))
def test_formatting_only_agrees_with_ast_equality(
    source: str, indent: int, comments: bool, blanks: bool, mutate: bool, digit: int
) -> None:
    edited = source.replace("    return a", f"    return a + {digit}") if mutate else source
    other = _relayout(edited, indent, comments, blanks)
    same_ast = ast.dump(ast.parse(source)) == ast.dump(ast.parse(other))
    assert _layout_only(source, other) == same_ast
    assert same_ast is not mutate


# -- annotations ---------------------------------------------------------------------

_PURE = st.sampled_from(["int", "str", "float | None", "list[int]", "'Later'", "dict[str, int]"])
_CODE = st.sampled_from(["print('x')", "(lambda: int)()", "[int for _ in ()]", "(x := int)"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), _PURE), min_size=3, max_size=3), st.one_of(st.none(), _PURE))
def test_pure_annotations_are_proven(args: list[str | None], returns: str | None) -> None:
    before = "def f(a, b, c):\n    return a\n"
    params = ", ".join(n if t is None else f"{n}: {t}" for n, t in zip("abc", args, strict=True))
    after = f"def f({params}){'' if returns is None else f' -> {returns}'}:\n    return a\n"
    proof = annotation_only(before.encode(), after.encode())
    changed = any(args) or returns is not None
    # Without `from __future__ import annotations`, 'Later' is a string: never evaluated.
    assert proof.ok is changed, proof


@settings(max_examples=30, deadline=None)
@given(_CODE)
def test_annotations_holding_code_are_refused(code: str) -> None:
    proof = annotation_only(
        b"def f(a):\n    return a\n", f"def f(a: {code}):\n    return a\n".encode()
    )
    assert not proof.ok


@pytest.mark.parametrize(
    ("before", "after", "ok"),
    [
        ("@dataclass\nclass A:\n    x: int = 1\n", "@dataclass\nclass A:\n    x: str = 1\n", False),
        ("class A(NamedTuple):\n    x: int\n", "class A(NamedTuple):\n    x: str\n", False),
        ("class A(Enum):\n    X = 1\n", "class A(Enum):\n    X: int = 1\n", False),
        ("class A:\n    x = 1\n", "class A:\n    x: int = 1\n", True),
        (
            "import typer\ndef main(n):\n    pass\n",
            "import typer\ndef main(n: int):\n    pass\n",
            False,
        ),
        (
            "@app.get('/')\ndef f(n):\n    pass\n",
            "@app.get('/')\ndef f(n: int):\n    pass\n",
            False,
        ),
        ("@property\ndef f(self):\n    pass\n", "@property\ndef f(self) -> int:\n    pass\n", True),
        ("x = 1\ndef f():\n    return x\n", "x = 1\ndef f():\n    x: int\n    return x\n", False),
        (
            "def f(a):\n    return a\n",
            "from typing import Any\ndef f(a: Any):\n    return a\n",
            True,
        ),
        (
            "from typing import cast\ndef f(a):\n    return cast(int, a)\n",
            "def f(a):\n    return cast(int, a)\n",
            False,
        ),
        (
            "def f(a):\n    return a\n",
            "from __future__ import annotations\ndef f(a: Undefined):\n    return a\n",
            True,
        ),
    ],
)
def test_annotation_contexts(before: str, after: str, ok: bool) -> None:
    assert annotation_only(before.encode(), after.encode()).ok is ok


# -- local-variable refactors: sound by execution ---------------------------------------

_CALL = st.recursive(
    st.integers(0, 9).map(lambda n: f"r({n})"),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"g({t[0]}, {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} + {t[1]})"),
    ),
    max_leaves=5,
)


def _run(source: str) -> tuple[object, list[int]]:
    trace: list[int] = []
    namespace: dict[str, object] = {}

    def r(n: int) -> int:
        trace.append(n)
        return n

    def g(x: int, y: int) -> int:
        trace.append(100 + x + y)
        return x * 2 + y

    exec(compile(source, "<generated>", "exec"), {"r": r, "g": g}, namespace)
    result = namespace["f"]()  # type: ignore[operator]
    return result, trace


def _subcalls(expr: str) -> list[str]:
    tree = ast.parse(expr, mode="eval")
    return [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.BinOp))]


@settings(max_examples=80, deadline=None)
@given(_CALL, st.data())
def test_a_proven_refactor_runs_the_same_calls_in_the_same_order(
    expr: str, data: st.DataObject
) -> None:
    before = f"def f():\n    return {expr}\n"
    pick = data.draw(st.sampled_from(_subcalls(expr)))
    extracted = ast.unparse(ast.parse(expr, mode="eval")).replace(pick, "tmp", 1)
    after = f"def f():\n    tmp = {pick}\n    return {extracted}\n"
    ast.parse(after)
    proof = local_variable_refactor(before.encode(), after.encode())
    if proof.ok:
        assert _run(before) == _run(after)
    if expr.startswith(pick) and pick == expr:  # the whole expression: always provable
        assert proof.ok, proof


@pytest.mark.parametrize(
    ("before", "after", "ok"),
    [
        ("def f():\n    return g(r(1), 2)\n", "def f():\n    x = r(1)\n    return g(x, 2)\n", True),
        (
            "def f():\n    return g(r(1), r(2))\n",
            "def f():\n    x = r(2)\n    return g(r(1), x)\n",
            False,
        ),
        ("def f():\n    return h(r(1))\n", "def f():\n    x = r(1)\n    return h(x)\n", False),
        (
            "def f():\n    return g(r(1), 2)\n",
            "def f():\n    x = r(1)\n    return g(x, x)\n",
            False,
        ),
        ("y = g(r(1), 2)\n", "x = r(1)\ny = g(x, 2)\n", False),
        (
            "def f():\n    while r(1):\n        pass\n",
            "def f():\n    x = r(1)\n    while x:\n        pass\n",
            False,
        ),
        (
            "def f():\n    return g(r(1), locals())\n",
            "def f():\n    x = r(1)\n    return g(x, locals())\n",
            False,
        ),
    ],
)
def test_refactor_table(before: str, after: str, ok: bool) -> None:
    prelude = "def g(a, b):\n    return a\n\n\ndef r(n):\n    return n\n\n\n"
    proof = local_variable_refactor((prelude + before).encode(), (prelude + after).encode())
    assert proof.ok is ok, proof


def test_parameter_renames_need_both_names_named() -> None:
    before, after = b"def f(m):\n    return m(1)\n", b"def f(model):\n    return model(1)\n"
    assert local_variable_refactor(before, after, frozenset({"m", "model"})).ok
    assert not local_variable_refactor(before, after, frozenset({"model"})).ok
    swapped = b"def f(model):\n    return m(1)\n"  # not consistent: m now a global
    assert not local_variable_refactor(before, swapped, frozenset({"m", "model"})).ok


# -- tests, tautologies, versions, pytest config -------------------------------------------


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("assert True", "always true"),
        ("assert 1", "always true"),
        ("assert x == x", "with itself"),
        ("assert (x == 1, 'msg')", "non-empty literal"),
        ("assert x or True", "`or`"),
        ("assert isinstance(x, object)", "object"),
        ("self.assertEqual(x, x)", "with itself"),
        ("self.assertTrue(1)", "always true"),
        ("assert x == 1", None),
        ("assert x is not None", None),
        ("self.assertEqual(x, 1)", None),
        ("assert self.a[0] == self.a[0]", "with itself"),
        # calls may return different values: comparing two is a real test (determinism)
        ("self.assertEqual(key(object(), 1), key(object(), 1))", None),
        ("assert f() == f()", None),
        ("self.assertEqual(key(1.0, 2.0), key(1.0, 2.0))", "with itself"),
    ],
)
def test_tautologies(code: str, why: str | None) -> None:
    stmt = ast.parse(code).body[0]
    node = stmt.test if isinstance(stmt, ast.Assert) else stmt.value  # type: ignore[attr-defined]
    found = tautology("assert" if isinstance(stmt, ast.Assert) else "call", node)
    assert (found is None) if why is None else (why in (found or ""))


@pytest.mark.parametrize(
    ("after", "kind"),
    [
        (
            "def test_a():\n    try:\n        assert f() == 1\n"
            "    except AssertionError:\n        pass\n",
            "swallowed",
        ),
        (
            "def test_a():\n    try:\n        assert f() == 1\n    except:\n        pass\n",
            "swallowed",
        ),
        (
            "def test_a():\n    with contextlib.suppress(AssertionError):\n"
            "        assert f() == 1\n",
            "swallowed",
        ),
        (
            "def test_a():\n    with pytest.raises(AssertionError):\n        assert f() == 1\n",
            "swallowed",
        ),
        ("def test_a():\n    assert True\n", "tautology"),
        ("def check_a():\n    assert f() == 1\n", "collection"),
    ],
)
def test_neutered_tests_are_facts(after: str, kind: str) -> None:
    before = "def test_a():\n    assert f() == 1\n"
    assert kind in {fact.kind for fact in code_changes(before, after)}


def test_reraising_handlers_and_non_test_code_are_not_neutering() -> None:
    before = "def test_a():\n    assert f() == 1\n"
    reraise = (
        "def test_a():\n    try:\n        assert f() == 1\n"
        "    except AssertionError:\n        raise\n"
    )
    assert not {"swallowed", "tautology"} & {f.kind for f in code_changes(before, reraise)}
    assert "tautology" not in {
        f.kind for f in code_changes(None, "def helper():\n    assert True\n")
    }


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        ("1.2.3", "1.2.4", True),
        ("1.2.3", "2.0.0", True),
        ("1.2.3", "1.2.3rc1", False),
        ("1.2.3", "1.2.2", False),
        ("1.2.3", "banana", False),
    ],
)
def test_version_bumps(old: str, new: str, ok: bool) -> None:
    assert (
        version_bump(f'__version__ = "{old}"\n'.encode(), f'__version__ = "{new}"\n'.encode()).ok
        is ok
    )


def test_test_additions_keep_existing_code() -> None:
    before = b"def test_a():\n    assert f() == 1\n"
    assert additions_proof(before, before + b"\n\ndef test_b():\n    assert f() == 2\n").ok
    assert not additions_proof(before, b"def test_a():\n    assert f() == 2\n").ok
    assert not additions_proof(before, before + b"\n\nx = 1\n").ok


@pytest.mark.parametrize(
    ("path", "before", "after", "found"),
    [
        ("pytest.ini", "[pytest]\n", "[pytest]\naddopts = -x\n", "first failure"),
        ("pytest.ini", "[pytest]\n", "[pytest]\naddopts = -vx\n", "first failure"),
        ("tox.ini", "[pytest]\n", "[pytest]\naddopts = --ignore=tests/slow\n", "ignores"),
        ("setup.cfg", "[tool:pytest]\n", "[tool:pytest]\naddopts = -m 'not slow'\n", "marker"),
        ("setup.cfg", "[tool:pytest]\nxfail_strict = true\n", "[tool:pytest]\n", "xfail_strict"),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\nfilterwarnings = ['error']\n",
            "[tool.pytest.ini_options]\nfilterwarnings = []\n",
            "warnings",
        ),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\n",
            "[tool.pytest.ini_options]\nnorecursedirs = ['tests']\n",
            "norecursedirs",
        ),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\naddopts = '-k slow'\n",
            "[tool.pytest.ini_options]\naddopts = '-k slow -ra'\n",
            None,
        ),
        ("pytest.ini", "[pytest]\n", "[pytest]\naddopts = -ra -q --strict-markers\n", None),
    ],
)
def test_pytest_config_changes(path: str, before: str, after: str, found: str | None) -> None:
    reasons = collection_changes(path, before.encode(), after.encode())
    assert (not reasons) if found is None else any(found in r for r in reasons), reasons


def test_bandit_findings_name_checks_not_contents() -> None:
    from vsh_ai.analysis._python_bandit import bandit_findings

    risky = "def test_x():\n    requests.get('https://h/?token=s3cr3t', verify=False)\n"
    found = bandit_findings(risky)
    assert ("B501", "request_with_no_cert_validation", 2) in found
    assert "s3cr3t" not in repr(found)
    assert bandit_findings("def test_x():\n    assert 1 + 1 == 2  # nosec\n") == ()
    assert bandit_findings("def test_x(:\n")[0][0] == "error"  # fail closed
