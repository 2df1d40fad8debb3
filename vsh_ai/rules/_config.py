"""Structured config invariants for TOML, JSON, YAML, INI and .env files.

Both sides are parsed from their complete bytes; invalid syntax or duplicate keys on
either side is a ``review``. Keys are dotted paths (``server.tls.enabled``); a
segment may use ``*`` to match any one key (``dependencies.*``).
"""

from __future__ import annotations

import configparser
import hashlib
import json
import re
import tomllib
from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator, model_validator

from .._evidence import Evidence
from .._verdict import Verdict
from ._base import Action, Rule, describe_paths
from ._glob import matching
from ._paths import validate_globs

__all__ = ("ConfigFormat", "ConfigInvariants", "ConfigSyntaxError", "flatten", "parse_config")

ConfigFormat = Literal["auto", "toml", "json", "yaml", "ini", "env"]
_MISSING: Any = object()


class ConfigSyntaxError(ValueError):
    """A config file could not be parsed (bad syntax or a duplicate key)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    pass


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    keys: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in keys:
            raise ConfigSyntaxError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
        keys.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _unique_mapping,
)


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ConfigSyntaxError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _parse_env(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key or not key.replace("_", "").replace(".", "").isalnum():
            raise ConfigSyntaxError(f"line {number} is not KEY=VALUE")
        if key in out:
            raise ConfigSyntaxError(f"duplicate key {key!r} (line {number})")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[key] = value
    return out


def _parse_ini(text: str) -> dict[str, Any]:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    out: dict[str, Any] = {name: dict(parser[name]) for name in parser.sections()}
    if parser.defaults():
        out["DEFAULT"] = dict(parser.defaults())
    return out


@lru_cache(maxsize=4096)
def detect_format(path: str) -> ConfigFormat:
    """The config format a file name implies (``auto`` when it implies none)."""
    name = path.rsplit("/", 1)[-1]
    suffix = name[name.rfind(".") :].lower() if "." in name[1:] else ""
    if name == ".env" or name.startswith(".env.") or suffix == ".env":
        return "env"
    formats: dict[str, ConfigFormat] = {
        ".toml": "toml",
        ".json": "json",
        ".yaml": "yaml",
        ".yml": "yaml",
        ".ini": "ini",
        ".cfg": "ini",
        ".conf": "ini",
    }
    return formats.get(suffix, "auto")


def parse_config(data: bytes, fmt: ConfigFormat, path: str = "") -> Any:
    """Parse complete config bytes; raise :class:`ConfigSyntaxError` on bad input.

    Results are cached by content: treat them as read-only.
    """
    if fmt == "auto":
        fmt = detect_format(path)
        if fmt == "auto":
            raise ConfigSyntaxError(f"cannot tell the format of {path!r}; set format explicitly")
    key = (hashlib.sha256(data).digest(), fmt)
    if key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key]
    parsed = _parse(data, fmt)
    if len(data) <= _CACHE_MAX_BYTES:
        _PARSED[key] = parsed
        while len(_PARSED) > _CACHE_ENTRIES:
            _PARSED.popitem(last=False)
    return parsed


_PARSED: OrderedDict[tuple[bytes, str], Any] = OrderedDict()
_CACHE_ENTRIES = 8192
_CACHE_MAX_BYTES = 64 * 1024


def _parse(data: bytes, fmt: ConfigFormat) -> Any:
    try:
        text = data.decode("utf-8")
        if fmt == "toml":
            return tomllib.loads(text)
        if fmt == "json":
            return json.loads(text, object_pairs_hook=_json_pairs)
        if fmt == "yaml":
            return yaml.load(text, Loader=_UniqueKeyLoader)
        if fmt == "ini":
            return _parse_ini(text)
        return _parse_env(text)
    except ConfigSyntaxError:
        raise
    except (ValueError, yaml.YAMLError, configparser.Error) as error:
        raise ConfigSyntaxError(str(error).splitlines()[0] if str(error) else repr(error)) from None


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists and scalars are leaves.

    Two keys that flatten to the same dotted path (``{"a": {"b": 1}, "a.b": 2}``)
    raise :class:`ConfigSyntaxError`: one could hide a change to the other.
    """
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            for flat_key, leaf in flatten(inner, f"{prefix}{key}.").items():
                if flat_key in out:
                    raise ConfigSyntaxError(f"ambiguous key {flat_key!r} (spelled twice)")
                out[flat_key] = leaf
        return out
    return {prefix[:-1]: value} if prefix else {}


def _get(tree: Any, key: str) -> Any:
    if isinstance(tree, Mapping) and key in tree:  # flat keys such as .env's
        return tree[key]
    node = tree
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _key_pattern(pattern: str) -> str:
    parts = []
    for segment in pattern.split("."):
        if segment == "**":
            parts.append(r"(?:[^.]+\.)*")
        else:
            parts.append(re.escape(segment).replace(r"\*", "[^.]*") + r"\.")
    return "".join(parts).removesuffix(r"\.") + r"(?:\..*)?"


