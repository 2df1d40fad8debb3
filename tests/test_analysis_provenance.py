"""Read provenance on real VSH evidence: bytes that were ever at an unshared path stay unshared."""

from __future__ import annotations

import pytest

from vsh_ai.analysis._provenance import content_sources, derived_paths, unshared_paths

pytestmark = pytest.mark.anyio

FILES = {
    "keys/a.txt": "db: hunter2\n",
    "public/old.txt": "x\n",
    "public/readme.md": "hello\n",
}
MOVE = "vsh_move('/workspace/keys/a.txt', '/workspace/public/a.txt')\n"


def public(path: str) -> bool:
    return path.startswith("public/")


# Issue 10 item 1: the seven ways a rename carried unshared bytes into a shared path.
VARIANTS = {
    "monty read": ("monty", MOVE + "print(vsh_read('/workspace/public/a.txt'))", "public/a.txt"),
    "monty edit": (
        "monty",
        MOVE + "p = '/workspace/public/a.txt'\nvsh_write(p, vsh_read(p).replace('db', 'DB'))",
        "public/a.txt",
    ),
    "monty append": (
        "monty",
        MOVE + "import pathlib\n"
        "with pathlib.Path('/workspace/public/a.txt').open('a') as f:\n"
        "    f.write('more\\n')\n",
        "public/a.txt",
    ),
    "move out, read, move back": (
        "monty",
        MOVE + "s = vsh_read('/workspace/public/a.txt')\n"
        "vsh_move('/workspace/public/a.txt', '/workspace/keys/a.txt')\n"
        "vsh_write('/workspace/public/old.txt', s.upper())\n",
        "public/old.txt",
    ),
    "bash mv && cat": ("bash", "mv keys/a.txt public/a.txt && cat public/a.txt", "public/a.txt"),
    "bash mv && echo >>": (
        "bash",
        "mv keys/a.txt public/a.txt && echo more >> public/a.txt",
        "public/a.txt",
    ),
    "bash mv && sed -i": (
        "bash",
        "mv keys/a.txt public/a.txt && sed -i 's/db/DB/' public/a.txt",
        "public/a.txt",
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
async def test_renamed_unshared_bytes_stay_unshared(evidence_for, variant: str) -> None:
    language, code, leaked = VARIANTS[variant]
    evidence = await evidence_for(FILES, code, language=language)
    # The evidence really shows the secret at the shared name (else the test proves nothing).
    shown = [c.data for c in evidence.contents if c.path == leaked]
    assert any(b"hunter2" in data.lower() for data in shown), variant
    unshared = unshared_paths(evidence, public)
    assert leaked in unshared, variant
    assert "keys/a.txt" in content_sources(evidence)[leaked], variant
    # Every path whose captured bytes hold the secret is unshared, whatever its name.
    for content in evidence.contents:
        if b"hunter2" in content.data.lower():
            assert content.path in unshared, (variant, content.path)
    # A sed temp file or any other path that held the bytes is covered as well.
    assert not any(public(p) for p in unshared) or leaked in unshared


async def test_an_unrelated_shared_path_stays_shared(evidence_for) -> None:
    """Not everything is tainted: a shared edit that never met unshared bytes is shared."""
    evidence = await evidence_for(
        FILES,
        "vsh_write('/workspace/public/readme.md', vsh_read('/workspace/public/readme.md') + 'x')\n",
    )
    assert unshared_paths(evidence, public) == frozenset()
    assert content_sources(evidence)["public/readme.md"] == {"public/readme.md"}


async def test_a_shared_write_before_an_unshared_read_is_tainted_conservatively(
    evidence_for,
) -> None:
    """The canonical after of every written path counts once the program read unshared bytes."""
    evidence = await evidence_for(
        FILES,
        "vsh_write('/workspace/public/readme.md', 'v2\\n')\n"
        "s = vsh_read('/workspace/keys/a.txt')\n",
    )
    assert "public/readme.md" in unshared_paths(evidence, public)


async def test_a_read_taints_later_writes_not_unrelated_reads(evidence_for) -> None:
    evidence = await evidence_for(
        FILES,
        "s = vsh_read('/workspace/keys/a.txt')\n"
        "r = vsh_read('/workspace/public/readme.md')\n"
        "vsh_write('/workspace/public/new.txt', str(len(s)))\n",
    )
    unshared = unshared_paths(evidence, public)
    assert "public/new.txt" in unshared  # even a length is derived from the bytes
    assert "public/readme.md" not in unshared  # read, never written: its bytes are its own


async def test_a_copy_carries_taint_and_the_same_bytes_anywhere_are_tainted(evidence_for) -> None:
    evidence = await evidence_for(
        {**FILES, "public/same.txt": "db: hunter2\n"},
        "vsh_copy('/workspace/keys/a.txt', '/workspace/public/copy.txt')\n",
    )
    unshared = unshared_paths(evidence, public)
    assert "public/copy.txt" in unshared
    # public/same.txt holds the same blob as keys/a.txt only if VSH observed it; it was
    # not touched here, so it is not in the evidence at all.
    assert "public/same.txt" not in content_sources(evidence)


@pytest.mark.parametrize(
    "code",
    [
        "vsh_move('/workspace/keys', '/workspace/public/keys')",
        "vsh_move('/workspace/keys/a.txt', '/workspace/keys/b.txt')\n"
        "vsh_move('/workspace/keys/b.txt', '/workspace/public/a.txt')",
        "vsh_move('/workspace/keys/a.txt', '/workspace/public/old.txt')",
        "vsh_move('/workspace/keys', '/workspace/tmp')\n"
        "vsh_move('/workspace/tmp/a.txt', '/workspace/public/a.txt')",
    ],
)
async def test_directory_moves_and_chains_carry_taint(evidence_for, code: str) -> None:
    evidence = await evidence_for(FILES, code)
    unshared = unshared_paths(evidence, public)
    tainted = [c.path for c in evidence.changes if c.after and public(c.path)]
    assert tainted
    assert set(tainted) <= unshared, code


async def test_directory_move_without_captured_content_still_carries_taint(evidence_for) -> None:
    """Renames link by name, not only by blob: uncaptured bytes cannot break the chain."""
    evidence = await evidence_for(
        FILES, "vsh_move('/workspace/keys', '/workspace/public/keys')", review_content_bytes=0
    )
    assert not evidence.contents
    assert "public/keys/a.txt" in unshared_paths(evidence, public)


async def test_bash_cat_into_a_shared_file(evidence_for) -> None:
    evidence = await evidence_for(
        FILES, "cat keys/a.txt > public/out.txt; cp keys/a.txt public/cp.txt", language="bash"
    )
    assert {"public/out.txt", "public/cp.txt"} <= unshared_paths(evidence, public)


async def test_a_failing_sharing_decision_fails_closed(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_write('/workspace/public/x.txt', 'hi\\n')")

    def broken(path: str) -> bool:
        raise RuntimeError("glob engine failed")

    assert "public/x.txt" in unshared_paths(evidence, broken)


async def test_unshared_paths_agrees_with_content_sources(evidence_for) -> None:
    for language, code, _ in VARIANTS.values():
        evidence = await evidence_for(FILES, code, language=language)
        sources = content_sources(evidence)
        expected = {p for p, srcs in sources.items() if any(not public(s) for s in srcs)}
        assert unshared_paths(evidence, public) == expected
        assert all(path in srcs for path, srcs in sources.items())


async def test_many_moves_each_keep_their_own_provenance(evidence_for) -> None:
    """A 300-file program: each moved file has its own source, unrelated writes stay shared."""
    files = {f"keys/k{i:03d}.txt": f"secret {i}\n" for i in range(150)}
    files |= {f"public/p{i:03d}.txt": f"pub {i}\n" for i in range(150)}
    code = (
        "for i in range(150):\n"
        "    vsh_move(f'/workspace/keys/k{i:03d}.txt', f'/workspace/public/m{i:03d}.txt')\n"
        "    vsh_write(f'/workspace/public/p{i:03d}.txt', 'v2\\n')\n"
    )
    evidence = await evidence_for(files, code)
    unshared = unshared_paths(evidence, public)
    assert {f"public/m{i:03d}.txt" for i in range(150)} <= unshared
    assert not any(f"public/p{i:03d}.txt" in unshared for i in range(150))
    sources = content_sources(evidence)
    assert sources["public/m007.txt"] >= {"keys/k007.txt"}
    assert "keys/k008.txt" not in sources["public/m007.txt"]


async def test_equal_bytes_at_a_shared_path_are_tainted_by_content_alone(evidence_for) -> None:
    """No rename, no read: a shared file whose old bytes equal an unshared file's is unshared
    (its diff would show them as removed lines)."""
    evidence = await evidence_for(
        {**FILES, "public/same.txt": "db: hunter2\n"},
        "vsh_remove('/workspace/keys/a.txt')\nvsh_write('/workspace/public/same.txt', 'v2\\n')\n",
    )
    assert not evidence.read_paths
    assert not evidence.renames
    assert "public/same.txt" in unshared_paths(evidence, public)
    assert "keys/a.txt" in content_sources(evidence)["public/same.txt"]


async def test_the_sed_temp_file_is_unshared_too(evidence_for) -> None:
    language, code, _ = VARIANTS["bash mv && sed -i"]
    evidence = await evidence_for(FILES, code, language=language)
    temps = [p for e in evidence.effects for p in e.paths if ".tmp" in p]
    assert temps
    assert set(temps) <= unshared_paths(evidence, public)


async def test_untraceable_evidence_taints_everything(evidence_for) -> None:
    """Truncated effects could hide the move: then one unshared path taints all paths."""
    evidence = await evidence_for(
        FILES,
        "import pathlib\npathlib.Path('/workspace/keys/a.txt').exists()\n"
        "vsh_write('/workspace/public/x.txt', 'hi\\n')\n",
    )
    assert unshared_paths(evidence, public) == {"keys/a.txt"}  # a metadata read moves no bytes
    for update in ({"evidence_truncated": True}, {"evidence_complete": False}):
        partial = evidence.model_copy(update=update)
        assert "public/x.txt" in unshared_paths(partial, public)
        assert unshared_paths(partial, lambda p: True) == frozenset()  # nothing unshared
        sources = content_sources(partial)
        assert all(sources[p] == frozenset(sources) for p in sources)


async def test_derived_paths_are_those_with_another_source(evidence_for) -> None:
    """The linear answer to 'may bytes of another path be in this one?' agrees with the
    full source sets on every variant and on untouched, read-only and plain writes."""
    programs = [(language, code) for language, code, _ in VARIANTS.values()]
    programs += [
        ("monty", "vsh_write('/workspace/public/x.txt', 'hi\\n')"),
        ("monty", "vsh_read('/workspace/public/readme.md')"),
        ("monty", "vsh_copy('/workspace/public/readme.md', '/workspace/public/c.md')"),
        ("bash", "cat keys/a.txt public/readme.md > public/both.txt"),
    ]
    for language, code in programs:
        evidence = await evidence_for(FILES, code, language=language)
        sources = content_sources(evidence)
        expected = {path for path, srcs in sources.items() if srcs - {path}}
        assert derived_paths(evidence) == expected, code
    plain = await evidence_for(FILES, "vsh_write('/workspace/public/x.txt', 'hi\\n')")
    assert derived_paths(plain) == frozenset()
