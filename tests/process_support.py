"""What a test launching a vsh-ai process can ask it at its exit."""

from __future__ import annotations

FROZEN_AT_EXIT = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: print(gc.get_freeze_count() > 0, gc.get_threshold(),\n"
    "                              file=sys.stderr))\n"
)
"""Prefix of a ``-c`` program: at exit, whether the heap was frozen and the GC thresholds
(on the last line of its standard error)."""