@lru_cache(maxsize=512)
def _keys_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching any key covered by any of ``patterns``."""
    alternatives = "|".join(f"(?:{_key_pattern(p)})" for p in patterns) or "(?!)"
    return re.compile(rf"(?:{alternatives})\Z", re.IGNORECASE)


def _covers(pattern: str | tuple[str, ...], key: str) -> bool:
    """True when ``key`` is a pattern or lies below one.

    ``*`` matches within one key segment, ``**`` any number of whole segments;
    matching ignores case (``**.*tls*`` covers ``server.TLS.enabled``).
    """
    patterns = (pattern,) if isinstance(pattern, str) else pattern
    return _keys_regex(patterns).match(key) is not None


def _same(actual: Any, expected: Any) -> bool:
    if actual == expected and type(actual) is type(expected):
        return True
    if isinstance(actual, str) and not isinstance(expected, str):  # INI/.env values are text
        text = json.dumps(expected) if not isinstance(expected, str | bool) else str(expected)
        return actual == text or actual.lower() == text.lower() == str(expected).lower()
    return isinstance(actual, int | float) and not isinstance(actual, bool) and actual == expected


class ConfigInvariants(Rule):
    """Invariants on structured config files matching ``globs`` (checked when they change).

    * ``keep``: keys that must keep their value (present/absent included);
    * ``require``: keys that must have exactly these values after the change;
    * ``keep_present``: keys that must not be removed;
    * ``may_change``: if set, only these keys may change value; everything else
      (other keys, added or removed keys) must stay equal, except keys in ``may_add``.
    """

    type: Literal["config"] = "config"
    globs: tuple[str, ...] = Field(description="Globs of config files this rule covers.")
    format: ConfigFormat = "auto"
    keep: tuple[str, ...] = ()
    require: dict[str, Any] = Field(default_factory=dict)
    keep_present: tuple[str, ...] = ()
    may_change: tuple[str, ...] | None = None
    may_add: tuple[str, ...] = ()
    allow_delete: bool = False
    action: Action = "review"

    _check_globs = field_validator("globs")(validate_globs)

    @model_validator(mode="after")
    def _something_to_check(self) -> ConfigInvariants:
        if not (self.keep or self.require or self.keep_present or self.may_change is not None):
            raise ValueError("set at least one of keep, require, keep_present or may_change")
        return self

    def check(self, evidence: Evidence, /) -> Verdict | None:
        problems: list[str] = []
        for change in evidence.changes:
            if matching(self.globs, change.path) is None:
                continue
            if change.before is not None and change.before.kind != "file":
                continue
            problems.extend(self._check_file(evidence, change.path))
        if not problems:
            return None
        return self.verdict(self.action, " ".join(problems))

    def _check_file(self, evidence: Evidence, path: str) -> list[str]:
        before_bytes = evidence.before_bytes(path)
        after_bytes = evidence.after_bytes(path)
        if after_bytes is None:
            if self.allow_delete:
                return []
            return [f"{path} is a protected config file and must not be deleted; restore it."]
        try:
            before = {} if before_bytes is None else parse_config(before_bytes, self.format, path)
        except ConfigSyntaxError as error:
            return [
                f"{path} could not be parsed before the change ({error}); a human must review it."
            ]
        try:
            after = parse_config(after_bytes, self.format, path)
        except ConfigSyntaxError as error:
            return [
                f"{path} is not valid after the change ({error}); "
                "fix the syntax and keep every key unique."
            ]
        try:
            flat_before = flatten(before)
        except ConfigSyntaxError as error:
            return [f"{path} is ambiguous before the change ({error}); a human must review it."]
        try:
            flat_after = flatten(after)
        except ConfigSyntaxError as error:
            return [
                f"{path} is not valid after the change ({error}); "
                "fix the syntax and keep every key unique."
            ]
        problems: list[str] = []
        changed = _changed_keys(self.keep, flat_before, flat_after) if self.keep else []
        if changed:
            problems.append(
                f"{path}: {describe_paths(changed)} must keep the current value; "
                "restore it and change only other keys."
            )
        wrong = [
            k
            for k, v in self.require.items()
            if (got := _get(after, k)) is _MISSING or not _same(got, v)
        ]
        if wrong:
            wanted = ", ".join(f"{k} = {json.dumps(self.require[k])}" for k in wrong)
            problems.append(f"{path} must have {wanted}; set exactly that value.")
        removed = [k for k in flat_before if k not in flat_after and _covers(self.keep_present, k)]
        if removed:
            problems.append(f"{path}: {describe_paths(removed)} must not be removed; put it back.")
        if self.may_change is not None:
            problems.extend(self._only_allowed(path, flat_before, flat_after))
        return problems

    def _only_allowed(
        self, path: str, flat_before: dict[str, Any], flat_after: dict[str, Any]
    ) -> list[str]:
        bad: list[str] = []
        for key in dict.fromkeys([*flat_before, *flat_after]):
            old, new = flat_before.get(key, _MISSING), flat_after.get(key, _MISSING)
            if old is not _MISSING and new is not _MISSING and old == new:
                continue
            allowed = self.may_change or ()
            if old is _MISSING:  # added
                ok = _covers(self.may_add, key) or _added_below_existing(key, flat_before, allowed)
            elif new is _MISSING:  # removed
                ok = False
            else:
                ok = _covers(allowed, key)
            if not ok:
                bad.append(key)
        if not bad:
            return []
        return [
            f"{path}: only {', '.join(self.may_change or ()) or 'no keys'} may change, but "
            f"{describe_paths(bad)} changed, appeared or disappeared; revert those keys."
        ]


def _added_below_existing(key: str, flat_before: dict[str, Any], allowed: tuple[str, ...]) -> bool:
    """A key added inside an allowed key that already existed (its value became a table)."""
    return any(_covers(p, key) and _get_flat_prefix(flat_before, p) for p in allowed)


def _get_flat_prefix(flat: dict[str, Any], pattern: str) -> bool:
    return any(_covers(pattern, k) for k in flat)


def _changed_keys(
    patterns: tuple[str, ...], flat_before: dict[str, Any], flat_after: dict[str, Any]
) -> list[str]:
    """Keys covered by ``patterns`` whose value differs (added or removed included)."""
    return [
        key
        for key in dict.fromkeys([*flat_before, *flat_after])
        if flat_before.get(key, _MISSING) != flat_after.get(key, _MISSING)
        and _covers(patterns, key)
    ]
