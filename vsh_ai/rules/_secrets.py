"""Secrets in added content: private keys, cloud keys, service tokens, inline passwords."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Literal

from pydantic import field_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ._base import Action, Rule, describe_paths
from ._content import added_text_lines, located
from ._paths import validate_globs

__all__ = ("BASE64_TOKEN", "SECRET_PATTERNS", "NoSecrets", "find_secret")

_PLACEHOLDER = r"""(?!\$|\{\{|<|%\(|\*\*\*|changeme|example|placeholder|xxx|your[-_])"""

SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "a private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    "an AWS access key id": re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    "an AWS secret access key": re.compile(
        r"(?i)aws_?secret_?(?:access_?)?key\s*[:=]\s*[\"']?[A-Za-z0-9/+]{40}\b"
    ),
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    "a Slack token": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    "an OpenAI/Anthropic-style API key": re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    "a Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    "a Stripe key": re.compile(r"\b[rs]k_live_[0-9A-Za-z]{16,}"),
    "a JSON web token": re.compile(
        r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+"
    ),
    "credentials in a URL": re.compile(r"://[^/\s:@\"']+:[^/\s@\"']{3,}@"),
    "an inline password or secret": re.compile(
        r"(?i)\b[\w.-]*(?:password|passwd|pwd|secret|api_?key|access_?token|auth_?token)\b"
        r"[\"']?\s*[:=]\s*[\"']" + _PLACEHOLDER + r"[^\"'\s]{6,}[\"']"
    ),
    "an unquoted password or secret": re.compile(
        r"(?i)^\s*(?:export\s+)?[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|API_KEY|TOKEN)[A-Z0-9_]*\s*=\s*"
        + _PLACEHOLDER
        + r"[^\s\"'$]{8,}\s*$"
    ),
}


BASE64_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
"""A run of base64 (or base64url) long enough to hide a secret."""


def _scoped(pattern: str) -> str:
    """``(?i)x`` → ``(?i:x)`` so patterns can be joined into one alternation."""
    return f"(?i:{pattern[4:]})" if pattern.startswith("(?i)") else f"(?:{pattern})"


_ANY_SECRET = re.compile("|".join(_scoped(rx.pattern) for rx in SECRET_PATTERNS.values()))


def _kind(text: str) -> str | None:
    if _ANY_SECRET.search(text) is None:  # one pass for the common case: no secret
        return None
    return next((kind for kind, rx in SECRET_PATTERNS.items() if rx.search(text)), None)


def find_secret(line: str) -> str | None:
    """The kind of secret ``line`` appears to contain (also inside base64), or None."""
    kind = _kind(line)
    if kind is not None:
        return kind
    for token in BASE64_TOKEN.findall(line):
        try:
            decoded = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_")
            text = decoded.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            continue
        if inner := next((k for k, rx in SECRET_PATTERNS.items() if rx.search(text)), None):
            return f"{inner} (base64-encoded)"
    return None


class NoSecrets(Rule):
    """Added lines must not contain secrets (default action: reject).

    Binary files cannot be scanned and get ``review``. Reasons never repeat the secret.
    """

    type: Literal["no_secrets"] = "no_secrets"
    globs: tuple[str, ...] = ("**",)
    action: Action = "reject"

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        found: dict[str, list[int]] = {}
        kinds: set[str] = set()
        binary: list[str] = []
        for path, number, line in added_text_lines(evidence, self.globs):
            if line is None or number is None:
                binary.append(path)
            elif (kind := find_secret(line)) is not None:
                found.setdefault(path, []).append(number)
                kinds.add(kind)
        if found:
            hits = located(found)
            return self.verdict(
                self.action,
                f"{describe_paths(hits)} {'adds' if len(hits) == 1 else 'add'} what looks like "
                f"{', '.join(sorted(kinds))}; remove it and reference the secret indirectly (an "
                "environment variable or secret manager) instead of writing it into files.",
                paths=list(found),
            )
        if binary:
            return self.verdict(
                "review",
                f"{describe_paths(binary)} is binary and cannot be scanned for secrets; "
                "write text files only, or ask a human to review it.",
                paths=binary,
            )
        return None
