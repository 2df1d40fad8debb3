"""Net change kinds on real VSH evidence: renames proven, copies traced, destruction named."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai import Evidence
from vsh_ai.analysis._changes import NetChange, destructive_edit, net_changes
from vsh_ai.analysis._diff import line_opcodes

pytestmark = pytest.mark.anyio

EvidenceFor = Callable[..., Awaitable[Evidence]]

FILES = {
    "a.txt": "hello\n",
    "keep.txt": "keep\n",
    "d/x.txt": "x\n",
    "d/sub/y.txt": "y\n",
    "empty.txt": "",
}


def by_path(evidence: Evidence) -> dict[str, NetChange]:
    changes = net_changes(evidence)
    assert [c.path for c in changes] == [c.path for c in evidence.changes]
    return {c.path: c for c in changes}


def summary(evidence: Evidence) -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    return {c.path: (c.kind, c.partner, c.copied_from) for c in net_changes(evidence)}


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("vsh_move('a.txt', 'c.txt')", "monty"),
        ("mv a.txt c.txt", "bash"),
        ("vsh_move('a.txt', 'tmp.txt')\nvsh_move('tmp.txt', 'c.txt')", "monty"),
        ("mv a.txt t1 && mv t1 t2 && mv t2 c.txt", "bash"),
    ],
)
async def test_rename(evidence_for: EvidenceFor, code: str, language: str) -> None:
    evidence = await evidence_for(FILES, code, language=language)
    assert summary(evidence) == {
        "a.txt": ("rename", "c.txt", ()),
        "c.txt": ("rename", "a.txt", ()),
    }


async def test_directory_rename_renames_every_entry(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "mv d e", language="bash")
    got = summary(evidence)
    assert got["d/x.txt"] == ("rename", "e/x.txt", ())
    assert got["e/sub/y.txt"] == ("rename", "d/sub/y.txt", ())
    assert got["d"] == ("rename", "e", ())
    assert {kind for kind, _, _ in got.values()} == {"rename"}


async def test_directory_rename_then_delete_inside(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "mv d e && rm e/x.txt", language="bash")
    got = summary(evidence)
    assert got["d/x.txt"] == ("delete", None, ())
    assert got["d/sub/y.txt"] == ("rename", "e/sub/y.txt", ())


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("vsh_move('a.txt', 'c.txt')\nvsh_remove('c.txt')", "monty"),
        ("mv a.txt c.txt && rm c.txt", "bash"),
    ],
)
async def test_move_then_delete_is_a_delete(
    evidence_for: EvidenceFor, code: str, language: str
) -> None:
    evidence = await evidence_for(FILES, code, language=language)
    assert summary(evidence) == {"a.txt": ("delete", None, ())}


async def test_move_then_edit_is_delete_plus_create(evidence_for: EvidenceFor) -> None:
    code = "vsh_move('a.txt', 'c.txt')\nvsh_write('c.txt', 'changed\\n')"
    evidence = await evidence_for(FILES, code)
    assert summary(evidence) == {"a.txt": ("delete", None, ()), "c.txt": ("create", None, ())}


async def test_move_then_delete_then_recreate_is_not_a_rename(evidence_for: EvidenceFor) -> None:
    code = "mv a.txt c.txt && rm c.txt && printf 'hello\\n' > c.txt"
    evidence = await evidence_for(FILES, code, language="bash")
    assert summary(evidence) == {
        "a.txt": ("delete", None, ()),
        "c.txt": ("create", None, ("a.txt",)),
    }


async def test_move_with_chmod_is_not_a_rename(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "mv a.txt b.sh && chmod +x b.sh", language="bash")
    got = summary(evidence)
    assert got == {"a.txt": ("delete", None, ()), "b.sh": ("create", None, ("a.txt",))}


async def test_move_onto_existing_file_is_delete_plus_modify(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "mv a.txt keep.txt", language="bash")
    assert summary(evidence) == {
        "a.txt": ("delete", None, ()),
        "keep.txt": ("modify", None, ("a.txt",)),
    }


async def test_swap_through_a_temporary_name(evidence_for: EvidenceFor) -> None:
    code = "mv a.txt t && mv keep.txt a.txt && mv t keep.txt"
    evidence = await evidence_for(FILES, code, language="bash")
    assert summary(evidence) == {
        "a.txt": ("modify", None, ("keep.txt",)),
        "keep.txt": ("modify", None, ("a.txt",)),
    }


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("vsh_copy('a.txt', 'c.txt')", "monty"),
        ("cp a.txt c.txt", "bash"),
        ("vsh_write('c.txt', vsh_read('a.txt'))", "monty"),
        ("cat a.txt > c.txt", "bash"),
    ],
)
async def test_copy_is_a_create_copied_from_the_source(
    evidence_for: EvidenceFor, code: str, language: str
) -> None:
    evidence = await evidence_for(FILES, code, language=language)
    assert summary(evidence) == {"c.txt": ("create", None, ("a.txt",))}


async def test_copy_then_delete_source_is_not_a_rename(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "cat a.txt > c.txt && rm a.txt", language="bash")
    assert summary(evidence) == {
        "a.txt": ("delete", None, ()),
        "c.txt": ("create", None, ("a.txt",)),
    }


async def test_read_after_own_write_is_not_a_before_copy(evidence_for: EvidenceFor) -> None:
    code = "vsh_write('a.txt', 'new\\n')\nvsh_write('c.txt', vsh_read('a.txt'))"
    evidence = await evidence_for(FILES, code)
    assert summary(evidence) == {
        "a.txt": ("modify", None, ()),
        "c.txt": ("create", None, ()),
    }


async def test_empty_files_are_never_copies(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "vsh_write('new.txt', '')\nvsh_read('empty.txt')")
    assert summary(evidence) == {"new.txt": ("create", None, ())}


async def test_sed_in_place_is_a_modify(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "sed -i 's/hello/bye/' a.txt", language="bash")
    assert summary(evidence) == {"a.txt": ("modify", None, ())}


async def test_metadata_change_stays(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "chmod +x a.txt", language="bash")
    assert summary(evidence) == {"a.txt": ("metadata_change", None, ())}


CONFIG = (
    "# service settings\n"
    "host = 0.0.0.0\n"
    "port = 8080\n"
    "workers = 4\n"
    "timeout = 30\n"
    "log_level = info\n"
    "\n"
    "tls = true\n"
)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("", "emptied"),
        ("\n\n   \n", "emptied"),
        (
            CONFIG.replace("host =", "#host =")
            .replace("port =", "# port =")
            .replace("workers =", "; workers =")
            .replace("timeout =", "// timeout ="),
            "lines commented out",
        ),
        ("# service settings\ntls = true\n", "lines removed"),
        ("/*\n" + CONFIG + "*/\n", "commented out"),
        ("host = 0.0.0.0\nport = 8080\n", "removed"),
    ],
)
async def test_destructive_modify(evidence_for: EvidenceFor, after: str, expected: str) -> None:
    evidence = await evidence_for({"app.conf": CONFIG}, f"vsh_write('app.conf', {after!r})")
    (change,) = net_changes(evidence)
    assert change.kind == "modify"
    assert change.destructive is not None
    assert expected in change.destructive


@pytest.mark.parametrize(
    "after",
    [
        CONFIG.replace("lof_level", "log_level"),  # (no-op) and a typo fix below
        CONFIG.replace("port = 8080", "port = 8081"),
        # a large legitimate rewrite: every line changed, nothing lost
        "\n".join(
            f"{key.upper()}={value}"
            for key, value in (
                ("host", "127.0.0.1"),
                ("port", "9090"),
                ("workers", "8"),
                ("timeout", "60"),
                ("log_level", "debug"),
                ("tls", "false"),
                ("keepalive", "5"),
            )
        ),
        # half removed is not "more than half"
        "host = 0.0.0.0\nport = 8080\nworkers = 4\n",
        CONFIG + "extra = 1\n",
    ],
)
async def test_not_destructive(evidence_for: EvidenceFor, after: str) -> None:
    files = {"app.conf": CONFIG.replace("log_level", "lof_level")}
    evidence = await evidence_for(files, f"vsh_write('app.conf', {after!r})")
    (change,) = net_changes(evidence)
    assert change.kind == "modify"
    assert change.destructive is None


async def test_destructive_only_for_modify(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for({"app.conf": CONFIG}, "vsh_remove('app.conf')")
    assert net_changes(evidence)[0].destructive is None


async def test_binary_and_uncaptured_do_not_raise(evidence_for: EvidenceFor) -> None:
    binary = await evidence_for({"b.bin": b"\x00\x01" * 10}, "vsh_write('b.bin', b'\\x00')")
    assert net_changes(binary)[0].destructive is None
    uncaptured = await evidence_for(
        {"app.conf": CONFIG}, "vsh_write('app.conf', '')", review_content_bytes=0
    )
    (change,) = net_changes(uncaptured)
    assert change.kind == "modify"
    assert change.destructive is None


async def test_cached_per_evidence(evidence_for: EvidenceFor) -> None:
    evidence = await evidence_for(FILES, "mv a.txt c.txt", language="bash")
    assert net_changes(evidence) is net_changes(evidence)
    copy = Evidence.model_validate_json(evidence.model_dump_json())
    assert net_changes(copy) == net_changes(evidence)


def test_destructive_edit_small_files_and_comments() -> None:
    assert destructive_edit("a\nb\nc\n", "") == (
        "emptied: the file had content and now holds only whitespace"
    )
    assert destructive_edit("a\nb\nc\n", "a\n") is None  # fewer than 4 meaningful lines
    assert destructive_edit("", "") is None
    assert destructive_edit("  \n", "") is None
    before = "# a\n# b\nx = 1\ny = 2\n"
    assert destructive_edit(before, "x = 1\n") is None  # comments are not meaningful
    sql = "select 1;\nselect 2;\nselect 3;\nselect 4;\n"
    assert destructive_edit(sql, "-- " + sql.replace("\n", "\n-- ")) is not None
    html = "<p>1</p>\n<p>2</p>\n<p>3</p>\n<p>4</p>\n"
    assert destructive_edit(html, "<!--\n" + html + "-->\n") is not None
    bat = "set A=1\nset B=2\nset C=3\nset D=4\n"
    assert "commented out" in (destructive_edit(bat, "REM " + bat.replace("\n", "\nREM ")) or "")
    # code after a closed block comment still counts
    assert destructive_edit(bat, "/* x */ " + bat) is None


_LINES = st.lists(st.sampled_from(["a = 1", "b = 2", "c", "# c", "", "x()"]), max_size=12)


@given(_LINES, _LINES)
def test_destructive_edit_properties(old: list[str], new: list[str]) -> None:
    before, after = "\n".join(old), "\n".join(new)
    verdict = destructive_edit(before, after)
    assert destructive_edit(before, before) is None
    assert destructive_edit(before, before + "\nmore = 1") is None
    if verdict is not None:
        assert verdict.startswith("emptied") or "meaningful lines" in verdict


async def test_reformatted_config_is_not_destructive(evidence_for: EvidenceFor) -> None:
    pretty = '{\n  "host": "0.0.0.0",\n  "port": 8080,\n  "workers": 4,\n  "tls": true\n}\n'
    minified = '{"tls":true,"port":8080,"host":"0.0.0.0","workers":4}'
    evidence = await evidence_for({"app.json": pretty}, f"vsh_write('app.json', {minified!r})")
    assert net_changes(evidence)[0].destructive is None
    # the same line-level edit that also changes a value stays destructive
    changed = minified.replace("8080", "9090")
    evidence = await evidence_for({"app.json": pretty}, f"vsh_write('app.json', {changed!r})")
    assert net_changes(evidence)[0].destructive == "most of its meaningful lines removed"
    # commenting out YAML keys removes them from the parsed values: still destructive
    yaml_before = "host: 0.0.0.0\nport: 8080\nworkers: 4\ntls: true\n"
    yaml_after = "# " + yaml_before.replace("\n", "\n# ")
    evidence = await evidence_for({"c.yaml": yaml_before}, f"vsh_write('c.yaml', {yaml_after!r})")
    assert net_changes(evidence)[0].destructive == "most of its meaningful lines commented out"


@given(
    st.lists(st.sampled_from("abx#"), max_size=12), st.lists(st.sampled_from("abx#"), max_size=12)
)
def test_opcodes_cover_both_sides_in_order(old: list[str], new: list[str]) -> None:
    i = j = 0
    for tag, i1, i2, j1, j2 in line_opcodes(old, new).opcodes:
        assert (i1, j1) == (i, j)
        if tag == "equal":
            assert old[i1:i2] == new[j1:j2]
        i, j = i2, j2
    assert (i, j) == (len(old), len(new))


def _reference_comment_flags(stripped: list[str]) -> list[bool]:
    """The line-by-line walk (block comments included), as destructive_edit always did."""
    from vsh_ai.analysis._changes import _BLOCKS, _LINE_COMMENT

    flags: list[bool] = []
    closing: str | None = None
    for text in stripped:
        if closing is not None:
            flags.append(True)
            if closing in text:
                tail = text.split(closing, 1)[1].strip()
                closing = None
                if tail:
                    flags[-1] = False
            continue
        if not text or _LINE_COMMENT.match(text):
            flags.append(True)
            continue
        for opener, closer in _BLOCKS:
            if text.startswith(opener):
                rest = text[len(opener) :]
                if closer in rest:
                    flags.append(not rest.split(closer, 1)[1].strip())
                else:
                    flags.append(True)
                    closing = closer
                break
        else:
            flags.append(False)
    return flags


@given(
    st.lists(
        st.sampled_from(
            [
                "x = 1",
                "# c",
                "// c",
                "; c",
                "-- c",
                "* c",
                "rem c",
                "REM",
                "",
                "  ",
                "/* a",
                "b */",
                "/* a */",
                "/* a */ x",
                "<!-- a",
                "-->",
                "a -->",
                "#",
                "remark",
            ]
        ),
        max_size=30,
    )
)
def test_comment_flags_fast_paths_agree_with_the_walk(lines: list[str]) -> None:
    from vsh_ai.analysis._changes import _comment_flags

    text = "\n".join(lines)
    stripped = [line.strip() for line in text.splitlines()]
    assert _comment_flags(text, stripped) == _reference_comment_flags(stripped)
