"""README.md's code blocks run here, offline, and must do what their text says.

The collector reads README.md: every fenced block is one test, named after the nearest
heading and its index among that section's blocks of the same language
(``test_python_block[durable-agents-dbos-1]``).

* **Python blocks** of one section run in order, once, in one namespace, with a temporary
  folder as the current directory: ``path/to/workspace`` in a block is a real workspace
  there, holding the files the section's :class:`Section` spec lists; DBOS's SQLite file
  and the approval key land there too, never in the repository. The blocks name real
  models (``openai:gpt-4o-mini``); none is called. After each block the agents it built run
  on a scripted :class:`~readme_support.Play` through ``agent.override(model=...)``, with
  ``ALLOW_MODEL_REQUESTS = False``; an agent inside a DBOS workflow (which ``override``
  cannot reach) talks to a loopback server speaking OpenAI's Responses API instead. The
  process refuses every non-loopback connection meanwhile. vsh-ai, VSH, Pydantic AI and
  DBOS are the real ones. Right after each block, the spec's check for it asserts what the
  README's text claims; a block whose run or check fails stops its section (later blocks
  report that they did not run).
* **Bash blocks** are not run: every command must be one this repository provides
  (extras that exist, console scripts, files), and every ``vsh-ai`` line must parse with
  the real CLI parser, name bundled suites and judges that exist and gates that parse.
* The **layout** block must name files and folders that exist.

A block that only illustrates syntax and cannot run offline is marked right above its
fence with ``<!-- readme-test: skip (reason) -->`` and reported as skipped. A new block
without a check here fails: add one.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import socket
import sys
import time
import tomllib
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from readme_support import Play, ResponsesServer, answer, function_model

from vsh_ai import VshResult, VshToolset

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
WORKSPACE = "path/to/workspace"

# -- the collector ---------------------------------------------------------------------------

_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SKIP = re.compile(r"^<!--\s*readme-test:\s*skip\s*\((.+)\)\s*-->$")


@dataclass(frozen=True)
class Block:
    lang: str
    section: str  # slug of the nearest heading above
    index: int  # 1-based among this section's blocks of this language
    line: int  # README line of the block's first code line
    code: str
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.section}-{self.index}"

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.lang or 'text'} block {self.id})"


def slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def read_blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with its section, index and skip marker."""
    blocks: list[Block] = []
    counts: dict[tuple[str, str], int] = {}
    section = "top"
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        fence = _FENCE.match(line)
        if heading:
            section = slug(heading.group(2))
        elif fence:
            lang = fence.group(1).lower()
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                raise AssertionError(f"README.md:{i + 1}: unclosed code fence")
            before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = _SKIP.match(before)
            key = (section, lang)
            counts[key] = counts.get(key, 0) + 1
            code = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(
                Block(lang, section, counts[key], i + 2, code, marker.group(1) if marker else None)
            )
            i = end
        i += 1
    return blocks


BLOCKS = read_blocks(README.read_text(encoding="utf-8"))
PYTHON_BLOCKS = [b for b in BLOCKS if b.lang == "python"]
BASH_BLOCKS = [b for b in BLOCKS if b.lang in ("bash", "sh", "shell", "console")]


def test_the_collector_finds_blocks_and_skip_markers() -> None:
    text = (
        "# Intro\n```python\nx = 1\n```\n## Two words (here)\n\n"
        "<!-- readme-test: skip (needs a GPU) -->\n\n```python\ny = 2\n```\n"
        "```bash\nls\n```\n```python\nz = 3\n```\n"
    )
    found = read_blocks(text)
    assert [(b.id, b.lang, b.line, b.skip) for b in found] == [
        ("intro-1", "python", 3, None),
        ("two-words-here-1", "python", 10, "needs a GPU"),
        ("two-words-here-1", "bash", 13, None),
        ("two-words-here-2", "python", 16, None),
    ]
    assert PYTHON_BLOCKS, "README.md has python blocks"
    assert {b.lang for b in BLOCKS} <= {"python", "bash", ""}, "a language the test ignores"


# -- what each section's python blocks need and claim -----------------------------------------


@dataclass
class Run:
    """One section's run: its namespace, folder and (for DBOS agents) the model server."""

    root: Path
    ns: dict[str, Any]
    server: ResponsesServer | None = None

    @property
    def workspace(self) -> Path:
        return self.root / WORKSPACE

    def host(self, name: str) -> str:
        return (self.workspace / name).read_text()


Check = Callable[[Run], None]


