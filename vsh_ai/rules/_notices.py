"""Keep notices: a deletion the workspace's own text says must not happen goes to a human.

A cache or scratch folder is disposable by convention, not by proof: its README may say it
holds the only copy of something, or a file's header may say "do not delete". Path
allowances cannot read that, so this denial does: for every deleted file it reads the
file's own first lines and every notice file (README, NOTICE, KEEP, DO-NOT-DELETE...) of
the same folder or a folder above it, as they were before the change, wherever the
evidence holds their bytes (deleted with it, read, or edited by the program, or read from
the host by a hook that knows the workspace: :mod:`vsh_ai._folder_notices`). A keep
phrase ("only copy", "do not delete", "source of truth", "cannot be regenerated"...)
there makes the change a ``review``. Over-matching costs a review, never more; a notice
the program never touched is seen only where the hook read the host's (the toolset,
evals and ``simulate`` do; a bare ``as_hook`` on a runtime of your own does not).
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence
from .._folder_notices import NOTICE_BYTES as _NOTICE_BYTES
from .._folder_notices import NOTICE_NAME as _NOTICE_NAME
from .._verdict import Verdict
from ._base import Action, GlobFields, Rule, describe_paths, net_changes
from ._glob import check_globs, matching

__all__ = ("KEEP_PHRASES", "DeletionNotices", "keep_notice")

_NOT = (
    r"(?:do\s*n[o']?t|don['\u2019]?t|never|must\s*not|must\s*n['\u2019]t|should\s*not"
    r"|shouldn['\u2019]t|cannot|can\s*not|can['\u2019]t|may\s*not|please\s*do\s*not)"
)
KEEP_PHRASES = re.compile(
    r"(?ix)"
    r"\b(?:the\s+)?(?:only|sole|single|last|unique|one)\s+(?:remaining\s+|surviving\s+)?(?:copy|copies|record|source|instance)\b"
    rf"|\b{_NOT}\s+(?:be\s+)?(?:delet|remov|purg|clean|wip|eras|prun|discard|rm\b|clear|throw)"
    r"|\bsource\s+of\s+truth\b"
    r"|\b(?:not|non|un|never)[-\s]?(?:re-?gener|re-?buil|re-?creat|re-?produc|recover|replac)\w*"
    rf"|\b{_NOT}\s+(?:be\s+)?(?:re-?gener|re-?buil|re-?creat|re-?produc|recover|replac|re-?download|re-?fetch)"
    r"|\bno\s+(?:other\s+)?(?:backup|copy|copies)\b"
    r"|\birreplaceable\b|\bkeep\s+(?:this|these)\s+(?:file|folder|directory|dir)s?\b"
    r"|\bdo\s*not\s+touch\b|\bhand[-\s]?(?:curated|labell?ed|annotated|written|made)\b"
)
"""Phrases that say a file or folder must be kept (case-insensitive)."""

_HEADER_CHARS = 2048


def keep_notice(text: str) -> bool:
    """True when ``text`` says something must be kept (:data:`KEEP_PHRASES`)."""
    return KEEP_PHRASES.search(text) is not None


def _folder(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _speaks_for(notice: str, path: str) -> bool:
    """A notice file speaks for files in its folder and every folder below it."""
    folder = _folder(notice)
    return folder == "" or path.startswith(folder + "/")


class DeletionNotices(Rule):
    """Deleting a file (matching ``globs``) whose own header, or a notice file of its
    folder or a folder above, says it must be kept: ``action`` (review by default)."""

    type: Literal["deletion_notices"] = "deletion_notices"
    glob_fields: ClassVar[GlobFields] = (("globs", False),)
    globs: tuple[str, ...] = Field(
        default=("**",), description="Deleted paths whose notices are read (any case)."
    )
    action: Action = "review"

    _check_globs = field_validator("globs")(check_globs)

    @staticmethod
    def _captured(evidence: Evidence) -> dict[str, str]:
        """Blob of every path whose before-state bytes the program's evidence holds."""
        blobs: dict[str, str] = {}
        for change in evidence.changes:
            node = change.before
            if node is not None and node.kind == "file":
                blobs.setdefault(change.path, node.blob or "")
        for effect in evidence.effects:
            if effect.observed_content and effect.paths:
                blobs.setdefault(effect.paths[0], effect.observed_content)
        return blobs

    def _base_texts(self, evidence: Evidence, deleted: set[str]) -> dict[str, str]:
        """Text of every path as it was before the change, where its bytes were captured."""
        texts: dict[str, str] = {}
        for path, blob in self._captured(evidence).items():
            notice = _NOTICE_NAME.match(path.rsplit("/", 1)[-1]) is not None
            if not notice and path not in deleted:
                continue  # only notices and the deleted files' own headers are read
            data = evidence.blob_bytes(blob or None)
            if data is None or b"\x00" in data[:8192]:
                continue  # uncaptured (the completeness rule's finding) or binary
            # A cut may split a character: decoding ignores it (never a reason to skip).
            texts[path] = data[: _NOTICE_BYTES if notice else _HEADER_CHARS].decode(
                "utf-8", errors="ignore"
            )
        for path, text in evidence.folder_notices.items():
            if _NOTICE_NAME.match(path.rsplit("/", 1)[-1]) is not None:
                texts.setdefault(path, text[:_NOTICE_BYTES])  # captured bytes come first
        return texts

    def check(self, evidence: Evidence, /) -> Verdict | None:
        deleted = [
            c.path
            for c in net_changes(evidence)
            if c.kind == "delete" and matching(self.globs, c.path, ignore_case=True) is not None
        ]
        if not deleted:
            return None
        texts = self._base_texts(evidence, set(deleted))
        notices = [
            p
            for p, text in texts.items()
            if _NOTICE_NAME.match(p.rsplit("/", 1)[-1]) and keep_notice(text)
        ]
        kept: dict[str, str] = {}
        for path in deleted:
            own = texts.get(path)
            if own is not None and keep_notice(own):
                kept[path] = path
                continue
            speaker = next((n for n in notices if n != path and _speaks_for(n, path)), None)
            if speaker is not None:
                kept[path] = speaker
        if not kept:
            return None
        # A notice read from the host (the program never touched it) is not named: what
        # the worker is told stays a function of what the program itself saw.
        host_only = set(evidence.folder_notices) - set(self._captured(evidence))
        named = [n for n in dict.fromkeys(kept.values()) if n not in host_only]
        said = ", ".join(
            ([describe_paths(named)] if named else [])
            + (["a notice file of its folder"] if len(named) < len(set(kept.values())) else [])
        )
        return self.verdict(
            self.action,
            f"{describe_paths(kept)}: the workspace's own text ({said}) says this must be "
            "kept (the only copy, not regenerable, a source of truth or do-not-delete); "
            "leave it in place and ask a human whether it may go.",
            paths=list(kept),
        )
