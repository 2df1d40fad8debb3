"""The one secret detector: rules, protected reads, redaction, intent and path names use it.

Built on detect-secrets: its regex detectors (recompiled for RE2), its keyword list and
its entropy measure, plus patterns of our own for what it lacks. Every pattern is RE2
(linear time); Python loops only walk matches or lines with bounded work each.
Decoding passes (:mod:`._decode`) rescan text with hex, base64 (wrapped or url-safe),
``\\xNN`` escapes, URL-percent encoding and concatenated string pieces decoded in place,
and ROT13 for whole tokens, so a secret found in plain form is also found encoded.

Work per call is capped at :data:`MAX_SCAN_CHARS`; content beyond it is reported as a
finding of kind :data:`UNSCANNED` (so rules fail closed and redaction hides it).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate
from threading import Lock
from typing import Any

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.keyword import DENYLIST
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector

from ._decode import (
    Rewrite,
    compile_re2,
    could_match,
    decode_base64,
    decode_runs,
    finditer,
    gate,
    join_pieces,
    matches_nothing,
    percent_decode,
    possible,
    printable,
    rot13,
)

__all__ = (
    "MAX_SCAN_CHARS",
    "UNSCANNED",
    "SecretFinding",
    "contains_secret",
    "find_secret",
    "find_secrets",
    "is_placeholder",
    "redact_text",
    "secret_lines",
)

MAX_SCAN_CHARS = 4 * 1024 * 1024
"""Characters scanned per call; the rest is one :data:`UNSCANNED` finding (fail closed)."""

UNSCANNED = "unscanned content beyond the scan limit"
_CONTEXT = 256  # characters rescanned either side of a decoded part
_DEPTH = 2  # decoding passes nest this deep (base64 of hex of split pieces, ...)


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
    if _PLACEHOLDER_FORM.fullmatch(value) is not None:
        return True
    if any(c.isdigit() for c in value) or not all(c.isalpha() or c in " -_." for c in value):
        return False
    words = _words(value)
    return bool(words) and any(w in _PLACEHOLDER_WORDS for w in words)


# ---------------------------------------------------------------------------
# Values and keys.

_ENTROPY = Base64HighEntropyString()  # detect-secrets' Shannon entropy over base64 chars
_LITERAL_VALUE = re.compile(
    r"(?i)[-+]?\d+(?:\.\d+)?[a-z]{0,3}|true|false|yes|no|on|off|null|none|nil|undefined"
)
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


# ---------------------------------------------------------------------------
# Token patterns: detect-secrets' detectors (recompiled for RE2) and ours.

_L = r"(?:^|[^A-Za-z0-9])"  # token start: not glued to a longer alphanumeric run


def _from_detect_secrets() -> list[tuple[str, Any, bool]]:
    """detect-secrets' regex detectors as RE2 patterns ``(kind, regex, randomness gate)``."""
    detectors: tuple[tuple[type[RegexBasedDetector], str], ...] = (
        (AWSKeyDetector, "AWS access key id"),
        (AzureStorageKeyDetector, "Azure storage account key"),
        (GitHubTokenDetector, "GitHub token"),
        (GitLabTokenDetector, "GitLab token"),
        (MailchimpDetector, "Mailchimp API key"),
        (OpenAIDetector, "OpenAI API key"),
        (PypiTokenDetector, "PyPI token"),
        (SendGridDetector, "SendGrid API key"),
        (SlackDetector, "Slack token"),
        (SquareOAuthDetector, "Square OAuth secret"),
        (StripeDetector, "Stripe key"),
        (TelegramBotTokenDetector, "Telegram bot token"),
    )
    out: list[tuple[str, Any, bool]] = []
    for detector, kind in detectors:
        denylist: tuple[re.Pattern[str], ...] = tuple(detector.denylist)  # type: ignore[arg-type]
        for number, regex in enumerate(denylist):
            pattern = regex.pattern.replace("(?!\\w)", "").replace("{50,1024}", "{50,}")
            if regex.flags & re.VERBOSE:
                pattern = re.sub(r"\s+|#[^\n]*", "", pattern)
            flags = "(?i)" if regex.flags & re.IGNORECASE else ""
            try:
                compiled = compile_re2(flags + pattern)
            except Exception:  # RE2 cannot express it: our own patterns cover the kind
                continue
            if detector is AWSKeyDetector and number == 1:
                kind = "AWS secret access key"
            out.append((kind, compiled, detector is not AWSKeyDetector))
    return out


