"""Version ranges as intervals, checked against the grammars' own implementations.

Hypothesis samples versions and ranges; the interval answer (membership, subset, floor)
must agree with ``packaging``'s ``SpecifierSet.contains(v, prereleases=True)`` for PEP 440,
with ``nodesemver.satisfies`` for npm, and with node-semver's caret/tilde for Poetry's
(the two grammars define ``^``/``~`` alike on ``X.Y.Z`` releases).
"""

from __future__ import annotations

import contextlib

import nodesemver  # type: ignore[import-untyped]
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from vsh_ai.analysis._deps_intervals import _Interval, complement, relate
from vsh_ai.analysis._deps_pep440 import pep440_intervals, poetry_intervals, version_key
from vsh_ai.analysis._deps_ranges import (
    _semver_key,
    floor_major,
    npm_intervals,
    relate_ranges,
    satisfies,
)


def _holds(intervals: list[_Interval], key: object) -> bool:
    for low, low_inclusive, high, high_inclusive in intervals:
        above = low is None or low < key or (low_inclusive and low == key)
        below = high is None or key < high or (high_inclusive and key == high)
        if above and below:
            return True
    return False


_numbers = st.integers(min_value=0, max_value=3)


@st.composite
def pep440_versions(draw: st.DrawFn, *, local: bool = True) -> str:
    release = ".".join(str(draw(_numbers)) for _ in range(draw(st.integers(1, 4))))
    text = (f"{draw(st.sampled_from(['', '', '', '1!']))}") + release
    if draw(st.booleans()):
        text += draw(st.sampled_from(["a", "b", "rc"])) + str(draw(_numbers))
    if draw(st.integers(0, 3)) == 0:
        text += f".post{draw(_numbers)}"
    if draw(st.integers(0, 3)) == 0:
        text += f".dev{draw(_numbers)}"
    if local and draw(st.integers(0, 4)) == 0:
        text += "+" + draw(st.sampled_from(["1", "abc", "abc.2", "0.x"]))
    return text


@st.composite
def pep440_clauses(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["==", "!=", ">=", "<=", ">", "<", "~=", "==*", "!=*"]))
    if op.endswith("*"):
        release = ".".join(str(draw(_numbers)) for _ in range(draw(st.integers(1, 3))))
        return f"{op[:-1]}{release}.*"
    return op + draw(pep440_versions(local=op in ("==", "!=")))


pep440_specs = st.lists(pep440_clauses(), min_size=1, max_size=3).map(",".join)


def _specifier(text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        assume(False)
        raise


@settings(max_examples=400, deadline=None)
@given(pep440_specs, st.lists(pep440_versions(), min_size=1, max_size=12))
def test_pep440_membership_matches_packaging(spec: str, versions: list[str]) -> None:
    specifier = _specifier(spec)
    intervals = pep440_intervals(spec)
    assume(intervals is not None)
    assert intervals is not None
    for text in versions:
        version = Version(text)
        expected = specifier.contains(version, prereleases=True)
        assert _holds(intervals, version_key(version)) == expected, (spec, text)


@settings(max_examples=300, deadline=None)
@given(pep440_specs, pep440_specs, st.lists(pep440_versions(), min_size=4, max_size=16))
def test_pep440_relations_are_sound(new: str, old: str, versions: list[str]) -> None:
    new_set, old_set = _specifier(new), _specifier(old)
    relation = relate_ranges("pypi", new, old)
    assume(relation is not None)
    assert relation is not None
    admitted_new = [v for v in versions if new_set.contains(v, prereleases=True)]
    admitted_old = [v for v in versions if old_set.contains(v, prereleases=True)]
    if relation.subset:
        assert set(admitted_new) <= set(admitted_old)
    if relation.superset:
        assert set(admitted_old) <= set(admitted_new)
    if relation.disjoint:
        assert not set(admitted_new) & set(admitted_old)
    # packaging's own set relations (26.3+) agree where both answer
    if hasattr(new_set, "is_subset"):
        with contextlib.suppress(ValueError):
            assert new_set.is_subset(old_set) == relation.subset, (new, old)


@st.composite
def semver_versions(draw: st.DrawFn, *, prerelease: bool = True) -> str:
    text = ".".join(str(draw(st.integers(0, 4))) for _ in range(3))
    if prerelease and draw(st.integers(0, 3)) == 0:
        text += "-" + draw(st.sampled_from(["0", "alpha", "alpha.1", "beta.2", "rc.1"]))
    return text


@st.composite
def npm_ranges(draw: st.DrawFn) -> str:
    def atom() -> str:
        kind = draw(st.sampled_from(["^", "~", "", ">=", "<", ">", "<=", "x", "hyphen", "*"]))
        version = draw(semver_versions())
        if kind == "x":
            parts = version.split("-")[0].split(".")
            return ".".join(parts[: draw(st.integers(1, 2))]) + ".x"
        if kind == "hyphen":
            return f"{version} - {draw(semver_versions())}"
        if kind == "*":
            return "*"
        return kind + version

    alternatives = [
        " ".join(atom() for _ in range(draw(st.integers(1, 2))))
        for _ in range(draw(st.integers(1, 2)))
    ]
    return " || ".join(alternatives)


@settings(max_examples=400, deadline=None)
@given(npm_ranges(), st.lists(semver_versions(), min_size=1, max_size=12))
def test_npm_membership_matches_node_semver(spec: str, versions: list[str]) -> None:
    intervals = npm_intervals(spec)
    assume(intervals is not None)
    assert intervals is not None
    for text in versions:
        key = _semver_key(nodesemver.make_semver(text, loose=False))
        expected = bool(nodesemver.satisfies(text, spec, loose=False))
        if "-" in text:  # npm admits a pre-release only where a comparator names one:
            assert _holds(intervals, key) or not expected, (spec, text)  # intervals hold more
        else:
            assert _holds(intervals, key) == expected, (spec, text)


@st.composite
def poetry_atoms(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["^", "~", ">=", "<", "", "=="]))
    parts = [str(draw(st.integers(0, 3))) for _ in range(draw(st.integers(1, 3)))]
    if op == "" and draw(st.booleans()):
        return ".".join(parts[:2]) + ".*"
    return op + ".".join(parts)


