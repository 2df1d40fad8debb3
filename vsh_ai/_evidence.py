"""Evidence: a frozen, JSON-serialisable snapshot of one ``vsh.RequestEvent``."""

from __future__ import annotations

import contextlib
import difflib
import gc
import hashlib
from collections.abc import Iterator
from functools import cached_property
from typing import Any, Literal, NamedTuple

import vsh
from pydantic import BaseModel, ConfigDict, Field

__all__ = (
    "Change",
    "Content",
    "Counters",
    "Digests",
    "Effect",
    "Evidence",
    "EvidenceGap",
    "ExecutionInfo",
    "Node",
    "PolicyResult",
    "WrittenVersion",
    "gc_paused",
)

_WRITE_OPERATIONS = frozenset(("create", "modify_content", "copy"))
_BINARY_SNIFF = 8192


class EvidenceGap(LookupError):
    """The evidence does not hold what a question needs (content not captured, not text)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Node(_Frozen):
    """One side of a change: what a path was before or after the transaction."""

    kind: str
    size: int
    mode: int
    content: str | None = Field(
        default=None,
        description="Blob id of the exact bytes, or a 'stamp:' token when bytes were not hashed.",
    )

    @property
    def blob(self) -> str | None:
        """The content-addressed blob id, or None for directories and uncaptured stamps."""
        if not self.content or self.content.startswith("stamp:"):
            return None
        return self.content

    @property
    def executable(self) -> bool:
        return self.kind == "file" and bool(self.mode & 0o111)


class Change(_Frozen):
    """One canonical change: the net difference a commit would make at ``path``."""

    path: str
    kind: str
    before: Node | None
    after: Node | None


class Effect(_Frozen):
    """One ordered effect the program had on the virtual snapshot (reads included)."""

    sequence: int
    origin: str
    operation: str
    paths: tuple[str, ...]
    before: Node | None = None
    after: Node | None = None
    observed_content: str | None = None


class Content(_Frozen):
    """Captured bytes of one blob, as VSH supplied it for review (base64 in JSON)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )

    path: str
    blob: str
    data: bytes


class Digests(_Frozen):
    """Identities and digests that bind the evidence to one exact transaction."""

    event_id: str
    hook_id: str
    transaction: str
    base_snapshot: str
    diff: str
    read_set: str
    write_set: str
    program: str
    policy: str
    runtime_config: str
    intent_digest: str | None


class PolicyResult(_Frozen):
    """What the deterministic VSH policy concluded before any hook ran."""

    profile: str
    baseline: str
    state: str
    risk_flags: tuple[str, ...]
    thresholds: dict[str, int]


class Counters(_Frozen):
    touched_paths: int
    created_paths: int
    modified_paths: int
    deleted_paths: int
    renamed_paths: int
    changed_bytes: int
    delete_ratio_bps: int
    executable_changes: int
    symlink_changes: int
    os_calls: int
    read_bytes: int
    write_bytes: int
    directory_entries: int
    output_bytes: int
    denied_accesses: int
    result_bytes: int


class ExecutionInfo(_Frozen):
    language: Literal["monty", "bash"]
    profile: str | None
    exit_code: int | None
    complete: bool
    evidence: str | None
    stdout_bytes: int
    stderr_bytes: int


class WrittenVersion(NamedTuple):
    """A version of a file that the program wrote, final or intermediate (``sequence`` -1:
    the final state). A tuple: thousands of them are made per large change."""

    path: str
    blob: str | None
    sequence: int
    resolvable: bool


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while the block builds thousands of acyclic objects.

    Building or copying the evidence of a large change allocates tens of thousands of model
    objects; each allocation burst triggers full collections that walk the whole heap and
    free nothing (evidence holds no cycles): at 5,000 files two thirds of a copy's time.
    Collection resumes afterwards (unless it was off before).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _node(summary: vsh.NodeSummary | None) -> Node | None:
    if summary is None:
        return None
    return Node(kind=summary.kind, size=summary.size, mode=summary.mode, content=summary.content)


