"""Who may use the inbox: login tokens, sessions, CSRF tokens, origin and address rules.

* A token logs a person in as its principal: one random token printed at start (as
  Jupyter does), or a tokens file (one ``<token> <principal>`` per line). Tokens are
  compared in constant time; failed logins are logged and throttled per client.
* A session is a random id in a cookie (``HttpOnly``, ``SameSite=Strict``, path ``/``)
  mapped, in this process only, to its principal, its CSRF token and its expiry.
* Every state change (a POST) needs a matching ``Origin`` (or, without one, ``Referer``)
  and, once logged in, the session's CSRF token.
* The server binds to a loopback address unless the operator passes an explicit flag.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..toolset._principal import InvalidPrincipal, check_principal

__all__ = (
    "MIN_TOKEN_CHARS",
    "SESSION_COOKIE",
    "LoginThrottle",
    "Session",
    "Sessions",
    "TokenFileError",
    "Tokens",
    "check_bind_address",
    "log",
    "same_origin",
)

log = logging.getLogger("vsh_ai.inbox")

SESSION_COOKIE = "vsh_inbox_session"
MIN_TOKEN_CHARS = 16


class TokenFileError(ValueError):
    """A tokens file that cannot be used (the message names the file, the line and the fix)."""


class Tokens:
    """Login tokens and the principal each one logs in as."""

    def __init__(self, principals: dict[str, str]) -> None:
        if not principals:
            raise TokenFileError("no login tokens: give at least one")
        self._principals = dict(principals)

    @classmethod
    def generated(cls, principal: str) -> tuple[Tokens, str]:
        """One fresh random token for ``principal`` (returned to print at start)."""
        token = secrets.token_urlsafe(32)
        return cls({token: check_principal(principal, where="--principal")}), token

    @classmethod
    def from_file(cls, path: Path) -> Tokens:
        """``<token> <principal>`` per line; blank lines and ``#`` comments are skipped."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise TokenFileError(f"{path}: cannot read the tokens file ({error})") from None
        principals: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            token, _, principal = line.partition(" ")
            principal = principal.strip()
            where = f"{path}:{number}"
            if not principal:
                raise TokenFileError(
                    f"{where}: expected '<token> <principal>' (a token, a space, who it logs in as)"
                )
            if len(token) < MIN_TOKEN_CHARS:
                raise TokenFileError(
                    f"{where}: the token has {len(token)} characters; use at least "
                    f"{MIN_TOKEN_CHARS} random ones (python -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))')"
                )
            if token in principals:
                raise TokenFileError(f"{where}: this token is already given on an earlier line")
            try:
                principals[token] = check_principal(principal, where=f"{where}: the principal")
            except InvalidPrincipal as error:
                raise TokenFileError(str(error)) from None
        if not principals:
            raise TokenFileError(f"{path}: holds no '<token> <principal>' line")
        return cls(principals)

    def principal(self, offered: str) -> str | None:
        """Who ``offered`` logs in as, else None (every token compared, in constant time)."""
        found: str | None = None
        data = offered.encode()
        for token, principal in self._principals.items():
            if hmac.compare_digest(token.encode(), data):
                found = principal
        return found


@dataclass
class Session:
    id: str
    principal: str
    csrf: str
    expires: float

    def csrf_ok(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(self.csrf.encode(), offered.encode())


@dataclass
class Sessions:
    """Sessions of this process (a restart logs everyone out)."""

    lifetime_s: float = 12 * 3600
    _by_id: dict[str, Session] = field(default_factory=dict)

    def create(self, principal: str) -> Session:
        session = Session(
            id=secrets.token_urlsafe(32),
            principal=principal,
            csrf=secrets.token_urlsafe(32),
            expires=time.monotonic() + self.lifetime_s,
        )
        self._by_id[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._by_id.get(session_id)
        if session is None:
            return None
        if session.expires < time.monotonic():
            del self._by_id[session_id]
            return None
        return session

    def drop(self, session_id: str | None) -> None:
        if session_id:
            self._by_id.pop(session_id, None)


@dataclass
class LoginThrottle:
    """At most ``limit`` failed logins per client per ``window_s`` seconds."""

    limit: int = 10
    window_s: float = 60.0
    _failures: dict[str, list[float]] = field(default_factory=dict)

    def _recent(self, client: str) -> list[float]:
        now = time.monotonic()
        kept = [t for t in self._failures.get(client, []) if now - t < self.window_s]
        self._failures[client] = kept
        return kept

    def blocked(self, client: str) -> bool:
        return len(self._recent(client)) >= self.limit

    def failed(self, client: str) -> None:
        self._recent(client).append(time.monotonic())


def same_origin(origin: str | None, referer: str | None, host: str, scheme: str) -> bool:
    """Whether a state-changing request comes from this server's own pages: ``Origin``
    equals ``scheme://host`` (or, when a browser sent no ``Origin``, the ``Referer``
    has that origin). Neither header: refused."""
    expected = f"{scheme}://{host}".lower()
    if origin is not None:
        return origin.lower() == expected
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}".lower() == expected
    return False


def check_bind_address(host: str, *, allow_remote: bool) -> None:
    """Refuse anything but a loopback address unless ``allow_remote`` (ValueError)."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_remote:
        raise ValueError(
            f"--host {host} is not a loopback address: anyone who can reach it may try tokens "
            "against the inbox. Serve on 127.0.0.1 (the default) behind your own HTTPS proxy, "
            "or pass --allow-remote to bind it anyway"
        )