@dataclass(frozen=True)
class Section:
    files: Mapping[str, str]  # the workspace's files before the first block
    plays: tuple[Play, ...]  # what the section's agents do, by prompt
    checks: tuple[Check, ...]  # one per python block, run right after it
    durable: bool = False  # agents run inside DBOS workflows: the loopback model server
    teardown: Callable[[Run], None] | None = None


def tool_results(messages: list[ModelMessage]) -> list[VshResult]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and isinstance(part.content, VshResult)
    ]


def only_result(messages: list[ModelMessage]) -> VshResult:
    results = tool_results(messages)
    assert len(results) == 1, f"one vsh_run result expected, got {results}"
    return results[0]


# "An agent with reviewed file access": the bundled service-config judge on config/app.toml.

APP_TOML = """\
[server]
host = "127.0.0.1"
port = 8443
tls = true
workers = 4
timeout_s = 30
log_level = "info"

[auth]
required = true
"""
RAISE_TIMEOUT = Play(
    "Raise the request timeout",
    "vsh_patch('/workspace/config/app.toml', 'timeout_s = 30', 'timeout_s = 60')\n",
    "Raise the request timeout to 60 seconds.",
)
TLS_OFF = Play(
    "Turn off TLS",
    "vsh_patch('/workspace/config/app.toml', 'tls = true', 'tls = false')\n",
    "Turn off TLS.",
)
RAISED = APP_TOML.replace("timeout_s = 30", "timeout_s = 60")


def judged_agent_built(run: Run) -> None:
    toolset = run.ns["toolset"]
    assert isinstance(toolset, VshToolset)
    assert toolset.judge_scope == "mutations", "every mutation goes to the judge by default"
    assert isinstance(run.ns["agent"], Agent)
    assert run.host("config/app.toml") == APP_TOML


def judged_runs(run: Run) -> None:
    result = run.ns["result"]
    done = only_result(result.all_messages())
    assert done.state == "committed", done
    assert done.verdict is not None
    assert done.verdict.decision == "approve", "the rules proved the edit allowed"
    assert [c.path for c in done.changes] == ["config/app.toml"]
    assert done.diff is not None
    assert "+timeout_s = 60" in done.diff
    assert done.next_step, "one line saying what to do next"
    assert result.output == answer("committed")

    refused = only_result(run.ns["refused"].all_messages())
    assert refused.state == "rejected", refused
    assert refused.verdict is not None
    assert refused.verdict.decision == "reject"
    assert refused.feedback, "the judge's feedback reaches the agent"
    assert refused.result is None
    assert not refused.stdout, "no output of refused work"
    assert run.ns["refused"].output == answer("rejected")
    assert run.host("config/app.toml") == RAISED, "only the approved edit is on the host"


# "Human approval": deferred, no judge: a person approves every change.


def deferred_agent_built(run: Run) -> None:
    toolset = run.ns["agent"].toolsets[-1]
    assert isinstance(toolset, VshToolset)
    assert toolset.approval == "deferred"
    assert run.host("config/app.toml") == APP_TOML


def asks_before_committing(run: Run) -> None:
    assert run.host("config/app.toml") == APP_TOML, "nothing is committed before approval"
    requests = run.ns["requests"]
    assert isinstance(requests, DeferredToolRequests)
    assert [call.tool_name for call in requests.approvals] == ["vsh_run"]
    shown = requests.metadata[requests.approvals[0].tool_call_id]
    assert "+timeout_s = 60" in shown["diff"], "the person sees the exact diff"
    assert shown["transaction"]


def commits_what_was_approved(run: Run) -> None:
    requests = run.ns["requests"]
    shown = requests.metadata[requests.approvals[0].tool_call_id]
    committed = only_result(run.ns["done"].new_messages())
    assert committed.state == "committed", committed
    assert committed.transaction == shown["transaction"], "exactly the transaction shown"
    assert run.ns["done"].output == answer("committed")
    assert run.host("config/app.toml") == RAISED
    toolset = run.ns["agent"].toolsets[-1]
    bindings = list(toolset.store.all())
    assert [(b.end_state, b.end_principal) for b in bindings] == [("committed", "alice")]


# "Durable agents (DBOS)": a workflow that waits for a person, approved later.