_TOKEN_SOURCES: tuple[tuple[str, str, bool], ...] = (
    (
        "private key",
        r"-{4,5}[ \t]*BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?[ \t]*-{4,5}(?s:.*?)"
        r"(?:-{4,5}[ \t]*END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?[ \t]*-{4,5}|\z)",
        False,
    ),
    ("private key", r"PuTTY-User-Key-File-[0-9]+:[^\n]*", False),
    (
        "private key",
        r"Private-Lines:[ \t]*[0-9]+[ \t]*\r?\n"
        r"(?P<v>(?:[ \t]*[A-Za-z0-9+/=]{4,}[ \t]*(?:\r?\n|\z))+)",
        False,
    ),
    (
        "AWS access key id",
        _L + r"(?P<v>(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})(?:[^0-9A-Z]|\z)",
        False,
    ),
    (
        "AWS secret access key",
        r"(?i)aws[A-Za-z0-9_.\-]{0,30}(?:secret|private|key)[A-Za-z0-9_.\-]{0,30}[\"']?[ \t]*"
        r"(?:=>|:=|[:=])[ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)",
        False,
    ),
    (
        "AWS secret access key",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}[\"']?[ \t]*[,;:|\t][ \t]*[\"']?"
        r"(?P<v>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)",
        False,
    ),
    (
        "AWS credentials",
        r"(?i)access key id[ \t]*,[ \t]*secret access key[^\n]*(?P<v>(?:\n[^\n]*)+)",
        False,
    ),
    (
        "GitHub token",
        _L + r"(?P<v>gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        True,
    ),
    ("Slack token", _L + r"(?P<v>xox[abposre]-[A-Za-z0-9-]{10,})", True),
    ("Slack app token", _L + r"(?P<v>xapp-[0-9]+-[A-Za-z0-9-]{10,})", True),
    (
        "Slack webhook URL",
        r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/\-]{8,})",
        False,
    ),
    (
        "Discord webhook URL",
        r"(?i)discord(?:app)?\.com/api/webhooks/(?P<v>[0-9]+/[A-Za-z0-9_\-]{20,})",
        False,
    ),
    (
        "API key",
        _L + r"(?P<v>sk-(?:proj-|ant-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,})",
        True,
    ),
    ("Google API key", _L + r"(?P<v>AIza[0-9A-Za-z_\-]{35})", False),
    ("Stripe key", _L + r"(?P<v>(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,})", True),
    ("Stripe webhook secret", _L + r"(?P<v>whsec_[0-9A-Za-z+/]{20,})", True),
    (
        "JSON web token",
        _L + r"(?P<v>eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*)",
        False,
    ),
    ("PyPI token", _L + r"(?P<v>pypi-AgE[A-Za-z0-9_\-]{50,})", False),
    ("npm token", _L + r"(?P<v>npm_[A-Za-z0-9]{36,})", True),
    ("Hugging Face token", _L + r"(?P<v>(?:hf_|api_org_)[A-Za-z0-9]{30,})", True),
    (
        "GitLab token",
        _L + r"(?P<v>(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-"
        r"[A-Za-z0-9_\-]{20,}|GR1348941[A-Za-z0-9_\-]{20,})",
        True,
    ),
    (
        "Azure storage account key",
        r"(?i)AccountKey[ \t]*=[ \t]*(?P<v>[A-Za-z0-9+/]{20,}={0,2})",
        False,
    ),
    (
        "Azure shared access key",
        r"(?i)SharedAccess(?:Key|Signature)[ \t]*=[ \t]*(?P<v>[^;\s\"'<>]{10,})",
        False,
    ),
)

