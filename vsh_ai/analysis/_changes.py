"""The net effect of a transaction per path: renames proven, copies traced, destruction named.

VSH's canonical diff is the ground truth of what a commit would change; its effects say
how the program got there. :func:`net_changes` combines them:

* **rename** only when the canonical diff deletes a source and creates a destination with
  exactly the source's before node (same kind, same mode, same blob id; directories: same
  kind and mode) *and* a chain of ``rename`` effects carried the source to the destination
  (through intermediate names or inside a renamed directory). A delete, create or overwrite
  of a name in between breaks the chain. Both ends get kind ``rename`` and each other as
  ``partner``. Everything else stays what the canonical diff says: "move then delete" is a
  delete of the source, "move then edit" a delete plus a create, a move with ``chmod`` a
  delete plus a create, a move onto an existing file a delete plus a modify. Missing
  (truncated) effects leave a rename unproven (a delete plus a create): a chain is built
  only from rename effects VSH reported, and only between identical before/after nodes.
* **copied_from**: a create or modify whose after-bytes are exactly the before-bytes of
  other paths (known from the canonical diff or from reads made before the program changed
  that path): a copy, or a move whose chain was broken. Empty files are never "copied".
* **destructive** (modify only): :func:`destructive_edit` of the two sides, except for a
  config file (:func:`~vsh_ai.analysis._config.detect_format`) whose parsed values are all
  unchanged (reformatted, reordered, minified). Binary or
  uncaptured content is not judged here (``destructive`` stays None); rules that need the
  bytes meet :class:`vsh_ai._evidence.EvidenceGap` themselves and must escalate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from .._evidence import Change, Evidence, EvidenceGap, Node, is_binary
from ._config import ConfigSyntaxError, config_changes, detect_format, flatten, parse_config
from ._diff import line_opcodes
from ._memo import analysis_of

__all__ = ("NetChange", "NetKind", "destructive_edit", "net_changes")

NetKind = Literal["create", "modify", "delete", "rename", "metadata_change"]

_READS = frozenset(("content_read", "metadata_read", "directory_read"))
_KEEPS_IDENTITY = frozenset(("modify_content", "modify_metadata"))


_UNJUDGED = object()  # NetChange.destructive not asked yet


@dataclass(frozen=True, slots=True)
class NetChange:
    """The net effect at one canonical path."""

    path: str
    kind: NetKind
    before: Node | None
    after: Node | None
    partner: str | None = None
    """rename: the other end (source for the destination, destination for the source)."""
    copied_from: tuple[str, ...] = ()
    """create/modify: paths whose before-bytes equal this path's after-bytes."""
    sides: tuple[bytes, bytes] | None = field(default=None, repr=False, compare=False)
    """modify of a file whose two sides were captured: their bytes (what
    :attr:`destructive` judges)."""
    _verdict: object = field(default=_UNJUDGED, init=False, repr=False, compare=False)

    @property
    def destructive(self) -> str | None:
        """modify only: why the edit destroys content (emptied, most lines removed or
        commented). Judged on first use (most rules never ask), then remembered."""
        verdict = self._verdict
        if verdict is _UNJUDGED:
            verdict = None if self.sides is None else _destructive(self.path, *self.sides)
            object.__setattr__(self, "_verdict", verdict)
        assert verdict is None or isinstance(verdict, str)
        return verdict


# -- renames -------------------------------------------------------------------------


def _under(name: str, root: str) -> bool:
    return name == root or name.startswith(root + "/")


def _is_dir(node: Node | None) -> bool:
    return node is not None and node.kind == "directory"


def _drop(where: dict[str, str], path: str, directory: bool) -> None:
    """Forget what ``path`` (and, for a directory, everything below it) held."""
    where.pop(path, None)
    if directory:
        for name in [name for name in where if _under(name, path)]:
            del where[name]


def _rename_origins(evidence: Evidence, sources: set[str]) -> dict[str, str]:
    """Final name -> original path, for every ``sources`` path an unbroken rename chain moved."""
    where: dict[str, str] = {source: source for source in sources}
    for effect in sorted(evidence.effects, key=lambda e: e.sequence):
        operation = effect.operation
        if operation in _READS or operation in _KEEPS_IDENTITY or not effect.paths:
            continue
        if operation == "rename" and len(effect.paths) == 2:
            old, new = effect.paths
            if _is_dir(effect.before):
                moved = {
                    new + name[len(old) :]: where.pop(name)
                    for name in [name for name in where if _under(name, old)]
                }
                _drop(where, new, directory=True)
            else:
                moved = {new: where.pop(old)} if old in where else {}
                where.pop(new, None)
            where.update(moved)
            continue
        # create, delete, copy, anything new: whatever these names held is gone
        for path in effect.paths if operation == "delete" else effect.paths[-1:]:
            _drop(where, path, directory=_is_dir(effect.before))
    return {name: origin for name, origin in where.items() if name != origin}


