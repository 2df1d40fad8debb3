"""Secret findings, placeholders and secret-sounding keys: what a value and a key mean.

Shared by the token and contextual patterns (:mod:`._secret_tokens`, :mod:`._secret_context`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.keyword import DENYLIST

from ._decode import (
    compile_re2,
)

__all__ = ("UNSCANNED", "SecretFinding", "is_placeholder")

UNSCANNED = "unscanned content beyond the scan limit"


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A detected secret: what kind, and the span of the scanned text that hides it.

    For a secret found after decoding, the span is the encoded source text and
    ``encoding`` names the encoding ("base64", "hex", "rot13", "split", "url", ...).
    """

    kind: str
    start: int
    end: int
    encoding: str | None = None


# ---------------------------------------------------------------------------
# Placeholders: values that only stand for a secret.

_PLACEHOLDER_FORM = compile_re2(
    r"(?s)(?:"
    r"\$\{\{.*\}\}|\$\{[^{}]*\}?|\$[A-Za-z_][A-Za-z0-9_]*|\$\([^()]*\)|\$\{?[0-9]\}?"
    r"|%\([^()]*\)[sdrif]|%[sdrif]|\{\{.*\}\}|\{%.*%\}|\{[A-Za-z_0-9.]*\}|#\{[^{}]*\}"
    r"|<[^<>]*>|%[A-Za-z_][A-Za-z0-9_]*%|@[A-Za-z_][A-Za-z0-9_.]*@|\[REDACTED.*"
    r"|ENC\[.*\]|\$ANSIBLE_VAULT.*|!vault.*|!Ref .*|vault:.*|ref\+.*|op://.*"
    r"|[A-Za-z0-9]{0,12}[-_]?(?:[a-z]{1,8}[-_])?[xX*•#.?]{4,}"
    r"|[*xX•#.?_\-]+"
    r")"
)
_FORM_FIRST = frozenset("$%{#<@[E!vro")
"""The first character of every :data:`_PLACEHOLDER_FORM` alternative but the last two."""
_FORM_FILL = frozenset("xX*•#.?")
_FORM_FILL_ONLY = frozenset("*xX•#.?_-")


def _could_be_placeholder_form(value: str) -> bool:
    """False when :data:`_PLACEHOLDER_FORM` cannot match the whole of ``value`` (a
    non-empty value), without the regex: each alternative starts with a character of
    :data:`_FORM_FIRST`, ends with four fill characters, or is fill characters only.
    A value dense with secrets asks this for every one of thousands of candidates."""
    return (
        value[0] in _FORM_FIRST
        or _FORM_FILL.issuperset(value[-4:])
        or _FORM_FILL_ONLY.issuperset(value)
    )


