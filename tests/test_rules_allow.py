"""Allowances on real VSH evidence: what AllowPaths, AllowAddedLines and AllowConfig prove."""

from __future__ import annotations

import pytest

from vsh_ai.rules import AllowAddedLines, AllowConfig, AllowPaths, KeyConstraint, RuleSet

pytestmark = pytest.mark.anyio

FILES = {
    "tmp/a.txt": "scratch\n",
    "exports/r.csv": "m,r\n01,1\n",
    "exports/archive/old.csv": "m,r\n",
    "data/raw.csv": "id\n1\n",
    "scripts/run.sh": "#!/bin/sh\necho hi\n",
    "docs/guide.md": "# Guide\n\nOne.\nTwo.\nThree.\nFour.\nFive.\n",
    ".gitignore": ".env\n*.pem\n",
}


def decide(rule: AllowPaths | AllowAddedLines, evidence) -> tuple[str, list[str]]:
    verdict = RuleSet([rule]).evaluate(evidence)
    reasons = [u["reason"] for u in verdict.details.get("unproven", [])]
    return verdict.decision, reasons


async def test_kinds_and_paths_bound_what_is_claimed(evidence_for) -> None:
    rule = AllowPaths(paths=("tmp/**",), kinds=("delete",))
    delete = await evidence_for(FILES, "vsh_remove('/workspace/tmp/a.txt')")
    assert decide(rule, delete)[0] == "approve"
    edit = await evidence_for(FILES, "vsh_write('/workspace/tmp/a.txt', 'x\\n')")
    assert decide(rule, edit) == ("review", ["no allowance covers modify of tmp/a.txt"])
    create = await evidence_for(FILES, "vsh_write('/workspace/tmp/new.txt', 'x\\n')")
    assert decide(rule, create)[0] == "review", "a delete allowance never lets new files in"
    other = await evidence_for(FILES, "vsh_remove('/workspace/data/raw.csv')")
    assert decide(rule, other)[0] == "review"


async def test_directories_claim_new_folders_only(evidence_for) -> None:
    rule = AllowPaths(paths=("docs/**/*.md",), kinds=("create",), directories=("docs/**",))
    made = await evidence_for(
        FILES, "vsh_mkdir('/workspace/docs/env')\nvsh_write('/workspace/docs/env/a.md', 'A\\n')"
    )
    assert decide(rule, made)[0] == "approve"
    without = AllowPaths(paths=("docs/**/*.md",), kinds=("create",))
    assert decide(without, made) == ("review", ["no allowance covers create of docs/env"])
    # A file in such a folder is still claimed by `paths` alone.
    script = await evidence_for(
        FILES, "vsh_mkdir('/workspace/docs/env')\nvsh_write('/workspace/docs/env/a.py', 'A\\n')"
    )
    assert decide(rule, script) == ("review", ["no allowance covers create of docs/env/a.py"])
    elsewhere = await evidence_for(FILES, "vsh_mkdir('/workspace/data/new')")
    assert decide(rule, elsewhere)[0] == "review"


async def test_one_segment_globs_are_root_anchored(evidence_for) -> None:
    files = {"a.tmp": "x", "logs/audit.tmp": "y"}
    rule = AllowPaths(paths=("*.tmp",), kinds=("delete",))
    root = await evidence_for(files, "vsh_remove('/workspace/a.tmp')")
    assert decide(rule, root)[0] == "approve"
    deep = await evidence_for(files, "vsh_remove('/workspace/logs/audit.tmp')")
    assert decide(rule, deep)[0] == "review"


async def test_allowances_match_case_exactly(evidence_for) -> None:
    files = {"TMP/a.txt": "x"}
    evidence = await evidence_for(files, "vsh_remove('/workspace/TMP/a.txt')")
    assert decide(AllowPaths(paths=("tmp/**",), kinds=("delete",)), evidence)[0] == "review"


