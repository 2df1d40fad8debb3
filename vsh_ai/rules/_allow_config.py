"""``allow_config``: claims config file changes whose every changed key is allowed."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence
from ..analysis._config import (
    MISSING,
    ConfigSyntaxError,
    detect_format,
    parse_config,
)
from ..analysis._tokens import opaque_line as _opaque_line
from ._base import Allowance, Claim, GlobFields, NetChange
from ._config_checker import Checker, key_changes
from ._constraints import KeyConstraint, globs_given
from ._glob import matching
from ._key_patterns import name_glob

__all__ = ("AllowConfig",)

ConfigFormatName = Literal["auto", "toml", "json", "yaml", "ini", "env", "properties"]


class AllowConfig(Allowance):
    """Claims config file changes when every changed key is allowed by ``may_change``.

    Both sides are parsed (TOML, JSON, YAML, INI/CFG, .env, .properties) into typed trees.
    Every key no ``may_change`` pattern matches must keep its typed value and presence
    (``true`` -> ``1`` is a change). Comment- or formatting-only edits are claimed.
    ``kinds`` may include ``create``: a new file all of whose keys are allowed. For
    INI/.env/.properties, string values are read as the constraint's ``type``.
    Patterns: dotted keys, ``[0]``/``[*]`` list items, ``*`` one key, ``**`` any depth;
    the last segment may glob a key's name (``**.*_timeout_s``); the first pattern that
    matches decides; a ``list``/``table``/``any`` constraint also covers everything below
    its key. Keys match as written or as words in any case style (``**.*timeout_ms``
    matches ``readTimeoutMs``, ``read-timeout-ms``, ``READ_TIMEOUT_MS``). Setting a key the
    old file documents as a commented-out option (``# timeout_s = 30``) is a change of it,
    not an addition, when its value is within the constraint.
    """

    type: Literal["allow_config"] = "allow_config"
    glob_fields: ClassVar[GlobFields] = (("paths", False),)
    paths: tuple[str, ...] = Field(description="Root-anchored globs of the config files.")
    format: ConfigFormatName = "auto"
    kinds: tuple[Literal["create", "modify"], ...] = ("modify",)
    may_change: dict[str, KeyConstraint] = Field(
        default_factory=dict, description="Key pattern -> what the key may become."
    )
    opaque_tokens: bool = Field(
        default=False,
        description="True: added lines (comments included) may hold opaque tokens (12+ "
        "characters mixing letters and digits). By default they are not claimed: a comment "
        "is free text, and a credential copied into one parses as no change at all.",
    )
    description: str = Field(default="", description="What this allowance is for.")

    _check_paths = field_validator("paths")(globs_given)

    @field_validator("kinds")
    @classmethod
    def _some_kinds(
        cls, kinds: tuple[Literal["create", "modify"], ...]
    ) -> tuple[Literal["create", "modify"], ...]:
        if not kinds:
            raise ValueError("give at least one kind (modify, create)")
        return kinds

    @field_validator("may_change")
    @classmethod
    def _patterns(cls, may_change: dict[str, KeyConstraint]) -> dict[str, KeyConstraint]:
        for pattern in may_change:
            if not pattern:
                raise ValueError("an empty key pattern matches nothing; name the key")
            try:
                name_glob(pattern)
            except ValueError as error:
                raise ValueError(f"key pattern {pattern!r}: {error}") from None
        return may_change

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        if change.kind not in self.kinds or matching(self.paths, change.path) is None:
            return None
        path = change.path
        fmt = self.format
        if fmt == "auto":
            try:
                fmt = detect_format(path)
            except ValueError as error:
                return Claim(False, f"{path}: {error}; set `format` on the allowance")
            if fmt == "auto":
                return Claim(False, f"{path}: unknown config format; set `format`")
        sides: list[Any] = []
        for side, data in (
            ("before", evidence.before_bytes(path) if change.kind == "modify" else None),
            ("after", evidence.after_bytes(path)),
        ):
            if data is None:
                sides.append(MISSING)
                continue
            try:
                sides.append(parse_config(data, fmt, path))
            except ConfigSyntaxError as error:
                return Claim(False, f"{path} ({side}) cannot be parsed as {fmt}: {error}")
        before, after = sides
        if after is MISSING:
            return Claim(False, f"{path} has no content after the change")
        if not self.opaque_tokens:
            line = _opaque_line(evidence, path, evidence.after_bytes(path) or b"")
            if line is not None:
                return Claim(
                    False,
                    f"{path} line {line} adds an opaque token (a key, password, hash or "
                    "encoded value?); config edits here change operational values only",
                )
        changes = key_changes(evidence, before, after)
        if not changes:
            return Claim(True, f"{path}: same {fmt} values (only comments or formatting)")
        checker = Checker(self.may_change, fmt, before, after, MISSING)
        old_bytes = evidence.before_bytes(path) if change.kind == "modify" else None
        checker.before_text = old_bytes.decode("utf-8", "replace") if old_bytes else ""
        problems: list[str] = []
        proven: list[str] = []
        for key_change in changes:
            ok, text = checker.check(key_change.key, key_change.before, key_change.after)
            (proven if ok else problems).append(text)
        if problems:
            shown = "; ".join(problems[:5]) + (
                f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
            )
            return Claim(False, f"{path}: {shown}")
        return Claim(True, f"{path}: " + "; ".join(dict.fromkeys(proven)))