_PLACEHOLDER_WORDS = frozenset(
    [
        "changeme",
        "change",
        "replace",
        "replaceme",
        "example",
        "examples",
        "sample",
        "samples",
        "dummy",
        "test",
        "testing",
        "fake",
        "placeholder",
        "redacted",
        "todo",
        "tbd",
        "fixme",
        "your",
        "yours",
        "my",
        "none",
        "null",
        "nil",
        "undefined",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pass",
        "pw",
        "pwd",
        "user",
        "username",
        "token",
        "key",
        "apikey",
        "value",
        "here",
        "xxx",
        "foo",
        "bar",
        "baz",
        "demo",
        "insert",
        "enter",
        "put",
        "goes",
        "missing",
        "unset",
        "empty",
        "default",
        "notset",
        "not",
        "set",
        "hidden",
        "masked",
        "removed",
        "omitted",
        "required",
        "needed",
        "generate",
        "generated",
        "random",
        "something",
        "whatever",
    ]
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _words(name: str) -> list[str]:
    """``dbPassword_HASH`` → ``["db", "password", "hash"]`` (name is short: bounded work)."""
    return [w for w in re.split(r"[^a-z0-9ñ]+", _CAMEL.sub("_", name[-200:]).lower()) if w]


_SEPARATORS_GONE = str.maketrans("", "", " -_.")


def _letters_and_separators(value: str) -> bool:
    """Every character a letter or one of `` -_.`` (in C: thousands of values per text)."""
    rest = value.translate(_SEPARATORS_GONE)
    return not rest or rest.isalpha()


def is_placeholder(value: str) -> bool:
    """True when the WHOLE value is a placeholder form, not a secret.

    ``REPLACE_ME_IN_PROD``, ``changeme``, ``<your-key>``, ``${VAR}``, ``{{ var }}``,
    ``%(x)s``, ``xxxx``, ``***``, ``sk-...``, ``example``: yes. A value holding digits or
    random-looking text is never a placeholder just because a word like "test" is in it.
    """
    value = value.strip().strip("\"'`").strip()
    if not value or len(set(value)) == 1:
        return True
    if "..." in value or "…" in value:
        return True  # elided on purpose: not a usable secret
    if _could_be_placeholder_form(value) and _PLACEHOLDER_FORM.fullmatch(value) is not None:
        return True
    if not _letters_and_separators(value):  # digits included: a digit is not a letter
        return False
    words = _words(value)
    return bool(words) and any(w in _PLACEHOLDER_WORDS for w in words)


# ---------------------------------------------------------------------------
# Values and keys.

_ENTROPY = Base64HighEntropyString()  # detect-secrets' Shannon entropy over base64 chars
_LITERAL_VALUE = re.compile(
    r"(?i)[-+]?\d+(?:\.\d+)?[a-z]{0,3}|true|false|yes|no|on|off|null|none|nil|undefined"
)
# Digits and separators only (dates, times, addresses, ports, versions, 1_000_000): a
# secret only when the key itself ends in a secret's name (`password: 1-800-555-0100`),
# never when the secret word only qualifies another (`api_key_rotated_at`, `token_port`).
_NUMBER_ONLY = re.compile(r"(?i)v?[-+]?\d+(?:[._:/,+-]\d+)*(?:t\d+(?::\d+)*z?|[a-z]{0,3})")
_SECRET_ENDINGS = (
    "apikey",
    "authkey",
    "accesskey",
    "privatekey",
    "secretkey",
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "secret",
    "token",
    "pin",
    "key",
    "credential",
    "credentials",
)


def _names_a_secret(key: str) -> bool:
    """The key's last words are a secret's name (``db_password``, ``apiKey``, ``TOKEN``)."""
    flat = re.sub(r"[^a-z0-9]", "", key.lower())
    return flat.endswith(_SECRET_ENDINGS)


_TYPE_NAMES = frozenset(
    [
        "str",
        "string",
        "int",
        "bool",
        "boolean",
        "bytes",
        "secretstr",
        "secretbytes",
        "optional",
        "any",
        "text",
        "char",
        "varchar",
        "number",
        "object",
        "list",
        "dict",
        "array",
        "password",
    ]
)
# A known environment lookup opening a call or subscript: the value of
# `SECRET_KEY=os.environ["SECRET_KEY"]` (a keyword argument) is code looking the secret
# up, cut at the quote that follows. Only these spellings, so `PASSWORD=abc.x(` is still
# a value.
_LOOKUP_CALL = re.compile(
    r"(?:os\.environ(?:\.get)?|os\.getenv|environ(?:\.get)?|env(?:\.(?:str|get))?|getenv"
    r"|System\.getenv|process\.env)\s*[\[(]"
)


def _randomish(value: str) -> bool:
    """Mixed character classes and some entropy: how generated credentials look."""
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
        )
    )
    return classes >= 2 and _ENTROPY.calculate_shannon_entropy(value) >= 3.0


def _code_like(value: str, key: str) -> bool:
    """An unquoted value that is an expression or name in code, not a literal."""
    if any(c in value for c in "()[]{}") or value[0] in "$@&*!%\\":
        return True
    if value.lower() == key.lower() or value.lower() in _TYPE_NAMES:
        return True
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value):
        return True  # self.password, os.environ, settings.SECRET_KEY
    return re.fullmatch(r"[a-z_]+", value) is not None  # password_input, getpass


# Keywords: detect-secrets' denylist ("api_?key", "password", "secret", ...) plus ours.
_STRONG_WORDS = tuple(sorted({w.replace("_?", "") for w in DENYLIST} | {"passphrase"}))
_NOT_SECRET_LAST = frozenset(
    [
        "name",
        "names",
        "id",
        "ids",
        "type",
        "types",
        "path",
        "file",
        "files",
        "dir",
        "url",
        "uri",
        "length",
        "len",
        "size",
        "ttl",
        "timeout",
        "expiry",
        "expires",
        "expiration",
        "age",
        "count",
        "field",
        "fields",
        "header",
        "env",
        "var",
        "ref",
        "arn",
        "policy",
        "mode",
        "format",
        "version",
        "min",
        "max",
        "enabled",
        "enable",
        "required",
        "prefix",
        "suffix",
        "backend",
        "provider",
        "store",
        "label",
        "hint",
        "regex",
        "pattern",
        "rotation",
        "reset",
        "validation",
        "validator",
        "strength",
        "endpoint",
        "algorithm",
        "alg",
        "kind",
        "class",
        "limit",
        "attempts",
        "retries",
        "lifetime",
        "duration",
        "seconds",
        "minutes",
        "hours",
        "days",
        "interval",
        "location",
        "source",
        "stdin",
        "input",
        "prompt",
        "length",
        "help",
        "description",
        "desc",
        "placeholder",
        "message",
        "msg",
        "error",
        "errors",
        "column",
        "col",
        "param",
        "params",
        "argument",
        "arg",
        "option",
        "options",
        "flag",
        "flags",
        "config",
        "settings",
        "method",
        "methods",
        "scheme",
        "schemes",
        "policy",
        "policies",
        "rule",
        "rules",
        "hash_algorithm",
        "fingerprint",
        "usage",
        "manager",
        "service",
        "store",
        "id_token_hint",
        "salt_rounds",
        "rounds",
        "cost",
        "yaml",
        "yml",
        "json",
        "toml",
        "txt",
        "ini",
        "cfg",
        "conf",
        "py",
        "md",
        "xml",
        "csv",
        "sh",
        "log",
        "lock",
        "html",
        "js",
        "ts",
    ]
)
_NOT_SECRET_FIRST = frozenset(
    [
        "max",
        "min",
        "num",
        "is",
        "has",
        "use",
        "enable",
        "enabled",
        "show",
        "allow",
        "require",
        "no",
        "validate",
        "check",
        "forgot",
        "reset",
        "get",
        "set",
        "should",
        "can",
        "must",
    ]
)