def normalize_path(path: str) -> str:
    """Accept ``/workspace/a/b``, ``./a/b`` or ``a/b``; return the evidence form ``a/b``."""
    stripped = path.strip()
    for prefix in ("/workspace/", "./"):
        if stripped.startswith(prefix):
            stripped = stripped[len(prefix) :]
    if stripped in ("/workspace", "."):
        return "."
    return stripped.strip("/")


def is_binary(data: bytes) -> bool:
    """True for bytes that are not UTF-8 text (NUL bytes or invalid encoding)."""
    if b"\x00" in data[:_BINARY_SNIFF]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


class Evidence(_Frozen):
    """Everything a judge may use to decide one transaction, without a VSH runtime.

    Build it once with :meth:`from_event`. ``intent`` and every captured byte are
    untrusted: they describe what the agent claims and wrote, not what is allowed.
    """

    schema_version: int
    digests: Digests
    intent: str | None
    policy: PolicyResult
    counters: Counters
    changes: tuple[Change, ...]
    effects: tuple[Effect, ...]
    contents: tuple[Content, ...]
    execution: ExecutionInfo
    content_complete: bool
    evidence_complete: bool
    evidence_truncated: bool
    folder_notices: dict[str, str] = Field(
        default_factory=dict,
        description="Notice files (README, NOTICE, KEEP...) of the folders the change "
        "deletes from, read from the host by hooks that know the workspace "
        "(vsh_ai._folder_notices); untouched by the program, untrusted text.",
    )

    @classmethod
    def from_event(cls, event: vsh.RequestEvent) -> Evidence:
        """Snapshot a real ``vsh.RequestEvent`` (as handed to a commit hook)."""
        with gc_paused():
            return cls._from_event(event)

    @classmethod
    def _from_event(cls, event: vsh.RequestEvent) -> Evidence:
        context = event.execution_context
        return cls(
            schema_version=event.schema_version,
            digests=Digests(
                event_id=event.event_id,
                hook_id=event.hook_id,
                transaction=event.transaction,
                base_snapshot=event.base_snapshot,
                diff=event.diff,
                read_set=event.read_set,
                write_set=event.write_set,
                program=event.program,
                policy=event.policy,
                runtime_config=event.runtime_config,
                intent_digest=event.intent_digest,
            ),
            intent=event.intent,
            policy=PolicyResult(
                profile=event.policy_profile,
                baseline=event.baseline,
                state=event.state,
                risk_flags=tuple(event.risk_flags),
                thresholds=dict(event.policy_thresholds),
            ),
            counters=Counters(
                **{name: getattr(event, name) for name in Counters.model_fields},
            ),
            changes=tuple(
                Change(path=c.path, kind=c.kind, before=_node(c.before), after=_node(c.after))
                for c in event.canonical_diff
            ),
            effects=tuple(
                Effect(
                    sequence=e.sequence,
                    origin=e.origin,
                    operation=e.operation,
                    paths=tuple(e.paths),
                    before=_node(e.before),
                    after=_node(e.after),
                    observed_content=e.observed_content,
                )
                for e in event.effects
            ),
            contents=tuple(Content(path=c.path, blob=c.blob, data=c.bytes) for c in event.contents),
            execution=ExecutionInfo(
                language="bash" if context.language is vsh.Language.BASH else "monty",
                profile=context.profile,
                exit_code=context.exit_code,
                complete=context.complete,
                evidence=context.evidence,
                stdout_bytes=context.stdout_bytes,
                stderr_bytes=context.stderr_bytes,
            ),
            content_complete=event.content_complete,
            evidence_complete=event.evidence_complete,
            evidence_truncated=event.evidence_truncated,
        )

    # -- identity -------------------------------------------------------------------

    @property
    def transaction(self) -> str:
        return self.digests.transaction

    @cached_property
    def digest(self) -> str:
        """sha256 of the canonical JSON form: what a verdict can cite as 'this evidence'."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()

    # -- paths ----------------------------------------------------------------------

    def change(self, path: str) -> Change | None:
        """The canonical change at ``path`` (any path spelling), or None."""
        return self._changes_by_path.get(normalize_path(path))

    @cached_property
    def _changes_by_path(self) -> dict[str, Change]:
        return {c.path: c for c in self.changes}

    @property
    def changed_paths(self) -> tuple[str, ...]:
        """Every path a commit would change (a rename is a delete plus a create).

        Transient paths (a temp file written then renamed away, as ``sed -i`` does)
        never reach the host and are not listed.
        """
        return tuple(c.path for c in self.changes)

    @property
    def written_paths(self) -> tuple[str, ...]:
        """Paths whose after-state exists and differs (create, modify, metadata change)."""
        return tuple(c.path for c in self.changes if c.after is not None)

    @property
    def deleted_paths(self) -> tuple[str, ...]:
        return tuple(c.path for c in self.changes if c.after is None)

    @cached_property
    def renames(self) -> tuple[tuple[str, str], ...]:
        """(source, destination) pairs of every rename effect, in program order."""
        return tuple(
            (e.paths[0], e.paths[1])
            for e in self.effects
            if e.operation == "rename" and len(e.paths) == 2
        )

    @property
    def read_paths(self) -> tuple[str, ...]:
        """Paths whose contents the program read (in order, without repeats)."""
        return self._effect_paths(("content_read",))

    @property
    def inspected_paths(self) -> tuple[str, ...]:
        """Paths the program read in any way: contents, metadata or directory listings."""
        return self._effect_paths(("content_read", "metadata_read", "directory_read"))

    def _effect_paths(self, operations: tuple[str, ...]) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for effect in self.effects:
            if effect.operation in operations:
                seen.update(dict.fromkeys(effect.paths))
        return tuple(seen)

    # -- contents -------------------------------------------------------------------

    @cached_property
    def _blobs(self) -> dict[str, bytes]:
        return {c.blob: c.data for c in self.contents}

    @cached_property
    def _plain(self) -> dict[str, Any]:
        """This evidence as plain data, dumped once (what :func:`vsh_ai._staging.isolated`
        validates copies from; never handed out)."""
        return self.model_dump()

    def blob_bytes(self, blob: str | None) -> bytes | None:
        """Captured bytes for a blob id (content-addressed), or None when not captured."""
        return None if blob is None else self._blobs.get(blob)

    def before_bytes(self, path: str) -> bytes | None:
        """Bytes at ``path`` before the transaction; None when no file was there.

        Raises :class:`EvidenceGap` when a file existed but its bytes were not captured.
        """
        return self._side_bytes(path, "before")

    def after_bytes(self, path: str) -> bytes | None:
        """Bytes at ``path`` after the transaction; None when no file is there."""
        return self._side_bytes(path, "after")

    def before_text(self, path: str) -> str | None:
        return _text(path, self.before_bytes(path))

    def after_text(self, path: str) -> str | None:
        return _text(path, self.after_bytes(path))

    def _side_bytes(self, path: str, side: Literal["before", "after"]) -> bytes | None:
        change = self.change(path)
        if change is None:
            raise EvidenceGap(f"{normalize_path(path)}: not changed by this transaction")
        node = change.before if side == "before" else change.after
        if node is None or node.kind != "file":
            return None
        data = self.blob_bytes(node.blob)
        if data is None:
            raise EvidenceGap(
                f"{change.path}: {side} bytes were not captured "
                "(raise review_content_bytes on the runtime)"
            )
        return data

    def added_lines(self, path: str) -> tuple[str, ...]:
        """Lines present after but not before (a unified-diff '+' view of ``path``)."""
        return tuple(line[1:] for line in self._diff_lines(path) if line.startswith("+"))

    def removed_lines(self, path: str) -> tuple[str, ...]:
        return tuple(line[1:] for line in self._diff_lines(path) if line.startswith("-"))

    def _diff_lines(self, path: str) -> Iterator[str]:
        before = (self.before_text(path) or "").splitlines()
        after = (self.after_text(path) or "").splitlines()
        for line in difflib.unified_diff(before, after, lineterm="", n=0):
            if line.startswith(("+++", "---", "@@")):
                continue
            yield line

    def unified_diff(self, path: str, *, context: int = 3) -> str:
        """A unified diff of one text path, ``a/`` before and ``b/`` after."""
        change = self.change(path)
        name = normalize_path(path) if change is None else change.path
        before = (self.before_text(name) or "").splitlines(keepends=True)
        after = (self.after_text(name) or "").splitlines(keepends=True)
        lines = difflib.unified_diff(before, after, f"a/{name}", f"b/{name}", n=context)
        # A last line without a newline gets git's marker instead of running into the next.
        return "".join(
            line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n"
            for line in lines
        )

    def is_binary(self, path: str) -> bool:
        """True when either side of ``path`` is binary (raises EvidenceGap if uncaptured)."""
        sides = (self.before_bytes(path), self.after_bytes(path))
        return any(data is not None and is_binary(data) for data in sides)

    # -- completeness ---------------------------------------------------------------

    @cached_property
    def written_versions(self) -> tuple[WrittenVersion, ...]:
        """Every file version the program wrote, intermediate writes and rewrites included."""
        with gc_paused():
            return self._written_versions()

    def _written_versions(self) -> tuple[WrittenVersion, ...]:
        blobs = self._blobs
        versions: list[WrittenVersion] = []
        add = versions.append
        for effect in self.effects:
            after = effect.after
            if after is None or after.kind != "file" or effect.operation not in _WRITE_OPERATIONS:
                continue
            blob = after.blob
            add(WrittenVersion(effect.paths[-1], blob, effect.sequence, blob in blobs))
        for change in self.changes:
            after = change.after
            if after is None or after.kind != "file" or change.kind == "metadata_change":
                continue
            blob = after.blob
            add(WrittenVersion(change.path, blob, -1, blob in blobs))
        return tuple(versions)

    @property
    def unresolved_writes(self) -> tuple[WrittenVersion, ...]:
        """Written versions whose bytes a reviewer cannot see (the intermediate-write gap)."""
        return tuple(v for v in self.written_versions if not v.resolvable)

    @property
    def all_writes_resolvable(self) -> bool:
        return not self.unresolved_writes

    @cached_property
    def uncaptured_contents(self) -> tuple[str, ...]:
        """Paths whose before/after file bytes or read bytes are not in ``contents``.

        Checked from the blobs themselves rather than trusting ``content_complete``:
        a canonical side of a content change, or a content read, with no captured bytes.
        """
        missing: dict[str, None] = {}
        for change in self.changes:
            if change.kind == "metadata_change":
                continue  # bytes unchanged; VSH does not hash them
            for node in (change.before, change.after):
                if node is not None and node.kind == "file" and self.blob_bytes(node.blob) is None:
                    missing[change.path] = None
        for effect in self.effects:
            unseen = self.blob_bytes(effect.observed_content) is None
            if effect.operation == "content_read" and effect.observed_content and unseen:
                missing.update(dict.fromkeys(effect.paths))
        return tuple(missing)

    @property
    def complete(self) -> bool:
        """Structurally complete, content complete, and every written version resolvable."""
        return (
            self.evidence_complete
            and not self.evidence_truncated
            and self.content_complete
            and not self.uncaptured_contents
            and self.all_writes_resolvable
        )

    def gaps(self) -> tuple[str, ...]:
        """Why the evidence is not complete, one short sentence per gap (empty if complete)."""
        reasons: list[str] = []
        if not self.evidence_complete or self.evidence_truncated:
            reasons.append("VSH reported structurally incomplete or truncated evidence")
        if not self.content_complete or self.uncaptured_contents:
            reasons.append("changed or read contents were not all captured")
        for version in self.unresolved_writes:
            where = "an intermediate" if version.sequence >= 0 else "the final"
            reasons.append(
                f"{where} write to {version.path} is not resolvable from captured content"
            )
        return tuple(dict.fromkeys(reasons))


def _text(path: str, data: bytes | None) -> str | None:
    if data is None:
        return None
    if is_binary(data):
        raise EvidenceGap(f"{normalize_path(path)}: content is binary, not text")
    return data.decode("utf-8")