_TOKENS: tuple[tuple[str, Any, bool], ...] = (
    *((kind, compile_re2(source), gate) for kind, source, gate in _TOKEN_SOURCES),
    *_from_detect_secrets(),
)
# Token patterns run only in windows around a hit of this cheap literal gate, so text
# without any vendor prefix costs one fast scan. The first three patterns (armour, PuTTY)
# and the AWS CSV can be long and always scan the whole text.
_GATE = compile_re2(
    r"AKIA|ASIA|ABIA|ACCA|A3T|AKC|gh[pousr]_|github_pat_|xox|xapp-|(?i:hooks\.slack\.com)"
    r"|(?i:discord)|sk-|sk_|rk_|AIza|whsec_|eyJ|pypi-|npm_|hf_|api_org_|GR1348941"
    r"|gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|(?i:accountkey|sharedaccess|aws)"
    r"|SG\.|sq0csp|-us[0-9]|[0-9]{8}:"
)
_RUN = compile_re2(r"[^\s\"'<>]*")  # a token run: tokens never hold space, quotes or <>
_WHOLE_TEXT = frozenset(("private key", "AWS credentials"))
_BEFORE, _AFTER = 64, 4096  # window around a gate hit


def _windows(text: str) -> list[tuple[int, int]]:
    """Spans around gate hits; a window reaches at least the end of the hit's token run."""
    windows: list[tuple[int, int]] = []
    for (start, end), _ in finditer(_GATE, text):
        if windows and end <= windows[-1][1]:
            continue  # inside the current window (so its run is covered): no rescan
        low, high = max(start - _BEFORE, 0), min(end + _AFTER, len(text))
        for (_, run_end), _ in finditer(_RUN, text, start, len(text)):
            high = max(high, min(run_end + _AFTER, len(text)))
            break
        if windows and low <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(windows[-1][1], high))
        else:
            windows.append((low, high))
    return windows


def _value_span(span: tuple[int, int], groups: dict[str, tuple[int, int]]) -> tuple[int, int]:
    v = groups.get("v")
    if v is not None and v[0] >= 0:
        return v
    return span


def _spans(regex: Any, text: str, pos: int = 0, endpos: int | None = None) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    numbered = regex.groups > 0 and not regex.groupindex
    for span, groups in finditer(regex, text, pos, endpos):
        if numbered:
            spans.append(_group1(regex, text, span) or span)
        else:
            spans.append(_value_span(span, groups))
    return spans


def _group1(regex: Any, text: str, span: tuple[int, int]) -> tuple[int, int] | None:
    """detect-secrets puts the secret in group 1 (when it has one of useful length)."""
    match = regex.match(text[span[0] : span[1]])
    if match is None or match.start(1) < 0 or match.end(1) - match.start(1) < 16:
        return None
    return span[0] + match.start(1), span[0] + match.end(1)


# Literals each kind's patterns cannot match without (lowercase ones: any case), so a
# pattern runs only over windows that hold one of them (a C-speed substring test).
_NEEDLES: dict[str, tuple[str, ...]] = {
    "AWS access key id": ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    "AWS secret access key": ("aws", "akia", "asia", "abia", "acca", "a3t"),
    "AWS credentials": ("access key id",),
    "GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "Slack token": ("xox", "hooks.slack"),
    "Slack app token": ("xapp-",),
    "Slack webhook URL": ("hooks.slack",),
    "Discord webhook URL": ("discord",),
    "API key": ("sk-",),
    "OpenAI API key": ("T3BlbkFJ",),
    "Google API key": ("AIza",),
    "Stripe key": ("k_live_", "k_test_"),
    "Stripe webhook secret": ("whsec_",),
    "JSON web token": ("eyJ",),
    "PyPI token": ("pypi-",),
    "npm token": ("npm_",),
    "Hugging Face token": ("hf_", "api_org_"),
    "GitLab token": (
        *(f"{p}-" for p in ("glpat", "gldt", "glft", "glsoat", "glrt", "glcbt", "glimt")),
        *(f"{p}-" for p in ("glptt", "glagent", "gloas")),
        "GR1348941",
    ),
    "Azure storage account key": ("accountkey",),
    "Azure shared access key": ("sharedaccess",),
    "Mailchimp API key": ("-us",),
    "SendGrid API key": ("SG.",),
    "Square OAuth secret": ("sq0csp",),
    "Telegram bot token": (":",),
}