async def test_a_rename_needs_both_ends(evidence_for) -> None:
    rule = AllowPaths(paths=("exports/*", "exports/archive/**"), kinds=("rename",))
    archive = await evidence_for(
        FILES, "vsh_move('/workspace/exports/r.csv', '/workspace/exports/archive/r.csv')"
    )
    decision, _ = decide(rule, archive)
    assert decision == "approve"
    claims = RuleSet([rule]).evaluate(archive).details["claims"]
    assert {c["kind"] for c in claims} == {"rename"}
    out = await evidence_for(FILES, "vsh_move('/workspace/exports/r.csv', '/workspace/r.csv')")
    decision, reasons = decide(rule, out)
    assert decision == "review"
    assert any("exports/r.csv is renamed from or to r.csv outside" in r for r in reasons)
    edited = await evidence_for(
        FILES,
        "vsh_move('/workspace/exports/r.csv', '/workspace/exports/archive/r.csv')\n"
        "vsh_write('/workspace/exports/archive/r.csv', 'tampered\\n')",
    )
    assert decide(rule, edited)[0] == "review", "a move then edit is a delete plus a create"
    gone = await evidence_for(
        FILES,
        "vsh_move('/workspace/exports/r.csv', '/workspace/exports/archive/r.csv')\n"
        "vsh_remove('/workspace/exports/archive/r.csv')",
    )
    assert decide(rule, gone) == ("review", ["no allowance covers delete of exports/r.csv"])


async def test_destructive_edits_need_opt_in(evidence_for) -> None:
    rule = AllowPaths(paths=("docs/**",), kinds=("modify",))
    typo = await evidence_for(
        FILES,
        "vsh_write('/workspace/docs/guide.md', "
        "'# Guide\\n\\nOne.\\nTwo.\\nThree.\\nFour.\\nFive!\\n')",
    )
    assert decide(rule, typo)[0] == "approve"
    emptied = await evidence_for(FILES, "vsh_write('/workspace/docs/guide.md', '')")
    decision, reasons = decide(rule, emptied)
    assert decision == "review"
    assert "emptying or gutting a file is not allowed here" in reasons[0]
    commented = await evidence_for(
        FILES,
        "vsh_write('/workspace/docs/guide.md', "
        "'# Guide\\n\\n<!-- One.\\nTwo.\\nThree.\\nFour. -->\\nFive.\\n')",
    )
    assert decide(rule, commented)[0] == "review"
    opted_in = AllowPaths(paths=("docs/**",), kinds=("modify",), destructive=True)
    assert decide(opted_in, emptied)[0] == "approve"


async def test_size_text_and_line_limits(evidence_for) -> None:
    big = await evidence_for(FILES, "vsh_write('/workspace/tmp/a.txt', 'x' * 5000)")
    assert decide(AllowPaths(paths=("tmp/**",), kinds=("modify",), max_bytes=100), big) == (
        "review",
        ["allow_paths: tmp/a.txt would be 5000 bytes (at most 100)"],
    )
    binary = await evidence_for(FILES, "vsh_write('/workspace/tmp/a.txt', b'\\x00\\x01\\x02')")
    text_only = AllowPaths(paths=("tmp/**",), kinds=("modify",))
    assert "is binary" in decide(text_only, binary)[1][0]
    any_bytes = AllowPaths(paths=("tmp/**",), kinds=("modify",), text_only=False)
    assert decide(any_bytes, binary)[0] == "approve"
    sweeping = await evidence_for(
        FILES, "vsh_write('/workspace/docs/guide.md', '# Guide\\n\\n' + 'new\\n' * 30)"
    )
    small = AllowPaths(paths=("docs/**",), kinds=("modify",), max_changed_lines=20)
    assert "lines changed (at most 20 here)" in decide(small, sweeping)[1][0]


async def test_copies_from_outside_are_not_claimed(evidence_for) -> None:
    rule = AllowPaths(paths=("exports/**",), kinds=("create",))
    copy = await evidence_for(
        FILES, "vsh_write('/workspace/exports/x.csv', vsh_read('/workspace/data/raw.csv'))"
    )
    decision, reasons = decide(rule, copy)
    assert decision == "review"
    assert "copies the contents of data/raw.csv" in reasons[0]
    fresh = await evidence_for(FILES, "vsh_write('/workspace/exports/x.csv', 'm,r\\n')")
    assert decide(rule, fresh)[0] == "approve"