def _same_node(before: Node, after: Node) -> bool:
    if before.kind != after.kind or before.mode != after.mode:
        return False
    if before.kind == "directory":
        return True
    return before.blob is not None and before.blob == after.blob


def _renames(evidence: Evidence) -> dict[str, str]:
    """path -> partner for both ends of every proven rename."""
    deleted = {c.path: c for c in evidence.changes if c.kind == "delete" and c.before}
    if not deleted:
        return {}
    partners: dict[str, str] = {}
    for name, origin in _rename_origins(evidence, set(deleted)).items():
        created = evidence.change(name)
        source = deleted[origin]
        if (
            created is not None
            and created.kind == "create"
            and created.after is not None
            and source.before is not None
            and _same_node(source.before, created.after)
        ):
            partners[name] = origin
            partners[origin] = name
    return partners


# -- copies --------------------------------------------------------------------------


def _before_blobs(evidence: Evidence) -> dict[str, list[str]]:
    """blob id -> paths whose before-bytes it is (canonical diff, then untouched reads)."""
    found: dict[str, list[str]] = {}

    def add(blob: str | None, path: str) -> None:
        if blob is not None and path not in (paths := found.setdefault(blob, [])):
            paths.append(path)

    for change in evidence.changes:
        if change.before is not None and change.before.kind == "file" and change.before.size:
            add(change.before.blob, change.path)
    touched: set[str] = set()
    for effect in sorted(evidence.effects, key=lambda e: e.sequence):
        if effect.operation == "content_read":
            for path in effect.paths:
                if not any(ancestor in touched for ancestor in _ancestors(path)):
                    add(effect.observed_content, path)
        elif effect.operation not in _READS and effect.operation != "modify_metadata":
            touched.update(effect.paths)
    return found


def _ancestors(path: str) -> list[str]:
    """``a/b/c`` -> ``a/b/c``, ``a/b``, ``a``."""
    parts = path.split("/")
    return ["/".join(parts[:end]) for end in range(len(parts), 0, -1)]


def _copied_from(change: Change, sources: dict[str, list[str]]) -> tuple[str, ...]:
    after = change.after
    if change.kind not in ("create", "modify") or after is None or after.kind != "file":
        return ()
    if not after.size or after.blob is None:
        return ()
    return tuple(path for path in sources.get(after.blob, ()) if path != change.path)


# -- destructive edits ---------------------------------------------------------------

_LINE_COMMENT = re.compile(r"(?:#|//|;|--|\*|rem(?:\s|$))", re.IGNORECASE)
_BLOCKS = (("/*", "*/"), ("<!--", "-->"))
_MIN_MEANINGFUL = 4


_ANY_COMMENT = re.compile(r"^[ \t]*(?:#|//|;|--|\*|rem(?:\s|$)|/\*|<!--)", re.I | re.M)


def _comment_flags(text: str, stripped: list[str]) -> list[bool]:
    """Per (stripped) line: True when blank or a comment (line and block comments)."""
    if _ANY_COMMENT.search(text) is None:  # the common case: no comment syntax at all
        return [not line for line in stripped]
    if "/*" not in text and "<!--" not in text:  # line comments only: no block to track
        match = _LINE_COMMENT.match
        return [not line or match(line) is not None for line in stripped]
    flags: list[bool] = []
    closing: str | None = None
    for text in stripped:
        if closing is not None:
            flags.append(True)
            if closing in text:
                tail = text.split(closing, 1)[1].strip()
                closing = None
                if tail:  # code after the block's end on the same line
                    flags[-1] = False
            continue
        if not text or _LINE_COMMENT.match(text):
            flags.append(True)
            continue
        for opener, closer in _BLOCKS:
            if text.startswith(opener):
                rest = text[len(opener) :]
                if closer in rest:
                    flags.append(not rest.split(closer, 1)[1].strip())
                else:
                    flags.append(True)
                    closing = closer
                break
        else:
            flags.append(False)
    return flags


def _uncommented(line: str) -> str:
    text = line.strip()
    for opener, closer in _BLOCKS:
        if text.startswith(opener):
            return text[len(opener) :].removesuffix(closer).strip()
    match = _LINE_COMMENT.match(text)
    return text[match.end() :].strip() if match else text


