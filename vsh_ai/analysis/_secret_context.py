"""Contextual patterns: a secret-sounding key, flag or header, then a value."""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

from ._decode import (
    compile_re2,
    could_match,
    decode_base64,
    finditer,
    gate,
    printable,
)
from ._secret_tokens import GATE, TOKENS
from ._secret_values import SecretFinding, _key_kind, _randomish, _value_is_secret, is_placeholder

__all__ = ("contextual", "line_starts")

# ---------------------------------------------------------------------------
# Contextual patterns: a secret-sounding key, flag or header, then a value.

_KW = r"(?i:pass|pw|secret|token|key|auth|cred|sign|sig|private|contrase)"
_KEY = r"[\pL\pN_.\-]*" + _KW + r"[\pL\pN_.\-]*"  # unbounded: RE2 stays small
_QVAL = r"\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`"

_ASSIGNMENT = compile_re2(
    r"(?P<key>" + _KEY + r")[\"'\]]{0,2}[ \t]*(?P<op>:=|=>|===|==|!==|!=|=|:)[ \t]*@?"
    # values of 6+ characters only: shorter ones are never secrets, and dense short
    # assignments then cost no match each
    r"(?P<val>\"[^\"\n]{6,}\"|'[^'\n]{6,}'|`[^`\n]{6,}`|[^\s\"'`,;#&}\])<>]{6,})"
)
_XML_ELEMENT = compile_re2(
    r"<(?P<key>[A-Za-z_][A-Za-z0-9_.:\-]{0,80})(?:[ \t][^<>\n]*)?>(?P<val>[^<\n]{1,500})</"
)
_XML_PAIR = compile_re2(
    r"(?i)(?:key|name)[ \t]*=[ \t]*\"(?P<key>[^\"\n]{1,80})\"[ \t]+value[ \t]*=[ \t]*"
    r"\"(?P<val>[^\"\n]*)\""
)
_NETRC = compile_re2(
    r"(?i)(?:(?:^|\s)(?:machine[ \t]+\S+|default)(?:\s+(?:login|account|port)[ \t]+\S+)*"
    r"\s+|(?m:^)[ \t]*)(?P<key>password|passwd)[ \t]+(?P<val>[^\s=:\"']\S*)"
)
_FLAG = compile_re2(
    r"(?:^|[\s\"'])--?(?P<key>[A-Za-z0-9_\-]*" + _KW + r"[A-Za-z0-9_\-]*)"
    r"(?:=|[ \t]+)(?P<val>" + _QVAL + r"|[^\s\"'|;&<>]+)"
)
_CURL_USER = compile_re2(r"(?:^|\s)(?:-u|--user)(?:=|[ \t]*)(?P<val>" + _QVAL + r"|[^\s\"'|;&<>]+)")
_AUTH_HEADER = compile_re2(
    r"(?i)(?:authorization|x-api-key|api-key|x-auth-token|private-token)[\"']?[ \t]*[:=][ \t]*"
    r"[\"']?(?:(?:bearer|basic|token|digest|negotiate|bot|apikey)[ \t]+)?"
    r"(?P<val>[A-Za-z0-9._~+/=\-]{8,})"
)
_BEARER = compile_re2(r"(?i)(?:^|[^A-Za-z0-9])bearer[ \t]+(?P<val>[A-Za-z0-9._~+/\-]{16,}=*)")
_BASIC = compile_re2(r"(?i)(?:^|[^A-Za-z0-9])basic[ \t]+(?P<val>[A-Za-z0-9+/]{8,}={0,2})")
_URL_CREDENTIALS = compile_re2(
    r"(?i)(?:^|[^A-Za-z0-9+.\-])[a-z][a-z0-9+.\-]{1,30}://(?P<user>[^\s/:@\"'<>]*):"
    r"(?P<val>[^\s\"'<>]+)@[A-Za-z0-9\[_]"
)
_QUERY = compile_re2(
    r"[?&;](?P<key>[A-Za-z0-9_.\-]*" + _KW + r"[A-Za-z0-9_.\-\[\]]*)="
    r"(?P<val>[^&;\s\"'#<>]+)"
)
_DOCKERFILE_ENV = compile_re2(
    r"(?m)^[ \t]*(?:ENV|ARG)[ \t]+(?P<key>" + _KEY + r")[ \t]+(?P<val>" + _QVAL + r"|[^\s\"']+)"
)
_SHORT_PASSWORD_FLAG = compile_re2(
    r"(?:(?:^|\s)(?:login|mysql|mysqldump|mysqladmin)(?:[ \t][^\n]*?)?[ \t]-p[ \t]*|(?:^|\s)-p)"
    r"(?P<val>[^\s\"'|;&<>-][^\s\"'|;&<>]*)"
)
_DOCKER_AUTH = compile_re2(r"(?i)\"(?:auth|identitytoken)\"[ \t]*:[ \t]*\"(?P<val>[^\"\n]{8,})\"")
_YAML_KEY_LINE = compile_re2(
    r"(?m)^(?P<indent>[ \t]*)(?:-[ \t]+)?[\"']?(?P<key>" + _KEY + r")[\"']?[ \t]*:[ \t]*"
    r"(?P<block>[|>][-+0-9]*)?[ \t]*(?:#[^\n]*)?$"
)
_ENV_PREFIX = frozenset(("", "export", "set", "setenv", "env", "arg", "declare", "local"))