def _needles(kind: str, regex: Any) -> tuple[str, ...]:
    if kind == "private key":
        pattern = regex.pattern
        return (
            ("PuTTY-User-Key-File",)
            if "PuTTY" in pattern
            else ("Private-Lines",)
            if "Private-Lines" in pattern
            else ("PRIVATE KEY",)
        )
    return _NEEDLES.get(kind, ("",))  # an unknown kind always runs


_TOKEN_NEEDLES: tuple[tuple[str, ...], ...] = tuple(_needles(k, r) for k, r, _ in _TOKENS)


def _holds(needles: tuple[str, ...], text: str, lower: str) -> bool:
    return any(n in (lower if n.islower() else text) for n in needles)


_TOKEN_ENTRIES: tuple[tuple[str, Any, bool, tuple[str, ...]], ...] = tuple(
    (kind, regex, gate, needles)
    for (kind, regex, gate), needles in zip(_TOKENS, _TOKEN_NEEDLES, strict=True)
)
# Without a gate hit there are no windows: only the whole-text kinds can match (same order).
_WHOLE_TEXT_ENTRIES = tuple(entry for entry in _TOKEN_ENTRIES if entry[0] in _WHOLE_TEXT)


def _tokens(text: str, encoding: str | None = None) -> list[SecretFinding]:
    if matches_nothing(text):
        return []  # every token pattern (and the window gate) is gated: none can match
    out: list[SecretFinding] = []
    windows = [(low, high, text[low:high]) for low, high in _windows(text)]
    lowered = [window.lower() for _, _, window in windows]
    whole_lower = text.lower() if len(text) <= 64 else ""
    holds: dict[tuple[tuple[str, ...], int], bool] = {}  # one substring test per kind
    entries = _TOKEN_ENTRIES if windows else _WHOLE_TEXT_ENTRIES
    for kind, regex, gated, needles in possible(entries, text, lambda entry: entry[1]):
        spans: list[tuple[int, int]] = []
        if kind in _WHOLE_TEXT:
            if any(n.islower() for n in needles) and not whole_lower:
                whole_lower = text.lower()
            if _holds(needles, text, whole_lower):
                spans = _spans(regex, text)
        else:
            for number, ((low, high, window), lower) in enumerate(
                zip(windows, lowered, strict=True)
            ):
                held = holds.get((needles, number))
                if held is None:
                    held = holds[needles, number] = _holds(needles, window, lower)
                if not held:
                    continue
                for start, end in _spans(regex, text, low, high):
                    if end == high < len(text):  # cut by the window: match it in full
                        start, end = _spans(regex, text, start)[0]
                    spans.append((start, end))
        for start, end in spans:
            value = text[start:end]
            if is_placeholder(value) or (gated and not _random_tail(value)):
                continue
            out.append(SecretFinding(kind, start, end, encoding))
    return out


def _random_tail(token: str) -> bool:
    """The part after a vendor prefix has digits or mixed case (hf_hub_download does not)."""
    tail = re.split(r"[-_]", token, maxsplit=1)[-1]
    return any(c.isdigit() for c in tail) or (
        any(c.isupper() for c in tail) and any(c.islower() for c in tail)
    )


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
gate((_GATE, *(regex for _, regex, _ in _TOKENS), *_CONTEXTUAL))


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


def _plain(text: str) -> list[SecretFinding]:
    return _tokens(text) + _contextual(text)


# ---------------------------------------------------------------------------
# Decoding passes and the public API.