def _as_npm(atom: str) -> str:
    """The same constraint in npm's grammar (node-semver is the oracle)."""
    if atom.startswith("=="):
        atom = atom[2:]
    if atom.endswith(".*"):
        return atom[:-2] + ".x"
    if atom and atom[0] not in "^~<>" and atom.count(".") < 2:
        atom += ".0" * (2 - atom.count("."))  # poetry's bare 1.2 is ==1.2 (= 1.2.0)
    return atom


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.lists(poetry_atoms(), min_size=1, max_size=2), min_size=1, max_size=2),
    st.lists(semver_versions(prerelease=False), min_size=1, max_size=12),
)
def test_poetry_membership_matches_node_semver(atoms: list[list[str]], versions: list[str]) -> None:
    poetry = " || ".join(", ".join(group) for group in atoms)
    npm = " || ".join(" ".join(_as_npm(a) for a in group) for group in atoms)
    intervals = poetry_intervals(poetry)
    assert intervals is not None, poetry
    for text in versions:
        expected = bool(nodesemver.satisfies(text, npm, loose=False))
        assert _holds(intervals, version_key(Version(text))) == expected, (poetry, npm, text)


@pytest.mark.parametrize(
    ("old", "new", "subset", "floor"),
    [
        ("^8.2.3", "^8.5.0", True, "higher"),  # the known false reject: a narrower range
        ("^8.5.0", "^8.2.3", False, "lower"),
        ("~1.2.3", "~1.2.5", True, "higher"),
        ("^0.2.3", "^0.3.0", False, "higher"),  # disjoint: an upgrade, not a loosening
        ("*", "^1.0", True, "higher"),
        ("^1.2", "^1.2 || ^2.0", False, "same"),
        (">=1.2,<2.0", "^1.2", True, "same"),
        ("1.2.*", "~1.2", True, "higher"),  # 1.2.* admits 1.2rc1, ~1.2 starts at 1.2
    ],
)
def test_poetry_relations(old: str, new: str, subset: bool, floor: str) -> None:
    relation = relate_ranges("pypi", new, old)
    assert relation is not None
    assert (relation.subset, relation.floor) == (subset, floor)


@pytest.mark.parametrize(
    ("old", "new", "subset", "floor", "ceiling_dropped"),
    [
        ("~=2.31", "~=2.32", True, "higher", False),
        ("~=2.31.0", "~=2.31", False, "same", False),  # <2.32 widened to <3
        ("==2.32.*", ">=2.32", False, "higher", True),  # ==2.32.* admits 2.32rc1
        (">=2.31,<3", ">=2.30,<3", False, "lower", False),
        ("!=2.31.1,>=2.31", ">=2.31", False, "same", False),
    ],
)
def test_pep440_relations(
    old: str, new: str, subset: bool, floor: str, ceiling_dropped: bool
) -> None:
    relation = relate_ranges("pypi", new, old)
    assert relation is not None
    assert (relation.subset, relation.floor, relation.ceiling_dropped) == (
        subset,
        floor,
        ceiling_dropped,
    )


def test_npm_relations_and_floor_major() -> None:
    narrower = relate_ranges("npm", "^8.5.0", "^8.2.3")
    assert narrower is not None
    assert narrower.narrowed
    assert narrower.floor == "higher"
    wider = relate_ranges("npm", "^8.2.3 || ^9.0.0", "^8.2.3")
    assert wider is not None
    assert wider.widened
    assert wider.ceiling_dropped is False
    assert relate_ranges("npm", "latest", "^1.0.0") is None
    assert floor_major("npm", "^8.2.3") == 8
    assert floor_major("pypi", "^8.2.3") == 8
    assert floor_major("pypi", "<2") == 0  # from 0.dev0, the smallest version
    assert floor_major("npm", "<2.0.0") is None


def test_not_an_interval_is_cannot_tell() -> None:
    assert pep440_intervals(">1.0rc1") is None  # PEP 440 excludes 1.0+local, 1.0.post1
    assert pep440_intervals("===1.0") is None
    assert poetry_intervals("^1.2 |& 2") is None
    assert complement([]) == [(None, False, None, False)]
    assert pep440_intervals("<0.dev0") == []  # nothing sorts below 0.dev0


def test_poetry_constraints_satisfy() -> None:
    assert satisfies("pypi", "8.5.1", "^8.2.3") is True
    assert satisfies("pypi", "9.0.0", "^8.2.3") is False
    assert satisfies("pypi", "9.0.0rc1", "^8.2.3") is False  # <9 leaves out 9's pre-releases
    assert satisfies("pypi", "0.2.9", "^0.2.3") is True
    assert satisfies("pypi", "0.3.0", "^0.2.3") is False


def test_relate_is_exact_on_merged_unions() -> None:
    a = pep440_intervals(">=1.0,<2.0")
    b = pep440_intervals(">=1.0,<1.5")
    c = pep440_intervals(">=1.5.dev0,<2.0")  # <1.5 leaves out 1.5's pre-releases
    assert a is not None
    assert b is not None
    assert c is not None
    assert relate(a, b + c).equal


def test_invalid_versions_are_not_admitted() -> None:
    with pytest.raises(InvalidVersion):
        Version("not-a-version")
    assert satisfies("pypi", "not-a-version", "^1.0") is None
