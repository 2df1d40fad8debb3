"""Config rules on real-file shapes, on real VSH evidence: quantities with units, relative
bounds, enum tables, word vocabularies, documented options, keep-list tiers, and the
config_values denial (URL downgrades, limits, the file's own warnings)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis._config_context import (
    comment_warning,
    commented_option,
    commented_value,
    key_context,
)
from vsh_ai.analysis._config_words import canonical_key, word_match, words
from vsh_ai.analysis._quantities import duration_seconds, size_bytes
from vsh_ai.analysis._urls import url_changes
from vsh_ai.rules import AllowConfig, ConfigInvariants, ConfigValues, KeyConstraint, RuleSet

pytestmark = pytest.mark.anyio


def patch(path: str, old: str, new: str) -> str:
    return f"vsh_patch('/workspace/{path}', {old!r}, {new!r})\n"


def decide(rules: list[Any], evidence: Any) -> tuple[str, str, str]:
    verdict = RuleSet(rules).evaluate(evidence)
    return verdict.decision, verdict.judge or "", verdict.reason


# -- analysis ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10), ("1h30m", 5400), ("500ms", 0.5), ("PT30S", 30), ("2 days", 172800)],
)
def test_durations_are_read_with_units(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [("4 GiB", 4 * 1024**3), ("512MB", 512e6), ("512m", 512 * 1024**2), ("512Mi", 512 * 1024**2)],
)
def test_sizes_are_read_with_units(text: str, size: float) -> None:
    assert size_bytes(text) == size


@pytest.mark.parametrize("text", ["", "10", "abc", "10 parsecs", "s", "1e400s", "x" * 100])
def test_other_spellings_are_no_quantity(text: str) -> None:
    assert duration_seconds(text) is None
    assert size_bytes(text) is None


@given(st.text(max_size=40))
def test_quantity_readers_never_raise(text: str) -> None:
    for value in (duration_seconds(text), size_bytes(text)):
        assert value is None or value >= 0


def test_key_names_are_words_in_any_case_style() -> None:
    assert words("readTimeoutMs") == words("read-timeout-ms") == words("READ_TIMEOUT_MS")
    assert canonical_key('server."keepAlive-Timeout"') == "server.keep_alive_timeout"
    assert word_match("check", "features.health_check") == "word"
    assert word_match("check", "features.skipcheck") == "word"
    assert word_match("check", "features.newCheckout") == "other"
    assert word_match("verif", "features.skipverification") == "letters"


def test_key_context_finds_the_line_under_its_parents() -> None:
    text = (
        "server:\n  http:\n    # read timeout for slow clients\n    timeout: 30s\n"
        "  grpc:\n    timeout: 10s  # per call\n"
    )
    http = key_context(text, "server.http.timeout")
    assert (http.line, http.comments) == (4, ("read timeout for slow clients",))
    grpc = key_context(text, "server.grpc.timeout")
    assert (grpc.line, grpc.comments) == (6, ("per call",))
    assert key_context(text, "server.other").line == 0


def test_comment_warnings_name_the_value_or_a_capacity() -> None:
    warns = ("NOTE: debug logs full request bodies and headers (PII); never in production.",)
    assert comment_warning(warns, "DEBUG") == warns[0]
    assert comment_warning(warns, "info") is None
    capacity = ("Hosts have 8 GB of RAM.",)
    assert comment_warning(capacity, "64GB", 64e9) == capacity[0]
    assert comment_warning(capacity, "512MB", 512e6) is None
    assert comment_warning(("at most 16 on these hosts",), 32) is not None
    assert comment_warning(("at most 16 on these hosts",), 8) is None


def test_comment_warnings_about_switching_a_boolean() -> None:
    warns = ("WARNING: enabling this exposes the admin API to the internet.",)
    assert comment_warning(warns, True) == warns[0]
    assert comment_warning(warns, False) is None
    assert comment_warning(("Enable the new dashboard.",), True) is None


def test_commented_out_options_are_documented() -> None:
    text = "[server]\n; SSH_PER_WRITE_TIMEOUT = 30\n# keepalive_s: 5\nworkers = 4\n"
    assert commented_option(text, "server.SSH_PER_WRITE_TIMEOUT")
    assert commented_option(text, "server.keepalive_s")
    assert not commented_option(text, "server.other")


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("https://api.example.com/v1", "http://api.example.com/v1", "downgrade"),
        ("wss://x.example.com/ws", "ws://x.example.com/ws", "downgrade"),
        ("rediss://cache:6380", "redis://cache:6379", "downgrade"),
        ("postgres://db/app?sslmode=require", "postgres://db/app?sslmode=disable", "downgrade"),
        ("https://api.example.com", "https://svc:pw@api.example.com", "credentials"),
        ("https://api.example.com", "https://api.example.net", "host"),
    ],
)
def test_url_weakenings_are_named(before: str, after: str, kind: str) -> None:
    assert [change.kind for change in url_changes(before, after)] == [kind]


def test_same_or_stronger_urls_are_no_change() -> None:
    assert url_changes("http://a.example.com/x", "https://a.example.com/x") == []  # upgrade
    assert url_changes("https://a.example.com/x", "https://a.example.com/x/?a=2") == []
    # another path or port on the same host is another endpoint: reviewed like a host
    moved = url_changes("https://a.example.com/api/v1", "https://a.example.com/api/v2")
    assert [(c.kind, c.text) for c in moved] == [
        ("host", "points to another endpoint on a.example.com (path /api/v1 -> /api/v2)")
    ]
    port = url_changes("https://a.example.com:8443/x", "https://a.example.com:9443/x")
    assert "port 8443 -> 9443" in port[0].text


# -- constraints -----------------------------------------------------------------------

TIMEOUT = KeyConstraint(type="duration", unit="s", min="1s", max="1h", may_add=True)
CACHE = KeyConstraint(type="size", unit="MB", min=0, max="64 GiB", factor=8)


def test_duration_and_size_bounds_take_units() -> None:
    assert (TIMEOUT.min, TIMEOUT.max) == (1.0, 3600.0)
    assert CACHE.max == 64 * 1024**3
    assert KeyConstraint(type="duration", unit="ms", max=1500).max == 1.5
    with pytest.raises(ValueError, match="is not a duration"):
        KeyConstraint(type="duration", max="soon")
    with pytest.raises(ValueError, match="factor/step apply"):
        KeyConstraint(type="string", factor=2)
    with pytest.raises(ValueError, match="not a size unit"):
        KeyConstraint(type="size", unit="parsec")


def test_enum_tables_name_their_values() -> None:
    level = KeyConstraint(type="string", enum={"info": "normal", "debug": "developer detail"})
    assert level.allowed == ("info", "debug")
    assert level.meaning("debug") == "developer detail"
    assert "one of 'info', 'debug'" in level.describe()


YAML = "server:\n  readTimeout: 30s\n  cacheSize: 256MB\n  workers: 4\n"
VALUES = AllowConfig(
    paths=("config/**",),
    may_change={
        "**.*timeout": TIMEOUT,
        "**.*cache_size": KeyConstraint(type="size", min=0, max="64 GiB", factor=8),
        "**.*workers": KeyConstraint(type="integer", min=1, max=64, step=4),
    },
)


@pytest.mark.parametrize(
    ("old", "new", "decision"),
    [
        ("readTimeout: 30s", "readTimeout: 1m30s", "approve"),
        ("readTimeout: 30s", "readTimeout: 90", "review"),  # the unit dropped
        ("readTimeout: 30s", "readTimeout: 2h", "review"),
        ("readTimeout: 30s", "readTimeout: 0s", "review"),
        ("readTimeout: 30s", "readTimeout: soon", "review"),
        ("cacheSize: 256MB", "cacheSize: 1GB", "approve"),
        ("cacheSize: 256MB", "cacheSize: 64GB", "review"),  # 250x the current value
        ("workers: 4", "workers: 8", "approve"),
        ("workers: 4", "workers: 12", "review"),  # more than `step` from the current value
    ],
)
async def test_quantities_and_relative_bounds(evidence_for, old, new, decision) -> None:
    evidence = await evidence_for({"config/app.yaml": YAML}, patch("config/app.yaml", old, new))
    assert decide([VALUES], evidence)[0] == decision


SPELLED = '[server]\nidle_timeout = "500ms"\nread_timeout = 30\nttl = "10m"\nlimit = "30"\n'
SPELLING = AllowConfig(
    paths=("config/**",),
    may_change={
        "**.*timeout": KeyConstraint(type="duration", min="1s", max="1h", factor=16),
        "**.ttl": KeyConstraint(type="duration", max="1d"),
        "**.limit": KeyConstraint(type="duration", max="1h"),
    },
)


@pytest.mark.parametrize(
    ("old", "new", "decision", "reason"),
    [
        ('idle_timeout = "500ms"', "idle_timeout = 500", "review", "spelled"),  # unit dropped
        ('idle_timeout = "500ms"', "idle_timeout = 0x1F4", "review", "spelled"),  # hex 500
        ('idle_timeout = "500ms"', 'idle_timeout = "2s"', "approve", ""),  # units kept, 4x
        ("read_timeout = 30", 'read_timeout = "30"', "review", "spelled"),  # now a string
        ("read_timeout = 30", "read_timeout = 3e1", "review", "spelled"),  # now a float
        ("read_timeout = 30", "read_timeout = 45", "approve", ""),
        ("read_timeout = 30", "read_timeout = 3000", "review", "100 times"),
        ("read_timeout = 30", "read_timeout = 7200", "review", "above"),
        ("read_timeout = 30", "read_timeout = 1200", "review", "40 times"),  # factor 16
        ('ttl = "10m"', 'ttl = "10M"', "review", "months"),
        ('ttl = "10m"', 'ttl = "PT20M"', "approve", ""),  # ISO 8601 minutes
        ('limit = "30"', 'limit = "60"', "approve", ""),  # bare both times
        ('limit = "30"', 'limit = "60s"', "review", "spelled"),  # a unit added
    ],
)
async def test_a_quantity_respelled_or_far_from_its_value_is_not_proven(
    evidence_for, old, new, decision, reason
) -> None:
    evidence = await evidence_for({"config/app.toml": SPELLED}, patch("config/app.toml", old, new))
    got = decide([SPELLING], evidence)
    assert got[0] == decision, got
    assert reason in got[2]


async def test_a_new_timeout_key_needs_only_its_absolute_bounds(evidence_for) -> None:
    rule = AllowConfig(
        paths=("config/**",),
        may_change={
            "**.*timeout": KeyConstraint(type="duration", max="1h", factor=16, may_add=True)
        },
    )
    added = await evidence_for(
        {"config/app.toml": SPELLED},
        patch("config/app.toml", "ttl =", 'write_timeout = "20m"\nttl ='),
    )
    assert decide([rule], added)[0] == "approve"


UNLIMITED = '[coordinator]\nmax-concurrent-queries = 0\nquery-timeout = "0s"\nretries = 0\n'
ZERO_IS_NO_LIMIT = AllowConfig(
    paths=("config/**",),
    may_change={
        "**.max_concurrent_*": KeyConstraint(
            type="integer", min=1, max=1000, factor=8, zero_unlimited=True
        ),
        "**.*timeout": KeyConstraint(
            type="duration", min="1s", max="1h", factor=16, step=60, zero_unlimited=True
        ),
        "**.retries": KeyConstraint(type="integer", min=1, max=10, factor=8),
    },
)


@pytest.mark.parametrize(
    ("old", "new", "decision", "reason"),
    [
        ("max-concurrent-queries = 0", "max-concurrent-queries = 32", "approve", ""),
        ("max-concurrent-queries = 0", "max-concurrent-queries = 5000", "review", "above 1000"),
        ('query-timeout = "0s"', 'query-timeout = "30m"', "approve", ""),  # past `step` too
        ('query-timeout = "0s"', 'query-timeout = "2h"', "review", "above 1h"),
        ('query-timeout = "0s"', "query-timeout = 60", "review", "spelled"),
        ("retries = 0", "retries = 3", "review", "no factor"),  # 0 here is no retries
    ],
)
async def test_zero_as_no_limit_may_become_any_bounded_value(
    evidence_for, old, new, decision, reason
) -> None:
    evidence = await evidence_for(
        {"config/app.toml": UNLIMITED}, patch("config/app.toml", old, new)
    )
    got = decide([ZERO_IS_NO_LIMIT], evidence)
    assert got[0] == decision, got
    assert reason in got[2]


async def test_lifting_a_limit_to_zero_stays_unproven(evidence_for) -> None:
    text = '[coordinator]\nmax-concurrent-queries = 32\nquery-timeout = "60s"\n'
    for old, new in (
        ("max-concurrent-queries = 32", "max-concurrent-queries = 0"),
        ('query-timeout = "60s"', 'query-timeout = "0s"'),
    ):
        evidence = await evidence_for({"config/app.toml": text}, patch("config/app.toml", old, new))
        got = decide([ZERO_IS_NO_LIMIT], evidence)
        assert got[:2] == ("review", "rules/unproven"), got


def test_commented_values_are_found_once() -> None:
    text = '[a]\n  # limit = 0\n  # wait = "10s"\n[b]\n  # twice = 1\n[c]\n  # twice = 2\n'
    assert commented_value(text, "a.limit") == "0"
    assert commented_value(text, "a.wait") == '"10s"'
    assert commented_value(text, "b.twice") is None  # documented with two values
    assert commented_value(text, "a.absent") is None


DOCUMENTED = "[coordinator]\n  # max-concurrent-queries = 0\n  # max-pending = 64\n"
PENDING = KeyConstraint(type="integer", min=1, max=1000, factor=8)


@pytest.mark.parametrize(
    ("old", "new", "decision"),
    [
        ("# max-concurrent-queries = 0", "max-concurrent-queries = 32", "approve"),
        ("# max-pending = 64", "max-pending = 128", "approve"),  # 2x the documented 64
        ("# max-pending = 64", "max-pending = 1", "review"),  # 64x down
        ("# max-pending = 64", 'max-pending = "128"', "review"),  # no integer
    ],
)
async def test_an_uncommented_option_is_compared_with_its_documented_value(
    evidence_for, old, new, decision
) -> None:
    rule = AllowConfig(
        paths=("config/**",),
        may_change={**ZERO_IS_NO_LIMIT.may_change, "**.max_pending": PENDING},
    )
    evidence = await evidence_for(
        {"config/app.toml": DOCUMENTED}, patch("config/app.toml", old, new)
    )
    got = decide([rule], evidence)
    assert got[0] == decision, got


def test_zero_unlimited_needs_a_minimum_above_zero() -> None:
    for bad in (
        {"type": "integer", "min": 0, "max": 10},
        {"type": "integer", "max": 10},
        {"type": "string"},
    ):
        with pytest.raises(ValueError, match="zero_unlimited applies"):
            KeyConstraint(zero_unlimited=True, **bad)
    assert "0 is no limit" in KeyConstraint(type="integer", min=1, zero_unlimited=True).describe()


@pytest.mark.parametrize(
    ("path", "text", "old", "new"),
    [
        ("config/app.json", '{"server": {"readTimeoutMs": 5000}}', "5000", "9000"),
        ("config/app.yaml", "server:\n  read-timeout-ms: 5000\n", "5000", "9000"),
        ("config/app.yaml", "READ_TIMEOUT_MS: 5000\n", "5000", "9000"),
        ("config/server.properties", "zk.connection.timeout.ms=5000\n", "5000", "9000"),
    ],
)
async def test_vocabularies_match_words_in_any_case_style(evidence_for, path, text, old, new):
    rule = AllowConfig(
        paths=("config/**",),
        may_change={"**.*timeout_ms": KeyConstraint(type="duration", unit="ms", max="1m")},
    )
    evidence = await evidence_for({path: text}, patch(path, old, new))
    assert decide([rule], evidence)[0] == "approve"


INI = "[server]\nworkers = 4\n; Seconds before an idle connection closes.\n; idle_timeout = 30\n"


async def test_uncommenting_a_documented_option_is_a_change(evidence_for) -> None:
    rule = AllowConfig(
        paths=("config/**",),
        may_change={"**.*timeout": KeyConstraint(type="duration", max="1h")},
    )
    on = await evidence_for(
        {"config/app.ini": INI}, patch("config/app.ini", "; idle_timeout = 30", "idle_timeout = 60")
    )
    assert decide([rule], on)[0] == "approve"
    assert "uncomments the documented option" in json.dumps(
        RuleSet([rule]).evaluate(on).details["claims"]
    )
    too_long = await evidence_for(
        {"config/app.ini": INI},
        patch("config/app.ini", "; idle_timeout = 30", "idle_timeout = 9000"),
    )
    assert decide([rule], too_long)[0] == "review"
    unknown = await evidence_for(
        {"config/app.ini": INI},
        patch("config/app.ini", "workers = 4", "workers = 4\nread_timeout = 5"),
    )
    assert decide([rule], unknown)[0] == "review", "an undocumented key is still an addition"


# -- keep-list tiers -------------------------------------------------------------------

KEEP = ConfigInvariants(
    globs=("config/**",), keep=("**.*check*", "**.*token*", "**.*tls*"), action="reject"
)
FLAGS = "[features]\nnewCheckout = false\nskipverification = false\nhealth_check = true\n"
FLAGS += "[cache]\ntoken_cache_size = 100\ntoken_cache_ttl = 60\ntoken_count = 1\n"
FLAGS += "[server]\nmtls = true\n"


@pytest.mark.parametrize(
    ("old", "new", "decision"),
    [
        ("newCheckout = false", "newCheckout = true", None),  # checkout is not a check
        ("skipverification = false", "skipverification = true", None),  # no pattern for it
        ("health_check = true", "health_check = false", "reject"),
        ("token_cache_size = 100", "token_cache_size = 200", None),  # sizes a cache
        ("token_cache_ttl = 60", "token_cache_ttl = 600", "review"),  # times what it trusts
        ("token_count = 1", "token_count = 2", "review"),  # counts tokens
        ("mtls = true", "mtls = false", "reject"),
    ],
)
async def test_keep_lists_reject_only_whole_words(evidence_for, old, new, decision) -> None:
    evidence = await evidence_for({"config/app.toml": FLAGS}, patch("config/app.toml", old, new))
    verdict = KEEP.check(evidence)
    assert (verdict.decision if verdict else None) == decision


@pytest.mark.parametrize(
    ("old", "new", "decision"),
    [
        ('tls_handshake_timeout = "10s"', 'tls_handshake_timeout = "15s"', None),  # excepted
        ('tls_min_version = "1.2"', 'tls_min_version = "1.0"', "reject"),  # still kept
        ('tls_session_ttl = "1h"', 'tls_session_ttl = "2h"', "review"),  # times TLS state
    ],
)
async def test_keep_except_names_only_its_own_keys(evidence_for, old, new, decision) -> None:
    rule = ConfigInvariants(
        globs=("config/**",),
        keep=("**.*tls*",),
        keep_except=("**.tls_handshake_timeout",),
        action="reject",
    )
    text = '[server]\ntls_handshake_timeout = "10s"\ntls_min_version = "1.2"\n'
    text += 'tls_session_ttl = "1h"\n'
    evidence = await evidence_for({"config/app.toml": text}, patch("config/app.toml", old, new))
    verdict = rule.check(evidence)
    assert (verdict.decision if verdict else None) == decision


async def test_a_keep_match_inside_a_longer_word_is_reviewed(evidence_for) -> None:
    rule = ConfigInvariants(globs=("config/**",), keep=("**.*verif*",), action="reject")
    evidence = await evidence_for(
        {"config/app.toml": FLAGS},
        patch("config/app.toml", "skipverification = false", "skipverification = true"),
    )
    verdict = rule.check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"


# -- config_values ---------------------------------------------------------------------

DENY = ConfigValues(
    id="config-values",
    globs=("config/**",),
    limits={"**.*cache_size_mb": KeyConstraint(type="size", unit="MB", max="64 GiB", factor=8)},
)


@pytest.mark.parametrize(
    ("path", "text", "old", "new"),
    [
        ("config/app.toml", 'url = "https://api.example.com"\n', "https:", "http:"),
        ("config/app.yaml", "upstream:\n  url: wss://x.example.com/ws\n", "wss:", "ws:"),
        ("config/app.json", '{"db": "postgres://db/a?sslmode=require"}', "require", "disable"),
        ("config/app.ini", "[api]\nbase = https://api.example.com\n", "https:", "http:"),
        ("config/app.properties", "api.base=https://api.example.com\n", "https:", "http:"),
        ("config/app.conf", "upstream https://api.example.com;\n", "https:", "http:"),
        ("config/app.toml", 'url = "https://api.example.com"\n', "https://", "https://u:pw@"),
    ],
)
async def test_url_downgrades_are_rejected_in_any_format(evidence_for, path, text, old, new):
    evidence = await evidence_for({path: text}, patch(path, old, new))
    decision, judge, reason = decide([DENY], evidence)
    assert (decision, judge) == ("reject", "rules/config-values")
    assert "keep the URL as it was" in reason


async def test_a_url_to_another_host_is_reviewed(evidence_for) -> None:
    evidence = await evidence_for(
        {"config/app.toml": 'url = "https://api.example.com"\n'},
        patch("config/app.toml", "example.com", "example.net"),
    )
    assert decide([DENY], evidence)[:2] == ("review", "rules/config-values")


CACHE_FILE = "[cache]\n# Hosts have 8 GB of RAM.\nsize_mb = 4096\n"


@pytest.mark.parametrize(
    ("new", "decision", "says"),
    [
        ("size_mb = 6000", "approve", ""),
        ("size_mb = 9000", "review", "Hosts have 8 GB"),  # the file's own capacity
        ("size_mb = 65536", "review", "documented limit"),  # 16x the current value
    ],
)
async def test_limits_and_the_files_own_capacity(evidence_for, new, decision, says) -> None:
    allow = AllowConfig(paths=("config/**",), may_change={"**.*size_mb": CACHE})
    evidence = await evidence_for(
        {"config/app.toml": CACHE_FILE}, patch("config/app.toml", "size_mb = 4096", new)
    )
    got, _, reason = decide([DENY, allow], evidence)
    assert got == decision
    assert says in reason


LOGGING = (
    "logging:\n  level:\n"
    "    # DEBUG on org.springframework.web logs request parameters and headers.\n"
    "    org.springframework.web: INFO\n    root: INFO\n"
)


async def test_a_comment_warning_about_the_new_value_is_a_review(evidence_for) -> None:
    allow = AllowConfig(
        paths=("config/**",),
        may_change={"logging.level.**": KeyConstraint(type="string", enum=("INFO", "DEBUG"))},
    )
    web = await evidence_for(
        {"config/app.yaml": LOGGING},
        patch("config/app.yaml", "web: INFO", "web: DEBUG"),
    )
    decision, judge, reason = decide([DENY, allow], web)
    assert (decision, judge) == ("review", "rules/config-values")
    assert "request parameters and headers" in reason
    root = await evidence_for(
        {"config/app.yaml": LOGGING}, patch("config/app.yaml", "root: INFO", "root: DEBUG")
    )
    assert decide([DENY, allow], root)[0] == "approve"


async def test_an_opaque_token_added_in_a_comment_is_a_named_review(evidence_for) -> None:
    evidence = await evidence_for(
        {"config/app.toml": CACHE_FILE},
        patch("config/app.toml", "[cache]\n", "[cache]\n# db: app / Xq9-prod-PASSWORD-77\n"),
    )
    decision, judge, reason = decide([DENY], evidence)
    assert (decision, judge) == ("review", "rules/config-values")
    assert "line 2 adds an opaque token" in reason


@pytest.mark.parametrize("key", ["metrics-port", "metricsPort", "METRICS_PORT"])
async def test_keep_lists_cover_keys_in_any_case_style(evidence_for, key) -> None:
    rule = ConfigInvariants(globs=("config/**",), keep=("**.*_port",), action="reject")
    evidence = await evidence_for(
        {"config/app.yaml": f"server:\n  {key}: 9090\n"},
        patch("config/app.yaml", f"{key}: 9090", f"{key}: 80"),
    )
    verdict = rule.check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"


# -- units stated by the host's own comment, and admin listeners ----------------------

MS_FILE = (
    "[general]\n# How long to wait before aborting a server connection (ms).\n"
    "connect_timeout = 5000\n# For how long to ban a server (minutes).\nban_time = 30\n"
    "read_timeout = 30\n"
)
UNITS = AllowConfig(
    paths=("config/**",),
    may_change={
        "**.*timeout": KeyConstraint(type="duration", unit="s", min="1s", max="1h", factor=16),
        "**.ban_time": KeyConstraint(type="duration", unit="s", min="1s", max="1h", factor=16),
    },
)


@pytest.mark.parametrize(
    ("old", "new", "decision"),
    [
        ("connect_timeout = 5000", "connect_timeout = 10000", "approve"),  # 10 s, not 2.8 h
        ("connect_timeout = 5000", "connect_timeout = 500", "review"),  # 0.5 s: below 1 s
        ("ban_time = 30", "ban_time = 45", "approve"),  # 45 minutes
        ("ban_time = 30", "ban_time = 90", "review"),  # 90 minutes, not 90 seconds
        ("read_timeout = 30", "read_timeout = 60", "approve"),  # no comment: the rule's unit
    ],
)
async def test_a_bare_number_is_read_in_the_unit_its_comment_states(
    evidence_for, old, new, decision
) -> None:
    evidence = await evidence_for({"config/app.toml": MS_FILE}, patch("config/app.toml", old, new))
    got = decide([UNITS], evidence)
    assert got[0] == decision, got


async def test_a_unit_comment_the_program_writes_does_not_choose_the_unit(evidence_for) -> None:
    """Only the host's own comment counts: an agent adding "(ms)" reads 7200 as seconds."""
    code = patch("config/app.toml", "read_timeout = 30", "# (ms)\nread_timeout = 7200")
    evidence = await evidence_for({"config/app.toml": MS_FILE}, code)
    assert decide([UNITS], evidence)[0] == "review"


