"""Path globs for rules: the one dialect of :mod:`vsh_ai.analysis._globs`, re-exported.

Globs are root-anchored (``*.log`` is a root file only; ``**/*.log`` any depth); ``**``
is a whole segment; deny and protected sets match case-insensitively (``ignore_case``).
Globs that do not mean what they look like are refused at load time, naming the fix.
"""

from __future__ import annotations

from ..analysis._globs import GLOB_DIALECT, check_globs, fold, glob_matches, matching

__all__ = ("GLOB_DIALECT", "check_globs", "fold", "glob_matches", "matching")
