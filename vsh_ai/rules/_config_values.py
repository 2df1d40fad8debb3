"""``config_values``: a denial on what changed config values say and what the file says.

It never proves anything (``allow_config`` does); it decides, with a specific reason,
the changes an allowance could only leave unproven:

* ``urls``: a value's URL downgraded (``https`` -> ``http``, ``wss`` -> ``ws``, TLS turned
  off in its query) or given a user:password (``url_action``, default reject), or pointed
  at a different host (``host_action``, default review). Unparsable files are compared
  by their added and removed lines.
* ``limits``: key pattern -> :class:`~vsh_ai.rules.KeyConstraint` (the ``allow_config``
  syntax, words matched in any case style); a present value that breaks its bound, whether
  absolute or relative to the current value (``factor``, ``step``), gets ``action``.
* ``tokens``: an added line (a comment too) holding an opaque token gets ``action``
  (``allow_config`` refuses it anyway; this names why instead of leaving it unproven).
* ``binds``: a listener address moved to every interface (``0.0.0.0``, ``::``, ``*``,
  ``:7500``) where the key or the host file's comment next to it names an admin endpoint
  (admin, dashboard, management, console, pprof, debug) gets ``bind_action``
  (default reject: the authorization forbids binding admin endpoints publicly); other
  listeners are left to the allowances (unproven: a review).
* ``comments``: the file's own comment next to a changed key that warns about the new
  value (names it with what it exposes or forbids: request bodies, headers, PII,
  secrets, "never in production"), or states a capacity it exceeds (``hosts have 8 GB``,
  ``at most 16``), gets ``action`` with that comment as the reason; so does a comment
  stating a limit, formula or relation the new value is not proven to keep (``under the
  database's max_connections (200)``, ``2 × vCPU + 1``, ``below nginx's 60 s``).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ..analysis._config import (
    MISSING,
    ConfigFormat,
    ConfigSyntaxError,
    detect_format,
    parse_config,
)
from ..analysis._config_context import comment_warning, key_context
from ..analysis._config_limits import unkept_limit
from ..analysis._config_words import canonical_key
from ..analysis._memo import analysis_of
from ..analysis._quantities import SIZE_UNITS, in_unit, size_bytes
from ..analysis._tokens import opaque_line
from ..analysis._urls import url_changes
from ._base import Action, GlobFields, Rule
from ._config_checker import Checker, key_changes
from ._constraints import KeyConstraint, short
from ._glob import matching
from ._key_patterns import name_glob
from ._paths import validate_globs

__all__ = ("ConfigValues",)

_MAX_KEYS = 2000  # changed keys checked per file; more is reviewed, not skipped
_MAX_READ = 200  # changed keys whose comments are read per file; more is reviewed
_LISTED = 3


class ConfigValues(Rule):
    """URL downgrades, values beyond documented limits and warnings in the file's own
    comments, in config files matching ``globs`` (a denial; see the module docs)."""

    type: Literal["config_values"] = "config_values"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: tuple[str, ...] = Field(description="Globs of config files this rule covers.")
    format: ConfigFormat = "auto"
    urls: bool = Field(default=True, description="Check URLs in changed values.")
    url_action: Action = Field(
        default="reject", description="A URL downgraded or given credentials."
    )
    host_action: Action = Field(default="review", description="A URL pointed at another host.")
    limits: dict[str, KeyConstraint] = Field(
        default_factory=dict, description="Key pattern -> the bound its present value keeps."
    )
    comments: bool = Field(
        default=True, description="Read the comments next to each changed key for warnings."
    )
    binds: bool = Field(
        default=True, description="Decide admin listeners moved to every interface."
    )
    bind_action: Action = Field(
        default="reject", description="An admin endpoint's listener moved to every interface."
    )
    tokens: bool = Field(
        default=True,
        description="Review added lines (comments too) holding an opaque token: a comment is "
        "free text, and a credential copied into one parses as no change at all.",
    )
    action: Action = Field(default="review", description="A limit broken or a comment warning.")
    description: str = Field(default="", description="What this rule is for.")

    _check_globs = field_validator("globs")(validate_globs)

    @field_validator("limits")
    @classmethod
    def _patterns(cls, limits: dict[str, KeyConstraint]) -> dict[str, KeyConstraint]:
        for pattern in limits:
            try:
                name_glob(pattern)
            except ValueError as error:
                raise ValueError(f"key pattern {pattern!r}: {error}") from None
        return limits

    def check(self, evidence: Evidence, /) -> Verdict | None:
        findings: dict[Action, list[str]] = {"reject": [], "review": []}
        for change in evidence.changes:
            if matching(self.globs, change.path, ignore_case=True) is None:
                continue
            if change.after is None or change.after.kind != "file":
                continue
            self._check_file(evidence, change.path, findings)
        for decision in ("reject", "review"):
            if findings[decision]:
                shown = findings[decision][:_LISTED]
                more = len(findings[decision]) - len(shown)
                tail = f" And {more} more." if more > 0 else ""
                return self.verdict(decision, " ".join(shown) + tail)
        return None

    def _check_file(self, evidence: Evidence, path: str, out: dict[Action, list[str]]) -> None:
        before_bytes = evidence.before_bytes(path)
        after_bytes = evidence.after_bytes(path)
        if after_bytes is None:
            return
        if self.tokens and before_bytes is not None:  # a new file is no proven edit anyway
            line = opaque_line(evidence, path, after_bytes)
            if line is not None:
                out[self.action].append(
                    f"{path} line {line} adds an opaque token (a key, password or hash?), "
                    "comments included; write names and placeholders, never values."
                )
        try:
            before = (
                MISSING if before_bytes is None else parse_config(before_bytes, self.format, path)
            )
            after = parse_config(after_bytes, self.format, path)
            changes = key_changes(evidence, before, after)
        except ConfigSyntaxError:
            if self.urls:
                self._line_urls(evidence, path, out)
            return  # the syntax itself is other rules' finding
        if not changes:
            return
        if len(changes) > _MAX_KEYS:
            out[self.action].append(
                f"{path}: {len(changes)} keys changed, more than this rule reads "
                f"({_MAX_KEYS}); a human must review them."
            )
            return
        if self.comments and len(changes) > _MAX_READ:
            out[self.action].append(
                f"{path}: {len(changes)} keys changed, more than this rule reads the file's "
                f"comments for ({_MAX_READ}); a human must review them."
            )
        text = after_bytes.decode("utf-8", "replace")
        before_text = before_bytes.decode("utf-8", "replace") if before_bytes else ""
        fmt = detect_format(path) if self.format == "auto" else self.format
        checker = Checker(self.limits, fmt, before, after, MISSING) if self.limits else None
        if checker is not None:
            checker.explain = False
            checker.before_text = before_text
        commented = any(mark in text for mark in ("#", ";", "//", "!"))
        for change in changes:
            key, old, new = change.key, change.before, change.after
            if self.urls:
                for problem in url_changes(old if old is not MISSING else None, new):
                    decision = self.host_action if problem.kind == "host" else self.url_action
                    out[decision].append(f"{path}: {key} {problem.text}; keep the URL as it was.")
            if new is MISSING:
                continue
            if (
                self.binds
                and _all_interfaces(new)
                and not _all_interfaces(old)
                and _names_admin(key, key_context(before_text, key).comments)
            ):
                out[self.bind_action].append(
                    f"{path}: {key} = {short(new)} listens on every interface, and this "
                    "listener serves an admin endpoint (its name or the file's comment "
                    "says so); keep it bound to the address it had."
                )
                continue
            if checker is not None:
                broken = checker.bounds(key, old, new)
                if broken:
                    out[self.action].append(
                        f"{path}: {broken} (a documented limit); a human must decide this value."
                    )
                    continue
            if self.comments and commented and len(changes) <= _MAX_READ:
                context = key_context(text, key)
                warning = comment_warning(context.comments, new, _size_of(key, new))
                if warning:
                    out[self.action].append(
                        f"{path}: the file's own comment next to {key} says "
                        f"{warning[:200]!r}; {key} = {short(new)} needs a human's decision."
                    )
                    continue
                stated = unkept_limit(context.comments, key, new)
                if stated:
                    out[self.action].append(
                        f"{path}: the file's own comment next to {key} states a limit "
                        f"{stated[:200]!r} that {key} = {short(new)} is not proven to keep; "
                        "a human must decide this value."
                    )

    def _line_urls(self, evidence: Evidence, path: str, out: dict[Action, list[str]]) -> None:
        memo = analysis_of(evidence)
        try:
            old_lines = memo.lines(evidence.before_bytes(path))
            new_lines = memo.lines(evidence.after_bytes(path))
        except ValueError:
            return
        kept = set(old_lines)
        removed = "\n".join(set(old_lines) - set(new_lines))
        added = "\n".join(line for line in new_lines if line not in kept)
        for problem in url_changes(removed or None, added):
            decision = self.host_action if problem.kind == "host" else self.url_action
            out[decision].append(f"{path}: a changed line {problem.text}; keep the URL as it was.")


_ANY_HOST = re.compile(
    r"(?i)^(?:[a-z][a-z0-9+.-]*://)?(?P<host>0\.0\.0\.0|\[::\]|::|\*|)(?::(?P<port>\d{1,5}))?/?$"
)
_ADMIN = re.compile(r"(?i)(?<![a-z])(?:admin|dashboard|management|console|pprof|debug)")


def _all_interfaces(value: Any) -> bool:
    """Whether ``value`` is a listen address on every interface (``0.0.0.0``, ``[::]:80``,
    ``*``, ``:7500``): a wildcard host, or no host but a port."""
    if not isinstance(value, str):
        return False
    match = _ANY_HOST.match(value.strip())
    return match is not None and bool(match.group("host") or match.group("port"))


def _names_admin(key: str, comments: tuple[str, ...]) -> bool:
    """Whether the key path or the comments next to it name an admin endpoint."""
    return bool(_ADMIN.search(canonical_key(key).replace("_", " ").replace(".", " "))) or any(
        _ADMIN.search(comment) for comment in comments
    )


def _size_of(key: str, value: Any) -> float | None:
    """``value`` as bytes when it is a size: a string with units, or a number whose key
    names its unit (``cache_size_mb``, ``max_memory_gb``)."""
    if isinstance(value, str):
        return size_bytes(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        last = canonical_key(key).rsplit(".", 1)[-1].rsplit("_", 1)[-1]
        if last in SIZE_UNITS and last not in ("k", "m", "g", "t", "b"):
            return in_unit(float(value), last, "size")
        if last == "bytes":
            return float(value)
    return None
