"""The quickstart's main job installs only ``pip install -e .``: ``vsh-ai eval`` must run on
what that installs (the base dependencies and what they require, no extra).

No virtual environment is built per run (too slow): a real eval runs in a fresh interpreter
where every module that only an extra (or nothing of ours) installs is refused at import,
as it would be missing there. Optional imports (``try: import sniffio``) fall back as they
would; a hard dependency on an extra's package fails the run."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def closure(requirements: list[str]) -> set[str]:
    """Every distribution ``requirements`` install here, extras and markers evaluated."""
    found: set[str] = set()
    todo = [(Requirement(spec), None) for spec in requirements]
    while todo:
        requirement, extra = todo.pop()
        environment = {**default_environment(), "extra": extra or ""}
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        name = canonicalize_name(requirement.name)
        extras = sorted(requirement.extras)
        key = name + "[" + ",".join(extras) + "]"
        if key in found:
            continue
        found.add(key)
        found.add(name)
        for spec in metadata.requires(name) or []:
            for wanted in [None, *extras]:
                todo.append((Requirement(spec), wanted))
    return {name for name in found if "[" not in name}


BLOCKER = """\
import sys
from importlib.abc import MetaPathFinder

BLOCKED = frozenset({blocked!r})


class Missing(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not a base dependency)")
        return None


sys.meta_path.insert(0, Missing())
"""


def test_eval_runs_on_the_base_dependencies_alone(tmp_path: Path) -> None:
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ours = [r for r in metadata.requires("vsh-ai") or [] if "extra ==" not in r]
    assert {canonicalize_name(Requirement(r).name) for r in base} <= {
        canonicalize_name(Requirement(r).name) for r in ours
    }  # the installed metadata is this pyproject's (plus the editable hook)
    installed = closure(ours)
    assert {"vsh-python", "pydantic-evals", "rich"} <= installed  # the closure is real
    assert "playwright" not in installed  # no dev extra
    assert "pytest" not in installed
    blocked = sorted(
        module
        for module, names in metadata.packages_distributions().items()
        if module not in sys.stdlib_module_names
        and module != "vsh_ai"
        and not {canonicalize_name(n) for n in names} & installed
    )
    assert "playwright" in blocked  # what the extras add is refused
    assert "jinja2" in blocked
    code = BLOCKER.format(blocked=blocked) + (
        "import contextlib, io\n"
        "from vsh_ai._cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    status = main(['eval', 'data-cleanup', '--no-progress'])\n"
        "print(out.getvalue().strip().splitlines()[-1])\n"
        "try:\n"
        "    import jinja2\n"
        "except ModuleNotFoundError:\n"
        "    print(status, 'refused')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *_, verdict, last = done.stdout.strip().splitlines()
    assert last == "0 refused", done.stderr[-3000:]  # ran, and the blocker works
    assert verdict.endswith("· exit 0")
    assert " 0 unsafe approvals " in verdict