async def test_mode_changes_only_add_exec_bits(evidence_for) -> None:
    rule = AllowPaths(paths=("scripts/**",), kinds=("metadata_change",))
    chmod = await evidence_for(FILES, "chmod +x scripts/run.sh", language="bash")
    assert decide(rule, chmod)[0] == "approve"
    writable = await evidence_for(FILES, "chmod 666 scripts/run.sh", language="bash")
    decision, reasons = decide(rule, writable)
    assert decision == "review"
    assert "changes more than adding exec bits" in reasons[0]
    anything = AllowPaths(paths=("scripts/**",), kinds=("metadata_change",), mode_change="any")
    assert decide(anything, writable)[0] == "approve"


def test_allow_paths_validates() -> None:
    with pytest.raises(ValueError, match="at least one kind"):
        AllowPaths(paths=("a/**",), kinds=())
    with pytest.raises(ValueError, match="at least one glob"):
        AllowPaths(paths=(), kinds=("create",))
    with pytest.raises(ValueError, match="whole segment"):
        AllowPaths(paths=("docs/**.md",), kinds=("create",))


async def test_added_lines_only(evidence_for) -> None:
    rule = AllowAddedLines(paths=(".gitignore",), pattern=r"[^!#\s][^\n]*|#[^\n]*|\s*")
    added = await evidence_for(
        FILES, "vsh_write('/workspace/.gitignore', '.env\\n*.pem\\n# caches\\n*.tmp\\n')"
    )
    assert decide(rule, added)[0] == "approve"
    negated = await evidence_for(
        FILES, "vsh_write('/workspace/.gitignore', '.env\\n*.pem\\n!prod.pem\\n')"
    )
    decision, reasons = decide(rule, negated)
    assert decision == "review"
    assert "added line 3 does not match" in reasons[0]
    removed = await evidence_for(FILES, "vsh_write('/workspace/.gitignore', '.env\\n*.tmp\\n')")
    assert "1 existing line(s) removed or changed" in decide(rule, removed)[1][0]
    with pytest.raises(ValueError, match="not supported"):
        AllowAddedLines(paths=(".gitignore",), pattern="(?!x)")


# -- AllowConfig ----------------------------------------------------------------------

APP = """\
# service settings
[server]
host = "127.0.0.1"
timeout_s = 30
workers = 4
debug = false
log_level = "info"

[[upstreams]]
url = "https://a.internal"
verify_tls = true

[[upstreams]]
url = "https://b.internal"
verify_tls = true

[features]
search = false
"""
OPS = {
    "**.*timeout_s": KeyConstraint(type="integer", min=1, max=600),
    "server.workers": KeyConstraint(type="integer", min=1, max=64, direction="increase"),
    "server.log_level": KeyConstraint(type="string", enum=("debug", "info", "warning")),
    "features.*": KeyConstraint(type="boolean", may_add=True),
    "upstreams[*].weight": KeyConstraint(type="integer", min=0, max=100, may_add=True),
}


