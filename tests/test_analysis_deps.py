"""Dependency parsing and comparison: packaging (PEP 440/508), node-semver, lock files."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis._deps import (
    MAX_FILE_BYTES,
    MAX_LOCK_FILE_BYTES,
    MAX_NPM_RANGES,
    MAX_REQUIREMENT_LINES,
    DependencySyntaxError,
    compare_locks,
    compare_manifests,
    file_kind,
    lock_mismatches,
    marker_never_holds,
    npm_exact,
    npm_range_subset,
    parse_dependency_file,
    parse_requirements,
    pep440_exact,
    pep440_subset,
    satisfies,
)
from vsh_ai.analysis._deps_pip import _requirement, _requirement_line


def parse(path: str, text: str):  # type: ignore[no-untyped-def]
    return parse_dependency_file(path, text.encode())


def changes(path: str, before: str, after: str):  # type: ignore[no-untyped-def]
    return compare_manifests(parse(path, before), parse(path, after))


# -- requirement files -------------------------------------------------------------------


def test_requirements_file_grammar() -> None:
    text = (
        "# pinned\n"
        "--require-hashes\n"
        "--index-url https://pypi.org/simple\n"
        "-c constraints.txt\n"
        "Requests[SOCKS,security]==2.31.0 ; python_version >= '3.8' \\\n"
        "    --hash=sha256:aaa \\\n"
        "    --hash sha256:bbb  # trailing comment\n"
        "-e ./vendor/lib\n"
        "git+https://github.com/x/y.git@v1#egg=yy\n"
        "foo @ https://files.example/foo-1.0-py3-none-any.whl\n"
        "./local/pkg-1.0.tar.gz\n"
    )
    manifest = parse("requirements.txt", text)
    by_name = {d.name: d for d in manifest.dependencies}
    req = by_name["requests"]
    assert req.spec == "==2.31.0"
    assert req.pin == "2.31.0"
    assert req.extras == ("security", "socks")
    assert req.marker == 'python_version >= "3.8"'
    assert req.hashes == ("--hash=sha256:aaa", "--hash=sha256:bbb")
    assert by_name["lib"].source == "editable:./vendor/lib"
    assert by_name["yy"].source
    assert by_name["yy"].source.startswith("git+")
    assert by_name["foo"].source == "https://files.example/foo-1.0-py3-none-any.whl"
    assert by_name["pkg"].source == "./local/pkg-1.0.tar.gz"
    assert manifest.options == (
        "--require-hashes",
        "--index-url=https://pypi.org/simple",
        "-c=constraints.txt",
    )


def test_spelling_variants_are_the_same_requirement() -> None:
    a = parse("requirements.txt", "Django_Rest.Framework == 3.15.1\n")
    b = parse("requirements.txt", "django-rest-framework==3.15.1   # same\n")
    assert compare_manifests(a, b).changes == ()


@pytest.mark.parametrize(
    ("spec", "pin"),
    [
        ("==2.31.0", "2.31.0"),
        ("===2.31.0", "2.31.0"),
        ("==2.32.*", None),
        (">=2.31,<3", None),
        ("==2.31.0,!=2.31.1", None),
        ("~=2.31.0", None),
        ("", None),
    ],
)
def test_pep440_exact(spec: str, pin: str | None) -> None:
    assert pep440_exact(spec) == pin


@pytest.mark.parametrize(
    ("new", "old", "subset"),
    [
        ("==2.32.3", ">=2.31,<3", True),
        ("==2.32.*", "==2.31.0", False),
        (">=2.31", "==2.31.0", False),
        ("~=2.31.0", ">=2.31,<2.32", True),
        ("~=2.31", ">=2.31,<2.32", False),
        (">=2.31,<2.33", ">=2.30,<3", True),
        (">=2.31,!=2.31.5,<2.40", ">=2.31,<2.40", True),
        (">=2.31,<2.40", ">=2.31,!=2.31.5,<2.40", False),
        ("", ">=1", False),
    ],
)
def test_pep440_subset(new: str, old: str, subset: bool) -> None:
    assert pep440_subset(new, old) is subset


@pytest.mark.parametrize(
    ("new", "old", "subset"),
    [
        (">=4.17.21", "^4.17.20", False),
        ("4.19.2 || >=0.0.0", "^4.17.20", False),
        ("^4.17.21", "^4.17.20", True),
        ("4.17.21 || 4.18.0", "^4.17.20", True),
        ("~4.17.21", "^4.17.20", True),
        ("4.17.21 - 4.18.0", "^4.17.20", True),
        ("*", "^4.17.20", False),
        ("4.x", "^4.17.20", False),
        ("^5.0.0", "^4.17.20", False),
    ],
)
def test_npm_range_subset(new: str, old: str, subset: bool) -> None:
    assert npm_range_subset(new, old) is subset


@pytest.mark.parametrize(
    ("spec", "pin"),
    [
        ("4.17.21", "4.17.21"),
        ("=4.17.21", "4.17.21"),
        ("v4.17.21", "4.17.21"),
        ("^4.17.21", None),
        ("4.17", None),
        ("latest", None),
        ("github:a/b", None),
        ("4.17.21 || 5.0.0", None),
    ],
)
def test_npm_exact(spec: str, pin: str | None) -> None:
    assert npm_exact(spec) == pin


@pytest.mark.parametrize(
    ("marker", "never"),
    [
        ('python_version < "3"', True),
        ('python_version < "3.0"', True),
        ('python_version >= "3.8" and python_version < "3.0"', True),
        ('sys_platform == "win32" and sys_platform == "linux"', True),
        ('platform_python_implementation == "Jython"', True),
        ('sys_platform == "win32"', False),
        ('python_version >= "3.12"', False),
        ('extra == "dev"', False),
    ],
)
def test_marker_never_holds(marker: str, never: bool) -> None:
    assert marker_never_holds(marker) is never


# -- comparisons ---------------------------------------------------------------------------


def test_bump_facts() -> None:
    (change,) = changes("requirements.txt", "requests==2.31.0\n", "requests==2.32.3\n").changes
    assert change.kind == "changed"
    assert change.same_source
    assert change.same_extras
    assert (change.old_pin, change.new_pin, change.newer, change.major_bump) == (
        "2.31.0",
        "2.32.3",
        True,
        False,
    )
    assert change.bump_problems(allow_major=False) == []
    assert not change.loosened


@pytest.mark.parametrize(
    ("before", "after", "problem"),
    [
        ("requests==2.31.0\n", "requests==2.32.*\n", "no longer an exact pin"),
        ("requests==2.31.0\n", "requests[socks]==2.32.3\n", "extras"),
        ("requests==2.31.0\n", "requests==2.32.3; python_version<'3'\n", "marker"),
        ("requests==2.31.0 --hash=sha256:a\n", "requests==2.32.3\n", "drops its --hash"),
        ("requests==2.31.0\n", "requests==2.30.0\n", "newer"),
        ("requests==2.31.0\n", "requests==3.0.0\n", "major"),
        ("requests>=2.31\n", "requests==2.32.0\n", "not pinned exactly"),
        ("requests==2.31.0\n", "requests @ https://x.example/r.whl\n", "source"),
    ],
)
def test_bump_problems(before: str, after: str, problem: str) -> None:
    (change,) = changes("requirements.txt", before, after).changes
    assert any(problem in p for p in change.bump_problems(allow_major=False))


def test_hash_states() -> None:
    kept = changes(
        "requirements.txt", "a==1.0 --hash=sha256:x\n", "a==1.1 --hash=sha256:x --hash=sha256:y\n"
    )
    assert kept.changes[0].hashes == "kept"
    replaced = changes("requirements.txt", "a==1.0 --hash=sha256:x\n", "a==1.1 --hash=sha256:y\n")
    assert replaced.changes[0].hashes == "replaced"
    assert replaced.changes[0].bump_problems(allow_major=False) == []


@pytest.mark.parametrize(
    ("before", "after", "loosened"),
    [
        ("==2.31.0", ">=2.31.0", True),
        ("==2.31.0", "", True),
        (">=2.31,<3", ">=2.31", True),
        (">=2.31,<3", ">=2.0,<3", True),
        (">=2.31,<3", ">=2.32,<3", False),
        (">=2.31,<3", ">=3,<4", False),
        ("==2.31.0", "==2.32.0", False),
    ],
)
def test_loosened(before: str, after: str, loosened: bool) -> None:
    (change,) = changes("requirements.txt", f"requests{before}\n", f"requests{after}\n").changes
    assert change.loosened is loosened


def test_pyproject_sections_sources_and_indexes() -> None:
    text = """
