"""What file content may reach a model provider: a glob allowlist judged by provenance,
and secret redaction."""

from __future__ import annotations

import re
from collections import Counter
from functools import partial

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._evidence import Evidence, normalize_path
from ..analysis._provenance import unshared_paths
from ..rules._glob import check_globs, matching
from ..rules._secrets import BASE64_TOKEN, SECRET_PATTERNS, find_secret

__all__ = ("Redaction", "SharingPolicy", "redact_secrets")


class Redaction(BaseModel):
    """One kind of secret replaced before sending, and how many times."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    count: int


_PRIVATE_KEY = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(.*?)"
    r"(-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",  # unterminated: to the end
    re.DOTALL,
)
_SECRET_KEY = re.compile(
    r"(?i)password|passwd|pwd|secret|api[_-]?key|access[_-]?key|token|private[_-]?key|credential"
)
# (kind, pattern, group holding the secret value). Every bare token NoSecrets flags
# (rules/_secrets.py) is included, so content the rule would reject is never sent as is.
_INLINE: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("aws_access_key_id", SECRET_PATTERNS["an AWS access key id"], 0),
    (
        "aws_secret_access_key",
        re.compile(r"(?i)(aws_secret_access_key\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{40})"),
        2,
    ),
    ("github_token", re.compile(r"\b((?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,})"), 1),
    ("slack_token", SECRET_PATTERNS["a Slack token"], 0),
    ("api_key", SECRET_PATTERNS["an OpenAI/Anthropic-style API key"], 0),
    ("stripe_key", SECRET_PATTERNS["a Stripe key"], 0),
    ("google_api_key", re.compile(r"\b(AIza[0-9A-Za-z_-]{35})"), 1),
    ("jwt", re.compile(r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"), 1),
    ("jwt", SECRET_PATTERNS["a JSON web token"], 0),
    ("bearer_token", re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=-]{12,})"), 2),
    ("url_password", re.compile(r"([a-z][a-z0-9+.-]*://[^/\s:@]+:)([^@\s/]+)(@)"), 2),
)
# Any `key = value` / `key: value`; the key is then checked against _SECRET_KEY (linear time).
_ASSIGNMENT = re.compile(r"([\w.-]+[\"']?[ \t]*[:=][ \t]*)(\"[^\"\n]+\"|'[^'\n]+'|[^\s\"',;#}\]]+)")
_NOT_A_SECRET = re.compile(r"(?i)(?:-?\d+(?:\.\d+)?|true|false|null|none|yes|no|\$\{?[\w.]+\}?)")


def _assignment_kind(key: str) -> str:
    key = key.lower()
    if "pass" in key or "pwd" in key:
        return "password"
    if "token" in key:
        return "token"
    if "key" in key:
        return "api_key"
    return "secret"


def redact_secrets(text: str) -> tuple[str, tuple[Redaction, ...]]:
    """Replace secret-looking values with ``[REDACTED:kind]``; line count is preserved.

    A private key block keeps its BEGIN/END lines and each body line becomes a marker,
    so diff line numbers stay true. A base64 run hiding a secret is replaced whole.
    Numbers, booleans and ``${VAR}`` references assigned to secret-sounding keys are
    left alone.
    """
    counts: Counter[str] = Counter()

    def key_block(match: re.Match[str]) -> str:
        counts["private_key"] += 1
        lines = match.group(2).split("\n")
        masked = ["[REDACTED:private_key]" if line.strip() else line for line in lines]
        return match.group(1) + "\n".join(masked) + match.group(3)

    def swap(match: re.Match[str], group: int, kind: str) -> str:
        counts[kind] += 1
        start, end = match.span(group)
        whole, offset = match.group(0), match.start(0)
        return whole[: start - offset] + f"[REDACTED:{kind}]" + whole[end - offset :]

    def encoded(match: re.Match[str]) -> str:
        if find_secret(match.group(0)) is None:
            return match.group(0)
        counts["encoded_secret"] += 1
        return "[REDACTED:encoded_secret]"

    text = _PRIVATE_KEY.sub(key_block, text)
    for kind, pattern, group in _INLINE:
        text = pattern.sub(partial(swap, group=group, kind=kind), text)
    text = BASE64_TOKEN.sub(encoded, text)  # a secret inside base64, as NoSecrets decodes it

    def assignment(match: re.Match[str]) -> str:
        value = match.group(2).strip("\"'")
        if (
            not _SECRET_KEY.search(match.group(1))
            or _NOT_A_SECRET.fullmatch(value)
            or "[REDACTED:" in value
        ):
            return match.group(0)
        kind = _assignment_kind(match.group(1))
        counts[kind] += 1
        raw = match.group(2)
        quote = raw[0] if raw[0] in "\"'" else ""
        return f"{match.group(1)}{quote}[REDACTED:{kind}]{quote}"

    text = _ASSIGNMENT.sub(assignment, text)
    return text, tuple(Redaction(kind=k, count=n) for k, n in sorted(counts.items()))


class SharingPolicy(BaseModel):
    """Which paths' contents may be sent to the model provider, and whether to redact.

    ``share`` is an explicit allowlist of globs over workspace-relative paths, with the
    same syntax as rule globs (``config/**``; ``*.toml`` without a slash matches the
    name at any depth). Empty: no content is sent, so work that needs it goes to review.
    ``withhold`` removes paths from the allowlist (only ever more cautious).
    ``redact_secrets`` replaces secret-looking values with ``[REDACTED:kind]`` before sending.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    share: tuple[str, ...] = Field(default=(), description="Globs of paths whose content is sent.")
    withhold: tuple[str, ...] = Field(default=(), description="Globs never sent, even if shared.")
    redact_secrets: bool = True

    _compiles = field_validator("share", "withhold")(check_globs)

    def allows(self, path: str) -> bool:
        """True when the content of ``path`` may be sent to the provider."""
        if path != path.strip():
            return False  # ' public/x' is not 'public/x': never share a respelled path
        wanted = normalize_path(path)
        if matching(self.withhold, wanted) is not None:
            return False
        return matching(self.share, wanted) is not None

    def unshared(self, evidence: Evidence) -> frozenset[str]:
        """Paths of ``evidence`` whose content must not be sent, decided by provenance.

        A path is unshared when :meth:`allows` refuses its name, or when bytes that were
        ever at such a path may have flowed into it (renamed, moved, copied, read then
        written): see :func:`vsh_ai.analysis._provenance.unshared_paths`.
        """
        return unshared_paths(evidence, self.allows)

    def prepare(self, text: str) -> tuple[str, tuple[Redaction, ...]]:
        """The text as it will be sent (redacted when enabled) and what was redacted."""
        if not self.redact_secrets:
            return text, ()
        return redact_secrets(text)