WORKFLOW = "release-notes-1.4.1"
CHANGELOG = "# Changelog\n\n## 1.4.0\n- Faster startup\n"
RELEASE_NOTE = Play(
    "Add a 1.4.1 entry to CHANGELOG.md",
    "p = '/workspace/CHANGELOG.md'\n"
    "head, rest = vsh_read(p).split('## 1.4.0', 1)\n"
    "vsh_write(p, head + '## 1.4.1\\n- Fix request timeout handling\\n\\n## 1.4.0' + rest)\n",
    "Add the 1.4.1 release note.",
)
WITH_NOTE = CHANGELOG.replace("## 1.4.0", "## 1.4.1\n- Fix request timeout handling\n\n## 1.4.0")


def _workflow_state(wait_s: float, *, until_waiting: bool) -> tuple[str, Any]:
    """Poll the README's workflow: ('waiting', pending) or (its final status, output)."""
    from dbos import DBOS

    from vsh_ai.dbos import pending_approvals

    deadline = time.monotonic() + wait_s
    while True:
        status = DBOS.get_workflow_status(WORKFLOW)
        if status is not None and status.status in ("SUCCESS", "ERROR", "CANCELLED"):
            finished = status.status == "SUCCESS"
            return status.status, DBOS.retrieve_workflow(
                WORKFLOW
            ).get_result() if finished else None
        if until_waiting:
            pending = pending_approvals(WORKFLOW, wait_s=0.2)
            if pending is not None and pending.state == "waiting":
                return "waiting", pending
        if time.monotonic() > deadline:
            return str(status.status if status else "unknown"), None
        time.sleep(0.05)


def workflow_waits_for_a_person(run: Run) -> None:
    assert (run.root / "release-notes.sqlite").is_file(), "SQLite file ./release-notes.sqlite"
    state, seen = _workflow_state(20, until_waiting=True)
    assert run.host("CHANGELOG.md") == CHANGELOG, (
        f"nothing may be committed before a person approves; the workflow is {state} "
        f"({seen!r}) and CHANGELOG.md already changed"
    )
    assert state == "waiting", f"the workflow should wait for approval; it is {state}: {seen!r}"
    assert [call.tool_name for call in seen.calls] == ["vsh_run"]


def approval_commits_once(run: Run) -> None:
    pending = run.ns["pending"]
    assert "+## 1.4.1" in pending.calls[0].metadata["diff"], "the approver saw the exact diff"
    state, output = _workflow_state(20, until_waiting=False)
    assert (state, output) == ("SUCCESS", answer("committed"))
    assert run.host("CHANGELOG.md") == WITH_NOTE, "committed exactly once"
    assert run.server is not None
    assert len(run.server.requests) == 2, "one request proposed the change, one reported it"


def destroy_dbos(run: Run) -> None:
    if "DBOS" in run.ns:
        run.ns["DBOS"].destroy()


SECTIONS: dict[str, Section] = {
    "an-agent-with-reviewed-file-access": Section(
        files={"config/app.toml": APP_TOML},
        plays=(RAISE_TIMEOUT, TLS_OFF),
        checks=(judged_agent_built, judged_runs),
    ),
    "human-approval": Section(
        files={"config/app.toml": APP_TOML},
        plays=(RAISE_TIMEOUT,),
        checks=(deferred_agent_built, asks_before_committing, commits_what_was_approved),
    ),
    "durable-agents-dbos": Section(
        files={"CHANGELOG.md": CHANGELOG},
        plays=(RELEASE_NOTE,),
        checks=(workflow_waits_for_a_person, approval_commits_once),
        durable=True,
        teardown=destroy_dbos,
    ),
}


# -- running a section --------------------------------------------------------------------


@dataclass
class Outcome:
    """How each block of a section went: the error that stopped the section, if any."""

    errors: dict[int, BaseException] = field(default_factory=dict)

    def report(self, block: Block) -> None:
        error = self.errors.get(block.index)
        if error is not None:
            # The traceback's README frames show one line each (pytest would print the
            # whole README up to the failing line).
            trace = "".join(traceback.format_exception(error)).rstrip()
            pytest.fail(f"{block.where} failed:\n{trace}", pytrace=False)
        earlier = [i for i in self.errors if i < block.index]
        if earlier:
            pytest.fail(
                f"{block.where} did not run: block {block.section}-{earlier[0]} failed",
                pytrace=False,
            )


