"""One background thread per process for journal writes nobody waits for (``done``
records a ``prepared`` record already answers), and waiting for them before a read.

See :mod:`vsh_ai.toolset._journal` for why losing such a write is safe.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

__all__ = ("in_background", "wait_for", "wait_for_folder")

_BACKGROUND = threading.Lock()
_PENDING: dict[Path, Future[None]] = {}
_WRITER: tuple[int, ThreadPoolExecutor] | None = None


def in_background(path: Path, write: Callable[[], None]) -> bool:
    """Run ``write`` (of the record at ``path``) on this process's journal thread; False
    when it cannot (the interpreter is shutting down): then write it now."""
    global _WRITER
    with _BACKGROUND:
        if _WRITER is None or _WRITER[0] != os.getpid():  # none yet, or a forked child
            _WRITER = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="vsh-ai-journal"))
            _PENDING.clear()
        try:
            future = _WRITER[1].submit(write)
        except RuntimeError:
            return False
        _PENDING[path] = future
    future.add_done_callback(partial(_landed, path))
    return True


def _landed(path: Path, future: Future[None]) -> None:
    with _BACKGROUND:
        if _PENDING.get(path) is future:
            del _PENDING[path]


def wait_for(path: Path) -> None:
    """Wait until this process's background write of the record at ``path`` has landed."""
    with _BACKGROUND:
        future = _PENDING.get(path)
    if future is not None:
        future.result()


def wait_for_folder(directory: Path) -> None:
    """Wait for this process's background writes of every record in ``directory``."""
    with _BACKGROUND:
        futures = [f for path, f in _PENDING.items() if path.parent == directory]
    for future in futures:
        future.result()
