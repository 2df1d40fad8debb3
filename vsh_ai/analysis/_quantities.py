"""Durations and sizes spelled in config values (``"10s"``, ``"1h30m"``, ``"4 GiB"``).

:func:`duration_seconds` reads Go/systemd style durations (``500ms``, ``1h30m``, ``2 days``,
``90 s``) and ISO 8601 ``PT1H30M``; :func:`size_bytes` reads sizes with SI (``MB``) and
binary (``MiB``, Kubernetes' ``Mi``) units, the JVM's one-letter ``512m``/``4g`` (binary)
and bare ``KB`` (decimal). A bare number is ``None`` here: its unit comes from the key or the rule
(:func:`in_unit`). Anything else is ``None``: an unreadable spelling is never a quantity.
"""

from __future__ import annotations

import math
import re

__all__ = ("DURATION_UNITS", "SIZE_UNITS", "duration_seconds", "in_unit", "size_bytes")

DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 604800.0,
    "week": 604800.0,
    "weeks": 604800.0,
}

SIZE_UNITS: dict[str, float] = {
    "b": 1.0,
    "byte": 1.0,
    "bytes": 1.0,
    "k": 1024.0,
    "kb": 1e3,
    "kib": 1024.0,
    "m": 1024.0**2,
    "mb": 1e6,
    "mib": 1024.0**2,
    "g": 1024.0**3,
    "gb": 1e9,
    "gib": 1024.0**3,
    "t": 1024.0**4,
    "tb": 1e12,
    "tib": 1024.0**4,
    "ki": 1024.0,  # Kubernetes quantities: 512Mi, 4Gi
    "mi": 1024.0**2,
    "gi": 1024.0**3,
    "ti": 1024.0**4,
}

_PART = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([a-zµ]+)\s*")
_ISO = re.compile(r"p(?:(\d+)d)?(?:t(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?)?")
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([a-z]+)\s*")
_MAX_TEXT = 64


def duration_seconds(text: object) -> float | None:
    """Seconds a duration string spells (``"1h30m"`` -> 5400.0), or None."""
    if not isinstance(text, str) or not text.strip() or len(text) > _MAX_TEXT:
        return None
    lowered = text.strip().lower()
    iso = _ISO.fullmatch(lowered)
    if iso is not None and lowered not in ("p", "pt") and any(iso.groups()):
        days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
        return days * 86400 + hours * 3600 + minutes * 60 + seconds
    total = 0.0
    position = 0
    while position < len(lowered):
        match = _PART.match(lowered, position)
        if match is None or match.group(2) not in DURATION_UNITS:
            return None
        total += float(match.group(1)) * DURATION_UNITS[match.group(2)]
        position = match.end()
    return total if math.isfinite(total) else None


def size_bytes(text: object) -> float | None:
    """Bytes a size string spells (``"4 GiB"`` -> 4294967296.0, ``"512MB"``), or None."""
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        return None
    match = _SIZE.fullmatch(text.lower())
    if match is None or match.group(2) not in SIZE_UNITS:
        return None
    value = float(match.group(1)) * SIZE_UNITS[match.group(2)]
    return value if math.isfinite(value) else None


def in_unit(value: float, unit: str, kind: str) -> float | None:
    """``value`` given in ``unit`` as seconds (``kind="duration"``) or bytes (``"size"``)."""
    table = DURATION_UNITS if kind == "duration" else SIZE_UNITS
    factor = table.get(unit.lower())
    return None if factor is None else value * factor
