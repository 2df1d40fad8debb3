"""Config files re-encoded for the format mutants: TOML, JSON and YAML to one another, or
laid out differently in their own format, only where the data round-trips exactly."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, datetime, time
from typing import Any

import yaml

from .. import _toml

__all__ = ("convert",)

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built in
_YAML_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _load(text: str, fmt: str) -> Any:
    if fmt == "toml":
        return _toml.loads(text)
    if fmt == "json":
        return json.loads(text)
    if re.search(r"(?m)(^|\s)[&*][\w-]+|<<:", text):
        raise ValueError("YAML anchors and aliases have no faithful form in other formats")
    return yaml.load(text, Loader=_YAML_LOADER)  # a safe loader (C or pure Python)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_key(key: Any) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else json.dumps(text)


def _dump_toml(data: Any, prefix: str = "") -> str:
    if not isinstance(data, dict):
        raise TypeError("a TOML document is a table")
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    out = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars]
    for key, table in tables:
        name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
        body = _dump_toml(table, name)
        if any(not isinstance(v, dict) for v in table.values()) or not table:
            out += ["", f"[{name}]"]
        out.append(body)
    return "\n".join(line for line in out).strip("\n") + "\n"


def _dump(data: Any, fmt: str) -> str:
    if fmt == "toml":
        return _dump_toml(data)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    return yaml.dump(data, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True)


def _flatten(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
        if isinstance(value, dict) and value:
            yield from _flatten(value, name)
        else:
            yield name, value


def _dump_renested(data: Any, fmt: str) -> str:
    """The same data laid out differently: TOML dotted keys, YAML flow style, compact JSON."""
    if fmt == "toml":
        if not isinstance(data, dict):
            raise TypeError("a TOML document is a table")
        return "".join(f"{key} = {_toml_value(value)}\n" for key, value in _flatten(data))
    if fmt == "json":
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n"
    return yaml.dump(
        data, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=True
    )


def convert(text: str, source: str, target: str, *, renest: bool = False) -> str | None:
    """``text`` re-encoded from one format (or layout) to another; None unless it round-trips."""
    try:
        data = _load(text, source)
        out = _dump_renested(data, target) if renest else _dump(data, target)
        if _load(out, target) != data:
            return None
    except (ValueError, TypeError, yaml.YAMLError, _toml.TOMLDecodeError, RecursionError):
        return None
    return out