_PASS_FAIL = frozenset(
    [
        "on",
        "if",
        "to",
        "must",
        "should",
        "will",
        "can",
        "did",
        "test",
        "tests",
        "check",
        "checks",
        "all",
        "any",
        "no",
        "skip",
        "by",
        "fail",
        "first",
        "second",
        "then",
        "when",
        "else",
    ]
)


@lru_cache(maxsize=4096)
def _key_kind(key: str) -> tuple[str, bool] | None:
    """``(kind, strong)`` when ``key`` names a secret; weak kinds need random values."""
    words = _words(key)
    if not words or words[-1] in _NOT_SECRET_LAST or words[0] in _NOT_SECRET_FIRST:
        return None
    joined = "".join(words)
    for word in _STRONG_WORDS:
        if word in joined and not (word == "secret" and "secretary" in joined):
            if "pass" in word or word == "pwd" or word.startswith("contras"):
                return "password", True
            return ("secret" if word == "secret" else "key"), True
    for number, word in enumerate(words):
        if word in ("pw", "pswd", "passw") or (
            word.endswith("pass") and word not in ("pass", "bypass", "compass", "encompass")
        ):
            return "password", True
        if word == "pass" and (number == 0 or words[number - 1] not in _PASS_FAIL):
            return "password", True  # DB_PASS, SMTP_PASS; not on_pass or tests_pass
        if (word in ("signing", "signingkey") or (word.endswith("key") and len(word) > 3)) and (
            word not in ("hotkey", "monkey", "turkey", "donkey", "whiskey", "jockey")
        ):
            return "key", True
    for word in words:
        if word.endswith("token") or word == "tokens":
            return "token", False
        if word in ("credential", "credentials", "creds", "cred", "auth", "sig", "signature"):
            return "credential", False
        if word == "key" and len(words) <= 2:
            return "key", False
    return None


def _value_is_secret(
    value: str,
    key: str,
    strong: bool,
    *,
    quoted: bool,
    style: str,
    next_char: str = "",
    rest: str = "",
) -> bool:
    """Whether an assigned value is a secret (not a placeholder, literal or code)."""
    value = value.strip()
    if len(value) < 6:
        return False
    if is_placeholder(value) or _LITERAL_VALUE.fullmatch(value):
        return False
    if _NUMBER_ONLY.fullmatch(value) and not _names_a_secret(key):
        return False  # `password_changed: 2024-06-12`, `secret_store_addr: 10.0.0.5:8200`
    if not quoted and _LOOKUP_CALL.fullmatch(value):
        return False
    if not quoted:
        if style == "code" and _code_like(value, key):
            return False
        if style == "colon" and (
            value[0] in "$@&*!%|>{["
            or "[" in value
            or "(" in value
            or value.lower() in _TYPE_NAMES
            or value.lower() == key.lower()
        ):
            return False
        if style == "colon" and next_char in ",;" and re.fullmatch(r"[A-Za-z_]\w*", value):
            return False  # password: password, (a JS object shorthand-ish reference)
        if style == "colon" and rest[:1] not in ("", "#", ",", "}", "]"):
            return False  # "secret: masking repeats ..." is prose, not a YAML scalar
    if quoted and value.count(" ") >= 2 and not key.lower().endswith("phrase"):
        return False  # a sentence, such as a prompt or an error message
    if strong:
        return len(value) >= 6
    return len(value) >= 12 and _randomish(value)