def destructive_edit(before: str, after: str) -> str | None:
    """Why replacing ``before`` by ``after`` destroys content, or None.

    Destructive: the file is emptied (only whitespace left where there was content), or,
    for a file with at least 4 meaningful lines (non-blank, not comments), more than half
    of them were removed or turned into comments (``#``, ``//``, ``;``, ``--``, ``*``,
    ``rem``, ``/* */`` and ``<!-- -->`` blocks). Lines are paired as difflib pairs them
    (:func:`vsh_ai.analysis._diff.line_opcodes`, bounded time), so editing a line (a typo
    fix, a rewritten value) is not removing it. An edit whose lines cannot all be paired
    within that bound (long runs of repeated lines) counts as destructive: not provably
    otherwise.
    """
    if before.strip() and not after.strip():
        return "emptied: the file had content and now holds only whitespace"
    if before == after:
        return None
    old = [line.strip() for line in before.splitlines()]
    new = [line.strip() for line in after.splitlines()]
    old_comment = _comment_flags(before, old)
    meaningful = len(old) - sum(old_comment)
    if meaningful < _MIN_MEANINGFUL:
        return None
    new_comment = _comment_flags(after, new)
    removed = commented = 0
    pairing = line_opcodes(old, new)
    for tag, i1, i2, j1, j2 in pairing.opcodes:
        if tag == "equal":  # same text, maybe now inside a block comment
            commented += sum(
                not old_comment[i] and new_comment[j1 + (i - i1)] for i in range(i1, i2)
            )
            continue
        lost = [i for i in range(i1, i2) if not old_comment[i]]
        if not lost:
            continue
        kept = [j for j in range(j1, j2) if not new_comment[j]]
        as_comments = {_uncommented(new[j]) for j in range(j1, j2) if new_comment[j]}
        newly_commented = [i for i in lost if old[i] in as_comments]
        commented += len(newly_commented)
        removed += max(0, len(lost) - len(newly_commented) - len(kept))
    if 2 * (removed + commented) <= meaningful:
        if not pairing.exact:  # part of the files could not be paired line by line
            return (
                "its meaningful lines could not all be paired with the new version (long "
                "runs of repeated lines), so it cannot be shown not to gut them"
            )
        return None
    # No counts: the old side may be bytes the program never read (a blind overwrite of a
    # secret-bearing file), and this reason reaches the program.
    parts = ["removed"] if removed else []
    parts += ["commented out"] if commented else []
    return f"most of its meaningful lines {' or '.join(parts)}"


def _sides(evidence: Evidence, change: Change) -> tuple[bytes, bytes] | None:
    """The two sides' bytes :attr:`NetChange.destructive` judges (None: nothing to judge)."""
    before, after = change.before, change.after
    if change.kind != "modify" or before is None or after is None:
        return None
    if before.kind != "file" or after.kind != "file":
        return None
    try:
        old = evidence.before_bytes(change.path)
        new = evidence.after_bytes(change.path)
    except EvidenceGap:
        return None  # documented: the rules meet the gap themselves
    if old is None or new is None:
        return None
    return old, new


def _destructive(path: str, old: bytes, new: bytes) -> str | None:
    if is_binary(old) or is_binary(new):
        return None
    verdict = destructive_edit(old.decode("utf-8"), new.decode("utf-8"))
    if verdict is not None and _same_config_values(path, old, new):
        return None  # reformatted (a JSON file minified): every key keeps its typed value
    return verdict


def _same_config_values(path: str, old: bytes, new: bytes) -> bool:
    fmt = detect_format(path)
    if fmt == "auto":
        return False
    try:
        before, after = parse_config(old, fmt, path), parse_config(new, fmt, path)
        return bool(flatten(before)) and not config_changes(before, after)
    except ConfigSyntaxError:
        return False


# -- net changes ---------------------------------------------------------------------


def _kind(change: Change) -> NetKind:
    if change.kind in ("create", "modify", "delete", "metadata_change"):
        return change.kind  # type: ignore[return-value]
    if change.before is None:  # a kind this version does not know: say what it does
        return "create"
    return "delete" if change.after is None else "modify"


def net_changes(evidence: Evidence) -> tuple[NetChange, ...]:
    """One :class:`NetChange` per canonical change, in the canonical order.

    Computed once per evidence (:func:`vsh_ai.analysis._memo.analysis_of`).
    """
    return analysis_of(evidence).remember(("net_changes",), lambda: _net_changes(evidence))


def _net_changes(evidence: Evidence) -> tuple[NetChange, ...]:
    partners = _renames(evidence)
    sources = _before_blobs(evidence) if evidence.changes else {}
    out: list[NetChange] = []
    for change in evidence.changes:
        partner = partners.get(change.path)
        if partner is not None:
            out.append(NetChange(change.path, "rename", change.before, change.after, partner))
            continue
        out.append(
            NetChange(
                change.path,
                _kind(change),
                change.before,
                change.after,
                copied_from=_copied_from(change, sources),
                sides=_sides(evidence, change),
            )
        )
    return tuple(out)