def _unquote(text: str, span: tuple[int, int]) -> tuple[int, int, bool]:
    start, end = span
    if end - start >= 2 and text[start] == text[end - 1] and text[start] in "\"'`":
        return start + 1, end - 1, True
    return start, end, False


def _rest_of_line(text: str, offset: int) -> str:
    """What follows ``offset`` on its line (at most 200 characters), stripped."""
    stop = text.find("\n", offset, offset + 200)
    return text[offset : stop if stop >= 0 else offset + 200].strip()


def _line_starts(text: str) -> list[int]:
    return [0, *accumulate(len(line) + 1 for line in text.split("\n"))]


_CONTEXTUAL = (
    _ASSIGNMENT,
    _XML_ELEMENT,
    _XML_PAIR,
    _NETRC,
    _FLAG,
    _CURL_USER,
    _AUTH_HEADER,
    _BEARER,
    _BASIC,
    _URL_CREDENTIALS,
    _QUERY,
    _DOCKERFILE_ENV,
    _SHORT_PASSWORD_FLAG,
    _DOCKER_AUTH,
    _YAML_KEY_LINE,
)
gate((GATE, *(regex for _, regex, _ in TOKENS), *_CONTEXTUAL))


def _contextual(text: str) -> list[SecretFinding]:
    if not could_match(_CONTEXTUAL, text):
        return []  # the gate saw none of these patterns anywhere in the text
    out: list[SecretFinding] = []

    def add(kind: str, start: int, end: int) -> None:
        if end > start:
            out.append(SecretFinding(kind, start, end))

    starts = _line_starts(text)

    for _, g in finditer(_ASSIGNMENT, text):
        start, end, quoted = _unquote(text, g["val"])
        if end - start < 6:
            continue  # too short for any secret (checked first: dense input stays cheap)
        key = text[g["key"][0] : g["key"][1]]
        named = _key_kind(key)
        if named is None:
            continue
        op = text[g["op"][0] : g["op"][1]]
        line_start = starts[bisect_right(starts, g["key"][0]) - 1]
        prefix = text[max(line_start, g["key"][0] - 16) : g["key"][0]].strip().lower()
        if g["key"][0] - line_start > 16:
            prefix = "(code)"
        if op == ":":
            style = "colon"
        elif op == "=" and prefix in _ENV_PREFIX and text[g["key"][1] : g["op"][0]] == "":
            style = "env"
        else:
            style = "code"
        if _value_is_secret(
            text[start:end],
            key,
            named[1],
            quoted=quoted,
            style=style,
            next_char=text[g["val"][1] : g["val"][1] + 1],
            rest=_rest_of_line(text, g["val"][1]),
        ):
            add(named[0], start, end)
    for regex in (_XML_ELEMENT, _XML_PAIR):
        for _, g in finditer(regex, text):
            named = _key_kind(text[g["key"][0] : g["key"][1]].rsplit(":", 1)[-1])
            start, end = g["val"]
            value = text[start:end]
            if named and _value_is_secret(value, "", named[1], quoted=True, style="colon"):
                add(named[0], start, end)
    for _, g in finditer(_NETRC, text):
        start, end = g["val"]
        if not is_placeholder(text[start:end]) and end - start >= 3:
            add("password", start, end)
    for _, g in finditer(_FLAG, text):
        named = _key_kind(text[g["key"][0] : g["key"][1]])
        start, end, quoted = _unquote(text, g["val"])
        value = text[start:end]
        if (
            named
            and not value.startswith("-")
            and _value_is_secret(value, "", named[1], quoted=True, style="flag")
        ):
            add(named[0], start, end)
    for _, g in finditer(_DOCKERFILE_ENV, text):
        key = text[g["key"][0] : g["key"][1]]
        named = _key_kind(key)
        start, end, quoted = _unquote(text, g["val"])
        if named and _value_is_secret(text[start:end], key, named[1], quoted=quoted, style="env"):
            add(named[0], start, end)
    for (match_start, _), g in finditer(_SHORT_PASSWORD_FLAG, text):
        start, end = g["val"]
        line = text[max(match_start, start - 200) : start]
        if ("login" in line or "mysql" in line) and _value_is_secret(
            text[start:end], "", True, quoted=True, style="flag"
        ):
            add("password", start, end)
    for _, g in finditer(_CURL_USER, text):
        start, end, _ = _unquote(text, g["val"])
        user, sep, password = text[start:end].partition(":")
        if sep and password and not is_placeholder(password) and not password.isdigit():
            add("password", start + len(user) + 1, end)
    for regex in (_AUTH_HEADER, _BEARER):
        for _, g in finditer(regex, text):
            start, end = g["val"]
            value = text[start:end]
            if not is_placeholder(value) and (len(value) >= 20 or _randomish(value)):
                add("authorization credentials", start, end)
    for _, g in finditer(_BASIC, text):
        start, end = g["val"]
        data = decode_base64(text[start:end])
        if data is not None and b":" in data and printable(data.decode("utf-8", "replace")):
            add("authorization credentials", start, end)
    for _, g in finditer(_URL_CREDENTIALS, text):
        start, end = g["val"]
        value = text[start:end]
        if re.fullmatch(r"[0-9]+(?:/.*)?", value, re.DOTALL) or is_placeholder(value):
            continue
        add("credentials in a URL", start, end)
    for _, g in finditer(_QUERY, text):
        named = _key_kind(text[g["key"][0] : g["key"][1]])
        start, end = g["val"]
        from urllib.parse import unquote

        value = unquote(text[start:end])
        if named and _value_is_secret(value, "", named[1], quoted=True, style="query"):
            add(named[0], start, end)
    for _, g in finditer(_DOCKER_AUTH, text):
        start, end = g["val"]
        data = decode_base64(text[start:end])
        if data is not None and b":" in data:
            add("registry credentials", start, end)
    out.extend(_yaml_blocks(text))
    return out