def _scan(text: str, depth: int) -> list[SecretFinding]:
    if matches_nothing(text):  # no pattern nor decoding pass can find anything as written
        return _tokens(rot13(text), "rot13")
    found = _plain(text)
    found += _tokens(rot13(text), "rot13")
    if depth <= 0:
        return found
    encoded, keys = decode_runs(text)
    found += [SecretFinding("private key", s, e, encoding) for (s, e), encoding in keys]
    plain = _Spans(found)
    for rewrite in (encoded, join_pieces(text), percent_decode(text)):
        if rewrite is None:
            continue
        # Rescan only around what was decoded (the rest was scanned as it is), all the
        # windows in one text so the fixed cost of a scan is paid once per rewrite.
        windows = rewrite.windows(_CONTEXT)
        joined, offsets = _concatenated(rewrite.text, windows)
        for inner in _scan(joined, depth - 1):
            number = bisect_right(offsets, inner.start) - 1
            low, high = windows[number]
            start = low + inner.start - offsets[number]
            end = min(low + inner.end - offsets[number], high)
            for finding in _mapped(rewrite, [replace(inner, start=start, end=end)]):
                if not plain.inside(finding.kind, finding.start, finding.end):
                    found.append(finding)
    return found


class _Spans:
    """Is a finding of ``kind`` inside ``[start, end]``? In log time, not by a scan of all.

    Per kind: findings sorted by start, and a sparse table of the least end over any run
    of them; the findings starting in ``[start, end]`` are one run, and one of them ends by
    ``end`` exactly when the least end of that run does.
    """

    __slots__ = ("_kinds",)

    def __init__(self, found: list[SecretFinding]) -> None:
        spans: dict[str, list[tuple[int, int]]] = {}
        for finding in found:
            spans.setdefault(finding.kind, []).append((finding.start, finding.end))
        self._kinds: dict[str, tuple[list[int], list[list[int]]]] = {}
        for kind, pairs in spans.items():
            pairs.sort()
            table = [[end for _, end in pairs]]
            width = 1
            while 2 * width <= len(pairs):
                row = table[-1]
                table.append([min(row[i], row[i + width]) for i in range(len(row) - width)])
                width *= 2
            self._kinds[kind] = ([start for start, _ in pairs], table)

    def inside(self, kind: str, start: int, end: int) -> bool:
        known = self._kinds.get(kind)
        if known is None:
            return False
        starts, table = known
        low, high = bisect_left(starts, start), bisect_right(starts, end)
        if low >= high:
            return False
        level = (high - low).bit_length() - 1
        row = table[level]
        return min(row[low], row[high - (1 << level)]) <= end


def _concatenated(text: str, windows: list[tuple[int, int]]) -> tuple[str, list[int]]:
    """The windows of ``text`` joined by blank lines, and where each starts in the result."""
    parts: list[str] = []
    offsets: list[int] = []
    position = 0
    for low, high in windows:
        offsets.append(position)
        parts.append(text[low:high])
        position += high - low + 2
    return "\n\n".join(parts), offsets


def _mapped(rewrite: Rewrite, inner: list[SecretFinding]) -> list[SecretFinding]:
    out: list[SecretFinding] = []
    for finding in inner:
        start, end, label = rewrite.source_span(finding.start, finding.end)
        if label is None and finding.encoding is None:
            continue  # verbatim text: the plain scan already saw it
        encoding = "+".join(e for e in (label, finding.encoding) if e)
        out.append(replace(finding, start=start, end=end, encoding=encoding or None))
    return out


def _normalised(found: list[SecretFinding]) -> tuple[SecretFinding, ...]:
    """Sorted by position; a finding inside an earlier (wider) one's span is dropped."""
    out: list[SecretFinding] = []
    reach = -1
    for finding in sorted(found, key=lambda f: (f.start, -f.end, f.encoding or "")):
        if finding.end <= reach:
            continue  # inside the kept finding that reaches furthest (it starts earlier)
        out.append(finding)
        reach = finding.end
    return tuple(out)


