"""Real config shapes: directive .conf files, Compose environment lists, env assignments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from vsh_ai import Evidence
from vsh_ai.analysis._config import (
    ConfigSyntaxError,
    KeyChange,
    config_changes,
    flatten,
    parse_config,
)
from vsh_ai.analysis._tokens import opaque_line

NGINX = b"""user  nginx;
worker_processes  4;
http {
    keepalive_timeout  65;   # seconds
    server {
        listen 443 ssl;
        listen [::]:443 ssl;
        location /api { proxy_pass http://127.0.0.1:8080; }
    }
    server { listen 80; }
}
"""


def test_nginx_blocks_repeated_names_and_comments() -> None:
    flat = flatten(parse_config(NGINX, "auto", "config/nginx.conf"))
    assert flat == {
        "user": "nginx",
        "worker_processes": "4",
        "http.keepalive_timeout": "65",
        "http.server[0].listen[0]": "443 ssl",
        "http.server[0].listen[1]": "[::]:443 ssl",
        'http.server[0]."location /api".proxy_pass': "http://127.0.0.1:8080",
        "http.server[1].listen": "80",
    }


def test_key_value_lines_with_inline_comments_and_quotes() -> None:
    text = (
        b"# redis\nbind 127.0.0.1\nsave 900 1\nsave 300 10\n"
        b"max_connections = 100  # restart\nlisten_addresses = 'localhost'\n"
    )
    assert flatten(parse_config(text, "auto", "redis.conf")) == {
        "bind": "127.0.0.1",
        "save[0]": "900 1",
        "save[1]": "300 10",
        "max_connections": "100",
        "listen_addresses": "localhost",
    }


@pytest.mark.parametrize(
    "text",
    [
        b"http {\n  listen 80;\n",  # unclosed block
        b"listen 80;\n}\n",  # stray brace
        b'server_name "app;\n',  # unterminated quote
        b"<VirtualHost *:443>\nSSLEngine on\n</VirtualHost>\n",  # Apache sections
        b"bind 127.0.0.1\n!!! not a key\n",
    ],
)
def test_unreadable_directive_files_are_refused(text: bytes) -> None:
    with pytest.raises(ConfigSyntaxError):
        parse_config(text, "auto", "x.conf")


def test_ini_stays_ini_and_a_syntax_switch_is_one_whole_file_change() -> None:
    ini = parse_config(b"[redis]\nbind = 127.0.0.1\n", "auto", "redis.conf")
    lines = parse_config(b"bind 127.0.0.1\n", "auto", "redis.conf")
    assert flatten(ini) == {"redis.bind": "127.0.0.1"}
    assert config_changes(lines, ini) == (KeyChange("", "directive syntax", "INI syntax"),)
    flat_ini = parse_config(b"[x]\nbind = 1\n", "auto", "a.conf")
    assert config_changes(ini, flat_ini) != (KeyChange("", "INI syntax", "directive syntax"),)


def test_ini_errors_never_quote_the_line() -> None:
    with pytest.raises(ConfigSyntaxError) as caught:
        parse_config(b"[db]\npassword hunter2-secret\n", "auto", "db.ini")
    assert "hunter2" not in str(caught.value)
    assert "line 2" in str(caught.value)


COMPOSE = b"""services:
  web:
    environment:
      - LOG_LEVEL=info
      - EMPTY=
      - FROM_HOST
  worker:
    environment:
      LOG_LEVEL: info
  odd:
    environment: ["not a pair!", "X=1"]
"""


def test_compose_environment_lists_are_mappings() -> None:
    flat = flatten(parse_config(COMPOSE, "auto", "docker-compose.yml"))
    assert flat["services.web.environment.LOG_LEVEL"] == "info"
    assert flat["services.web.environment.EMPTY"] == ""
    assert flat["services.web.environment.FROM_HOST"] is None
    assert flat["services.worker.environment.LOG_LEVEL"] == "info"
    assert flat["services.odd.environment[0]"] == "not a pair!"  # not all pairs: a list


def test_compose_environment_names_given_twice_are_refused() -> None:
    text = b"services:\n  web:\n    environment:\n      - A=1\n      - A=2\n"
    with pytest.raises(ConfigSyntaxError, match="'A' is listed twice"):
        parse_config(text, "auto", "compose.yaml")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("line", "opaque"),
    [
        ("- REQUEST_TIMEOUT=60", False),  # a name and a number
        ("- API_KEY=q8Zr2LmX4vNp7Tw", True),  # the value itself is opaque
        ("- QUJDREVGR0hJSktM0g=", True),  # base64 padding is no assignment
        ("- K8S2_TOKEN=abc123", True),  # names with digits are not read as names
    ],
)
async def test_an_env_assignment_is_a_name_and_a_value(
    evidence_for: Callable[..., Awaitable[Evidence]], line: str, opaque: bool
) -> None:
    evidence = await evidence_for(
        {"c.yml": "env:\n"}, f"vsh_write('/workspace/c.yml', 'env:\\n{line}\\n')"
    )
    found = opaque_line(evidence, "c.yml", evidence.after_bytes("c.yml") or b"")
    assert (found is not None) is opaque


def test_hocon_like_blocks_nest_dotted_keys_and_merge_objects() -> None:
    text = (
        b'akka {\n  loglevel = "INFO"  // comment\n  http.server.idle-timeout = 60s\n}\n'
        b"akka.actor: local\nurl = ${?DATABASE_URL}\n"
    )
    assert flatten(parse_config(text, "auto", "application.conf")) == {
        "akka.loglevel": "INFO",
        "akka.http.server.idle-timeout": "60s",
        "akka.actor": "local",
        "url": "${?DATABASE_URL}",
    }


@pytest.mark.parametrize(
    "text",
    [
        b"a {\n  b = 1\n}\na.b = 2\n",  # one value given twice (the later would win)
        b"a {\n  b = [1,\n  2]\n}\n",  # a multi-line array
        b"a { b = 1 }\n",  # an inline object
        b"a {\n  b = 1\n",  # unclosed
    ],
)
def test_hocon_like_ambiguities_are_refused(text: bytes) -> None:
    with pytest.raises(ConfigSyntaxError):
        parse_config(text, "auto", "application.conf")