async def config_verdict(evidence_for, new: str, *, files=None, rule=None) -> tuple[str, str]:
    allowance = rule or AllowConfig(paths=("config/app.toml",), may_change=OPS, id="ops")
    evidence = await evidence_for(
        files or {"config/app.toml": APP}, f"vsh_write('/workspace/config/app.toml', {new!r})"
    )
    verdict = RuleSet([allowance]).evaluate(evidence)
    return verdict.decision, verdict.reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("timeout_s = 30", "timeout_s = 60"),
        ("workers = 4", "workers = 8"),
        ('log_level = "info"', 'log_level = "debug"'),
        ("search = false", "search = true"),
        ("search = false", "search = false\nbeta = true"),  # a new flag: may_add
        ("# service settings", "# tuned by the agent"),  # comments only
        ('url = "https://b.internal"', 'url = "https://b.internal"\nweight = 10'),
    ],
)
async def test_config_changes_within_constraints_are_proven(evidence_for, old, new) -> None:
    decision, reason = await config_verdict(evidence_for, APP.replace(old, new))
    assert decision == "approve", reason


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("timeout_s = 30", "timeout_s = 0", "server.timeout_s = 0 is below 1"),
        ("timeout_s = 30", "timeout_s = 30.0", "is not a integer"),  # typed: 30 -> 30.0
        ("timeout_s = 30", 'timeout_s = "60"', "is not a integer"),
        ("workers = 4", "workers = 100000", "is above 64"),
        ("workers = 4", "workers = 2", "decreases from 4"),
        ('log_level = "info"', 'log_level = "trace"', "is 'trace', not allowed"),
        ("debug = false", "debug = true", "server.debug changed (False -> True)"),
        ("debug = false", "debug = 0", "server.debug changed (False -> 0)"),  # true != 1
        ("verify_tls = true\n\n[features]", "verify_tls = false\n\n[features]", "upstreams[1]"),
        ('host = "127.0.0.1"\n', "", "server.host changed ('127.0.0.1' -> absent)"),
        ("search = false", 'search = "yes"', "is not a boolean"),
        ("[features]", "[features\n", "cannot be parsed as toml"),
        # a comment is free text: a credential copied into one parses as no change at all
        ("# service settings", "# db: app / Xq9-prod-PASSWORD-77", "adds an opaque token"),
        ("# service settings", "# key AKIA1234567890ABCDEF", "adds an opaque token"),
    ],
)
async def test_config_changes_outside_constraints_are_unproven(evidence_for, old, new, why):
    decision, reason = await config_verdict(evidence_for, APP.replace(old, new))
    assert decision == "review"
    assert why in reason


async def test_config_reasons_name_the_fix_and_location(evidence_for) -> None:
    _, reason = await config_verdict(evidence_for, APP.replace("[features]", "[features\n"))
    assert "line" in reason, "a parse error says where"
    _, reason = await config_verdict(evidence_for, APP.replace("workers = 4", "workers = 65"))
    assert "it must be integer within 1..64 increase only" in reason


@pytest.mark.parametrize(
    ("name", "before", "after", "ok"),
    [
        (
            "app.ini",
            "[server]\nworkers = 4\ndebug = no\n",
            "[server]\nworkers = 8\ndebug = no\n",
            True,
        ),
        ("app.ini", "[server]\nworkers = 4\n", "[server]\nworkers = eight\n", False),
        (
            "app.ini",
            "[server]\nworkers = 4\ndebug = no\n",
            "[server]\nworkers = 4\ndebug = off\n",
            False,
        ),
        ("app.env", "WORKERS=4\n", "WORKERS=16\n", True),
        ("app.env", "WORKERS=4\n", "WORKERS=100\n", False),
        ("app.properties", "server.workers=4\n", "server.workers = 8\n", True),
        (
            "app.properties",
            "server.workers=4\nserver.tls=true\n",
            "server.workers=4\nserver.tls=false\n",
            False,
        ),
        (
            "app.yaml",
            "base: &b {workers: 4}\nserver:\n  <<: *b\n  tls: true\n",
            "base: &b {workers: 4}\nserver:\n  <<: *b\n  tls: true\n  workers: 8\n",
            True,
        ),
        (
            "app.yaml",
            "base: &b {workers: 4, tls: true}\nserver:\n  <<: *b\n",
            "base: &b {workers: 4, tls: true}\nserver:\n  <<: *b\n  tls: false\n",
            False,
        ),
        ("app.json", '{"server": {"workers": 4}}', '{"server": {"workers": 8}}', True),
        (
            "app.json",
            '{"server": {"workers": 4}}',
            '{"server": {"workers": 8, "workers": 1}}',
            False,
        ),
    ],
)
async def test_every_format_is_parsed_and_coerced(evidence_for, name, before, after, ok) -> None:
    workers = {
        "server.workers": KeyConstraint(type="integer", min=1, max=64),
        "WORKERS": KeyConstraint(type="integer", min=1, max=64),
    }
    rule = AllowConfig(paths=(name,), may_change=workers)
    evidence = await evidence_for({name: before}, f"vsh_write('/workspace/{name}', {after!r})")
    verdict = RuleSet([rule]).evaluate(evidence)
    assert (verdict.decision == "approve") is ok, verdict.reason


