"""Python proofs and test-neutering denials on real VSH evidence (the bundled judge too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import pytest

from vsh_ai import Evidence
from vsh_ai._judge_files import load_judge
from vsh_ai.rules import RuleSet
from vsh_ai.rules._base import Allowance, Claim, net_changes
from vsh_ai.rules._intent import IntentScope, claimed_scope
from vsh_ai.rules._proofs import (
    AllowLocalRefactors,
    AllowPythonAnnotations,
    AllowTestAdditions,
    AllowVersionBump,
)
from vsh_ai.rules._tests import KeepTestsCollected

pytestmark = pytest.mark.anyio

Build = Callable[..., Awaitable[Evidence]]

UTIL = "def clamp(value, low, high):\n    return max(low, min(high, value))\n"
CORE = '''from pkg.util import clamp


def parse(text):
    """Parse key=value lines."""
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def bounded(value):
    return clamp(value, 0, 10)
'''
TEST = """from pkg.core import bounded, parse


def test_parse():
    assert parse("a=1") == {"a": "1"}


def test_bounded():
    assert bounded(11) == 10
"""
MODEL = "from pydantic import BaseModel\n\n\nclass Item(BaseModel):\n    size: int = 1\n"
FILES: dict[str, str] = {
    "src/pkg/__init__.py": '__version__ = "0.1.0"\n',
    "src/pkg/util.py": UTIL,
    "src/pkg/core.py": CORE,
    "src/pkg/models.py": MODEL,
    "tests/test_core.py": TEST,
    "pyproject.toml": '[project]\nname = "pkg"\n\n[tool.pytest.ini_options]\n'
    'testpaths = ["tests"]\n',
    "README.md": "# pkg\n",
}


def patch(path: str, old: str, new: str) -> str:
    return f"vsh_patch('/workspace/{path}', {old!r}, {new!r})"


def append(path: str, text: str) -> str:
    return f"p = '/workspace/{path}'\nvsh_write(p, vsh_read(p) + {text!r})"


async def run(
    evidence_for: Build, code: str, files: Mapping[str, str] = FILES, intent: str = "change"
) -> Evidence:
    return await evidence_for(dict(files), code, intent=intent)


def claim(evidence: Evidence, rule: Allowance, path: str) -> Claim:
    found = {c.path: rule.claim(evidence, c) for c in net_changes(evidence)}[path]
    assert found is not None
    return found


JUDGE = load_judge("repo-maintenance", skip_llm=True)

# -- annotations ---------------------------------------------------------------------

ANNOTATIONS = AllowPythonAnnotations(paths=("src/**/*.py",))


@pytest.mark.parametrize(
    "new",
    [
        "def clamp(value: float, low: float, high: float) -> float:",
        "def clamp(value: int | float, low: 'float', high: float) -> float:",
    ],
)
async def test_annotation_only_edits_are_claimed_and_approved(
    evidence_for: Build, new: str
) -> None:
    evidence = await run(
        evidence_for, patch("src/pkg/util.py", "def clamp(value, low, high):", new)
    )
    found = claim(evidence, ANNOTATIONS, "src/pkg/util.py")
    assert found.ok, found
    assert (await JUDGE.review(evidence)).decision == "approve"


@pytest.mark.parametrize(
    ("path", "old", "new", "why"),
    [
        ("src/pkg/util.py", "value, low", "value: print('x'), low", "holds code"),
        ("src/pkg/util.py", "value, low", "value: Number, low", "not bound"),
        ("src/pkg/util.py", "return max", "return min", "not annotation-only"),
        ("src/pkg/models.py", "size: int = 1", "size: str = 1", "reads annotations"),
    ],
)
async def test_annotations_that_can_change_behaviour_are_refused(
    evidence_for: Build, path: str, old: str, new: str, why: str
) -> None:
    evidence = await run(evidence_for, patch(path, old, new))
    found = claim(evidence, AllowPythonAnnotations(), path)
    assert not found.ok
    assert why in found.reason
    assert (await JUDGE.review(evidence)).decision != "approve"


async def test_a_behaviour_change_under_a_type_hints_intent_is_rejected(
    evidence_for: Build,
) -> None:
    evidence = await run(
        evidence_for,
        patch(
            "src/pkg/util.py",
            "def clamp(value, low, high):\n    return max(low,",
            "def clamp(value: float, low: float, high: float) -> float:\n    return min(low,",
        ),
        intent="Add type hints to clamp.",
    )
    verdict = await JUDGE.review(evidence)
    assert verdict.decision == "reject"
    assert verdict.judge.endswith("/intent-scope")
    assert "claims only type hints" in verdict.reason
    assert "src/pkg/util.py" in verdict.reason


# -- tests added -----------------------------------------------------------------------

ADDITIONS = AllowTestAdditions()


@pytest.mark.parametrize(
    "added",
    [
        '\n\ndef test_parse_empty():\n    assert parse("") == {}\n',
        '\n\nimport pytest\n\n\n@pytest.mark.parametrize("v", [11, 12])\n'
        "def test_many(v):\n    with pytest.raises(TypeError):\n        bounded(None)\n"
        "    assert bounded(v) == 10\n",
    ],
)
async def test_new_tests_with_real_checks_are_approved(evidence_for: Build, added: str) -> None:
    evidence = await run(evidence_for, append("tests/test_core.py", added))
    found = claim(evidence, ADDITIONS, "tests/test_core.py")
    assert found.ok, found
    assert (await JUDGE.review(evidence)).decision == "approve"


async def test_a_new_test_module_is_approved(evidence_for: Build) -> None:
    code = "vsh_write('/workspace/tests/test_util.py', 'from pkg.util import clamp\\n\\n\\n"
    code += "def test_clamp():\\n    assert clamp(5, 0, 3) == 3\\n')"
    evidence = await run(evidence_for, code)
    assert claim(evidence, ADDITIONS, "tests/test_util.py").ok
    assert (await JUDGE.review(evidence)).decision == "approve"


@pytest.mark.parametrize(
    ("added", "why"),
    [
        ("\n\ndef test_x():\n    parse('')\n", "no check that can fail"),
        ("\n\ndef test_parse():\n    assert parse('') == {}\n", "defined again"),
        ("\n\ndef helper():\n    return 1\n", "not a test function"),
        ("\n\nimport subprocess\n\n\ndef test_x():\n    assert parse('') == {}\n", "new import"),
    ],
)
async def test_additions_that_are_not_plain_tests_are_refused(
    evidence_for: Build, added: str, why: str
) -> None:
    evidence = await run(evidence_for, append("tests/test_core.py", added))
    found = claim(evidence, ADDITIONS, "tests/test_core.py")
    assert not found.ok
    assert why in found.reason


async def test_conftest_is_never_claimed_as_a_test_addition(evidence_for: Build) -> None:
    code = "vsh_write('/workspace/tests/conftest.py', 'def test_x():\\n    assert 1 == 2\\n')"
    evidence = await run(evidence_for, code)
    found = claim(evidence, ADDITIONS, "tests/conftest.py")
    assert not found.ok
    assert "tools run this file" in found.reason


# -- neutered tests ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "kind"),
    [
        (patch("tests/test_core.py", "assert bounded(11) == 10", "assert True"), "always true"),
        (
            patch(
                "tests/test_core.py",
                "assert bounded(11) == 10",
                "x = bounded(11)\n    assert x == x",
            ),
            "with itself",
        ),
        (
            patch(
                "tests/test_core.py",
                "    assert bounded(11) == 10",
                "    try:\n        assert bounded(11) == 10\n"
                "    except AssertionError:\n        pass",
            ),
            "swallowed",
        ),
        (
            patch(
                "tests/test_core.py",
                "    assert bounded(11) == 10",
                "    try:\n        assert bounded(11) == 10\n    except Exception:\n        pass",
            ),
            "swallowed",
        ),
        (patch("tests/test_core.py", "def test_bounded", "def check_bounded"), "does not collect"),
    ],
)
async def test_tests_that_can_no_longer_fail_are_rejected(
    evidence_for: Build, program: str, kind: str
) -> None:
    evidence = await run(evidence_for, program, intent="Make the test more robust.")
    verdict = await JUDGE.review(evidence)
    assert verdict.decision == "reject"
    assert verdict.judge.endswith("/python-risks")
    assert kind in verdict.reason
    assert "tests/test_core.py:" in verdict.reason


@pytest.mark.parametrize(
    ("program", "why"),
    [
        (
            "vsh_move('/workspace/tests/test_core.py', '/workspace/tests/core_checks.py')",
            "does not collect",
        ),
        (
            "vsh_mkdir('/workspace/attic')\n"
            "vsh_move('/workspace/tests/test_core.py', '/workspace/attic/test_core.py')",
            "moved out of its tests directory",
        ),
        (
            patch(
                "pyproject.toml",
                'testpaths = ["tests"]',
                'testpaths = ["tests"]\naddopts = "-k \'not bounded\'"',
            ),
            "by keyword (-k)",
        ),
        (
            patch("pyproject.toml", 'testpaths = ["tests"]', 'testpaths = ["tests/unit"]'),
            "no longer include tests",
        ),
        (
            patch(
                "pyproject.toml",
                'testpaths = ["tests"]',
                'testpaths = ["tests"]\naddopts = "--deselect tests/test_core.py::test_bounded"',
            ),
            "deselects",
        ),
        (
            patch(
                "pyproject.toml",
                'testpaths = ["tests"]',
                'testpaths = ["tests"]\npython_files = ["check_*.py"]',
            ),
            "python_files",
        ),
    ],
)
async def test_tests_taken_out_of_collection_are_rejected(
    evidence_for: Build, program: str, why: str
) -> None:
    evidence = await run(evidence_for, program, intent="Quieten pytest.")
    verdict = KeepTestsCollected().check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert why in verdict.reason
    assert (await JUDGE.review(evidence)).decision == "reject"


async def test_harmless_pytest_options_are_not_flagged(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for,
        patch(
            "pyproject.toml",
            'testpaths = ["tests"]',
            'testpaths = ["tests"]\naddopts = "-ra --strict-markers -p no:cacheprovider"',
        ),
    )
    assert KeepTestsCollected().check(evidence) is None


# -- version bumps and refactors ----------------------------------------------------------


@pytest.mark.parametrize(("new", "ok"), [("0.2.0", True), ("0.1.0rc1", False), ("0.0.9", False)])
async def test_version_bumps_must_go_up(evidence_for: Build, new: str, ok: bool) -> None:
    evidence = await run(evidence_for, patch("src/pkg/__init__.py", "0.1.0", new))
    found = claim(evidence, AllowVersionBump(), "src/pkg/__init__.py")
    assert found.ok is ok, found
    assert ((await JUDGE.review(evidence)).decision == "approve") is ok


async def test_extracting_a_local_variable_is_approved(evidence_for: Build) -> None:
    old = '    return dict(line.split("=", 1) for line in text.splitlines() if line)'
    new = (
        '    pairs = (line.split("=", 1) for line in text.splitlines() if line)\n'
        "    return dict(pairs)"
    )
    evidence = await run(evidence_for, patch("src/pkg/core.py", old, new))
    assert claim(evidence, AllowLocalRefactors(), "src/pkg/core.py").ok
    assert (await JUDGE.review(evidence)).decision == "approve"


async def test_parameter_renames_need_the_intent_to_name_them(evidence_for: Build) -> None:
    program = patch("src/pkg/util.py", UTIL, UTIL.replace("value", "number"))
    asked = await run(evidence_for, program, intent="Rename value to number in clamp.")
    assert claim(asked, AllowLocalRefactors(), "src/pkg/util.py").ok
    silent = await run(evidence_for, program, intent="Tidy clamp.")
    assert not claim(silent, AllowLocalRefactors(), "src/pkg/util.py").ok
    assert (await JUDGE.review(silent)).decision == "review"


# -- intent scope ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("intent", "claims"),
    [
        ("Fix a README typo.", {"documentation"}),
        ("Fix two typos in the README.", {"documentation"}),
        ("Add type hints to clamp as requested in the typing issue.", {"type hints"}),
        ("Reformat the module with black.", {"formatting"}),
        ("Fix parse and the README typo.", set()),
        ("Rename the parameter m to model in predict() and add a docstring.", set()),
        ("Split the parse expression for readability.", set()),
        (None, set()),
    ],
)
def test_claimed_scope_reads_exclusive_claims_only(intent: str | None, claims: set[str]) -> None:
    assert claimed_scope(intent) == claims


async def test_code_changes_under_a_docs_intent_are_rejected(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for,
        patch("src/pkg/util.py", "value", "val") + "\n" + patch("README.md", "pkg", "Pkg"),
        intent="Fix a README typo.",
    )
    verdict = IntentScope(action="reject").check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "claims only documentation" in verdict.reason
    assert "src/pkg/util.py" in verdict.reason
    assert (await JUDGE.review(evidence)).decision == "reject"
    docs_only = await run(
        evidence_for, patch("README.md", "pkg", "Pkg"), intent="Fix a README typo."
    )
    assert IntentScope().check(docs_only) is None


async def test_rules_alone_prove_nothing_beyond_their_claims(evidence_for: Build) -> None:
    evidence = await run(evidence_for, patch("src/pkg/util.py", "max(low,", "max(low + 1,"))
    verdict = RuleSet([ANNOTATIONS, ADDITIONS, AllowVersionBump(), AllowLocalRefactors()]).evaluate(
        evidence
    )
    assert verdict.decision != "approve"


async def test_bandit_is_a_second_opinion_on_new_tests(evidence_for: Build) -> None:
    added = (
        "\n\nimport hashlib\n\n\ndef test_digest():\n"
        "    assert hashlib.md5(b'x').hexdigest() == parse('a=1')['a']\n"
    )
    evidence = await run(evidence_for, append("tests/test_core.py", added))
    found = claim(evidence, ADDITIONS, "tests/test_core.py")
    assert not found.ok
    assert "Bandit flags the new tests (B324 hashlib)" in found.reason
    assert (await JUDGE.review(evidence)).decision == "review"


async def test_proofs_are_bounded_in_size(evidence_for: Build) -> None:
    big = "".join(f"def f_{i}(a, b):\n    return a + {i}\n\n\n" for i in range(2000))
    files = {**FILES, "src/pkg/big.py": big}
    program = patch("src/pkg/big.py", "def f_1(a, b):", "def f_1(a: int, b: int) -> int:")
    evidence = await run(evidence_for, program, files=files, intent="Add type hints to f_1.")
    found = claim(evidence, ANNOTATIONS, "src/pkg/big.py")
    assert not found.ok
    assert "larger modules need a human" in found.reason
    verdict = await JUDGE.review(evidence)
    assert verdict.decision == "review"  # unproven, never a reject: too large to prove either way
