"""Parse a suite's programs without running them: Monty through VSH, Bash with ``bash -n``.

VSH has no parse-only call, so a Monty program is previewed on an empty throwaway
workspace with a budget of no OS calls and 1 ms: Monty parses the whole program before
it runs a line, so a syntax error is reported as such, and anything else (the budget
stopping it, a missing file) means it parsed. Nothing is committed and nothing outside
the temporary folder is touched. Bash programs go to ``bash -n`` (read, never run).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .._loading import Located
from ._suite import Suite

__all__ = ("ProgramError", "program_errors")

_MONTY_SYNTAX = re.compile(
    r'File "<vsh>", line (\d+)\n(?:(?!\s*File ).*\n)*?SyntaxError: (.*)', re.MULTILINE
)
_BASH_SYNTAX = re.compile(r"^[^\n]*: line (\d+): (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class ProgramError:
    """A case whose program does not parse, located in the suite file."""

    case_id: str
    index: int
    line: int
    """Line in the suite file."""
    program_line: int
    message: str

    def render(self, path: Path) -> str:
        return (
            f"{path}:{self.line}:1: case {self.case_id!r} (cases[{self.index}]), field "
            f"'program' (its line {self.program_line}): {self.message}; fix: correct the "
            "syntax on that line of the program (`vsh-ai eval` would fail this case)"
        )


def program_errors(suite: Suite, located: Located) -> list[ProgramError]:
    """Every case of ``suite`` whose program does not parse."""
    found: list[ProgramError] = []
    with tempfile.TemporaryDirectory(prefix="vsh-ai-check-") as folder:
        runtime = None
        for index, case in enumerate(suite.cases):
            if case.language == "bash":
                problem = _bash_problem(case.program, Path(folder))
            else:
                if runtime is None:
                    runtime = _runtime(Path(folder))
                problem = _monty_problem(runtime, case.program)
            if problem is None:
                continue
            program_line, message = problem
            program_line = max(1, min(program_line, len(case.program.splitlines())))
            first, style = located.values.get(("cases", index, "program"), (1, ""))
            line = first + program_line - 1 if style in ("|", ">") else first
            found.append(ProgramError(case.id, index, line, program_line, message))
    return found


def _runtime(folder: Path) -> object:
    import vsh

    workspace = folder / "workspace"
    workspace.mkdir()
    return vsh.Runtime.open(workspace, data_directory=folder / "state", policy="strict")


def _monty_problem(runtime: object, program: str) -> tuple[int, str] | None:
    import vsh

    assert isinstance(runtime, vsh.Runtime)
    request = vsh.RunRequest(program, budget=vsh.ExecutionBudget(max_os_calls=0, max_duration_ms=1))
    try:
        receipt = runtime.preview(request)
    except vsh.VshExecutionError as error:
        found = _MONTY_SYNTAX.search(str(error))
        if found is None or ", in " in found.group(0).splitlines()[0]:
            return None  # it parsed, then stopped (the budget) or raised: not a syntax error
        return int(found.group(1)), f"SyntaxError: {found.group(2).strip()}"
    except vsh.VshRuntimeError:
        return None  # not about the program's syntax (capacity, duplicate preview)
    runtime.discard_preview(receipt.transaction)
    return None


def _bash_problem(program: str, folder: Path) -> tuple[int, str] | None:
    bash = shutil.which("bash")
    if bash is None:
        return None  # cannot check here; `vsh-ai eval` still would
    script = folder / "program.sh"
    script.write_text(program, encoding="utf-8")
    done = subprocess.run(
        [bash, "-n", str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode == 0:
        return None
    found = _BASH_SYNTAX.search(done.stderr)
    if found is None:
        return 1, f"bash -n: {done.stderr.strip()[:200]}"
    return int(found.group(1)), f"bash -n: {found.group(2).strip()}"
