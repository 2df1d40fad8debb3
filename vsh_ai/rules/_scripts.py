"""``script_downloads``: a shell script that downloads a file and then runs it (a denial).

Pipes into a shell (``curl ... | sh``) are a pattern any ``forbidden_patterns`` rule
catches; this follows the file by name across the script's lines, as the workflow rule
does across a job's steps (:func:`vsh_ai.analysis._workflows_exec.script_executions`):
``curl -o /tmp/i.sh URL`` then ``sh /tmp/i.sh`` runs whatever the server sent. A checksum
or signature check of the file before it runs turns the finding into a review; a run the
script already had before the change is no finding.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from .._evidence import Evidence, EvidenceGap
from .._verdict import Verdict
from ..analysis._workflows_exec import script_executions
from ._base import Action, GlobFields, Rule
from ._glob import matching
from ._paths import validate_globs

__all__ = ("ScriptDownloads",)

_MAX_BYTES = 1 << 20  # larger scripts are not read (other rules bound what is reviewed)


class ScriptDownloads(Rule):
    """Created or modified scripts matching ``globs`` that download a file and run it."""

    type: Literal["script_downloads"] = "script_downloads"
    glob_fields: ClassVar[GlobFields] = (("globs", True),)
    globs: tuple[str, ...] = Field(
        default=("**/*.sh", "**/*.bash", "**/*.zsh", "scripts/**"),
        description="Globs of the shell scripts read.",
    )
    action: Action = Field(default="reject", description="A download run unchecked.")
    verified_action: Action = Field(
        default="review", description="A download run after a checksum or signature check."
    )
    description: str = Field(default="", description="What this rule is for.")

    _check_globs = field_validator("globs")(validate_globs)

    def check(self, evidence: Evidence, /) -> Verdict | None:
        unchecked: list[str] = []
        checked: list[str] = []
        for change in evidence.changes:
            if change.after is None or change.after.kind != "file":
                continue
            if matching(self.globs, change.path, ignore_case=True) is None:
                continue
            try:
                after = evidence.after_bytes(change.path)
                before = evidence.before_bytes(change.path)
            except EvidenceGap:
                continue  # completeness rules decide uncaptured content
            if after is None or len(after) > _MAX_BYTES or b"\0" in after[:8192]:
                continue
            old = (
                {(e.file, e.command) for e in script_executions(before.decode("utf-8", "replace"))}
                if before
                else set()
            )
            for run in script_executions(after.decode("utf-8", "replace")):
                if (run.file, run.command) in old:
                    continue
                text = f"{change.path} downloads {run.file} and then runs it (`{run.command[:60]}`)"
                (checked if run.verified else unchecked).append(text)
        if unchecked:
            return self.verdict(
                self.action,
                "; ".join(unchecked[:3]) + ": a script must not download code and execute it.",
            )
        if checked:
            return self.verdict(
                self.verified_action,
                "; ".join(checked[:3]) + " after checking it; a human must confirm the source.",
            )
        return None