[project]
name = "x"
dependencies = ["requests==2.31.0"]
[project.optional-dependencies]
dev = ["pytest==8.1.1"]
[dependency-groups]
lint = ["ruff==0.6.0", {include-group = "dev"}]
[build-system]
requires = ["hatchling==1.24.0"]
[tool.uv.sources]
requests = { path = "../requests" }
[[tool.uv.index]]
url = "https://mirror.example/simple"
"""
    manifest = parse("pyproject.toml", text)
    sections = {(d.section, d.name): d for d in manifest.dependencies}
    assert sections[("project.dependencies", "requests")].source == 'uv:{"path": "../requests"}'
    assert ("project.optional-dependencies.dev", "pytest") in sections
    assert ("dependency-groups.lint", "ruff") in sections
    assert ("build-system.requires", "hatchling") in sections
    assert any("tool.uv.index" in o for o in manifest.options)
    assert any("include-group" in o for o in manifest.options)
    assert manifest.rest == {"project.name": '"x"'}


def test_poetry_dependencies() -> None:
    before = (
        '[tool.poetry.dependencies]\npython = "^3.11"\nrequests = "2.31.0"\n'
        'rich = {version = "13.7.0", extras = ["jupyter"]}\n'
    )
    after = '[tool.poetry.dependencies]\npython = "^3.11"\nrequests = "2.32.3"\nrich = {git = "https://github.com/x/rich"}\n'
    diff = changes("pyproject.toml", before, after)
    by_name = {c.name: c for c in diff.changes}
    assert by_name["requests"].bump_problems(allow_major=False) == []
    assert not by_name["rich"].same_source
    assert not by_name["rich"].same_extras


def test_pip_config_index_settings() -> None:
    manifest = parse(
        "pip.ini", "[global]\nindex_url = https://mirror.example/simple\ntimeout = 60\n"
    )
    assert manifest.options == ("[global] index-url = https://mirror.example/simple",)
    assert manifest.rest == {"global.timeout": "60"}


def test_package_json_sections_scripts_and_overrides() -> None:
    before = {"name": "a", "scripts": {"build": "vite"}, "dependencies": {"lodash": "4.17.20"}}
    after = {
        "name": "a",
        "scripts": {"build": "vite", "prepare": "node x.js"},
        "dependencies": {"lodash": "4.17.21"},
        "devDependencies": {"vitest": "1.0.0"},
        "overrides": {"minimist": "github:evil/minimist"},
    }
    diff = changes("package.json", json.dumps(before), json.dumps(after))
    assert diff.scripts_added == ("prepare",)
    by_key = {(c.section, c.name): c for c in diff.changes}
    assert by_key[("dependencies", "lodash")].bump_problems(allow_major=False) == []
    assert by_key[("devDependencies", "vitest")].kind == "added"
    assert by_key[("overrides", "minimist")].after is not None
    assert by_key[("overrides", "minimist")].after.source == "github:evil/minimist"
    assert "scripts.prepare" in diff.other_keys


# -- lock files ------------------------------------------------------------------------------


def _lock(version: str, *, v1: bool = False, install: bool = False) -> str:
    entry = {
        "version": version,
        "resolved": f"https://registry.npmjs.org/lodash/-/lodash-{version}.tgz",
        "integrity": f"sha512-{version}",
        **({"hasInstallScript": True} if install else {}),
    }
    if v1:
        return json.dumps({"lockfileVersion": 1, "dependencies": {"lodash": entry}})
    return json.dumps(
        {
            "lockfileVersion": 3,
            "packages": {"": {"dependencies": {"lodash": version}}, "node_modules/lodash": entry},
        }
    )


@pytest.mark.parametrize("v1", [False, True])
def test_package_lock_bump(v1: bool) -> None:
    before, after = (
        parse("package-lock.json", _lock("4.17.20", v1=v1)),
        parse("package-lock.json", _lock("4.17.21", v1=v1)),
    )
    entries = [c for c in compare_locks(before, after) if c.key == "node_modules/lodash"]
    assert entries
    assert entries[0].problems("npm", allow_major=False) == []
    manifest = parse("package.json", json.dumps({"dependencies": {"lodash": "4.17.21"}}))
    assert lock_mismatches(manifest, after) == []
    stale = parse("package.json", json.dumps({"dependencies": {"lodash": "4.17.22"}}))
    assert lock_mismatches(stale, after)


def test_lock_entry_problems() -> None:
    before = parse("package-lock.json", _lock("4.17.20"))
    for after_text, problem in [
        (_lock("4.17.19"), "newer"),
        (_lock("5.0.0"), "major"),
        (_lock("4.17.21", install=True), "install script"),
        (_lock("4.17.21").replace("registry.npmjs.org", "npm.evil.example"), "source"),
        (_lock("4.17.21").replace('"sha512-4.17.21"', '"sha512-4.17.20"'), "old integrity"),
    ]:
        after = parse("package-lock.json", after_text)
        (entry,) = [c for c in compare_locks(before, after) if c.key == "node_modules/lodash"]
        assert any(problem in p for p in entry.problems("npm", allow_major=False)), problem


def test_uv_and_poetry_locks() -> None:
    uv = """version = 1
