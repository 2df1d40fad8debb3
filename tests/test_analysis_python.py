"""Python AST facts: resolved calls, skips, assertions, definitions, unparsable code."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis._python import (
    MAX_ANALYSED_BYTES,
    MAX_RISKY_FACTS,
    code_changes,
    docstring_free_dump,
    is_python_source,
    is_tooling_code,
    line_diff,
)
from vsh_ai.analysis._python_names import in_flat_package


def kinds(before: str | None, after: str | None) -> list[tuple[str, str]]:
    return [(f.kind, f.detail) for f in code_changes(before, after)]


@pytest.mark.parametrize(
    ("code", "kind", "name"),
    [
        ("from subprocess import run as r\nr(['ls'])\n", "process", "subprocess.run"),
        ("from subprocess import *\ncheck_output('id')\n", "process", "subprocess.check_output"),
        ("import os as o\no.system('id')\n", "process", "os.system"),
        ("import os\nrun = os.system\nrun('id')\n", "process", "os.system"),
        ("import os\nx = os\ny = x\ny.execvp('sh', [])\n", "process", "os.execvp"),
        ("sp = __import__('subprocess')\nsp.Popen('id')\n", "process", "subprocess.Popen"),
        ("__import__('os').system('id')\n", "process", "os.system"),
        (
            "import importlib\nm = importlib.import_module('os')\nm.popen('id')\n",
            "process",
            "os.popen",
        ),
        (
            "from importlib import import_module as im\nim('subprocess').call('x')\n",
            "process",
            "subprocess.call",
        ),
        ("import os\ngetattr(os, 'system')('id')\n", "process", "os.system"),
        ("import sys\nsys.modules['os'].system('id')\n", "process", "os.system"),
        (
            "import asyncio\nasyncio.create_subprocess_shell('id')\n",
            "process",
            "asyncio.create_subprocess_shell",
        ),
        ("eval(data)\n", "eval", "builtins.eval"),
        ("exec(compile(src, 'f', 'exec'))\n", "eval", "builtins.exec"),
        ("import builtins\nbuiltins.exec(src)\n", "eval", "builtins.exec"),
        (
            "import urllib.request\nurllib.request.urlretrieve(u, 'x.sh')\n",
            "download",
            "urllib.request.urlretrieve",
        ),
        (
            "from urllib.request import urlopen as get\nget(u).read()\n",
            "download",
            "urllib.request.urlopen",
        ),
        ("import requests as rq\nrq.get(u)\n", "download", "requests.get"),
        ("import httpx\nwith httpx.Client() as c:\n    pass\n", "download", "httpx.Client"),
        ("import pickle\npickle.loads(blob)\n", "deserialise", "pickle.loads"),
        ("import marshal\nmarshal.loads(blob)\n", "deserialise", "marshal.loads"),
        ("import yaml\nyaml.load(text)\n", "deserialise", "yaml.load"),
        ("import yaml\nyaml.load(text, Loader=yaml.Loader)\n", "deserialise", "yaml.load"),
        ("from socket import socket as s\ns().connect(addr)\n", "socket", "socket.socket"),
        ("import ctypes\nctypes.CDLL('x.so')\n", "native", "ctypes.CDLL"),
        ("import posix\nposix.system('id')\n", "process", "posix.system"),
        ("import pandas as pd\npd.read_pickle(p)\n", "deserialise", "pandas.read_pickle"),
        (
            "import subprocess\nclass A:\n    def __init__(self):\n"
            "        self.run = subprocess.run\n    def go(self):\n        self.run('id')\n",
            "process",
            "subprocess.run",
        ),
        (
            "import os, threading\nthreading.Thread(target=os.system, args=('id',)).start()\n",
            "process",
            "os.system",
        ),
        ("import os\nlist(map(os.system, cmds))\n", "process", "os.system"),
        (
            "import functools, subprocess\nfunctools.partial(subprocess.call, shell=True)('x')\n",
            "process",
            "subprocess.call",
        ),
    ],
)
def test_risky_calls_resolve_through_aliases(code: str, kind: str, name: str) -> None:
    found = kinds(None, code)
    assert (kind, name) in found, found


@pytest.mark.parametrize(
    "code",
    [
        "model.eval()\nmodel.train()\n",
        "self.exec()\nobj.system('x')\n",
        "import yaml\nyaml.safe_load(t)\nyaml.load(t, Loader=yaml.SafeLoader)\n",
        "import json\njson.loads(s)\n",
        "def eval(x):\n    return x\n\neval(1)\n",
        "import os\nos.path.join('a', 'b')\n",
    ],
)
def test_look_alikes_are_not_flagged(code: str) -> None:
    risky = [k for k, _ in kinds(None, code) if k not in ("definition_added",)]
    assert risky == []


def test_existing_calls_are_not_new_facts() -> None:
    before = "import subprocess\n\ndef f():\n    subprocess.run(['ls'])  # list\n"
    after = "import subprocess\n\n\ndef f():\n    # list the files\n    subprocess.run(['ls'])\n"
    assert kinds(before, after) == []
    twice = before + "    subprocess.run(['ls'])\n"
    assert ("process", "subprocess.run") in kinds(before, twice)


@pytest.mark.parametrize(
    "code",
    [
        "from pytest import mark as m\n\n@m.skip\ndef test_a():\n    assert 1 == f()\n",
        (
            "import pytest as pt\n"
            "\n"
            "@pt.mark.skipif(True, reason='x')\n"
            "def test_a():\n"
            "    assert 1 == f()\n"
        ),
        "import pytest\n\n@pytest.mark.xfail\ndef test_a():\n    assert 1 == f()\n",
        "import pytest\n\ndef test_a():\n    pytest.skip('later')\n    assert 1 == f()\n",
        (
            "import unittest\n"
            "\n"
            "class T(unittest.TestCase):\n"
            "    @unittest.skip('x')\n"
            "    def test_a(self):\n"
            "        assert 1 == f()\n"
        ),
        (
            "import unittest\n"
            "\n"
            "class T(unittest.TestCase):\n"
            "    def test_a(self):\n"
            "        self.skipTest('x')\n"
            "        assert 1 == f()\n"
        ),
        (
            "from unittest import SkipTest\n"
            "\n"
            "def test_a():\n"
            "    raise SkipTest()\n"
            "    assert 1 == f()\n"
        ),
        "import pytest\npytestmark = pytest.mark.skip\n\ndef test_a():\n    assert 1 == f()\n",
        (
            "from pytest import mark\n"
            "pytestmark = [mark.xfail(strict=False)]\n"
            "\n"
            "def test_a():\n"
            "    assert 1 == f()\n"
        ),
    ],
)
def test_skips_whatever_the_alias(code: str) -> None:
    before = "def test_a():\n    assert 1 == f()\n"
    assert "skip" in [k for k, _ in kinds(before, code)]


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("def pytest_collection_modifyitems(config, items):\n    items[:] = []\n", "test_hook"),
        ("def pytest_ignore_collect(collection_path, config):\n    return True\n", "test_hook"),
        ("def pytest_runtest_call(item):\n    pass\n", "test_hook"),
        ("collect_ignore = ['test_payments.py']\n", "collection"),
        ("collect_ignore_glob = ['*_slow.py']\n", "collection"),
        ("collect_ignore = []\ncollect_ignore.append('test_x.py')\n", "collection"),
    ],
)
def test_conftest_hooks_and_collection(code: str, kind: str) -> None:
    assert kind in [k for k, _ in kinds("", code)]


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        (
            "def test_a():\n    assert f() == 1\n    assert g()\n",
            "def test_a():\n    assert f() == 1\n",
            "assertion_removed",
        ),
        (
            "def test_a():\n    self.assertEqual(f(), 1)\n",
            "def test_a():\n    f()\n",
            "assertion_removed",
        ),
        (
            "def test_a():\n    with pytest.raises(E):\n        f()\n",
            "def test_a():\n    f()\n",
            "assertion_removed",
        ),
        (
            "def test_a():\n    assert f() == 1\n",
            "def test_a():\n    assert True\n",
            "assertion_weakened",
        ),
        ("def test_a():\n    assert x\n", "def test_a():\n    assert 1\n", "assertion_weakened"),
        (
            "def test_a():\n    assert f() == 1\n",
            "def test_a():\n    assert f()\n",
            "assertion_weakened",
        ),
        (
            "def test_a():\n    assert f() == 1\n",
            "def test_a():\n    assert f() != 1\n",
            "assertion_weakened",
        ),
        (
            "def test_a():\n    assert t < 0.1\n",
            "def test_a():\n    assert t < 10\n",
            "assertion_weakened",
        ),
        (
            "def test_a():\n    assert f() == approx(1, rel=1e-6)\n",
            "def test_a():\n    assert f() == approx(1, rel=0.5)\n",
            "assertion_weakened",
        ),
        (
            "def test_a():\n    pass\n\ndef test_b():\n    pass\n",
            "def test_a():\n    pass\n",
            "definition_removed",
        ),
        ("def f():\n    return 1\n\nclass A:\n    x = 1\n", "", "emptied"),
        ("def f():\n    return 1\n\nclass A:\n    x = 1\n", "'''Module.'''\npass\n", "emptied"),
        (
            "def f():\n    x = 1\n    y = 2\n    return x + y\n",
            "# def f():\n#     x = 1\n#     y = 2\n#     return x + y\n",
            "commented_out",
        ),
        (
            "def test_a():\n    assert f() == 1\n",
            "def test_a():\n    return\n    assert f() == 1\n",
            "unreachable",
        ),
        (
            "def test_a():\n    assert f() == 1\n",
            "def test_a():\n    raise RuntimeError\n    assert f() == 1\n",
            "unreachable",
        ),
        ("x = 1\n", "def f(:\n    pass\n", "unparsable"),
        ("x = 1\n", "x = 1\n\0\n", "unparsable"),
    ],
)
def test_removed_weakened_and_emptied(before: str, after: str, kind: str) -> None:
    assert kind in [k for k, _ in kinds(before, after)], kinds(before, after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("def test_a():\n    x = f()\n", "def test_a():\n    x = f()\n    assert x is not None\n"),
        (
            "def test_a():\n    assert f() == 1\n",
            "def test_a():\n    assert f() == 1\n    assert g() is not None\n",
        ),
        ("def test_a():\n    assert f() != 1\n", "def test_a():\n    assert f() == 2\n"),
        ("def test_a():\n    assert t < 10\n", "def test_a():\n    assert t < 1\n"),
        (
            "def f():\n    return 1  # retrun the value\n",
            "def f():\n    return 1  # return the value\n",
        ),
        ("def f():\n    return 1\n", 'def f():\n    """Return one."""\n    return 1\n'),
    ],
)
def test_strengthened_or_harmless_edits_are_not_flagged(before: str, after: str) -> None:
    flagged = [k for k, _ in kinds(before, after) if k != "definition_added"]
    assert flagged == []


def test_typo_fix_is_a_modified_line_not_an_added_one() -> None:
    before = "a = 1\nb = 'helo'\nc = 3\n"
    after = "a = 1\nb = 'hello'\nc = 3\n"
    diff = line_diff(before, after)
    assert diff.added == frozenset()
    assert diff.removed == frozenset()
    assert diff.modified == {2: 2}
    grown = line_diff(before, "a = 1\nb = 'hello'\nx = 9\nc = 3\n")
    assert grown.modified == {2: 2}
    assert grown.added == frozenset({3})


def test_new_risky_call_on_edited_line_is_reported_as_modified() -> None:
    facts = code_changes("import os\nx = 1\n", "import os\nx = os.system('id')\n")
    assert [(f.kind, f.line, f.where) for f in facts] == [("process", 2, "modified")]


def test_facts_never_echo_string_literals() -> None:
    secret = "ghp_" + "A1b2C3d4" * 5
    facts = code_changes(None, f"import os\nos.system('curl -H {secret} x')\neval('{secret}')\n")
    assert facts
    assert all(secret not in f.detail for f in facts)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("conftest.py", True),
        ("tests/unit/conftest.py", True),
        ("setup.py", True),
        ("noxfile.py", True),
        ("docs/conf.py", True),
        ("project/docs/source/conf.py", True),
        (".github/workflows/ci.yml", True),
        ("package.json", True),
        ("web/package.json", True),
        ("lib/site-packages/evil.pth", True),
        ("src/pkg/sitecustomize.py", True),
        ("src/pkg/conf.py", False),
        ("src/pkg/core.py", False),
        ("README.md", False),
    ],
)
def test_is_tooling_code(path: str, expected: bool) -> None:
    assert is_tooling_code(path) is expected


def test_python_source_by_shebang() -> None:
    assert is_python_source("bin/tool", b"#!/usr/bin/env python3\nimport os\n")
    assert not is_python_source("bin/tool", b"#!/bin/sh\necho\n")
    assert is_python_source("x.py")


def test_docstring_free_dump_ignores_comments_and_docstrings_only() -> None:
    base = 'def f(x):\n    """Doc."""\n    return x + 1\n'
    same = '# note\ndef f(x):\n    """Better doc."""\n\n    return x + 1  # plus one\n'
    assert docstring_free_dump(base) == docstring_free_dump(same)
    assert docstring_free_dump(base) != docstring_free_dump(base.replace("+ 1", "+ 2"))
    assert docstring_free_dump("def f(:\n") is None
    # A coding cookie changes how the bytes decode, so it is part of the meaning.
    assert docstring_free_dump(b"# coding: latin-1\nx = '\xc3\xa9'\n") != docstring_free_dump(
        b"# coding: utf-8\nx = '\xc3\xa9'\n"
    )


_NAMES = st.sampled_from(["r", "run_it", "_x", "spawn", "helper"])


@given(alias=_NAMES, module_alias=_NAMES, form=st.integers(min_value=0, max_value=3))
def test_property_process_calls_found_under_any_alias(
    alias: str, module_alias: str, form: int
) -> None:
    code = [
        f"from subprocess import check_output as {alias}\n{alias}('id')\n",
        f"import subprocess as {module_alias}\n{module_alias}.check_output('id')\n",
        f"{module_alias} = __import__('subprocess')\n{module_alias}.check_output('id')\n",
        f"import subprocess\n{alias} = getattr(subprocess, 'check_output')\n{alias}('id')\n",
    ][form]
    assert ("process", "subprocess.check_output") in kinds(None, code)


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.system(" + "+".join(["a"] * 1500) + ")\n",  # too deep for ast.dump
        "x = " + "-" * 50000 + "1\n",  # too deep for the parser
        "x = 1\n" * 60000,  # over MAX_ANALYSED_BYTES
    ],
)
def test_unanalysable_code_is_unparsable_never_harmless(source: str) -> None:
    assert [f.kind for f in code_changes("x = 1\n", source)] == ["unparsable"]
    assert docstring_free_dump(source) is None or len(source) < 300_000


def test_repeated_lines_pair_in_bounded_time() -> None:
    before = "x = 1\n" * 20000
    after = "y = 2\n" + "x = 1\n" * 19998 + "y = 2\n"
    diff = line_diff(before, after)
    assert diff.modified == {1: 1, 20000: 20000}
    assert diff.added == frozenset()


ALIASED = "from subprocess import run as r\nimport os as o\n"


def _calls(count: int) -> str:
    return "".join(f"r(['x{i}'])\n" if i % 2 else f"o.system('y{i}')\n" for i in range(count))


def test_many_risky_calls_are_one_unanalysed_fact_per_kind() -> None:
    # The slow shape: 256 KiB of risky calls through aliases (ast.dump per call was 40%
    # of the time). Beyond MAX_RISKY_FACTS the module is not compared call by call: one
    # "unparsable" fact, and each kind found once, so rules flagging only some kinds see it.
    source = ALIASED + _calls(MAX_RISKY_FACTS + 1)
    facts = code_changes(None, source)
    assert [(f.kind, f.line) for f in facts] == [("unparsable", 3), ("process", 3)]
    assert facts[0].detail == f"too many risky calls to compare ({MAX_RISKY_FACTS + 1} > 500)"
    assert facts[1].detail == f"{MAX_RISKY_FACTS + 1} found, not compared"
    unchanged = code_changes(source, source)
    assert [f.kind for f in unchanged] == ["unparsable", "process"], (
        "an unchanged module over the limit cannot be proven unchanged call by call"
    )
    worst = ALIASED
    while len((worst + "r(['x'])\no.system('y')\n").encode()) <= MAX_ANALYSED_BYTES:
        worst += "r(['x'])\no.system('y')\n"
    facts = code_changes(None, worst)
    assert facts[0].kind == "unparsable"
    assert "too many risky calls" in facts[0].detail
    edited = worst.replace("r(['x'])\n", "r(['x'])  # edited\n", 100)
    assert code_changes(worst, edited)[0].kind == "unparsable"


def test_up_to_the_limit_risky_calls_are_compared() -> None:
    source = ALIASED + _calls(MAX_RISKY_FACTS)
    assert code_changes(source, source) == ()
    assert len(code_changes(None, source)) == MAX_RISKY_FACTS
    one_more = source.replace("o.system('y0')\n", "o.system('y0')\no.system('z')\n")
    assert kinds(source, one_more)[0] == (
        "unparsable",
        "too many risky calls to compare (501 > 500)",
    )
    changed = source.replace("o.system('y0')", "o.system('changed')")
    assert kinds(source, changed) == [("process", "os.system")]
    assert [f.line for f in code_changes(source, changed)] == [3]


def test_an_old_version_over_the_limit_compares_nothing() -> None:
    old = ALIASED + _calls(MAX_RISKY_FACTS + 1)
    new = ALIASED + _calls(3)
    facts = kinds(old, new)
    assert facts[0][0] == "unparsable"
    assert "previous version could not be analysed (too many risky calls" in facts[0][1]
    assert facts[1:] == [("process", name) for name in ("os.system", "subprocess.run", "os.system")]


@pytest.mark.parametrize("enabled", [True, False])
def test_garbage_collection_is_paused_and_restored(enabled: bool) -> None:
    import gc

    from vsh_ai.analysis import _python_facts

    was = gc.isenabled()
    seen: list[bool] = []
    original = _python_facts._index

    def spy(tree):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        if len(tree.body) == 3:
            raise RecursionError("deep")
        return original(tree)

    try:
        gc.enable() if enabled else gc.disable()
        _python_facts._index = spy
        _python_facts.remembered_facts.cache_clear()
        assert kinds(None, "import os\nos.system('x')\n") == [("process", "os.system")]
        assert gc.isenabled() is enabled
        assert kinds(None, "x = 1\ny = 2\nz = 3\n") == [
            ("unparsable", "too deeply nested (RecursionError)")
        ]
        assert gc.isenabled() is enabled
        assert seen == [False, False]
    finally:
        _python_facts._index = original
        gc.enable() if was else gc.disable()


def test_token_and_dump_helpers_also_pause_garbage_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from vsh_ai.analysis import _python, _python_facts, _python_layout

    seen: list[bool] = []
    original = _python_facts._parse

    def spy(source):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return original(source)

    assert gc.isenabled()
    monkeypatch.setattr(_python_layout, "_parse", spy)
    assert _python.code_tokens("x = 1  # c\n") == _python.code_tokens("x  =  1\n")
    assert docstring_free_dump('"""doc"""\nx = 1\n') == docstring_free_dump("x = 1\n")
    assert _python.code_tokens("x = (\n") is None
    assert seen == [False] * 5
    assert gc.isenabled()


RENAMED = (
    "import app\n\n"
    "def test_recieve():\n    assert app.get() == 1\n\n"
    "class TestClinet:\n    def test_call(self):\n        assert app.call() is not None\n"
)


def test_a_test_renamed_with_its_code_unchanged_moved_and_removed_nothing() -> None:
    after = RENAMED.replace("test_recieve", "test_receive").replace("TestClinet", "TestClient")
    assert code_changes(RENAMED, after) == ()


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("    assert app.get() == 1\n", "    app.get()\n", "assertion_removed"),  # body changed
        ("def test_recieve():", "def test_receive(tmp_path):", "definition_removed"),
    ],
)
def test_a_renamed_test_whose_code_changed_is_still_compared(old: str, new: str, kind: str) -> None:
    after = RENAMED.replace(old, new).replace("test_recieve", "test_receive")
    assert kind in [k for k, _ in kinds(RENAMED, after)]


def test_a_rename_out_of_collection_is_still_a_removal() -> None:
    found = [k for k, _ in kinds(RENAMED, RENAMED.replace("test_recieve", "check_recieve"))]
    assert "collection" in found
    assert "definition_removed" in found


def test_two_renamed_tests_with_one_body_pair_nothing() -> None:
    before = "def test_a():\n    assert f()\n\ndef test_b():\n    assert f()\n"
    after = "def test_c():\n    assert f()\n\ndef test_d():\n    assert f()\n"
    assert "definition_removed" in [k for k, _ in kinds(before, after)]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("slugify/core.py", True),
        ("mypkg/sub/util.py", True),
        ("slugify/__init__.py", True),
        ("core.py", False),  # a root module: the judges name it with "*.py"
        ("scripts/release.py", False),
        ("docs/conf.py", False),
        ("tools/gen.py", False),
        ("build/lib/pkg/core.py", False),
        (".github/scripts/check.py", False),
        ("my-data/load.py", False),  # not importable
        ("_vendor/six.py", False),
        ("pkg/conftest.py", False),  # run by pytest
        ("pkg/setup.py", False),
        ("pkg/data.json", False),
    ],
)
def test_in_flat_package(path: str, expected: bool) -> None:
    assert in_flat_package(path) is expected


_DOCSTRING_MODULES = (
    '"""Module."""\nx = "a"\n\n\ndef f():\n    """Doc."""\n    return "b"\n',
    'def f():\n    "a" "b"\n    return "c" "d"\n\n\nclass C:\n    ("x"\n     "y")\n    z = "w"\n',
    'class C:\n    """C."""\n\n    def m(self):\n        """M."""; y = "s"\n'
    '        return f"{y}"\n',
    "".join(f'def f{i}():"""d{i}"""; return "s{i}"\n' for i in range(50)),
    'x = 1\n"not a docstring"\n\n\nasync def g():\n    r"""Raw."""\n    await h("""no""")\n',
)


@pytest.mark.parametrize("source", _DOCSTRING_MODULES)
def test_code_tokens_skip_exactly_the_docstrings(source: str) -> None:
    """Issue 18: strings are found inside docstrings by bisect, not by a scan of every
    docstring per string (quadratic: 42 s for a module of 25,000 one-line functions); the
    tokens are those a scan keeps."""
    import ast
    import io
    import tokenize

    from vsh_ai.analysis import _python_layout

    spans = _python_layout._docstring_spans(ast.parse(source))
    expected = tuple(
        (token.type, token.string)
        for token in tokenize.tokenize(io.BytesIO(source.encode()).readline)
        if token.type not in _python_layout._LAYOUT_TOKENS
        and not (token.type == tokenize.STRING and any(a <= token.start < b for a, b in spans))
    )
    assert _python_layout.code_tokens(source) == expected
    assert any(kind == tokenize.STRING for kind, _ in expected)


def test_one_decision_parses_a_bounded_amount_of_python() -> None:
    """Issue 18 (a red team's shape): five distinct 95 KB modules of nested brackets took
    4 s; a rule-set decision parses at most MAX_DECISION_TOKENS words and symbols of
    distinct sources, and the rest is unparsable (reviewed). Outside a decision nothing
    is bounded but the size of each source."""
    from vsh_ai.analysis._python_facts import (
        MAX_DECISION_TOKENS,
        CodeFact,
        _parse,
        python_budget,
    )

    line = "x = (a + b) * c\n"  # 10 words and symbols
    big = (line * (MAX_DECISION_TOKENS // 20)).encode()  # half the budget
    other = b"# another\n" + big
    third = b"# a third\n" + big
    with python_budget():
        assert not isinstance(_parse(big), CodeFact)
        assert not isinstance(_parse(big), CodeFact)  # the same source counts once
        with python_budget():  # an inner decision shares the outer budget
            assert not isinstance(_parse(other), CodeFact)
        refused = _parse(third)
        assert isinstance(refused, CodeFact)
        assert "more Python source than one decision analyses" in refused.detail
        assert not isinstance(_parse(b"y = 1\n"), CodeFact)  # a small one still fits
    assert not isinstance(_parse(third), CodeFact)


def test_a_budget_refusal_is_not_remembered_for_the_next_decision() -> None:
    """Module facts are remembered per source across decisions; a module one decision had
    no room for is analysed in full by the next (else a change could decide another)."""
    from vsh_ai.analysis import _python_facts
    from vsh_ai.analysis._python_facts import module_facts, python_budget

    _python_facts.remembered_facts.cache_clear()
    source = b"import os\nos.system('x')\n"
    with python_budget(tokens=3):  # no room for it
        refused = module_facts(source)
    assert refused.error is not None
    assert "more Python source" in refused.error.detail
    with python_budget():
        again = module_facts(source)
    assert again.error is None
    assert [kind for kind, *_ in again.risky] == ["process"]
    with python_budget(tokens=3):  # a remembered module still counts toward a budget
        assert module_facts(source).error is not None


@pytest.mark.anyio
async def test_a_rule_set_decision_reviews_python_past_its_budget(evidence_for: Any) -> None:
    from vsh_ai._judge_files import load_judge

    module = ("X = " + "(" * 40 + "1" + ")" * 40 + "\n") * 300  # about 25,000 per side
    files = {f"src/pkg/m{i}.py": f"# module {i}\n{module}" for i in range(3)}

    def spaced(count: int) -> str:
        return "".join(
            f"p = '/workspace/src/pkg/m{i}.py'\nvsh_write(p, vsh_read(p).replace('1', ' 1 '))\n"
            for i in range(count)
        )

    judge = load_judge("repo-maintenance", skip_llm=True)
    one = judge.evaluate(await evidence_for(files, spaced(1)))
    assert one.decision == "approve", one.reason
    three = judge.evaluate(await evidence_for(files, spaced(3)))
    assert three.decision == "review"
    assert "more Python source than one decision analyses" in three.reason
