"""One documented path-glob dialect, on the maintained ``wcmatch`` matcher.

Paths are VSH canonical (``a/b/c``: no leading slash, no ``.``/``..``/empty segments).
A glob is matched against the whole path:

* **root-anchored**: ``*.log`` matches only ``x.log`` at the workspace root; write
  ``**/*.log`` for any depth;
* ``*`` is any run of characters within one segment, dotfiles included (``config/*``
  matches ``config/.hidden``); ``?`` is one character; ``[abc]`` / ``[!abc]`` a class;
  ``{a,b}`` alternatives (expanded before anything else is checked);
* ``**`` only as a whole segment: zero or more whole segments. ``dir/**`` matches ``dir``
  itself and everything below it; ``**/name`` matches ``name`` at the root too;
* refused, with the fix in the message: ``**`` inside a segment (``docs/**.md``, write
  ``docs/**/*.md``), a trailing ``/``, ``.``/``..``/empty segments, ``!``-negation,
  backslashes, an empty glob. A leading ``/``, ``/workspace/`` or ``./`` is stripped;
* ``ignore_case=True`` compares :func:`fold` of the glob with :func:`fold` of the path
  (Unicode NFKC + casefold, so ``SERVER.PEM``, full-width letters and ``.ENV`` all match
  ``**/*.pem`` / ``**/.env``). Protected and denied sets use it; allowances do not.

Globs are compiled once per pattern tuple. :func:`matching` tests a path against every
pattern with one RE2 set of pre-filters (exact for globs without character classes,
broader for those with); wcmatch's own regex then confirms a hit, so wcmatch decides.
:class:`GlobTable` does the same for many glob sets at once (a judge's): one pass per path.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from threading import Lock
from typing import Any

import bracex  # wcmatch's own brace expander (a dependency of wcmatch, same maintainer)
import re2  # type: ignore[import-untyped]  # google-re2: linear time on untrusted paths
from wcmatch import glob as _wc

__all__ = ("GLOB_DIALECT", "GlobTable", "check_globs", "fold", "glob_matches", "matching")

GLOB_DIALECT = (
    "Globs are root-anchored and matched against the whole workspace-relative path "
    "(`a/b/c`): `*.log` matches only a `.log` file at the workspace root, `**/*.log` one at "
    "any depth. `*` matches any characters within one path segment (dotfiles included), "
    "`?` one character, `[abc]` / `[!abc]` a character class, `{a,b}` alternatives. `**` "
    "is only allowed as a whole segment and matches zero or more whole segments: `dir/**` "
    "is `dir` itself and everything below it, `**/name` matches `name` at the root too. "
    "Refused: `**` inside a segment (write `docs/**/*.md`, not `docs/**.md`), a trailing "
    "`/`, `.`, `..` or empty segments, a leading `!`, backslashes and an empty glob; a "
    "leading `/`, `/workspace/` or `./` is ignored. Protected and denied path sets compare "
    "case-insensitively after Unicode NFKC normalisation (`SERVER.PEM` matches `**/*.pem`)."
)

_FLAGS = _wc.GLOBSTAR | _wc.DOTGLOB | _wc.FORCEUNIX | _wc.CASE
_BRACE_LIMIT = 1000


@lru_cache(maxsize=65536)
def fold(path: str) -> str:
    """The spelling protected sets compare: Unicode NFKC, then casefold."""
    return unicodedata.normalize("NFKC", path).casefold()


def _strip(glob: str) -> str:
    if glob in ("/workspace", "."):
        return ""
    for prefix in ("/workspace/", "./"):
        if glob.startswith(prefix):
            return glob[len(prefix) :]
    return glob[1:] if glob.startswith("/") and not glob.startswith("//") else glob


def _expand(pattern: str) -> tuple[str, ...]:
    """Validate ``pattern`` and return its brace expansions, each a checked glob."""
    if not pattern:
        raise ValueError("an empty glob matches nothing; use '**' for every path")
    if pattern != pattern.strip():
        raise ValueError(
            f"glob {pattern!r} starts or ends with whitespace; write {pattern.strip()!r} "
            "(whitespace is part of the name)"
        )
    if "\\" in pattern:
        raise ValueError(
            f"glob {pattern!r} contains a backslash: paths use '/', and escapes are not "
            "supported; use a class such as '[*]' for a literal '*'"
        )
    glob = _strip(pattern)
    if not glob:
        raise ValueError(f"glob {pattern!r} names the workspace root; use '**' for every path")
    if glob.startswith("!"):
        raise ValueError(
            f"glob {pattern!r} starts with '!': negation is not supported; list what is "
            "allowed, or use a deny rule for what is not"
        )
    try:
        expanded = tuple(bracex.expand(glob, limit=_BRACE_LIMIT))
    except Exception as error:  # bracex raises its own error for a too-large expansion
        raise ValueError(f"glob {pattern!r}: {error}") from None
    for alternative in expanded or ("",):
        _check_segments(pattern, alternative)
    return tuple(_collapse(alternative) for alternative in expanded)


def _collapse(glob: str) -> str:
    """``a/**/**/b`` is ``a/**/b``: zero-or-more segments twice is zero-or-more once."""
    segments: list[str] = []
    for segment in glob.split("/"):
        if not (segment == "**" and segments and segments[-1] == "**"):
            segments.append(segment)
    return "/".join(segments)


def _check_segments(pattern: str, glob: str) -> None:
    where = f"glob {pattern!r}" + (f" (alternative {glob!r})" if glob != pattern else "")
    if not glob:
        raise ValueError(f"{where} is empty; use '**' for every path")
    if glob.endswith("/"):
        name = glob.rstrip("/") or "**"
        raise ValueError(
            f"{where} ends with '/': write '{name}/**' for the directory and everything "
            f"in it, or '{name}' for the entry itself"
        )
    if glob.startswith("/"):
        raise ValueError(f"{where} is absolute; write it relative to the workspace root")
    segments = glob.split("/")
    if "" in segments:
        raise ValueError(f"{where} has an empty segment ('//'); write one '/'")
    for bad in (".", ".."):
        if bad in segments:
            raise ValueError(f"{where} has a {bad!r} segment; write the canonical path")
    for index, segment in enumerate(segments):
        if "**" in segment and segment != "**":
            fixed = list(segments)
            rest = segment.replace("**", "*")
            while "**" in rest:
                rest = rest.replace("**", "*")
            fixed[index : index + 1] = ["**", rest] if rest != "*" else ["**", "*"]
            raise ValueError(
                f"{where}: '**' is only allowed as a whole segment; write "
                f"{'/'.join(fixed)!r} for any depth, or use '*' within one segment"
            )


def _filter_regex(glob: str) -> str:
    """A fast regex that matches at least every path wcmatch matches for ``glob``.

    Exact for segments without a character class; a segment with ``[`` or ``]`` becomes
    "any one segment" (a superset), so class parsing stays wcmatch's alone.
    """
    segments = glob.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(("(?:/.*)?" if index else ".*") if last else "(?:[^/]+/)*")
            continue
        if "[" in segment or "]" in segment:
            body = "[^/]*"
        else:
            body = "".join(
                "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in segment
            )
        before_last_globstar = index == len(segments) - 2 and segments[-1] == "**"
        out.append(body if last or before_last_globstar else body + "/")
    return "".join(out)


class _Compiled:
    """One glob's brace expansions: a fast pre-filter and wcmatch's exact regexes (compiled
    by ``re`` on first use: compiling them all costs ~3 ms per glob, most never asked)."""

    __slots__ = ("_exact", "filter", "source")

    def __init__(self, globs: tuple[str, ...]) -> None:
        exact: list[str] = []
        filters: list[str] = []
        for glob in globs:
            filters.append(_filter_regex(glob))
            exact.extend(_wc.translate(glob, flags=_FLAGS)[0])
            if glob.endswith("/**"):  # 'dir/**' is 'dir' itself too
                exact.extend(_wc.translate(glob[: -len("/**")], flags=_FLAGS)[0])
        self.filter = "|".join(f"(?:{regex})" for regex in filters)
        self.source = "|".join(f"(?:{regex})" for regex in exact)
        self._exact: Any = None

    def __call__(self, subject: str) -> bool:
        exact = self._exact
        if exact is None:  # two threads may both compile: the same pattern either way
            exact = self._exact = re.compile(self.source).fullmatch
        return exact(subject) is not None


@lru_cache(maxsize=4096)
def _compiled(pattern: str, ignore_case: bool) -> _Compiled:
    expanded = _expand(fold(pattern) if ignore_case else pattern)
    if ignore_case:
        _expand(pattern)  # the raw spelling must be valid too
    return _Compiled(expanded)


_ANY = "(?s).*"  # in every set: a result without it means RE2 could not finish


class _Candidates:
    """Which of many globs may match a path: their pre-filters in one RE2 set per spelling.

    One pass per spelling (the path as written, and :func:`fold` of it for globs that
    ignore case) gives every glob whose pre-filter matches; wcmatch then decides, as in
    :func:`matching`. RE2 reports a set it could not finish (DFA out of memory) as no
    match, so each set also holds a pattern that always matches: without it in the result,
    every glob is a candidate (slower, same answer). RE2, not ``re``: paths come from the
    agent, and star-heavy globs against long names or deep paths backtrack polynomially in
    a backtracking engine (seconds per path).
    """

    __slots__ = ("_count", "_sets")

    def __init__(self, entries: Sequence[tuple[str, bool]]) -> None:
        self._count = len(entries)
        self._sets: list[tuple[bool, Any, list[int], int]] = []
        for ignore_case in (False, True):
            members = [i for i, (_, ic) in enumerate(entries) if ic is ignore_case]
            if not members:
                continue
            options = re2.Options()
            options.log_errors = False
            options.max_mem = 64 << 20
            built = re2.Set.FullMatchSet(options)
            for i in members:
                built.Add("(?s)" + _compiled(entries[i][0], ignore_case).filter)
            sentinel = built.Add(_ANY)
            built.Compile()
            self._sets.append((ignore_case, built, members, sentinel))

    def of(self, path: str) -> list[int]:
        """Indices of the entries that may match ``path``, ascending."""
        out: list[int] = []
        for ignore_case, built, members, sentinel in self._sets:
            found = built.Match(fold(path) if ignore_case else path) or ()
            if sentinel not in found:
                out.extend(members)  # unknown: every glob of this spelling is a candidate
            else:
                out.extend(members[k] for k in found if k != sentinel)
        out.sort()
        return out


GlobSet = tuple[tuple[str, ...], bool]  # (globs, ignore_case)


class _Build:
    """One immutable build of a table: its sets, their globs in one matcher, the rows."""

    __slots__ = ("candidates", "entries", "index", "owner", "rows")

    def __init__(self, sets: tuple[GlobSet, ...]) -> None:
        self.index = {key: number for number, key in enumerate(sets)}
        self.entries = [(pattern, ic) for patterns, ic in sets for pattern in patterns]
        self.owner = [number for number, (patterns, _) in enumerate(sets) for _ in patterns]
        self.candidates = _Candidates(self.entries)
        self.rows: dict[str, tuple[str | None, ...]] = {}

    def row(self, path: str) -> tuple[str | None, ...]:
        """Each set's first matching glob for ``path`` (None: no glob of it matches)."""
        row: list[str | None] = [None] * len(self.index)
        folded = fold(path)
        for entry in self.candidates.of(path):  # ascending: within a set, in glob order
            number = self.owner[entry]
            if row[number] is not None:
                continue  # an earlier glob of that set matched: the first one counts
            pattern, ignore_case = self.entries[entry]
            if _compiled(pattern, ignore_case)(folded if ignore_case else path):
                row[number] = pattern
        return tuple(row)


