"""What file content may reach a model provider: a glob allowlist judged by provenance,
and secret redaction."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._evidence import Evidence, normalize_path
from ..analysis._globs import check_globs, matching
from ..analysis._provenance import unshared_paths
from ..analysis._secrets import SecretFinding, redact_text

__all__ = ("Redaction", "SharingPolicy", "redact_secrets")


class Redaction(BaseModel):
    """One kind of secret replaced before sending, and how many times."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    count: int

    @staticmethod
    def tally(findings: tuple[SecretFinding, ...]) -> tuple[Redaction, ...]:
        """Findings of the shared detector, counted per kind (sorted by kind)."""
        counts = Counter(finding.kind for finding in findings)
        return tuple(Redaction(kind=k, count=n) for k, n in sorted(counts.items()))


def redact_secrets(text: str) -> tuple[str, tuple[Redaction, ...]]:
    """Replace every detected secret with ``[REDACTED:kind]``; the line count is kept.

    The detector is the project's one secret detector
    (:func:`vsh_ai.analysis._secrets.redact_text`), the same the ``no_secrets`` rule and
    protected-read checks use, so what a rule would flag is never sent as is: encoded
    (base64, hex, split pieces, ...) and unarmoured secrets included. Placeholders such
    as ``${VAR}`` are left alone.
    """
    redacted, findings = redact_text(text)
    return redacted, Redaction.tally(findings)


class SharingPolicy(BaseModel):
    """Which paths' contents may be sent to the model provider, and whether to redact.

    ``share`` is an explicit allowlist of globs over workspace-relative paths, in the
    rule glob dialect (root-anchored: ``config/**``; ``*.toml`` is a root file only,
    ``**/*.toml`` any depth). Empty: no content is sent, so work that needs it goes to
    review. Sharing is decided by provenance (:meth:`unshared`), not by name alone.
    ``withhold`` removes paths from the allowlist (only ever more cautious; matched
    ignoring case and Unicode width, as denied path sets are).
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
        if matching(self.withhold, wanted, ignore_case=True) is not None:  # as deny sets do
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
