"""Config denials (ConfigInvariants) and the config allowance (AllowConfig), on real evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from vsh_ai import load_judge
from vsh_ai.rules import (
    AllowConfig,
    ConfigInvariants,
    ConfigSyntaxError,
    KeyConstraint,
    RuleSet,
    parse_config,
)

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
    "cfg.ini": "[tls\nenabled = true\n",  # no valid [section] header, no `key value` line
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
    pool = {"pool.size": KeyConstraint(type="integer", min=1, max=16)}
    strict = RuleSet([AllowConfig(paths=("cfg.*",), may_change=pool)])

    ok = await evidence_for({name: before}, write(name, allowed))
    assert rule.check(ok) is None
    assert strict.evaluate(ok).decision == "approve"

    bad = await evidence_for({name: before}, write(name, weakened))
    verdict = rule.check(bad)
    assert verdict is not None
    assert verdict.decision == "review"
    assert f"{name}: tls.enabled must keep the current value" in verdict.reason
    assert f"{name} must have tls.enabled = true" in verdict.reason
    verdict = strict.evaluate(bad)
    assert verdict.decision == "review"
    assert "tls.enabled changed (" in verdict.reason
    assert "but this work may not change it" in verdict.reason


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
    assert "duplicate key" in verdict.reason
    assert "tls" in verdict.reason


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
    rule = ConfigInvariants(globs=("cfg.*",), keep=("tls.enabled",), action="reject")
    verdict = rule.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert "tls.enabled" in verdict.reason
    shadow = {
        "pool.size": KeyConstraint(type="integer"),
        '"tls.enabled"': KeyConstraint(type="boolean", may_add=True),
    }
    proof = RuleSet([AllowConfig(paths=("cfg.*",), may_change=shadow)]).evaluate(evidence)
    assert proof.decision == "review", "the quoted key is another key: the change stays seen"
    assert "tls.enabled changed (True -> False)" in proof.reason


async def test_the_service_config_judge_rejects_tls_hidden_behind_a_quoted_key(
    evidence_for,
) -> None:
    before = "[server]\nport = 443\n\n[server.tls]\nenabled = true\n"
    after = 'server = { port = 443, tls = { enabled = false } }\n"server.tls.enabled" = true\n'
    evidence = await evidence_for({"config/app.toml": before}, write("config/app.toml", after))
    judge = load_judge(Path(__file__).parents[1] / "judges/service-config.toml", skip_llm=True)
    verdict = await judge.review(evidence)
    assert verdict.decision == "reject"
    assert "server.tls.enabled" in verdict.reason
    assert "must keep the current value" in verdict.reason


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
    port = KeyConstraint(type="integer")
    only_port = RuleSet([AllowConfig(paths=("c.toml",), may_change={"server.port": port})])
    verdict = only_port.evaluate(added)
    assert "extra.x changed (absent -> 1) but this work may not change it" in verdict.reason
    extra = {"server.port": port, "extra.*": KeyConstraint(type="integer", may_add=True)}
    may_add = RuleSet([AllowConfig(paths=("c.toml",), may_change=extra)])
    assert may_add.evaluate(added).decision == "approve"


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
    with pytest.raises(ValidationError, match="Extra inputs"):
        ConfigInvariants(globs=("*.toml",), may_change=("a",))  # the proof is allow_config
