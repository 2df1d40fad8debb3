"""Every access-control rule of the inbox on its own: tokens, sessions, throttling,
origin checks and the bind address (the HTTP tests check that the app applies them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from vsh_ai.inbox._auth import (
    LoginThrottle,
    Sessions,
    TokenFileError,
    Tokens,
    check_bind_address,
    same_origin,
)

GOOD = "k" * 24


def test_a_generated_token_is_random_and_logs_in_as_its_principal() -> None:
    tokens, token = Tokens.generated("alice")
    _, other = Tokens.generated("alice")
    assert token != other
    assert len(token) >= 32
    assert tokens.principal(token) == "alice"
    assert tokens.principal(token[:-1]) is None
    assert tokens.principal("") is None


def test_a_generated_token_refuses_a_principal_with_control_characters() -> None:
    with pytest.raises(ValueError, match="U\\+202E"):
        Tokens.generated("alice\u202e")


def test_a_tokens_file_maps_each_token_to_its_principal(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"# approvers\n\n{GOOD} alice\n{'m' * 20} Bob Smith\n")
    tokens = Tokens.from_file(path)
    assert tokens.principal(GOOD) == "alice"
    assert tokens.principal("m" * 20) == "Bob Smith"
    assert tokens.principal("alice") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("short alice\n", ":1: the token has 5 characters"),
        (f"{GOOD}\n", ":1: expected '<token> <principal>'"),
        (f"# c\n{GOOD} alice\n{GOOD} bob\n", ":3: this token is already given"),
        (f"{GOOD} al\u0000ice\n", "U\\+0000"),
        ("# only comments\n", "holds no '<token> <principal>' line"),
    ],
)
def test_a_bad_tokens_file_is_refused_with_its_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(TokenFileError, match=message) as raised:
        Tokens.from_file(path)
    assert str(path) in str(raised.value)


def test_a_missing_tokens_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="cannot read the tokens file"):
        Tokens.from_file(tmp_path / "nope")


def test_sessions_are_random_expire_and_can_be_dropped() -> None:
    sessions = Sessions(lifetime_s=0.05)
    one, two = sessions.create("alice"), sessions.create("alice")
    assert one.id != two.id
    assert one.csrf != two.csrf
    assert sessions.get(one.id) is one
    assert sessions.get("forged") is None
    assert sessions.get(None) is None
    sessions.drop(two.id)
    assert sessions.get(two.id) is None
    time.sleep(0.06)
    assert sessions.get(one.id) is None


def test_the_csrf_token_must_match_exactly() -> None:
    session = Sessions().create("alice")
    assert session.csrf_ok(session.csrf)
    assert not session.csrf_ok(None)
    assert not session.csrf_ok("")
    assert not session.csrf_ok(session.csrf[:-1])
    assert not session.csrf_ok(Sessions().create("alice").csrf)


def test_failed_logins_are_throttled_per_client() -> None:
    throttle = LoginThrottle(limit=3, window_s=0.1)
    for _ in range(3):
        assert not throttle.blocked("1.2.3.4")
        throttle.failed("1.2.3.4")
    assert throttle.blocked("1.2.3.4")
    assert not throttle.blocked("5.6.7.8")
    time.sleep(0.11)
    assert not throttle.blocked("1.2.3.4")


@pytest.mark.parametrize(
    ("origin", "referer", "ok"),
    [
        ("http://127.0.0.1:8765", None, True),
        ("HTTP://127.0.0.1:8765", None, True),
        ("http://127.0.0.1:8766", None, False),
        ("http://evil.example", None, False),
        ("null", None, False),
        ("http://evil.example", "http://127.0.0.1:8765/item/x", False),  # Origin wins
        (None, "http://127.0.0.1:8765/item/x", True),
        (None, "http://127.0.0.1:8765.evil.example/", False),
        (None, "https://127.0.0.1:8765/", False),
        (None, None, False),
        (None, "", False),
    ],
)
def test_a_state_change_must_come_from_this_origin(
    origin: str | None, referer: str | None, ok: bool
) -> None:
    assert same_origin(origin, referer, "127.0.0.1:8765", "http") is ok


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_addresses_bind_without_a_flag(host: str) -> None:
    check_bind_address(host, allow_remote=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.com"])
def test_other_addresses_need_the_explicit_flag(host: str) -> None:
    with pytest.raises(ValueError, match="--allow-remote"):
        check_bind_address(host, allow_remote=False)
    check_bind_address(host, allow_remote=True)