def _offline_connect(real: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in (
            "127.0.0.1",
            "::1",
        ):
            raise OSError(f"tests/test_readme.py is offline: refused a connection to {address}")
        return real(self, address)

    return connect


@contextlib.contextmanager
def offline(run: Run, durable: bool) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(run.root)
        patch.setattr(socket.socket, "connect", _offline_connect(socket.socket.connect))
        patch.setattr(socket.socket, "connect_ex", _offline_connect(socket.socket.connect_ex))
        # The real models' providers must be constructible; no request reaches them.
        patch.setenv("OPENAI_API_KEY", "offline-readme-test")
        patch.delenv("OPENAI_BASE_URL", raising=False)
        patch.setenv("VSH_AI_APPROVAL_KEY_FILE", str(run.root / "approval.key"))
        patch.delenv("VSH_AI_DBOS_DATABASE_URL", raising=False)
        patch.setenv("LOGFIRE_IGNORE_NO_CONFIG", "1")
        # A durable agent's OpenAI model is the one making requests (to the loopback server).
        patch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", durable)
        if run.server is not None:
            patch.setenv("OPENAI_BASE_URL", run.server.base_url)
        yield


def run_section(name: str, root: Path) -> Outcome:
    spec = SECTIONS[name]
    blocks = [b for b in PYTHON_BLOCKS if b.section == name]
    outcome = Outcome()
    for path, text in spec.files.items():
        (root / WORKSPACE / path).parent.mkdir(parents=True, exist_ok=True)
        (root / WORKSPACE / path).write_text(text)
    run = Run(root=root, ns={"__name__": f"readme_{name.replace('-', '_')}"})
    with contextlib.ExitStack() as stack:
        if spec.durable:
            run.server = stack.enter_context(ResponsesServer(spec.plays).running())
        stack.enter_context(offline(run, spec.durable))
        overridden: set[int] = set()
        try:
            for block, check in zip(blocks, spec.checks, strict=True):
                if block.skip:
                    continue
                try:
                    # Line numbers in tracebacks are README.md's.
                    code = compile("\n" * (block.line - 1) + block.code, str(README), "exec")
                    exec(code, run.ns)
                    if not spec.durable:
                        for agent in [v for v in run.ns.values() if isinstance(v, Agent)]:
                            if id(agent) not in overridden:
                                overridden.add(id(agent))
                                model = function_model(spec.plays)
                                stack.enter_context(agent.override(model=model))
                    check(run)
                except Exception as error:
                    outcome.errors[block.index] = error
                    break
        finally:
            if spec.teardown is not None:
                spec.teardown(run)
    for stray in ("path", "release-notes.sqlite", "approval.key"):
        assert not (ROOT / stray).exists(), f"a README block left {stray} in the repository"
    return outcome


@pytest.fixture(scope="module")
def section_outcome(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Outcome]:
    outcomes: dict[str, Outcome] = {}

    def get(name: str) -> Outcome:
        if name not in outcomes:
            outcomes[name] = run_section(name, tmp_path_factory.mktemp(f"readme-{name}"))
        return outcomes[name]

    return get


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: b.id)
def test_python_block(block: Block, section_outcome: Callable[[str], Outcome]) -> None:
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    spec = SECTIONS.get(block.section)
    count = sum(1 for b in PYTHON_BLOCKS if b.section == block.section)
    if spec is None or len(spec.checks) != count:
        pytest.fail(
            f"{block.where}: tests/test_readme.py needs a Section spec for {block.section!r} "
            f"with one check per python block ({count}): what the workspace holds, what the "
            "agent does, and what the README's text claims",
            pytrace=False,
        )
    section_outcome(block.section).report(block)


# -- bash blocks: commands this repository provides ------------------------------------------

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
SCRIPTS: dict[str, str] = PYPROJECT["project"]["scripts"]


def commands(code: str) -> Iterator[list[str]]:
    """Each command of a shell block (continuations joined, comments dropped, split at &&)."""
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in [*words, "&&"]:
            if word == "&&":
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def _dev_has(package: str) -> bool:
    return any(re.match(rf"{re.escape(package)}\b", spec) for spec in EXTRAS["dev"])


def check_vsh_ai(argv: list[str]) -> None:
    from vsh_ai._cli import _parser
    from vsh_ai._judge_files import bundled_judges
    from vsh_ai.evals import bundled_suites_dir
    from vsh_ai.evals._report import Gate

    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = _parser().parse_args(argv)
        except SystemExit as stop:
            code = stop.code
        else:
            code = None
    if code is not None:  # --version exits 0; a bad option exits 2 with a message
        assert code == 0, errors.getvalue().strip()
        return
    suites = {p.stem for p in bundled_suites_dir().glob("*.yaml")}
    for name in getattr(args, "suites", None) or ():
        assert name in suites or name.endswith((".yaml", ".yml")), f"no bundled suite {name!r}"
    judge = getattr(args, "judge", None)
    if judge and ":" not in judge and not judge.endswith(".toml"):
        assert judge in bundled_judges(), f"no bundled judge {judge!r}"
    for expression in getattr(args, "fail_if", None) or ():
        gate = Gate.parse(expression)
        assert gate.suite is None or gate.suite in suites, f"no bundled suite in {expression!r}"


