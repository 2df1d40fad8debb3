"""Public values that look random but are meant to be shared: never opaque tokens.

Explicit recognisers, each checking the value's structure, not just its shape:

- UUIDs (RFC 4122 layout: 8-4-4-4-12 hex digits);
- checksums: hex digests of a digest length (MD5 to SHA-512) labelled as such (``sha256``,
  ``checksum``, ``digest``, ``sha256:``...) or followed by a file name as ``sha256sum``
  prints them; Subresource Integrity values (``sha384-<base64>`` of the digest length);
- git commit ids: 40 or 64 hex digits labelled (``commit``, ``rev``, ``sha``, ``@``);
- SSH public keys: ``ssh-ed25519 AAAA...`` whose base64 decodes to a key blob naming the
  same algorithm; lines inside a ``BEGIN PGP PUBLIC KEY BLOCK`` armour.

The maintained detector has the last word: a line :func:`find_secrets` flags is never
public (a UUID assigned to ``api_key`` is an API key). Nor is a line whose own words say
secret, key, token or password unless a file name says what its checksum is of
(``SESSION_SECRET (sha256): <hex>`` is a credential, ``app.tar.gz sha256 <hex>`` is not).
"""

from __future__ import annotations

import base64
import binascii
import re

from ._secrets import find_secrets

__all__ = ("pgp_public_lines", "public_spans")

_UUID = re.compile(
    r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"(?![0-9A-Za-z])"
)
_DIGEST_LENGTHS = frozenset((32, 40, 56, 64, 96, 128))
_HEX = re.compile(
    r"(?<![0-9A-Za-z])(?P<prefix>(?:sha(?:1|224|256|384|512)|md5):)?(?P<hex>[0-9a-fA-F]{32,128})(?![0-9A-Za-z])"
)
_LABEL = re.compile(
    r"(?i)sha-?(?:1|224|256|384|512)|md5|checksum|digest|hash|integrity|fingerprint|commit|"
    r"\brev(?:ision)?\b|\bsha\b|\bref\b|@"
)
_FILE_AFTER = re.compile(r"[ \t]+\*?[\w./\-]+\.\w+")
_SRI = re.compile(r"(?<![0-9A-Za-z])sha(?P<bits>256|384|512)-(?P<b64>[A-Za-z0-9+/]{40,88}={0,2})")
_SSH = re.compile(
    r"(?P<kind>ssh-(?:ed25519|rsa|dss)|ecdsa-sha2-nistp(?:256|384|521)|"
    r"sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)[ \t]+(?P<b64>AAAA[A-Za-z0-9+/]+={0,3})"
)
_PGP = re.compile(r"-----BEGIN PGP PUBLIC KEY BLOCK-----(?s:.*?)-----END PGP PUBLIC KEY BLOCK-----")


def public_spans(line: str) -> list[tuple[int, int]]:
    """Spans of ``line`` holding public values (empty when the detector flags the line)."""
    spans: list[tuple[int, int]] = []
    for match in _UUID.finditer(line):
        spans.append(match.span())
    labelled = _LABEL.search(line) is not None
    for match in _HEX.finditer(line):
        digest = match.group("hex")
        if len(digest) not in _DIGEST_LENGTHS:
            continue
        if match.group("prefix") or labelled or _FILE_AFTER.match(line, match.end()):
            spans.append(match.span())
    for match in _SRI.finditer(line):
        if _sri_length(match.group("b64")) == int(match.group("bits")) // 8:
            spans.append(match.span())
    for match in _SSH.finditer(line):
        if _ssh_blob_names(match.group("b64"), match.group("kind")):
            spans.append(match.span())
    if spans and find_secrets(line):
        return []  # the detector says this line holds a secret: nothing here is public
    if spans and _names_a_secret(line, spans):
        return []  # `SESSION_SECRET (sha256): <hex>`: a credential, whatever it is called
    return spans


_SECRET_WORDS = re.compile(
    r"(?i)secret|passw|passphrase|token|api[_\-\s]?key|private|credential|signing|salt|pepper|"
    r"(?<![a-z])(?:key|auth|pwd|pin)(?![a-z])|_key(?![a-z])|key_"
)
_FILE_NAME = re.compile(r"(?<![\w.])[\w\-]+(?:\.[A-Za-z][A-Za-z0-9]{0,7})+(?![\w])")


def _names_a_secret(line: str, spans: list[tuple[int, int]]) -> bool:
    """The words around the values say secret, key, token or password, and no file name
    says what the value is a checksum of (``app.tar.gz``): then it is not public."""
    rest = line
    for start, end in sorted(spans, reverse=True):
        rest = rest[:start] + " " + rest[end:]
    return _SECRET_WORDS.search(rest) is not None and _FILE_NAME.search(rest) is None


def pgp_public_lines(text: str) -> set[int]:
    """1-based numbers of the lines inside PGP public key armour in ``text``."""
    out: set[int] = set()
    if "PGP PUBLIC KEY BLOCK" not in text:
        return out
    for match in _PGP.finditer(text):
        first = text.count("\n", 0, match.start()) + 1
        last = first + text.count("\n", match.start(), match.end())
        out.update(range(first, last + 1))
    return out


def _sri_length(value: str) -> int:
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return -1


def _ssh_blob_names(value: str, kind: str) -> bool:
    """The key blob starts with its algorithm name, length-prefixed (RFC 4253)."""
    try:
        blob = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    size = int.from_bytes(blob[:4], "big")
    return blob[4 : 4 + size] == kind.encode()
