"""`vsh-ai schema judge` without building every rule model: a cache keyed by the sources.

Generating the judge-file schema imports every rule and analyser (about 2 s of CPU); the
text only changes when vsh-ai's own sources or pydantic change. The first run after any
change generates it and keeps the text in the user's cache folder under a digest of every
``vsh_ai/**/*.py`` file and pydantic's version; later runs read it back (no imports).
A cache that cannot be read or written is ignored: the schema is then generated.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ("cache_folder", "judge_schema_text", "sources_digest")

_PACKAGE = Path(__file__).resolve().parent


def cache_folder() -> Path:
    """``$VSH_AI_CACHE_DIR``, else ``$XDG_CACHE_HOME/vsh-ai``, else ``~/.cache/vsh-ai``."""
    explicit = os.environ.get("VSH_AI_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vsh-ai"


def sources_digest() -> str:
    """A digest of vsh-ai's sources (names and bytes), pydantic's version and Python's."""
    digest = hashlib.sha256(sys.version.encode())
    spec = importlib.util.find_spec("pydantic")  # finds the package without importing it
    if spec is not None and spec.origin:
        version = Path(spec.origin).with_name("version.py")
        digest.update(version.read_bytes() if version.is_file() else spec.origin.encode())
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _generate() -> str:
    import json

    from ._judge_files import schema

    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def judge_schema_text() -> str:
    """The judge-file schema as ``vsh-ai schema judge`` prints it (cached per sources)."""
    path: Path | None = None
    try:
        path = cache_folder() / f"judge-schema-{sources_digest()[:32]}.json"
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    text = _generate()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            partial.write_text(text, encoding="utf-8")
            partial.replace(path)  # atomic: a concurrent reader sees all of it or nothing
        except OSError:
            pass
    return text
