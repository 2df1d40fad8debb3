"""Red-team classes of round 5 through the bundled judge, on real VSH evidence.

A higher floor must not hide a higher ceiling (``~18.2.0`` -> ``^18.2.1``); a local
version label is not an index release; a lock hash is one file's (another entry's hash,
a weaker algorithm, a re-hashed file name); a tarball of another package without an alias.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from test_rules_deps_integrity import (
    L20,
    L21,
    R31,
    REACT,
    Build,
    decide,
    package_json,
    package_lock,
    poetry_lock,
    poetry_pyproject,
    write,
)

from vsh_ai.analysis._deps import compare_locks, hash_owners, lock_resolution
from vsh_ai.analysis._deps import parse_dependency_file as parse
from vsh_ai.analysis._deps_ranges import ceiling_widened, npm_intervals, satisfies

pytestmark = pytest.mark.anyio


def pyproject(spec: str) -> str:
    return f'[project]\nname = "shop"\nversion = "1.4.0"\ndependencies = ["{spec}"]\n'


def npm_manifest(react: str) -> str:
    data = {"name": "ui", "version": "1.0.0", "dependencies": {"react": react}}
    return json.dumps(data, indent=2) + "\n"


# -- ceilings compared as well as floors ------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("~18.2.0", "^18.2.1"),  # r5: 18.2.x -> all of 18.x
        ("~4.18.2", "^4.19.2"),  # r4: the floor rises, the ceiling more
        ("^4.17.20", "^4.17.21 || ^5.0.0"),
        ("^4.17.20", "4.17.21 - 5"),
    ],
)
async def test_npm_range_whose_ceiling_rises_is_rejected_as_loosened(
    evidence_for: Build, old: str, new: str
) -> None:
    files = {"package.json": npm_manifest(old)}
    decision, reason = await decide(
        evidence_for, files, write("package.json", npm_manifest(new)), "Raise the floor."
    )
    assert decision == "reject", reason
    assert "upper bound rises further above its floor" in reason


@pytest.mark.parametrize(
    ("old", "new"),
    [("httpx~=0.27.0", "httpx~=0.27"), ("urllib3>=2.0.7,<3", "urllib3>=2.2.2,<4")],
)
async def test_pep440_range_whose_ceiling_rises_is_rejected(
    evidence_for: Build, old: str, new: str
) -> None:
    decision, reason = await decide(
        evidence_for,
        {"pyproject.toml": pyproject(old)},
        write("pyproject.toml", pyproject(new)),
        "Tidy.",
    )
    assert decision == "reject", reason
    assert "where the old range stopped below" in reason


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        ("package.json", "~4.18.2", "~4.19.2"),  # the same width, one minor up
        ("package.json", "^1.6.2", "^1.7.4"),
        ("pyproject.toml", "httpx~=0.27.0", "httpx~=0.27.2"),
        ("pyproject.toml", "requests~=2.31.0", "requests~=2.32.0"),
    ],
)
async def test_same_width_moves_stay_approved(
    evidence_for: Build, path: str, old: str, new: str
) -> None:
    text = npm_manifest if path == "package.json" else pyproject
    decision, reason = await decide(
        evidence_for, {path: text(old)}, write(path, text(new)), "Bump."
    )
    assert decision == "approve", reason


_part = st.integers(min_value=0, max_value=4)
_version = st.tuples(_part, _part, _part).map(lambda v: f"{v[0]}.{v[1]}.{v[2]}")


@settings(max_examples=300, deadline=None)
@given(old=_version, new=_version, old_op=st.sampled_from("^~"), new_op=st.sampled_from("^~"))
def test_a_widened_ceiling_is_a_true_statement(
    old: str, new: str, old_op: str, new_op: str
) -> None:
    """Whenever ceiling_widened says so, node-semver admits a version the old range kept
    out above its ceiling (the reject is true), and a subset is never called widened."""
    old_spec, new_spec = f"{old_op}{old}", f"{new_op}{new}"
    found = ceiling_widened("npm", new_spec, old_spec)
    if found is None:
        return
    old_ceiling, new_ceiling = found
    assert satisfies("npm", old_ceiling, old_spec) is False
    below_new = [f"{a}.{b}.{c}" for a in range(7) for b in range(7) for c in range(7)]
    escaped = [
        v
        for v in below_new
        if satisfies("npm", v, new_spec)
        and not satisfies("npm", v, old_spec)
        and tuple(map(int, v.split("."))) >= tuple(map(int, old_ceiling.split(".")))
    ]
    assert escaped, (old_spec, new_spec, found)
    assert npm_intervals(new_spec) is not None
    assert new_ceiling


# -- local version labels ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("cryptography==42.0.5", "cryptography==42.0.8+shop1"),
        ("requests>=2.31,<3", "requests==2.32.3+internal"),
        ("requests==2.31.0", "requests===2.32.3"),
    ],
)
async def test_local_versions_are_reviewed_by_a_rule(
    evidence_for: Build, old: str, new: str
) -> None:
    decision, reason = await decide(
        evidence_for,
        {"pyproject.toml": pyproject(old)},
        write("pyproject.toml", pyproject(new)),
        "Bump.",
    )
    assert decision == "review", reason
    assert "not a release of the public index" in reason


async def test_a_kept_local_label_is_still_a_bump(evidence_for: Build) -> None:
    decision, reason = await decide(
        evidence_for,
        {"pyproject.toml": pyproject("torch==2.1.0+cpu")},
        write("pyproject.toml", pyproject("torch==2.1.2+cpu")),
        "Bump torch.",
    )
    assert decision == "approve", reason


# -- a lock hash names one file ----------------------------------------------------------


def _bumped_lock(integrity: str, *, tarball: str = "") -> str:
    return package_lock("4.17.21", integrity, resolved=tarball)


async def test_a_new_hash_that_is_another_entrys_is_rejected(evidence_for: Build) -> None:
    files = {
        "package.json": package_json("4.17.20"),
        "package-lock.json": package_lock("4.17.20", L20),
    }
    code = write("package.json", package_json("4.17.21")) + write(
        "package-lock.json", _bumped_lock(REACT)
    )
    decision, reason = await decide(evidence_for, files, code, "Bump lodash.")
    assert decision == "reject", reason
    assert "node_modules/react" in reason


async def test_a_weaker_hash_algorithm_on_a_bump_is_reviewed(evidence_for: Build) -> None:
    files = {
        "package.json": package_json("4.17.20"),
        "package-lock.json": package_lock("4.17.20", L20),
    }
    code = write("package.json", package_json("4.17.21")) + write(
        "package-lock.json", _bumped_lock("sha1-4N2cMx9Kq7rX1fH4pV2zL8yW3dE=")
    )
    decision, reason = await decide(evidence_for, files, code, "Bump lodash.")
    assert decision == "review", reason
    assert "from sha512 to sha1, a weaker check" in reason


async def test_a_real_bump_with_its_own_hash_is_approved(evidence_for: Build) -> None:
    files = {
        "package.json": package_json("4.17.20"),
        "package-lock.json": package_lock("4.17.20", L20),
    }
    code = write("package.json", package_json("4.17.21")) + write(
        "package-lock.json", _bumped_lock(L21)
    )
    decision, reason = await decide(evidence_for, files, code, "Bump lodash.")
    assert decision == "approve", reason


async def test_another_packages_tarball_without_an_alias_is_rejected(evidence_for: Build) -> None:
    files = {
        "package.json": package_json("4.17.20"),
        "package-lock.json": package_lock("4.17.20", L20),
    }
    other = "https://registry.npmjs.org/lodash-es/-/lodash-es-4.17.21.tgz"
    code = write("package.json", package_json("4.17.21")) + write(
        "package-lock.json", _bumped_lock(L21, tarball=other)
    )
    decision, reason = await decide(evidence_for, files, code, "Bump lodash.")
    assert decision == "reject", reason
    assert "declares no alias" in reason


async def test_one_file_rehashed_under_the_same_version_is_rejected(evidence_for: Build) -> None:
    files = {
        "pyproject.toml": poetry_pyproject("^2.31.0"),
        "poetry.lock": poetry_lock("2.31.0", R31),
    }
    swapped = [R31[0], (R31[1][0], "sha256:" + "1e1da868" * 8)]
    decision, reason = await decide(
        evidence_for, files, write("poetry.lock", poetry_lock("2.31.0", swapped)), "Re-lock."
    )
    assert decision == "reject", reason
    assert "file hash of requests-2.31.0.tar.gz changes" in reason


def test_a_nested_copy_or_alias_of_the_same_tarball_shares_its_hash() -> None:
    """One tarball recorded twice (a nested copy) is one artifact: no finding."""
    before = json.loads(package_lock("4.17.20", L20))
    after = json.loads(package_lock("4.17.20", L20))
    after["packages"]["node_modules/react/node_modules/lodash"] = dict(
        after["packages"]["node_modules/lodash"]
    )
    old = parse("package-lock.json", json.dumps(before).encode())
    new = parse("package-lock.json", json.dumps(after).encode())
    owners = hash_owners(new)
    found = [lock_resolution(c, "npm", owners) for c in compare_locks(old, new)]
    assert found == [[]]
    assert len(owners[L20]) == 1


@settings(max_examples=200, deadline=None)
@given(old=_version, new=_version)
def test_pep440_widened_ceiling_agrees_with_packaging(old: str, new: str) -> None:
    """~=X.Y.Z -> ~=A.B: when called widened, packaging admits a version at or above the
    old ceiling that the old specifier refuses; a same-width move is never called so."""
    old_spec, new_spec = f"~={old}", f"~={new.rsplit('.', 1)[0]}"
    found = ceiling_widened("pypi", new_spec, old_spec)
    old_set, new_set = SpecifierSet(old_spec), SpecifierSet(new_spec)
    grid = [Version(f"{a}.{b}.{c}") for a in range(7) for b in range(7) for c in range(7)]
    if found is not None:
        ceiling = Version(found[0])
        assert any(v >= ceiling and v in new_set and v not in old_set for v in grid)
    shifted = f"~={Version(old).major}.{Version(old).minor + 1}.0"
    assert ceiling_widened("pypi", shifted, old_spec) is None


def test_a_bump_to_the_hash_a_nested_copy_of_that_version_has_is_no_finding() -> None:
    """lodash moves to 4.17.21, which a nested copy already records with the same hash:
    one artifact recorded twice, not another entry's hash."""
    nested = {
        "version": "4.17.21",
        "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
        "integrity": L21,
    }
    before = json.loads(package_lock("4.17.20", L20))
    after = json.loads(package_lock("4.17.21", L21))
    for lock in (before, after):
        lock["packages"]["node_modules/react/node_modules/lodash"] = dict(nested)
    old = parse("package-lock.json", json.dumps(before).encode())
    new = parse("package-lock.json", json.dumps(after).encode())
    owners = hash_owners(new)
    found = [lock_resolution(c, "npm", owners) for c in compare_locks(old, new)]
    assert found
    assert all(f == [] for f in found), found
    assert len(owners[L21]) == 1


async def test_a_new_lock_entry_is_reviewed_by_a_rule(evidence_for: Build) -> None:
    """r5: a nested package slipped into the lock with no manifest change goes to a person
    (a rule decides; it is not left unproven for a model)."""
    lock = json.loads(package_lock("4.17.20", L20))
    lock["packages"]["node_modules/lodash/node_modules/left-pad"] = {
        "version": "1.3.0",
        "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
        "integrity": "sha512-" + "X" * 86 + "==",
    }
    files = {
        "package.json": package_json("4.17.20"),
        "package-lock.json": package_lock("4.17.20", L20),
    }
    decision, reason = await decide(
        evidence_for,
        files,
        write("package-lock.json", json.dumps(lock, indent=2) + "\n"),
        "Re-lock.",
    )
    assert decision == "review", reason
    assert "dependency-risks" in reason or "is new" in reason
    assert "unproven" not in reason