def check_command(argv: list[str]) -> None:
    program, *rest = argv
    tool = program.removeprefix(".venv/bin/")
    if tool == "python3" and rest[:2] == ["-m", "venv"]:
        return
    if tool == "pip":
        assert rest[0] == "install", argv
        for spec in rest[1:]:
            for extra in re.findall(r"^\.\[([\w,-]+)\]$", spec):
                for name in extra.split(","):
                    assert name in EXTRAS, f"pyproject.toml has no extra [{name}]"
        return
    if tool in SCRIPTS:
        assert tool == "vsh-ai", argv
        check_vsh_ai(rest)
        return
    if tool == "python":
        if rest[:2] == ["-m", "pytest"]:
            assert _dev_has("pytest")
            targets = [r for r in rest[2:] if not r.startswith("-")]
        elif rest[:2] == ["-m", "vsh_ai"]:
            check_vsh_ai(rest[2:])
            return
        else:
            targets = rest[:1]
        for target in targets:
            assert (ROOT / target).exists(), f"{target} does not exist"
        return
    if tool in ("ruff", "mypy"):
        assert _dev_has(tool), f"{tool} is not in the [dev] extra"
        return
    raise AssertionError(f"tests/test_readme.py does not know how to check {shlex.join(argv)!r}")


def quickstart_claims(block: Block) -> None:
    from vsh_ai.evals import bundled_suites_dir, load_suite

    suites = sorted(bundled_suites_dir().glob("*.yaml"))
    cases = sum(len(load_suite(path).cases) for path in suites)
    claimed = re.search(r"\((\d+) scenarios, (\d+) labelled cases\)", block.code)
    assert claimed is not None
    assert (int(claimed[1]), int(claimed[2])) == (len(suites), cases)
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    assert "Needs only Python 3.11+." in README.read_text()
    # The main job installs the package alone (no dev toolchain), where pip shows its
    # progress, then runs the evals; tests/test_base_dependencies.py checks that the
    # base dependencies are all `vsh-ai eval` imports.
    main_job = next(line for line in block.code.splitlines() if "vsh-ai eval" in line)
    venv, pip, run = commands(main_job)
    assert venv[:3] == ["python3", "-m", "venv"]
    assert pip == [".venv/bin/pip", "install", "-e", "."], "no extra, no -q"
    assert run == [".venv/bin/vsh-ai", "eval"]


BASH_CLAIMS: dict[str, Callable[[Block], None]] = {"quickstart-1": quickstart_claims}


@pytest.mark.parametrize("block", BASH_BLOCKS, ids=lambda b: b.id)
def test_bash_block(block: Block) -> None:
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    found = list(commands(block.code))
    assert found, f"{block.where}: no commands"
    for argv in found:
        try:
            check_command(argv)
        except AssertionError as error:
            raise AssertionError(f"{block.where}: {shlex.join(argv)}: {error}") from None
    if block.id in BASH_CLAIMS:
        BASH_CLAIMS[block.id](block)


# -- paths the README names ---------------------------------------------------------------------


def test_layout_names_what_exists() -> None:
    (layout,) = [b for b in BLOCKS if b.section == "layout" and b.lang == ""]
    parents: list[tuple[int, Path]] = []
    named = 0
    for line in layout.code.splitlines():
        indent = len(line) - len(line.lstrip())
        name = line.split()[0] if line.strip() else ""
        if not name or indent > 6 or not re.fullmatch(r"[\w.-]+(/|\.\w+)", name):
            continue  # a description's continuation
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = (parents[-1][1] if parents else ROOT) / name.rstrip("/")
        assert path.exists(), f"{layout.where}: {path.relative_to(ROOT)} does not exist"
        named += 1
        if name.endswith("/"):
            parents.append((indent, path))
    assert named > 20


def test_paths_in_the_text_exist() -> None:
    text = README.read_text()
    folders = "benchmarks|tutorials|tests|judges|evals"
    pattern = rf"(?<![\w/.])((?:{folders})/[\w./-]*\w\.(?:py|md|toml|yaml|json))"
    mentioned = sorted(set(re.findall(pattern, text)))
    assert mentioned
    missing = [path for path in mentioned if not (ROOT / path).exists()]
    assert not missing, f"README.md names files that do not exist: {missing}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
