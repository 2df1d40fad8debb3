"""What the inbox lists with ``--dbos``: tool calls of workflows waiting in
:func:`~vsh_ai.dbos.run_with_approvals`, read and decided through a ``DBOSClient``.

No workflow code and no ``DBOS.launch()``: a client on the same system database (a SQLite
path or a Postgres URL) reads each workflow's published round
(:func:`~vsh_ai.dbos.pending_approvals`) and sends the decision as a DBOS message
(:func:`~vsh_ai.dbos.send_approval`), bound to that round's ``request_id`` and to the
transaction the page showed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..toolset._principal import check_principal

__all__ = ("DbosInbox", "DbosItem", "system_database_url")


def system_database_url(spec: str) -> str:
    """``spec`` as a DBOS system database URL: a URL as given, a file path as SQLite."""
    if "://" in spec:
        return spec
    return f"sqlite:///{Path(spec).resolve()}"


@dataclass(frozen=True)
class DbosItem:
    """One call of a waiting round."""

    workflow_id: str
    request_id: str
    tool_call_id: str
    tool_name: str
    metadata: dict[str, Any]
    deadline_unix_s: float
    sent: str = ""
    """The decision this inbox already sent for it ("" if none)."""

    @property
    def left_s(self) -> float:
        return self.deadline_unix_s - time.time()

    @property
    def transaction(self) -> str:
        value = self.metadata.get("transaction")
        return value if isinstance(value, str) else ""


class DbosInbox:
    """Waiting workflows of one DBOS system database."""

    def __init__(self, spec: str) -> None:
        from dbos import DBOSClient

        self.url = system_database_url(spec)
        self.client = DBOSClient(system_database_url=self.url)
        self._sent: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.client.destroy()

    def items(self) -> list[DbosItem]:
        """Every call of every round now waiting, oldest workflow first."""
        from ..dbos import WorkflowNotWaiting, pending_approvals

        found: list[DbosItem] = []
        for status in self.client.list_workflows(status="PENDING", sort_desc=False):
            try:
                view = pending_approvals(status.workflow_id, client=self.client)
            except WorkflowNotWaiting:
                continue
            if view is None or view.state != "waiting":
                continue
            for call in view.calls:
                key = (status.workflow_id, view.request_id, call.tool_call_id)
                found.append(
                    DbosItem(
                        workflow_id=status.workflow_id,
                        request_id=view.request_id,
                        tool_call_id=call.tool_call_id,
                        tool_name=call.tool_name,
                        metadata=call.metadata,
                        deadline_unix_s=view.deadline_unix_s,
                        sent=self._sent.get(key, ""),
                    )
                )
        return found

    def item(self, workflow_id: str, tool_call_id: str) -> DbosItem | None:
        for item in self.items():
            if (item.workflow_id, item.tool_call_id) == (workflow_id, tool_call_id):
                return item
        return None

    def decide(
        self,
        workflow_id: str,
        tool_call_id: str,
        *,
        request_id: str,
        transaction: str,
        approve: bool,
        principal: str,
        reason: str = "",
    ) -> None:
        """Send one call's decision, if the round and transaction are still the ones the
        page showed (else ``ValueError`` saying why; nothing is sent)."""
        from ..dbos import WorkflowNotWaiting, send_approval

        check_principal(principal)
        with self._lock:
            current = self.item(workflow_id, tool_call_id)
            if (
                current is None
                or current.request_id != request_id
                or current.transaction != transaction
            ):
                raise ValueError(
                    "the workflow no longer waits for this call as this page showed it "
                    "(its round ended or changed); nothing was sent: reload the page"
                )
            if current.sent:
                raise ValueError(
                    f"this inbox already sent a decision ({current.sent}); nothing sent"
                )
            try:
                send_approval(
                    workflow_id,
                    request_id=request_id,
                    principal=principal,
                    approve=[tool_call_id] if approve else (),
                    deny={} if approve else {tool_call_id: reason},
                    client=self.client,
                )
            except WorkflowNotWaiting as error:
                raise ValueError(f"{error}; nothing was sent") from None
            self._sent[(workflow_id, request_id, tool_call_id)] = "approve" if approve else "deny"
