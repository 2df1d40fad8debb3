"""A missing or wrong workspace path fails with the path and the fix, before VSH opens;
``.vsh-runtime`` (which holds the bytes of rejected writes) stays out of git."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import vsh
from conftest import git_staged

from vsh_ai import VshToolset
from vsh_ai.toolset._workspace import ensure_runtime_gitignore


def test_a_missing_workspace_names_the_path_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as raised:
        VshToolset("no/such/workspace")
    message = str(raised.value)
    assert "VshToolset workspace no/such/workspace" in message
    assert str(tmp_path / "no/such/workspace") in message  # where it looked
    assert "create the folder first" in message
    assert "canonicalize" not in message
    assert not (tmp_path / "no").exists()  # nothing was created on the way


def test_a_file_is_not_a_workspace(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("x")
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        VshToolset(file)


def test_an_existing_folder_still_opens(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    toolset = VshToolset(tmp_path)
    assert toolset.workspace == tmp_path.resolve()


# -- .vsh-runtime stays out of git (issue 16 item 8) ------------------------------------------


def _reject_a_write(workspace: Path, secret: str) -> None:
    """A real VSH transaction writing ``secret``, rejected by its hook: the bytes stay in
    ``.vsh-runtime`` (data/blobs) although nothing reached the host."""
    runtime = vsh.Runtime.open(workspace, policy="strict", hook_id="reviewer")
    ensure_runtime_gitignore(workspace)
    receipt = runtime.preview(
        vsh.RunRequest(f"vsh_write('/workspace/b.txt', {secret!r})", intent="write b")
    )
    assert receipt.state == "pending_approval"
    preparation = runtime.prepare_commit(receipt.transaction)
    runtime.resolve_commit(preparation, vsh.HookDecision.reject("no"), int(time.time() * 1000))
    assert runtime.transaction_state(receipt.transaction) == "rejected"
    assert not (workspace / "b.txt").exists()


def test_git_add_stages_nothing_of_a_rejected_write(tmp_path: Path) -> None:
    secret = "rejected-bytes-7f3a"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    _reject_a_write(workspace, secret)
    blobs = [p for p in (workspace / ".vsh-runtime").rglob("*") if p.is_file()]
    assert any(secret.encode() in p.read_bytes() for p in blobs)  # VSH keeps the bytes
    assert git_staged(workspace) == ["a.txt"]


def test_without_the_gitignore_git_add_stages_vsh_runtime(tmp_path: Path) -> None:
    """The defect: VSH's state (rejected bytes included) was staged by ``git add -A``."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    vsh.Runtime.open(workspace, policy="strict")
    assert any(name.startswith(".vsh-runtime/") for name in git_staged(workspace))


@pytest.mark.parametrize("before_open", [False, True], ids=["after-open", "before-open"])
def test_the_gitignore_does_not_disturb_vsh(tmp_path: Path, before_open: bool) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    if before_open:
        ensure_runtime_gitignore(workspace)
    runtime = vsh.Runtime.open(workspace, policy="balanced")
    ensure_runtime_gitignore(workspace)
    ignore = workspace / ".vsh-runtime" / ".gitignore"
    assert ignore.read_text().splitlines()[-1] == "*"
    receipt = runtime.preview(
        vsh.RunRequest("vsh_write('/workspace/a.txt', 'b\\n')", intent="edit a")
    )
    runtime.commit(receipt.transaction, int(time.time() * 1000))
    assert (workspace / "a.txt").read_text() == "b\n"
    again = vsh.Runtime.open(workspace, policy="balanced")  # startup recovery sees the file
    receipt = again.preview(
        vsh.RunRequest("vsh_write('/workspace/a.txt', 'c\\n')", intent="edit a again")
    )
    again.commit(receipt.transaction, int(time.time() * 1000))
    assert (workspace / "a.txt").read_text() == "c\n"
    assert ignore.read_text().splitlines()[-1] == "*"
    with pytest.raises(vsh.VshExecutionError):  # guests still cannot reach it
        again.preview(vsh.RunRequest("vsh_read('/workspace/.vsh-runtime/.gitignore')"))


def test_an_existing_gitignore_is_kept_and_failures_are_ignored(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".vsh-runtime").mkdir(parents=True)
    mine = workspace / ".vsh-runtime" / ".gitignore"
    mine.write_text("data/\n")
    ensure_runtime_gitignore(workspace)
    assert mine.read_text() == "data/\n"
    # A symlinked .vsh-runtime is not written through.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".vsh-runtime").symlink_to(elsewhere)
    ensure_runtime_gitignore(linked)
    assert list(elsewhere.iterdir()) == []
    # No workspace folder, or a file where .vsh-runtime should be: nothing, no exception.
    ensure_runtime_gitignore(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / ".vsh-runtime").write_text("a file")
    ensure_runtime_gitignore(blocked)
    assert (blocked / ".vsh-runtime").read_text() == "a file"


# -- a relative workspace stays the same folder after the process changes folder --------------


@pytest.mark.anyio
async def test_a_relative_workspace_keeps_its_records_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A toolset built for ``path/to/workspace`` writes its bindings and journal there even
    when the call runs after the process moved to another folder (as a DBOS workflow resumed
    in a worker thread, or the caller's own ``os.chdir``, can)."""
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    (home / "path" / "to" / "workspace").mkdir(parents=True)
    (home / "path" / "to" / "workspace" / "app.toml").write_text("port = 8080\n")
    elsewhere.mkdir()
    monkeypatch.chdir(home)
    toolset = VshToolset("path/to/workspace", policy="strict", approval="deferred")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            args = {"path": "/workspace/app.toml", "old": "8080", "new": "9090"}
            return ModelResponse(parts=[ToolCallPart("vsh_patch", args, tool_call_id="p-1")])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(
        FunctionModel(respond), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )
    monkeypatch.chdir(elsewhere)
    result = await agent.run("change the port")
    assert isinstance(result.output, DeferredToolRequests)
    assert not any(elsewhere.rglob("*")), "nothing is written relative to the new folder"
    records = home / "path" / "to" / "workspace" / ".vsh-runtime" / "vsh-ai" / "approvals"
    assert any(p.is_file() for p in records.rglob("*")), "the binding is in the workspace"