@pytest.mark.parametrize(
    ("comments", "unit"),
    [
        (("How long to wait (ms).",), "ms"),
        (("in milliseconds",), "ms"),
        (("seconds",), "s"),
        (("Max size for uploads", "in bytes, 1024 * 1024"), "B"),
        (("(ms) or (seconds)?",), None),  # two units: none is chosen
        (("Retry in 5 s",), None),  # a one-letter unit after "in" is prose, not a unit
    ],
)
def test_stated_units(comments: tuple[str, ...], unit: str | None) -> None:
    from vsh_ai.analysis._config_context import stated_unit

    kind = "size" if unit == "B" else "duration"
    assert stated_unit(comments, kind) == unit


ADMIN_FILE = (
    'bindAddr = "0.0.0.0"\n# dashboard is available only if webServer.port is set.\n'
    'webServer.addr = "127.0.0.1"\nwebServer.port = 7500\n'
    '[metrics]\naddr = "127.0.0.1:9100"\n[admin]\nlisten = "localhost:9000"\n'
)


@pytest.mark.parametrize(
    ("old", "new", "decision"),
    [
        ('webServer.addr = "127.0.0.1"', 'webServer.addr = "0.0.0.0"', "reject"),  # comment
        ('listen = "localhost:9000"', 'listen = ":9000"', "reject"),  # [admin] names it
        ('listen = "localhost:9000"', 'listen = "[::]:9000"', "reject"),
        # not an admin listener, or not every interface: the denial says nothing (unproven)
        ('addr = "127.0.0.1:9100"', 'addr = "0.0.0.0:9100"', "review"),
        ('webServer.addr = "127.0.0.1"', 'webServer.addr = "10.0.0.5"', "review"),
    ],
)
async def test_an_admin_listener_moved_to_every_interface_is_rejected(
    evidence_for, old, new, decision
) -> None:
    evidence = await evidence_for(
        {"config/app.toml": ADMIN_FILE}, patch("config/app.toml", old, new)
    )
    got = decide([DENY], evidence)
    assert got[0] == decision, got
    assert ("every interface" in got[2]) is (decision == "reject")