[[package]]
name = "Requests"
version = "2.32.3"
source = { registry = "https://pypi.org/simple" }
wheels = [{ url = "https://x/r.whl", hash = "sha256:abc" }]
"""
    lock = parse("uv.lock", uv)
    assert lock.locked["requests"].version == "2.32.3"
    assert lock.locked["requests"].integrity == ("sha256:abc",)
    poetry = """[[package]]
name = "requests"
version = "2.32.3"
files = [{file = "r.whl", hash = "sha256:def"}]
[metadata]
content-hash = "x"
"""
    lock = parse("poetry.lock", poetry)
    assert lock.locked["requests"].integrity == ("sha256:def",)
    manifest = parse("pyproject.toml", '[project]\nname="x"\ndependencies=["requests==2.31.0"]\n')
    assert lock_mismatches(manifest, lock)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("package.json", "{"),
        ("package.json", "[]"),
        ("pyproject.toml", "[project\n"),
        ("pyproject.toml", "[project]\ndependencies = 'x'\n"),
        ("requirements.txt", "not a requirement !!\n"),
        ("uv.lock", "package = 3\n"),
        ("pip.conf", "index-url = x\n"),
    ],
)
def test_syntax_errors_raise(path: str, text: str) -> None:
    with pytest.raises(DependencySyntaxError):
        parse(path, text)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("requirements.txt", "requirements"),
        ("a/requirements-dev.in", "requirements"),
        ("constraints.txt", "requirements"),
        ("pkg/package.json", "package.json"),
        ("npm-shrinkwrap.json", "package-lock"),
        ("pip.ini", "pip-config"),
        ("README.txt", None),
    ],
)
def test_file_kind(path: str, kind: str | None) -> None:
    assert file_kind(path) == kind


_VERSIONS = st.tuples(*(st.integers(min_value=0, max_value=30) for _ in range(3)))


@given(old=_VERSIONS, new=_VERSIONS)
def test_property_exact_to_exact_bump(old: tuple[int, int, int], new: tuple[int, int, int]) -> None:
    a, b = ".".join(map(str, old)), ".".join(map(str, new))
    for path, fmt in [
        ("requirements.txt", "x=={}\n"),
        ("package.json", '{{"dependencies": {{"x": "{}"}}}}'),
    ]:
        diff = changes(path, fmt.format(a), fmt.format(b))
        if old == new:
            assert diff.changes == ()
            continue
        (change,) = diff.changes
        problems = change.bump_problems(allow_major=False)
        assert (problems == []) == (new > old and new[0] == old[0]), (a, b, problems)
        assert change.bump_problems(allow_major=True) == [] or new < old


@given(low=_VERSIONS, high=_VERSIONS, probe=_VERSIONS)
def test_property_subset_agrees_with_membership(
    low: tuple[int, int, int], high: tuple[int, int, int], probe: tuple[int, int, int]
) -> None:
    a, b, p = (".".join(map(str, v)) for v in (low, high, probe))
    if not low < high:
        return
    old = f">={a},<{b}"
    assert pep440_subset(f"=={p}", old) is (satisfies("pypi", p, old) is True)
    assert npm_range_subset(p, f">={a} <{b}") is (satisfies("npm", p, f">={a} <{b}") is True)


# -- bounds and memoisation --------------------------------------------------------------


def _fill(limit: int, line: Callable[[int], str]) -> str:
    out: list[str] = []
    size = 0
    while size + len(line(len(out))) <= limit:
        out.append(line(len(out)))
        size += len(out[-1])
    return "".join(out)


def test_file_size_limits_per_kind() -> None:
    # At 8 MiB a requirements file took about 24 s per side; now each kind is bounded.
    pins = _fill(MAX_FILE_BYTES, lambda i: f"package-number-{i}==1.0.{i % 9}\n")
    assert len(parse("requirements.txt", pins).dependencies) == pins.count("\n")
    for path in ("requirements.txt", "pyproject.toml", "package.json", "pip.conf"):
        with pytest.raises(DependencySyntaxError, match="too large to analyse"):
            parse_dependency_file(path, b" " * (MAX_FILE_BYTES + 1))
    # Lock files are often larger than manifests and cheaper per byte: their own limits.
    entries = {f"node_modules/p{i}": {"version": "1.0.0"} for i in range(12_000)}
    lock = json.dumps({"lockfileVersion": 3, "packages": {"": {}, **entries}})
    assert MAX_FILE_BYTES < len(lock) <= MAX_LOCK_FILE_BYTES["package-lock"]
    assert len(parse("package-lock.json", lock).locked) == 12_001
    for path, kind in (
        ("package-lock.json", "package-lock"),
        ("uv.lock", "uv.lock"),
        ("poetry.lock", "poetry.lock"),
    ):
        with pytest.raises(DependencySyntaxError, match="too large to analyse"):
            parse_dependency_file(path, b" " * (MAX_LOCK_FILE_BYTES[kind] + 1))


def test_too_many_requirement_lines_are_unparsable() -> None:
    names = "".join(f"p{i}\n" for i in range(MAX_REQUIREMENT_LINES))
    assert len(parse("requirements.txt", names).dependencies) == MAX_REQUIREMENT_LINES
    with pytest.raises(DependencySyntaxError, match=r"more than 10000 requirement lines"):
        parse("requirements.txt", names + "--index-url https://example.org/simple\n")
    commented = "#\n\n" * 20_000 + names
    assert len(parse("requirements.txt", commented).dependencies) == MAX_REQUIREMENT_LINES


@pytest.mark.parametrize(
    ("name", "spec"), [("npm_intervals", "^1.2.3 || ~0.4.1"), ("python_intervals", ">=2.1,<3")]
)
def test_remembered_ranges_are_each_callers_own(name: str, spec: str) -> None:
    """Issue 18: ranges are parsed once per process; a caller changing its list changes
    nobody else's."""
    from vsh_ai.analysis import _deps_ranges

    remembered = getattr(_deps_ranges, name)
    first = remembered(spec)
    assert first == remembered.__wrapped__(spec)
    assert first
    first.clear()
    assert remembered(spec) == remembered.__wrapped__(spec) != []
    assert remembered("not a range !") is None


