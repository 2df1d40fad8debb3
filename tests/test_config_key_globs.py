"""Config-key patterns match in linear time (RE2), with the meaning the docs give them.

Keys come from files the agent writes. A keep pattern such as ``**.*a*a*a*a*a*a*a*a*a*a*b``
compiled for Python's backtracking ``re`` took, with the GIL held, 2 s on one 30-character
key, 15 s at 35 and 72 s at 40 (measured by hand on a loaded 2-core machine); through RE2
each key below takes well under a millisecond. No timing is asserted here: the crafted
cases assert results, and under a backtracking matcher this module would run for many
minutes.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis._config import key_matches, name_matches
from vsh_ai.rules import AllowConfig, ConfigInvariants, KeyConstraint, RuleSet
from vsh_ai.rules._config import _covers

STARS = "**." + "*a" * 10 + "*b"  # ten stars inside one segment, then a 'b' that is missing
LONG = "a" * 40


def toml(values: dict[str, int]) -> str:
    return "".join(f"{key} = {value}\n" for key, value in values.items())


# -- keep patterns (ConfigInvariants) -------------------------------------------------------


@pytest.mark.anyio
async def test_a_crafted_keep_pattern_on_long_agent_keys(evidence_for: Any) -> None:
    keys = {f"{LONG[:n]}": 1 for n in range(30, 41)}  # 11 keys that nearly match
    keys[LONG[:39] + "b"] = 1  # and one that does
    before = toml(keys)
    after = toml({key: 2 for key in keys})
    evidence = await evidence_for({"c.toml": before}, f"vsh_write('/workspace/c.toml', {after!r})")
    verdict = ConfigInvariants(globs=("c.toml",), keep=(STARS,)).check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert f"{LONG[:39]}b must keep the current value" in verdict.reason
    assert f"{LONG} " not in verdict.reason
    assert f"{LONG}," not in verdict.reason


@pytest.mark.parametrize(
    ("pattern", "key", "covered"),
    [
        (STARS, LONG, False),
        (STARS, LONG + "b", True),
        (STARS, "x." + LONG + "b", True),
        (STARS, "x." + LONG + "b.deeper[3]", True),  # everything below a covered key
        (STARS, ("a." * 20) + LONG, False),
        ("**.*tls*", "server.TLS.enabled", True),
        ("**.*tls*", "upstreams[0].verify_tls", True),
        ("**.*tls*", "server.port", False),
        ("server.**", "server", True),  # fixed: a trailing '**' used to match nothing
        ("server.**", "server.tls.enabled", True),
        ("server.**", "servers.tls", False),
        ("**", "anything.at[0].all", True),
        ("**.**", "a", True),
        ("a.**.b", "a.b", True),
        ("a.**.b", "a.x.y.b", True),
        ("a.**.b", "a.x.y.c", False),
        ("*.port", "server.port", True),
        ("*.port", "a.server.port", False),
        ("**.port", "port", True),
        ("tls", "TLS", True),
        ("tls", "tls_min", False),
        ("**.*tls*", "x.\ud800tls", True),  # a lone surrogate (JSON "\ud800") cannot crash
    ],
)
def test_keep_pattern_meaning(pattern: str, key: str, covered: bool) -> None:
    assert _covers((pattern,), key) is covered
    assert _covers(("nothing.here", pattern), key) is covered


def test_the_shipped_keep_lists_cover_what_they_name() -> None:
    from vsh_ai import load_judge

    judge = load_judge("judges/service-config.toml", skip_llm=True)
    assert isinstance(judge, RuleSet)
    rules = judge.rules
    keeps = [rule.keep for rule in rules if isinstance(rule, ConfigInvariants) and rule.keep]
    assert keeps
    security = next(keep for keep in keeps if "**.*tls*" in keep)
    assert _covers(security, "server.tls_verify")
    assert _covers(security, "Server.Admin.Port")
    assert not _covers(security, "server.timeout_s")
    assert not _covers(security, "x" * 5000)


# -- may_change name globs (AllowConfig) ----------------------------------------------------


@pytest.mark.anyio
async def test_a_crafted_name_glob_on_long_agent_keys(evidence_for: Any) -> None:
    rule = AllowConfig(
        paths=("c.toml",), may_change={STARS: KeyConstraint(type="integer")}, id="stars"
    )
    before = toml({LONG: 1, LONG[:39] + "b": 1})
    proven = await evidence_for(
        {"c.toml": before},
        f"vsh_write('/workspace/c.toml', {toml({LONG: 1, LONG[:39] + 'b': 2})!r})",
    )
    assert RuleSet([rule]).evaluate(proven).decision == "approve"
    unproven = await evidence_for(
        {"c.toml": before},
        f"vsh_write('/workspace/c.toml', {toml({LONG: 2, LONG[:39] + 'b': 1})!r})",
    )
    verdict = RuleSet([rule]).evaluate(unproven)
    assert verdict.decision == "review"
    assert f"{LONG} changed (1 -> 2)" in verdict.reason


GLOB_CHARS = st.sampled_from("ab*?.-_é")
NAME_CHARS = st.sampled_from("ab.-_é\n")


@given(st.text(GLOB_CHARS, min_size=1, max_size=12), st.text(NAME_CHARS, max_size=30))
def test_name_globs_match_exactly_what_fnmatchcase_matches(glob: str, name: str) -> None:
    assert name_matches(glob, name) is fnmatchcase(name, glob)


def test_name_globs_on_long_names() -> None:
    glob = "*a" * 10 + "*b"
    assert not name_matches(glob, "a" * 5000)
    assert name_matches(glob, "a" * 5000 + "b")
    assert name_matches("*_timeout_s", "read_timeout_s")
    assert not name_matches("*_timeout_s", "read_timeout_ms")
    assert name_matches("*x", "\ud800x")


# -- structural key patterns (analysis key_matches) -------------------------------------------


def _reference(pattern: str, key: str) -> bool:
    """The recursive matcher key_matches replaced (exact, polynomial in the key's depth)."""
    from vsh_ai.analysis._config_keys import _segments

    @cache
    def match(p: int, k: int) -> bool:
        pat, seg = _segments(pattern, True), _segments(key, False)
        if p == len(pat):
            return k == len(seg)
        head = pat[p]
        if head[0] == "any":
            return any(match(p + 1, start) for start in range(k, len(seg) + 1))
        if k == len(seg):
            return False
        if head[0] == "any_key":
            ok = seg[k][0] == "key"
        elif head[0] == "any_index":
            ok = seg[k][0] == "index"
        else:
            ok = head == seg[k]
        return ok and match(p + 1, k + 1)

    return match(0, 0)


PATTERN_SEGMENTS = st.sampled_from(["a", "b", "*", "**", "[*]", "[0]", "[1]", '"a.b"', '"*"'])
KEY_SEGMENTS = st.sampled_from(["a", "b", "c", "[0]", "[1]", '"a.b"', '"*"', '"\\u0000"'])


def _join(segments: list[str]) -> str:
    out = ""
    for segment in segments:
        out += segment if segment.startswith("[") or not out else "." + segment
    return out


@given(st.lists(PATTERN_SEGMENTS, min_size=1, max_size=6), st.lists(KEY_SEGMENTS, max_size=8))
def test_key_patterns_match_exactly_as_the_segment_matcher(
    pattern_parts: list[str], key_parts: list[str]
) -> None:
    pattern, key = _join(pattern_parts), _join(key_parts)
    try:
        expected = _reference(pattern, key)
    except ValueError:
        return  # not a valid pattern/key spelling (e.g. a leading index after a dot)
    assert key_matches(pattern, key) is expected, (pattern, key)


def test_deep_keys_match_in_linear_time() -> None:
    deep = ".".join(["a"] * 200)
    assert not key_matches("**.*.**.*.**.*.**.*.**.b", deep)
    assert key_matches("**.*.**.*.**.*.**.*.**.a", deep)
    assert key_matches('**."a.b"', 'x.y."a.b"')
    assert not key_matches('**."a.b"', "x.y.a.b")
    assert key_matches("a[*].b", "a[12].b") and not key_matches("a[*].b", "a.x.b")  # noqa: PT018
    assert json.dumps(key_matches("*", "")) == "false"
