"""Config denials: invariants on structured config files (the proof is ``allow_config``).

:class:`ConfigInvariants` (type ``config``) is a *denial*: keys that must keep their
value, keep existing, or have a required value. It never proves a change allowed; an
``allow_config`` allowance does that. Files are parsed by :mod:`vsh_ai.analysis._config`
(TOML, JSON, YAML with merge keys, INI/CFG/CONF, .env, .properties); invalid syntax or
ambiguous keys on either side is a finding.
Keep patterns are deliberately broad (a deny list may over-match, never prove):
dotted key paths where ``*`` matches within one segment, ``**`` any number of
segments, matching ignores case (and reads kebab- and camelCase keys as snake-case words:
``rate-limit`` and ``rateLimit`` are ``rate_limit``) and covers everything below a matched key
(``**.*tls*`` covers ``server.TLS.enabled`` and ``upstreams[0].verify_tls``; ``server.**``
covers ``server`` and everything below it, ``**`` every key). Matching is RE2 (linear
time): keys come from files the agent writes, and star-heavy patterns backtrack.
A reject must be true, so a ``reject`` rule rejects only keys a pattern names by a whole
word (``*check*``: ``health_check``, ``checks``, ``skipcheck``) that are not a size, count
or duration of the thing (``token_count``, ``session_timeout_s``); a key that only
shares letters with one (``skipverification``) or sizes it is reviewed; a key whose match
lies only inside a common word naming something else (``checkout``, ``tokenizer``), or
that sizes a cache of the thing (``token_cache_size``), is not covered at all.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ..analysis._config import (
    MISSING,
    ConfigFormat,
    ConfigSyntaxError,
    flatten,
    linear_regex,
    matchable,
    parse_config,
    typed_equal,
)
from ..analysis._config_directives import DirectiveKeys
from ..analysis._config_words import WordMatch, canonical_key, word_match
from ._base import Action, GlobFields, Rule, describe_paths
from ._config_checker import key_changes
from ._glob import matching
from ._paths import validate_globs

__all__ = ("ConfigFormat", "ConfigInvariants", "ConfigSyntaxError", "flatten", "parse_config")


def _key_pattern(pattern: str) -> str:
    """The RE2 body for one keep pattern (whole key, any case; see the module docs)."""
    segments = pattern.split(".")
    while len(segments) > 1 and segments[-1] == "**":
        segments.pop()  # 'a.**' is 'a' and everything below it: what 'a' covers
    if segments == ["**"]:
        return ".*"
    parts = []
    for index, segment in enumerate(segments):
        if segment == "**":  # never last here: zero or more whole segments
            parts.append(r"(?:[^.]+\.)*")
            continue
        body = "".join("[^.]*" if c == "*" else re.escape(c) for c in segment)
        parts.append(body if index == len(segments) - 1 else body + r"\.")
    return "".join(parts) + r"(?:[.\[].*)?"


@lru_cache(maxsize=512)
def _keys_regex(patterns: tuple[str, ...]) -> Any:
    """One RE2 matching any key covered by any of ``patterns`` (linear in the key)."""
    if not patterns:
        return linear_regex(r"[^\x00-\x{10FFFF}]")
    alternatives = "|".join(f"(?:{_key_pattern(p)})" for p in patterns)
    return linear_regex(f"(?is)(?:{alternatives})")


@lru_cache(maxsize=65536)
def _covers(patterns: tuple[str, ...], key: str) -> bool:
    """True when ``key`` is a pattern or lies below one (see the module docs), as written
    or as snake-case words (``rate-limit`` and ``rateLimit`` are ``rate_limit``)."""
    regex = _keys_regex(patterns)
    if regex.fullmatch(matchable(key)) is not None:
        return True
    words = canonical_key(key)
    return words != key and regex.fullmatch(matchable(words)) is not None


# A key whose last word is one of these sizes, counts or times the thing a keep pattern
# named (token_cache_size, session_timeout_s): changing it is reviewed, never rejected.
_QUANTITY_WORDS_TEXT = """
    size sizes count counts capacity timeout timeouts ttl interval ms s sec secs second
    seconds minute minutes min hour hours day days mb kb gb bytes entries workers threads
    retries buffer len length max