def test_too_many_npm_ranges_are_unparsable() -> None:
    """Issue 18 (a red team's shape): 2,000 dependencies of 8 alternatives each took 2 s to
    compare; the alternatives of every range in a manifest count toward the bound."""
    half = MAX_NPM_RANGES // 2
    deps = {f"p{i}": f"^1.{i}.0 || ^2.{i}.0" for i in range(half)}
    assert len(parse("package.json", json.dumps({"dependencies": deps})).dependencies) == half
    dev = {"devDependencies": {"x": "*"}}
    with pytest.raises(DependencySyntaxError, match=rf"more than {MAX_NPM_RANGES} version ranges"):
        parse("package.json", json.dumps({"dependencies": deps, **dev}))


def test_memoised_requirement_parsing_gives_the_same_answers() -> None:
    # An edit shares most lines with its old version: unchanged lines are parsed once.
    text = "".join(
        f"Package_{i}[B,a]>=1.{i % 7},!=1.5 ; python_version >= '3.{i % 12}'"
        f" --hash=sha256:{i:064x}\n"
        for i in range(1000)
    )
    text += "./local/pkg.tar.gz\nhttps://example.org/x-1.0.whl\n"
    _requirement.cache_clear()
    _requirement_line.cache_clear()
    cold = parse("requirements.txt", text)
    hits = _requirement_line.cache_info().hits
    edited = text.replace(">=1.3,", ">=1.4,", 1)
    warm = parse("requirements.txt", edited)
    assert _requirement_line.cache_info().hits - hits == 1001, "only the edited line is new"
    assert parse("requirements.txt", text) == cold
    _requirement.cache_clear()
    _requirement_line.cache_clear()
    assert parse("requirements.txt", edited) == warm, "cached and fresh parses agree"
    first = cold.dependencies[0]
    assert (first.name, first.extras, first.spec) == ("package-0", ("a", "b"), "!=1.5,>=1.0")
    assert first.hashes == (f"--hash=sha256:{0:064x}",)
    assert cold.dependencies[-2].source == "./local/pkg.tar.gz"
    assert [c.name for c in compare_manifests(cold, warm).changes] == ["package-3"]


