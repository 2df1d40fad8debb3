"""URL changes in config values: scheme downgrades, other hosts, embedded credentials.

:func:`url_changes` compares the URLs in a value before and after (paired in order, by
scheme family) and says what got weaker: ``https`` -> ``http`` (and ``wss``/``ws``,
``ldaps``/``ldap``, ``rediss``/``redis``...), a query switch that turns TLS off
(``sslmode=disable``, ``tls=false``), a different host (or another port or path on the
same host: another endpoint), or a user:password in the URL.
URLs are parsed with :func:`urllib.parse.urlsplit` (what most clients use).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

__all__ = ("UrlChange", "url_changes", "urls_in")

_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,15})://[^\s\"'<>`]+")
_SECURE: dict[str, str] = {
    "https": "http",
    "wss": "ws",
    "ftps": "ftp",
    "sftp": "ftp",
    "ldaps": "ldap",
    "smtps": "smtp",
    "imaps": "imap",
    "pop3s": "pop3",
    "rediss": "redis",
    "amqps": "amqp",
    "mqtts": "mqtt",
    "grpcs": "grpc",
    "nntps": "nntp",
}
_TLS_OFF = {
    "sslmode": ("disable", "allow", "prefer"),
    "ssl": ("false", "0", "no", "off"),
    "tls": ("false", "0", "no", "off"),
    "usessl": ("false", "0", "no", "off"),
    "verify": ("false", "0", "no", "off", "none"),
    "insecure": ("true", "1", "yes", "on"),
    "tlsinsecure": ("true", "1", "yes", "on"),
    "tlsallowinvalidcertificates": ("true", "1", "yes", "on"),
    "sslverify": ("false", "0", "no", "off"),
}
_MAX_URLS = 64

UrlProblem = Literal["downgrade", "credentials", "host"]


@dataclass(frozen=True, slots=True)
class UrlChange:
    """One weakening: its kind and a sentence saying exactly what changed."""

    kind: UrlProblem
    text: str


def urls_in(value: object) -> list[str]:
    """The URLs written in a string value (at most 64)."""
    if not isinstance(value, str) or "://" not in value:
        return []
    return [m.group(0).rstrip(".,;)") for m in _URL.finditer(value)][:_MAX_URLS]


def _family(scheme: str) -> str:
    return _SECURE.get(scheme, scheme)


def _same_family(url: str, scheme: str) -> bool:
    parts = _split(url)
    return parts is not None and _family(parts[0]) == _family(scheme)


def _split(url: str) -> tuple[str, str, bool, dict[str, str]] | None:
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        has_password = parts.password is not None and parts.password != ""
    except ValueError:
        return None
    query = {k.lower(): v.lower() for k, v in parse_qsl(parts.query, keep_blank_values=True)}
    return parts.scheme.lower(), host, has_password, query


def _endpoint(url: str) -> tuple[str, str] | None:
    """A URL's port (as written) and path, or None when it does not parse."""
    try:
        parts = urlsplit(url)
        port = "" if parts.port is None else str(parts.port)
    except ValueError:
        return None
    return port, parts.path.rstrip("/")


def url_changes(before: object, after: object) -> list[UrlChange]:
    """What the URLs of ``after`` weaken compared with ``before`` (``before`` may be None)."""
    new = urls_in(after)
    if not new:
        return []
    old = urls_in(before)
    out: list[UrlChange] = []
    unmatched = list(old)
    for url in new:
        parsed = _split(url)
        if parsed is None:
            continue
        scheme, host, password, query = parsed
        was = next((u for u in unmatched if _same_family(u, scheme)), None)
        if was is None and unmatched:
            was = unmatched[0]
        if was is not None:
            unmatched.remove(was)
        before_parts = _split(was) if was is not None else None
        if password and (before_parts is None or not before_parts[2]):
            out.append(UrlChange("credentials", "puts a user:password into the URL"))
        if before_parts is None:
            continue
        old_scheme, old_host, _old_password, old_query = before_parts
        if _SECURE.get(old_scheme) == scheme:
            out.append(UrlChange("downgrade", f"changes {old_scheme}:// to {scheme}:// (no TLS)"))
        for name, weak in _TLS_OFF.items():
            if query.get(name) in weak and old_query.get(name) not in weak:
                out.append(
                    UrlChange("downgrade", f"sets {name}={query[name]} in the URL (TLS off)")
                )
        if old_host and host and host != old_host:
            out.append(UrlChange("host", f"points to {host} instead of {old_host}"))
        elif old_host and host == old_host and was is not None and scheme == old_scheme:
            # Another port or path on the same host is another endpoint (/api/v1 ->
            # /admin): not weaker, but not a tuning either; reviewed like another host.
            before_end, after_end = _endpoint(was), _endpoint(url)
            if before_end is not None and after_end is not None and before_end != after_end:
                moved = (
                    f"port {before_end[0] or 'default'} -> {after_end[0] or 'default'}"
                    if before_end[0] != after_end[0]
                    else f"path {before_end[1] or '/'} -> {after_end[1] or '/'}"
                )
                out.append(UrlChange("host", f"points to another endpoint on {host} ({moved})"))
    return out
