"""What the inbox lists: the pending approvals of each workspace's signed binding store."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..toolset._bindings import ApprovalBinding, ApprovalStore, shown_digest
from ..toolset._driver import now_ms
from ..toolset._signing import VshApprovalError
from ..toolset._workspace import workspace_identity

__all__ = ("InboxItem", "WorkspaceInbox", "item_key")

_KEY = re.compile(r"^(?P<workspace>\d{1,4})-(?P<stem>[0-9a-f]{64}\.[0-9a-f]{1,32})$")


def item_key(text: str) -> tuple[int, str] | None:
    """``(workspace index, binding file stem)`` of an item id from a URL, else None."""
    match = _KEY.match(text)
    return (int(match["workspace"]), match["stem"]) if match else None


@dataclass(frozen=True)
class InboxItem:
    """One binding as the inbox shows it (everything shown comes from the signed record)."""

    key: str
    workspace: Path
    binding: ApprovalBinding
    ttl_s: float

    @property
    def digest(self) -> str:
        return shown_digest(self.binding)

    @property
    def metadata(self) -> dict[str, Any]:
        return self.binding.metadata

    @property
    def waiting_s(self) -> float:
        return max(0.0, (now_ms() - self.binding.created_unix_ms) / 1000)

    @property
    def left_s(self) -> float:
        return self.ttl_s - self.waiting_s

    @property
    def pending(self) -> bool:
        """Still waiting for a person: pending, undecided and within ``approval_ttl``."""
        return (
            self.binding.end_state == "pending"
            and self.binding.decision is None
            and self.left_s > 0
        )


class WorkspaceInbox:
    """The bindings of one workspace (``<workspace>/.vsh-runtime/vsh-ai/approvals``).

    Only records whose signature verifies and that name this workspace are listed;
    ``problems`` holds what was skipped and why.
    """

    def __init__(self, index: int, workspace: Path, *, ttl_s: float) -> None:
        self.index = index
        self.workspace = workspace.resolve()
        self.ttl_s = ttl_s
        self.directory = self.workspace / ".vsh-runtime" / "vsh-ai" / "approvals"
        self._store: ApprovalStore | None = None
        self.problems: list[str] = []

    @property
    def store(self) -> ApprovalStore | None:
        """The store, once the workspace has one (its identity is verified on first use)."""
        if self._store is None and self.directory.is_dir():
            identity = workspace_identity(self.directory, self.workspace)
            self._store = ApprovalStore(
                self.directory, workspace_id=identity, workspace=self.workspace
            )
        return self._store

    def items(self) -> list[InboxItem]:
        """Every verified binding, newest first."""
        self.problems = []
        try:
            store = self.store
        except VshApprovalError as error:
            self.problems.append(str(error))
            return []
        if store is None:
            return []
        found: list[InboxItem] = []
        for path, binding, problem in store.audit():
            if binding is None:
                self.problems.append(f"{path.name}: {problem}")
                continue
            stem = path.name.removesuffix(".json")
            found.append(InboxItem(f"{self.index}-{stem}", self.workspace, binding, self.ttl_s))
        found.sort(key=lambda item: item.binding.created_unix_ms, reverse=True)
        return found

    def item(self, stem: str) -> InboxItem | None:
        """The binding stored under ``stem`` (re-read and verified now), else None."""
        store = self.store
        if store is None:
            return None
        for _path, binding, _problem in store.audit([self.directory / f"{stem}.json"]):
            if binding is not None:
                return InboxItem(f"{self.index}-{stem}", self.workspace, binding, self.ttl_s)
        return None