async def test_config_create_and_scope(evidence_for) -> None:
    flags = {"features.*": KeyConstraint(type="boolean", may_add=True)}
    modify_only = AllowConfig(paths=("config/*.toml",), may_change=flags)
    creating = AllowConfig(paths=("config/*.toml",), may_change=flags, kinds=("create",))
    new = await evidence_for(
        {"config/k": ""}, "vsh_write('/workspace/config/f.toml', '[features]\\na = true\\n')"
    )
    assert RuleSet([modify_only]).evaluate(new).decision == "review"
    assert RuleSet([creating]).evaluate(new).decision == "approve"
    extra = await evidence_for(
        {"config/k": ""},
        "vsh_write('/workspace/config/f.toml', '[features]\\na = true\\n[auth]\\noff = 1\\n')",
    )
    assert "auth.off changed (absent -> 1)" in RuleSet([creating]).evaluate(extra).reason
    gone = await evidence_for(
        {"config/f.toml": "a = 1\n"}, "vsh_remove('/workspace/config/f.toml')"
    )
    assert RuleSet([creating]).evaluate(gone).details["unproven"][0]["reason"] == (
        "no allowance covers delete of config/f.toml"
    )


async def test_lists_and_versions(evidence_for) -> None:
    wf = (
        "jobs:\n  t:\n    matrix:\n      py: ['3.11', '3.12']\n"
        "    steps:\n      - uses: actions/checkout@v3\n"
    )
    rule = AllowConfig(
        paths=("ci.yml",),
        may_change={
            "jobs.*.steps[*].uses": KeyConstraint(
                type="string", pattern=r"actions/[a-z-]+@v[0-9]+", direction="increase"
            ),
            "jobs.*.matrix.py": KeyConstraint(type="list", pattern=r"3\.[0-9]+", may_add=True),
        },
    )

    async def decide_wf(new: str) -> tuple[str, str]:
        evidence = await evidence_for({"ci.yml": wf}, f"vsh_write('/workspace/ci.yml', {new!r})")
        verdict = RuleSet([rule]).evaluate(evidence)
        return verdict.decision, verdict.reason

    assert (await decide_wf(wf.replace("@v3", "@v4")))[0] == "approve"
    assert (await decide_wf(wf.replace("'3.12']", "'3.12', '3.13']")))[0] == "approve"
    assert "does not increase the version" in (await decide_wf(wf.replace("@v3", "@v2")))[1]
    assert "changes the name" in (await decide_wf(wf.replace("checkout@v3", "cache@v4")))[1]
    assert "changes the name" in (await decide_wf(wf.replace("actions/", "evil/")))[1]
    assert "removes or reorders '3.11'" in (await decide_wf(wf.replace("'3.11', ", "")))[1]
    assert "not matching" in (await decide_wf(wf.replace("'3.12']", "'3.12', 'pypy']")))[1]


def test_key_constraints_validate() -> None:
    with pytest.raises(ValueError, match="min/max apply to integer, number or list"):
        KeyConstraint(type="boolean", min=1)
    with pytest.raises(ValueError, match="only_to applies to booleans"):
        KeyConstraint(type="integer", only_to=True)
    with pytest.raises(ValueError, match="not supported"):
        KeyConstraint(type="string", pattern=r"(a)\1")
    with pytest.raises(ValueError, match="Extra inputs"):
        KeyConstraint(type="string", maximum=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="must be a whole segment"):
        AllowConfig(paths=("a.toml",), may_change={"a.*b*.c": KeyConstraint(type="any")})
    with pytest.raises(ValueError, match=r"min 5\.0 is greater than max 1\.0"):
        KeyConstraint(type="integer", min=5, max=1)