def _yaml_blocks(text: str) -> list[SecretFinding]:
    """``password:`` with the value on the next (more indented) lines, plain or folded."""
    out: list[SecretFinding] = []
    for (_, line_end), g in finditer(_YAML_KEY_LINE, text):
        named = _key_kind(text[g["key"][0] : g["key"][1]])
        if named is None:
            continue
        indent = g["indent"][1] - g["indent"][0]
        position, start, end = line_end + 1, -1, -1
        lines: list[str] = []
        while position < len(text) and len(lines) < 64:  # bounded work per key
            stop = text.find("\n", position, position + 8192)
            stop = len(text) if stop < 0 else stop
            line = text[position:stop]
            body = line.lstrip(" \t")
            if body and len(line) - len(body) <= indent:
                break
            if body:
                start = position + len(line) - len(body) if start < 0 else start
                end = position + len(line.rstrip())
                lines.append(body.rstrip())
            position = stop + 1
        if not lines or re.match(r"[\w.\-\"']+[ \t]*:(?:\s|$)|- ", lines[0]):
            continue  # a nested mapping or list, not a scalar
        value = (
            " ".join(lines) if g["block"][0] < 0 or text[g["block"][0]] == ">" else "\n".join(lines)
        )
        if _value_is_secret(value.strip("\"'"), "", named[1], quoted=True, style="colon"):
            out.append(SecretFinding(named[0], start, end))
    return out


contextual = _contextual
line_starts = _line_starts
