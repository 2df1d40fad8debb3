"""Number-only values: a secret only when the key itself names one."""

from __future__ import annotations

import pytest

from vsh_ai.analysis._secrets import find_secrets


@pytest.mark.parametrize(
    "line",
    [
        "api_key_rotated_at: 2024-06-12\n",
        "secret_store_addr: 127.0.0.1:8200\n",
        "password_changed: 2024-06-01T09:30:00Z\n",
        "token_port: 8443/tcp\n",
        "SECRET_ROTATION=2024-06-12\n",
        "auth_token_version: 4.2.0-rc1\n",
    ],
)
def test_numbers_next_to_a_secret_word_are_not_secrets(line: str) -> None:
    assert find_secrets(line) == ()


@pytest.mark.parametrize(
    "line",
    [
        "unseal_password: 4471-9920-3318\n",
        "api_key: 1_000_000_000\n",
        "SECRET_TOKEN=2024-06-12\n",
        "db_pass: 10:30:00:11\n",
        "api_key_rotated_at: 2024-06-12x9Qz\n",  # not number-only
    ],
)
def test_numbers_the_key_calls_a_secret_stay_secrets(line: str) -> None:
    assert find_secrets(line) != ()