class GlobTable:
    """Many glob sets (a judge's) in one matcher: every set's first matching glob, per path.

    Answers exactly as :func:`matching` does for each set, from one RE2 pass per path and
    spelling instead of one pass per set, and remembers rows per path (bounded). Sets are
    given up front (compiled once, when the judge is built); a set first asked about later
    is added then (the matcher is rebuilt once).
    """

    def __init__(
        self, sets: Iterable[tuple[Sequence[str], bool]] = (), *, rows: int = 16384
    ) -> None:
        self._rows = rows
        self._lock = Lock()
        self._built = _Build(())
        self.add(sets)

    @property
    def sets(self) -> tuple[GlobSet, ...]:
        return tuple(self._built.index)

    def __reduce__(self) -> tuple[type[GlobTable], tuple[tuple[GlobSet, ...]], dict[str, int]]:
        """Pickled (and deep-copied) as its glob sets: the RE2 sets are built again."""
        return GlobTable, (self.sets,), {"_rows": self._rows}

    def add(self, sets: Iterable[tuple[Sequence[str], bool]]) -> None:
        """Add glob sets (each glob validated, as :func:`check_globs` does)."""
        with self._lock:
            known: dict[GlobSet, None] = dict.fromkeys(self._built.index)
            for patterns, ignore_case in sets:
                key = (tuple(patterns), bool(ignore_case))
                if key not in known:
                    for pattern in key[0]:
                        _compiled(pattern, key[1])
                    known[key] = None
            if len(known) > len(self._built.index):
                self._built = _Build(tuple(known))  # readers keep the old build

    def first(self, patterns: Sequence[str], path: str, *, ignore_case: bool = False) -> str | None:
        """:func:`matching` of ``patterns`` and ``path``, from this table's row of ``path``."""
        key = (patterns if isinstance(patterns, tuple) else tuple(patterns), ignore_case)
        built = self._built
        number = built.index.get(key)
        if number is None:
            self.add([key])
            built = self._built
            number = built.index[key]
        rows = built.rows
        row = rows.get(path)
        if row is None:
            row = built.row(path)
            if len(rows) >= self._rows:
                rows.clear()  # bounded: a path asked again is computed again
            rows[path] = row
        return row[number]


