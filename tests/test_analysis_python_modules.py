"""Module renames: dotted names, equality modulo a rename, re-export shims; the allowance."""

from __future__ import annotations

import ast
from collections.abc import Awaitable, Callable

import pytest

from vsh_ai import Evidence
from vsh_ai.analysis._python_modules import (
    equal_modulo_renames,
    module_name,
    package_of,
    shim_gaps,
)
from vsh_ai.rules import AllowModuleRenames, RuleSet

RENAME = {"pkg.engine": "pkg.core"}


def test_module_names() -> None:
    assert module_name("src/pkg/core.py") == "pkg.core"
    assert module_name("tools/run.py") == "tools.run"
    assert module_name("src/pkg/__init__.py") is None
    assert module_name("src/my-pkg/a.py") is None
    assert package_of("src/pkg/sub/a.py") == "pkg.sub"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("from pkg.core import parse\n", "from pkg.engine import parse\n"),
        ("import pkg.core\npkg.core.parse('')\n", "import pkg.engine\npkg.engine.parse('')\n"),
        ("from .core import parse\n", "from .engine import parse\n"),
        ("from . import core\n", "from . import engine as core\n"),
        ("patch('pkg.core.parse')\n", "patch('pkg.engine.parse')\n"),
    ],
)
def test_equal_modulo_the_rename(old: str, new: str) -> None:
    assert equal_modulo_renames(ast.parse(old), ast.parse(new), RENAME, "pkg")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("from pkg.core import parse\nx = 1\n", "from pkg.engine import parse\nx = 2\n"),
        ("from . import core\ncore.f()\n", "from . import engine\nengine.f()\n"),  # renamed name
        ("from pkg.core import parse\n", "from pkg.other import parse\n"),
    ],
)
def test_other_edits_are_not_equal(old: str, new: str) -> None:
    assert not equal_modulo_renames(ast.parse(old), ast.parse(new), RENAME, "pkg")


MODULE = ast.parse("import os\n_EPS = 1\n\n\ndef parse(t):\n    return t\n\n\nclass C: ...\n")


@pytest.mark.parametrize(
    ("shim", "gap"),
    [
        ("from pkg.engine import *\nfrom pkg.engine import _EPS\n", None),
        (
            '"""Old name."""\nimport warnings\nfrom .engine import *\nfrom .engine import _EPS\n'
            'warnings.warn("moved", DeprecationWarning, stacklevel=2)\n',
            None,
        ),
        ("from pkg.engine import *\n", "_EPS"),
        ("from pkg.engine import parse, C, os, _EPS as EPS\n", "another name"),
        ("from pkg.util import *\nfrom pkg.engine import _EPS\n", "another module"),
        ("from pkg.engine import *\nfrom pkg.engine import _EPS\nprint('hi')\n", "not a re-export"),
    ],
)
def test_shim_gaps(shim: str, gap: str | None) -> None:
    found = shim_gaps(ast.parse(shim), MODULE, "pkg.engine", "pkg")
    assert found is None if gap is None else (found is not None and gap in found)


def test_a_literal_all_limits_what_a_star_import_re_exports() -> None:
    module = ast.parse("__all__ = ['parse']\n\n\ndef parse(t): ...\n\n\ndef helper(): ...\n")
    gap = shim_gaps(ast.parse("from pkg.engine import *\n"), module, "pkg.engine", "pkg")
    assert gap is not None
    assert "helper" in gap


FILES = {
    "src/pkg/core.py": "def parse(t):\n    return t\n",
    "src/pkg/cli.py": "from pkg.core import parse\n",
}
RULES = RuleSet([AllowModuleRenames(paths=("src/**/*.py",))], id="renames", on_unproven="review")
SHIM = "vsh_write('/workspace/src/pkg/core.py', 'from pkg.engine import *\\n')\n"
MOVE = "vsh_move('/workspace/src/pkg/core.py', '/workspace/src/pkg/engine.py')\n"
IMPORT = "vsh_patch('/workspace/src/pkg/cli.py', 'pkg.core', 'pkg.engine')\n"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("code", "intent", "decision"),
    [
        (MOVE + SHIM + IMPORT, "Rename core to engine", "approve"),
        (MOVE + SHIM + IMPORT, "Tidy the package", "review"),  # the intent names no rename
        (MOVE + IMPORT, "Rename core to engine", "review"),  # no shim
        (
            MOVE + SHIM + IMPORT.replace("pkg.engine", "pkg.engine, os"),
            "Rename core to engine",
            "review",
        ),  # an import beyond the rename
    ],
)
async def test_the_allowance(
    evidence_for: Callable[..., Awaitable[Evidence]], code: str, intent: str, decision: str
) -> None:
    verdict = RULES.evaluate(await evidence_for(FILES, code, intent=intent))
    assert verdict.decision == decision, verdict.reason
