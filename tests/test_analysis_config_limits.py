"""Limits a config file's own comments state: kept only when provably kept."""

from __future__ import annotations

import pytest

from vsh_ai.analysis._config_limits import unkept_limit

POOL = "keep workers × pool_size under the database's max_connections (200)"
PROXY = "must stay below nginx's 60 s proxy_read_timeout"


@pytest.mark.parametrize(
    ("comment", "key", "value"),
    [
        ("at most 64", "pool", 64),
        (PROXY, "timeout_s", 30),
        (PROXY, "timeout", "45s"),
        (PROXY, "timeout_ms", 59_000),
        ("between 1 and 32", "threads", 3),
        ("≤ 4 GiB", "heap", "2GiB"),
        ("at least 2 replicas", "replicas", 3),
        ("Max connections per pool", "pool", 300),  # names the key, states no bound
        ("request timeout in seconds", "timeout", 300),
        ("default 30", "retries", 31),
        # arithmetic that describes the default or the unit states no limit
        ("Default: cpu core count * 2", "workers", 8),
        ("in bytes, 2 * 1024 * 1024 * 1024", "db_cache_capacity", 4 * 1024**3),
        ("256 * 1024 * 1024", "max_record_size", 512 * 1024**2),
        ("e.g. 4 x 1024", "buffer", 8192),
    ],
)
def test_kept_or_no_limit(comment: str, key: str, value: object) -> None:
    assert unkept_limit((comment,), key, value) is None


@pytest.mark.parametrize(
    ("comment", "key", "value"),
    [
        ("at most 64", "pool", 65),
        (PROXY, "timeout_s", 90),
        (PROXY, "timeout", "2m"),
        (PROXY, "timeout", 30),  # a bare number has no unit to compare in
        ("between 1 and 32", "threads", 33),
        ("between 1 and 32", "threads", 0),
        ("≤ 4 GiB", "heap", "8GiB"),
        ("at least 2 replicas", "replicas", 1),
        (POOL, "pool_size", 10),  # a product of two values: never evaluated
        ("2 × vCPU + 1", "workers", 9),
        ("gunicorn workers: 2 x vCPU + 1", "workers", 9),
        ("must be less than read_timeout", "write_timeout", 3),
        ("keep under 80%", "target", 70),  # a percentage of what?
        # a formula next to advice, even when it also names the default, is a rule to keep
        ("default 4; keep it at most 2 x vCPU", "workers", 9),
        ("recommended: 2 x vCPU + 1 (default 3)", "workers", 9),
        ("in bytes; must not exceed 2 * 1024 * 1024", "cache", 4 * 1024**2),
    ],
)
def test_not_proven_kept(comment: str, key: str, value: object) -> None:
    assert unkept_limit(("an unrelated line", comment), key, value) == comment


def test_values_that_are_no_quantity_are_left_alone() -> None:
    assert unkept_limit(("at most 64",), "enabled", True) is None
    assert unkept_limit(("at most 64",), "name", "primary") is None