@lru_cache(maxsize=256)
def _one_set(patterns: tuple[str, ...], ignore_case: bool) -> GlobTable:
    return GlobTable([(patterns, ignore_case)], rows=1024)


def check_globs(globs: Iterable[str]) -> tuple[str, ...]:
    """``globs`` as a tuple, unchanged, once each is valid in both spellings.

    Raises ValueError naming the glob and the fix (see the module docs for what is refused).
    """
    out = tuple(globs)
    for glob in out:
        if not isinstance(glob, str):
            raise ValueError(f"glob {glob!r} is not a string")
        _compiled(glob, False)
        _compiled(glob, True)
    return out


def glob_matches(pattern: str, path: str, *, ignore_case: bool = False) -> bool:
    """True when the canonical workspace-relative ``path`` matches ``pattern``."""
    return _compiled(pattern, ignore_case)(fold(path) if ignore_case else path)


def matching(patterns: Sequence[str], path: str, *, ignore_case: bool = False) -> str | None:
    """The first of ``patterns`` that matches ``path``, or None.

    One RE2 set of the pre-filters names the candidates; wcmatch confirms them in order.
    """
    key = patterns if isinstance(patterns, tuple) else tuple(patterns)
    if not key:
        return None
    return _one_set(key, ignore_case).first(key, path, ignore_case=ignore_case)