# Findings by the sha256 of the text scanned (its UTF-8 bytes, lone surrogates kept:
# one text, one key) and the scan limit. A rule, the read rule, redaction and the LLM
# packet asking about the same bytes get one scan between them, whichever Evidence object
# (or copy of one) holds them: the key is the content itself, never a blob id an evidence
# claims (a forged evidence could pair a known id with other bytes).
_FOUND: OrderedDict[tuple[bytes, int], tuple[SecretFinding, ...]] = OrderedDict()
_FOUND_LOCK = Lock()
_FOUND_ENTRIES = 8192
_FOUND_FINDINGS = 1 << 18  # findings held in all (a text dense with secrets holds many)
_found_held = 0


def find_secrets(text: str) -> tuple[SecretFinding, ...]:
    """Every secret in ``text`` (multi-line aware, decoding passes included), by position.

    Beyond :data:`MAX_SCAN_CHARS`, the rest is one :data:`UNSCANNED` finding. Results are
    remembered by content digest (a bounded cache): the same text is scanned once.
    """
    global _found_held
    key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), MAX_SCAN_CHARS)
    with _FOUND_LOCK:
        known = _FOUND.get(key)
        if known is not None:
            _FOUND.move_to_end(key)
            return known
    head = text[:MAX_SCAN_CHARS]
    found = _scan(head, _DEPTH)
    if len(text) > MAX_SCAN_CHARS:
        found.append(SecretFinding(UNSCANNED, MAX_SCAN_CHARS, len(text)))
    result = _normalised(found)
    if len(result) <= _FOUND_FINDINGS:
        with _FOUND_LOCK:
            if key not in _FOUND:
                _FOUND[key] = result
                _found_held += len(result)
                while len(_FOUND) > _FOUND_ENTRIES or _found_held > _FOUND_FINDINGS:
                    _found_held -= len(_FOUND.popitem(last=False)[1])
    return result


def clear_cache() -> None:
    """Forget remembered findings (benchmarks measure cold decisions with it)."""
    global _found_held
    with _FOUND_LOCK:
        _FOUND.clear()
        _found_held = 0


def find_secret(text: str) -> str | None:
    """The kind of the first secret in ``text``, or None."""
    found = find_secrets(text)
    return found[0].kind if found else None


def contains_secret(data: bytes | str) -> bool:
    """True when ``data`` holds a secret (bytes are read as UTF-8, bad bytes replaced)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return bool(find_secrets(text))


def secret_lines(text: str) -> tuple[int, ...]:
    """1-based numbers of the lines where findings start."""
    starts = _line_starts(text)
    return tuple(sorted({bisect_right(starts, f.start) for f in find_secrets(text)}))


def _masked(text: str, findings: tuple[SecretFinding, ...], mask: str) -> str:
    spans: list[list[Any]] = []
    for finding in findings:
        if spans and finding.start < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], finding.end)
        else:
            spans.append([finding.start, finding.end, finding.kind])
    parts: list[str] = []
    position = 0
    for start, end, kind in spans:
        parts.append(text[position:start])
        label = mask.format(kind=kind)
        pieces = text[start:end].split("\n")
        parts.append("\n".join(label if piece.strip() else piece for piece in pieces))
        position = end
    parts.append(text[position:])
    return "".join(parts)


def redact_text(
    text: str, *, mask: str = "[REDACTED:{kind}]"
) -> tuple[str, tuple[SecretFinding, ...]]:
    """``text`` with every detected secret replaced by ``mask`` (line count kept).

    Returns the redacted text and the findings in the original text. The result holds
    no detected secret: masking repeats until a rescan finds nothing, and as a last
    resort whole lines holding findings are masked.
    """
    findings = find_secrets(text)
    redacted = text
    current = findings
    for _ in range(4):
        if not current:
            return redacted, findings
        redacted = _masked(redacted, current, mask)
        current = find_secrets(redacted)
    lines = redacted.split("\n")
    for number in secret_lines(redacted):
        lines[number - 1] = mask.format(kind="secret")
    return "\n".join(lines), findings