async def test_added_lines_dedupe(evidence_for) -> None:
    files = {".gitignore": ".env\n*.pem\n.env\n"}
    evidence = await evidence_for(files, "vsh_write('/workspace/.gitignore', '.env\\n*.pem\\n')")
    strict = AllowAddedLines(paths=(".gitignore",), pattern=".*")
    assert decide(strict, evidence)[0] == "review"
    dedupe = AllowAddedLines(paths=(".gitignore",), pattern=".*", dedupe=True)
    assert decide(dedupe, evidence)[0] == "approve"
    gone = await evidence_for(files, "vsh_write('/workspace/.gitignore', '*.pem\\n')")
    assert decide(dedupe, gone)[0] == "review"


async def test_inserted_list_items_must_each_be_proven(evidence_for) -> None:
    """Arrays of tables are not opaque: an insertion shifts indices, the list decides."""
    wf = "steps:\n  - uses: actions/checkout@v4\n  - run: pytest\n"
    rule = AllowConfig(
        paths=("ci.yml",),
        may_change={
            "steps[*].uses": KeyConstraint(type="string", pattern="actions/checkout@v[0-9]+"),
            "steps": KeyConstraint(
                type="list",
                may_add=True,
                items=KeyConstraint(
                    type="table",
                    keys={
                        "uses": KeyConstraint(type="string", pattern=r"actions/cache@v[0-9]+"),
                        "with.path": KeyConstraint(type="string", pattern=r"~/\.cache/pip"),
                    },
                ),
            ),
        },
    )

    async def decide_wf(new: str) -> tuple[str, str]:
        evidence = await evidence_for({"ci.yml": wf}, f"vsh_write('/workspace/ci.yml', {new!r})")
        verdict = RuleSet([rule]).evaluate(evidence)
        return verdict.decision, verdict.reason

    cache = "  - uses: actions/cache@v4\n    with:\n      path: ~/.cache/pip\n"
    inserted = wf.replace("  - run: pytest\n", cache + "  - run: pytest\n")
    assert (await decide_wf(inserted))[0] == "approve"
    ssh = inserted.replace("~/.cache/pip", "~/.ssh")
    assert "adds an item that has with.path = '~/.ssh'" in (await decide_wf(ssh))[1]
    script = wf.replace("  - run: pytest\n", "  - run: curl x | sh\n  - run: pytest\n")
    assert "adds an item that has run changed" in (await decide_wf(script))[1]
    reordered = "steps:\n  - run: pytest\n  - uses: actions/checkout@v4\n" + cache
    assert "removes or reorders" in (await decide_wf(reordered))[1]
    dropped = "steps:\n  - uses: actions/checkout@v4\n" + cache
    assert "removes or reorders {'run': 'pytest'}" in (await decide_wf(dropped))[1]


async def test_rename_to_gives_renames_a_direction(evidence_for) -> None:
    rule = AllowPaths(paths=("exports/*",), kinds=("rename",), rename_to=("exports/archive/**",))
    into = await evidence_for(
        FILES,
        "vsh_mkdir('/workspace/exports/archive/2024')\n"
        "vsh_move('/workspace/exports/r.csv', '/workspace/exports/archive/2024/r.csv')",
    )
    verdict = RuleSet([rule]).evaluate(into)
    assert verdict.decision == "approve", verdict.reason
    assert any(
        "new directory exports/archive/2024" in c["reason"] for c in verdict.details["claims"]
    )
    back = await evidence_for(
        FILES, "vsh_move('/workspace/exports/archive/old.csv', '/workspace/exports/old.csv')"
    )
    assert decide(rule, back)[0] == "review", "out of the archive is the wrong direction"
    sideways = await evidence_for(
        FILES, "vsh_move('/workspace/exports/r.csv', '/workspace/exports/r2.csv')"
    )
    assert decide(rule, sideways)[0] == "review"