"""
_QUANTITY_WORDS = frozenset(_QUANTITY_WORDS_TEXT.split())
# ... except a cache's size (token_cache_size, session_cache_entries): it names the cache,
# which holds what it held before, only more or fewer of them; not covered at all. A
# cache's TTL or timeout (jwks_cache_ttl keeps revoked keys trusted) stays reviewed.
_CACHE_SIZE_WORDS = frozenset(
    ("size", "sizes", "entries", "capacity", "count", "mb", "kb", "gb", "bytes")
)


def _same(actual: Any, expected: Any) -> bool:
    if typed_equal(actual, expected):
        return True
    if isinstance(actual, str) and not isinstance(expected, str):  # INI/.env values are text
        text = json.dumps(expected)
        return actual == text or actual.lower() == text.lower()
    return False


class ConfigInvariants(Rule):
    """Invariants on structured config files matching ``globs`` (a denial).

    * ``keep``: keys that must keep their typed value (present/absent included);
    * ``require``: key paths that must have exactly these values after the change;
    * ``keep_present``: keys that must not be removed;
    * ``keep_except``: keys ``keep`` does not cover though a pattern names them.
    Globs match in any case; unparsable files are a finding (``action``).
    """

    type: Literal["config"] = "config"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: tuple[str, ...] = Field(description="Globs of config files this rule covers.")
    format: ConfigFormat = "auto"
    keep: tuple[str, ...] = ()
    keep_except: tuple[str, ...] = Field(
        default=(),
        description=(
            "Keys the keep patterns do not cover (same syntax): settings that only share a "
            "protected word, e.g. **.tls_handshake_timeout (it times a handshake and "
            "weakens no TLS setting)."
        ),
    )
    require: dict[str, Any] = Field(default_factory=dict)
    keep_present: tuple[str, ...] = ()
    allow_delete: bool = False
    action: Action = "review"

    _check_globs = field_validator("globs")(validate_globs)

    @model_validator(mode="after")
    def _something_to_check(self) -> ConfigInvariants:
        if not (self.keep or self.require or self.keep_present):
            raise ValueError(
                "set at least one of keep, require or keep_present (to prove changes "
                "allowed, use an allow_config allowance)"
            )
        return self

    def check(self, evidence: Evidence, /) -> Verdict | None:
        problems: list[str] = []
        loose: list[str] = []
        for change in evidence.changes:
            if matching(self.globs, change.path, ignore_case=True) is None:
                continue
            if change.before is not None and change.before.kind != "file":
                continue
            problems.extend(self._check_file(evidence, change.path, loose))
        if problems:
            return self.verdict(self.action, " ".join(problems))
        if loose:
            return self.verdict("review", " ".join(loose))
        return None

    def _strength(self, key: str) -> WordMatch:
        """``word`` when a keep pattern names ``key`` by a whole word (:func:`word_match`)
        and the key is no size, count or duration of it; ``other`` when every match is
        inside a word that names something else (``checkout``); else ``letters``."""
        found: WordMatch = "other"
        words = canonical_key(key).rsplit(".", 1)[-1].split("_")
        if len(words) >= 2 and words[-2] == "cache" and words[-1] in _CACHE_SIZE_WORDS:
            return "other"
        for pattern in self.keep:
            if not _covers((pattern,), key):
                continue
            core = pattern.rsplit(".", 1)[-1]
            stem = core.strip("*")
            match: WordMatch = "word" if "*" not in core else "letters"
            if "*" in core and "*" not in stem:  # one stem: is it a word of the key?
                match = word_match(stem, key)
            if match == "word":
                found = match
                break
            if match == "letters":
                found = match
        if found == "word" and words[-1] in _QUANTITY_WORDS:
            return "letters"
        return found

    def _tree(self, data: bytes | None, path: str) -> Any:
        return MISSING if data is None else parse_config(data, self.format, path)

    def _check_file(self, evidence: Evidence, path: str, loose: list[str]) -> list[str]:
        before_bytes = evidence.before_bytes(path)
        after_bytes = evidence.after_bytes(path)
        if after_bytes is None:
            if self.allow_delete:
                return []
            return [f"{path} is a protected config file and must not be deleted; restore it."]
        try:
            before = self._tree(before_bytes, path)
            flat_before = flatten(before) if self.keep_present else {}
        except ConfigSyntaxError as error:  # not the change's fault: a review, never a reject
            loose.append(
                f"{path} could not be parsed before the change ({error}); a human must review it."
            )
            return []
        try:
            after = self._tree(after_bytes, path)
            flat_after = flatten(after)
            changes = key_changes(evidence, before, after) if self.keep else ()
        except ConfigSyntaxError as error:
            return [
                f"{path} is not valid after the change ({error}); "
                "fix the syntax and keep every key unique."
            ]
        if before is not MISSING and isinstance(before, DirectiveKeys) != isinstance(
            after, DirectiveKeys
        ):
            loose.append(
                f"{path}: its syntax changed between INI sections and directive lines (the "
                "service reads one of them); a human must review the change."
            )
        problems: list[str] = []
        strength = {
            c.key: self._strength(c.key)
            for c in changes
            if _covers(self.keep, c.key) and not _covers(self.keep_except, c.key)
        }
        changed = [
            k
            for k, s in strength.items()
            if s == "word" or (s, self.action) == ("letters", "review")
        ]
        weak = [k for k, s in strength.items() if s == "letters" and k not in changed]
        if weak:
            loose.append(
                f"{path}: {describe_paths(weak)} may be a protected setting (its name shares "
                "letters with one, or it sizes or times one); a human must review the change."
            )
        if changed:
            problems.append(
                f"{path}: {describe_paths(changed)} must keep the current value; "
                "restore it and change only other keys."
            )
        wrong = [
            k
            for k, v in self.require.items()
            if (got := flat_after.get(k, MISSING)) is MISSING or not _same(got, v)
        ]
        if wrong:
            wanted = ", ".join(f"{k} = {json.dumps(self.require[k])}" for k in wrong)
            problems.append(f"{path} must have {wanted}; set exactly that value.")
        removed = [k for k in flat_before if k not in flat_after and _covers(self.keep_present, k)]
        if removed:
            problems.append(f"{path}: {describe_paths(removed)} must not be removed; put it back.")
        return problems