def test_invalid_requirements_stay_invalid_when_memoised() -> None:
    for _ in range(2):
        with pytest.raises(DependencySyntaxError, match="not a requirement"):
            parse("requirements.txt", "ok==1\nnot a requirement ==\n")
    lenient = parse_requirements("ok==1\nnot a requirement ==\n", strict=False)
    assert [d.name for d in lenient.dependencies] == ["ok"]


def test_a_name_repeated_thousands_of_times_is_keyed_in_linear_time() -> None:
    # Keys of repeated names were found by probing '#2', '#3', ... from the start each
    # time: 10,000 lines of one name took 17 s. The keys themselves must not change.
    before = parse("requirements.txt", "p\n" * MAX_REQUIREMENT_LINES)
    keys = list(before.by_key())
    assert keys[:3] == [("requirements", "p"), ("requirements", "p#2"), ("requirements", "p#3")]
    assert keys[-1] == ("requirements", f"p#{MAX_REQUIREMENT_LINES}")
    after = parse("requirements.txt", "p\n" * 5000 + "p==1\n" + "p\n" * 4999)
    [change] = compare_manifests(before, after).changes
    assert (change.name, change.after.spec if change.after else None) == ("p", "==1")
    mixed = parse("requirements.txt", "a\nb\na ; os_name == 'nt'\nb[x]\na[y]\n")
    assert [key[1] for key in mixed.by_key()] == ["a", "b", "a#2", "b#2", "a#3"]
