"""Vendor token patterns: detect-secrets' regex detectors (recompiled for RE2) and ours.

Token patterns run only in windows around a hit of one cheap literal gate.
"""

from __future__ import annotations

import re
from typing import Any

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector

from ._decode import (
    compile_re2,
    finditer,
    matches_nothing,
    possible,
)
from ._secret_values import SecretFinding, is_placeholder

__all__ = ("GATE", "TOKENS", "tokens")

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


tokens = _tokens
TOKENS = _TOKENS
GATE = _GATE
