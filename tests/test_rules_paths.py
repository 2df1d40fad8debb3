"""Path, change-kind, executable and symlink rules against real VSH evidence."""

from __future__ import annotations

import pytest

from vsh_ai._simulate import simulate
from vsh_ai.rules import (
    ChangeKinds,
    DeniedChanges,
    NoExecutableChanges,
    NoSymlinkChanges,
    ProtectedReads,
    glob_matches,
)

pytestmark = pytest.mark.anyio

FILES = {"config/app.toml": "port = 80\n", "src/a.py": "x = 1\n", "notes.txt": "n\n"}


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.log", "a.log", True),
        ("*.log", "deep/dir/a.log", False),  # root-anchored: one segment is the root only
        ("*.log", "logs/audit.log", False),
        ("**/*.log", "deep/dir/a.log", True),
        ("**/*.log", "a.log", True),
        ("*.log", "a.log.txt", False),
        ("README*", ".github/workflows/README.yml", False),
        ("tmp/**", "tmp", True),
        ("tmp/**", "tmp/a/b.txt", True),
        ("tmp/**", "tmpfile", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("/workspace/src/*.py", "src/a.py", True),
        ("config/[ab].toml", "config/b.toml", True),
        ("config/[!ab].toml", "config/b.toml", False),
        ("?.txt", "a.txt", True),
        ("**", "any/thing", True),
        (".env*", "sub/.env.local", False),
        ("**/.env*", "sub/.env.local", True),
        ("config/*", "config/.hidden", True),
        ("docs/{a,b}.md", "docs/b.md", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert glob_matches(pattern, path) is expected


@pytest.mark.parametrize("path", ["SERVER.PEM", "keys/Server.Pem", "a/ＳＥＲＶＥＲ.ＰＥＭ"])
def test_deny_sets_ignore_case_and_width(path: str) -> None:
    assert glob_matches("**/*.pem", path, ignore_case=True)
    assert not glob_matches("**/*.pem", path)


def test_empty_glob_is_refused() -> None:
    with pytest.raises(ValueError, match="empty glob"):
        DeniedChanges(globs=("",))


@pytest.mark.parametrize(
    ("glob", "message"),
    [
        ("secrets/", "ends with '/'"),  # matched only the entry 'secrets', not its files
        ("config/../.env", "'..'"),  # canonical paths never contain '..': matched nothing
        ("config/./app.toml", "'.'"),
        ("config//app.toml", "empty segment"),
        ("docs/**.md", "only allowed as a whole segment"),  # looked recursive, was not
        ("!secrets/**", "negation is not supported"),
    ],
)
def test_globs_that_would_silently_match_less_are_refused(glob: str, message: str) -> None:
    """A deny rule spelled like this used to match nothing below it: refuse it at load."""
    with pytest.raises(ValueError, match=message):
        DeniedChanges(globs=(glob,))
    with pytest.raises(ValueError, match=message):
        glob_matches(glob, "secrets/key.txt")
    with pytest.raises(ValueError, match=message):
        ProtectedReads(globs=(glob,))
    # Allow-lists too: a bad glob there used to fail only at review time, on every change.
    with pytest.raises(ValueError, match=message):
        NoExecutableChanges(allow=(glob,))
    with pytest.raises(ValueError, match=message):
        NoSymlinkChanges(allow_removal=(glob,))


async def test_denied_changes_reject_deletes_and_creates(evidence_for) -> None:
    rule = DeniedChanges(globs=("data/**",))
    deleted = await evidence_for({"data/x.csv": "1\n"}, "vsh_remove('/workspace/data/x.csv')")
    verdict = rule.check(deleted)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "data/x.csv must not be changed (denied by 'data/**')" in verdict.reason
    unrelated = await evidence_for(
        {"data/x.csv": "1\n", "tmp/a": "t"}, "vsh_remove('/workspace/tmp/a')"
    )
    assert rule.check(unrelated) is None


async def test_denied_changes_match_any_spelling_and_both_rename_ends(evidence_for) -> None:
    rule = DeniedChanges(globs=("**/*.pem", "secrets/**", "Vault/**"))
    files = {"certs/SERVER.PEM": "k\n", "Secrets/a.txt": "s\n", "b.txt": "b\n", "vault/k": ""}
    upper = await evidence_for(files, "vsh_write('/workspace/certs/SERVER.PEM', 'x\\n')")
    assert (v := rule.check(upper)) is not None
    assert v.details["paths"] == ["certs/SERVER.PEM"]
    folded = await evidence_for(files, "vsh_remove('/workspace/Secrets/a.txt')")
    assert rule.check(folded) is not None, "Secrets/ is secrets/ in a deny set"
    moved_in = await evidence_for(files, "vsh_move('/workspace/b.txt', '/workspace/vault/b')")
    assert (v := rule.check(moved_in)) is not None
    assert v.details["paths"] == ["vault/b"]


async def test_protected_reads(evidence_for) -> None:
    files = {"private/token.txt": "t0k3n\n", "README.md": "hi\n"}
    read = await evidence_for(files, "vsh_read('/workspace/private/token.txt')", policy="balanced")
    rule = ProtectedReads(globs=("private/**",), action="reject")
    verdict = rule.check(read)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "private/token.txt" in verdict.reason
    assert "t0k3n" not in verdict.reason

    listed = await evidence_for(files, "vsh_list('/workspace/private')", policy="balanced")
    assert rule.check(listed) is None, "a directory listing is not a content read"
    strict = ProtectedReads(globs=("private/**",), include_metadata=True)
    assert (v := strict.check(listed)) is not None
    assert v.decision == "review"

    harmless = await evidence_for(files, "vsh_read('/workspace/README.md')", policy="balanced")
    assert rule.check(harmless) is None


async def test_protected_reads_by_case_and_by_content(evidence_for) -> None:
    files = {
        "deploy/Prod.ENV": "X=1\n",
        "config/db.toml": 'url = "postgres://app:Xq9-prod-PASSWORD-77@db.internal:5432/app"\n',
        "config/app.toml": "port = 80\n",
    }
    by_name = ProtectedReads(globs=("**/*.env",), action="reject")
    upper = await evidence_for(files, "vsh_read('/workspace/deploy/Prod.ENV')")
    assert (v := by_name.check(upper)) is not None
    assert v.decision == "reject"
    by_content = ProtectedReads(content=True, action="reject")
    db = await evidence_for(files, "vsh_read('/workspace/config/db.toml')")
    assert by_name.check(db) is None
    assert (v := by_content.check(db)) is not None
    assert v.details["paths"] == ["config/db.toml"]
    assert "PASSWORD" not in v.reason
    plain = await evidence_for(files, "vsh_read('/workspace/config/app.toml')")
    assert by_content.check(plain) is None
    with pytest.raises(ValueError, match="content = true"):
        ProtectedReads()


async def test_change_kinds_per_glob(evidence_for) -> None:
    only_modify = ChangeKinds(globs=("config/**",), allow=("modify",))
    modify = await evidence_for(FILES, "vsh_write('/workspace/config/app.toml', 'port = 1\\n')")
    assert only_modify.check(modify) is None

    create = await evidence_for(FILES, "vsh_write('/workspace/config/new.toml', 'a = 1\\n')")
    verdict = only_modify.check(create)
    assert verdict is not None
    assert "create is not allowed on config/**" in verdict.reason

    upper = ChangeKinds(globs=("CONFIG/**",), allow=("modify",))
    assert upper.check(create) is not None, "deny sets match in any case"

    delete = await evidence_for(FILES, "vsh_remove('/workspace/notes.txt')")
    assert only_modify.check(delete) is None, "notes.txt is outside the rule's globs"
    assert ChangeKinds(allow=("modify",)).check(delete) is not None

    rename = await evidence_for(FILES, "vsh_move('/workspace/src/a.py', '/workspace/src/b.py')")
    no_rename = ChangeKinds(globs=("src/**",), allow=("create", "modify", "delete"))
    verdict = no_rename.check(rename)
    assert verdict is not None
    assert verdict.details["paths"] == ["src/a.py", "src/b.py"]
    assert ChangeKinds(globs=("src/**",), allow=("rename",)).check(rename) is None

    move_then_delete = await evidence_for(
        FILES,
        "vsh_move('/workspace/src/a.py', '/workspace/src/b.py')\nvsh_remove('/workspace/src/b.py')",
    )
    verdict = ChangeKinds(globs=("src/**",), allow=("rename",)).check(move_then_delete)
    assert verdict is not None, "a move followed by a delete is a delete, not a rename"
    assert "delete is not allowed" in verdict.reason


async def test_mkdir_is_a_create_and_not_an_executable_file(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_mkdir('/workspace/config/extra')", policy="balanced")
    assert "executable_change" in evidence.policy.risk_flags  # VSH counts the 0o755 dir mode
    assert NoExecutableChanges().check(evidence) is None  # ...but no file became executable
    assert ChangeKinds(allow=("modify",)).check(evidence) is not None


async def test_chmod_via_bash_is_an_executable_metadata_change(evidence_for) -> None:
    evidence = await evidence_for(FILES, "chmod +x notes.txt", language="bash")
    assert evidence.change("notes.txt").kind == "metadata_change"
    verdict = NoExecutableChanges().check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert verdict.reason.startswith("notes.txt would become executable")
    assert ChangeKinds(allow=("modify",)).check(evidence) is not None
    assert ChangeKinds(allow=("metadata_change",)).check(evidence) is None


async def test_writing_a_file_is_not_executable(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_write('/workspace/src/new.py', 'y = 1\\n')")
    assert NoExecutableChanges().check(evidence) is None


async def test_symlink_rule_flags_symlink_nodes(evidence_for) -> None:
    # VSH 0.6 cannot create symlinks from guest code, so flip a real change's node kind.
    evidence = await evidence_for(FILES, "vsh_write('/workspace/src/link', 'x')")
    assert NoSymlinkChanges().check(evidence) is None
    change = evidence.changes[0]
    assert change.after is not None
    linked = evidence.model_copy(
        update={
            "changes": (
                change.model_copy(
                    update={"after": change.after.model_copy(update={"kind": "symlink"})}
                ),
            )
        }
    )
    verdict = NoSymlinkChanges().check(linked)
    assert verdict is not None
    assert verdict.reason.startswith("src/link is a symlink")


async def test_chmod_allowed_only_for_existing_scripts(evidence_for) -> None:
    files = {"scripts/release.sh": "#!/bin/sh\n", "notes.txt": "n\n"}
    rule = NoExecutableChanges(allow=("scripts/*.sh",))
    chmod = await evidence_for(files, "chmod +x scripts/release.sh", language="bash")
    assert rule.check(chmod) is None
    elsewhere = await evidence_for(files, "chmod +x notes.txt", language="bash")
    assert rule.check(elsewhere) is not None
    created = await evidence_for(
        files, "printf '#!/bin/sh\\n' > scripts/new.sh\nchmod +x scripts/new.sh", language="bash"
    )
    verdict = rule.check(created)
    assert verdict is not None, "a new executable is not an existing script gaining +x"
    assert verdict.details["paths"] == ["scripts/new.sh"]


async def test_removing_a_host_symlink(make_workspace) -> None:
    workspace = make_workspace({"build/out.txt": "x\n"})
    (workspace / "build" / "latest").symlink_to("out.txt")
    result = await simulate(workspace, "vsh_remove('/workspace/build/latest')", policy="strict")
    assert result.evidence is not None
    verdict = NoSymlinkChanges().check(result.evidence)
    assert verdict is not None
    assert verdict.reason.startswith("build/latest is a symlink")
    assert NoSymlinkChanges(allow_removal=("build/**",)).check(result.evidence) is None
    assert (workspace / "build" / "latest").is_symlink(), "simulate never touches the host"
