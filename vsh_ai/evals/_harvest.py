"""Production decisions back into suites: resolved deferred approvals become labelled cases.

A deferred :class:`~vsh_ai.VshToolset` signs one binding per approval request; since
harvest capture exists, the binding also holds the program, its intent and the bounded,
secret-free before-state of every path the transaction read or changed. ``harvest``
turns each resolved binding into an :class:`EvalCase`:

- approved by a person and committed -> ``expected: approve``;
- denied with a message -> ``reject`` (the approver said why);
- denied without one (pydantic-ai's default text) -> ``review``;
- a denial names who denied when the app denied with :func:`vsh_ai.denial`, and says
  that nobody was recorded otherwise (Pydantic AI passes no metadata with a denial);
- still pending (only with ``include_pending``) -> ``review``;
- expired, stale, failed or released by VSH: no human decision, skipped.

Records that do not verify (tampered, corrupt), that predate capture, or whose capture
was refused (secrets, protected paths, too large) are skipped with the reason. Intents
and notes are redacted with :func:`~vsh_ai.analysis.redact_text`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..analysis._secrets import find_secrets, redact_text
from ..toolset._bindings import ApprovalBinding, ApprovalStore
from ..toolset._harvest import denied_by
from ._suite import EvalCase, Expected, Suite

__all__ = (
    "DEFAULT_AUTHORIZATION",
    "HarvestResult",
    "harvest",
    "harvest_case",
    "suite_yaml",
)

DEFAULT_AUTHORIZATION = (
    "Changes like those a person approved in production are allowed; anything a person "
    "denied, or that needs a closer look, must go to review."
)
_DEFAULT_DENIAL = "The tool call was denied."
_PROGRAM_TOOLS = ("vsh_run",)


@dataclass
class HarvestResult:
    """The harvested cases and every skipped record with its reason."""

    cases: list[EvalCase] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"harvested {len(self.cases)}, skipped {len(self.skipped)}"]
        lines += [f"  skipped {name}: {reason}" for name, reason in self.skipped]
        return "\n".join(lines)


def _date(binding: ApprovalBinding) -> str:
    stamp = binding.end_unix_ms or binding.created_unix_ms
    return datetime.fromtimestamp(stamp / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _redacted(text: str) -> str:
    return redact_text(text)[0]


def _label(binding: ApprovalBinding, include_pending: bool) -> tuple[Expected, str] | str:
    """``(expected, why)`` for a human decision, else the reason to skip."""
    when = _date(binding)
    if binding.end_state == "committed":
        if not binding.end_principal:
            return "committed without a recorded principal (no human approval to learn from)"
        return "approve", f"approved by {binding.end_principal} on {when} and committed"
    if binding.end_state == "denied":
        by, unrecorded = denied_by(binding.end_principal)
        message = binding.end_message.strip()
        if message and message != _DEFAULT_DENIAL:
            return "reject", f"denied{by} on {when} with the message: {message}{unrecorded}"
        return "review", f"denied{by} on {when} without a message (left at review){unrecorded}"
    if binding.end_state == "pending":
        if include_pending:
            return "review", f"still waiting for approval (requested {when})"
        return "still pending (pass --include-pending to harvest it as review)"
    return f"ended {binding.end_state} without a human decision"


def _files(binding: ApprovalBinding) -> dict[str, Any]:
    assert binding.harvest is not None
    files: dict[str, Any] = {}
    for path, encoded in binding.harvest.files.items():
        data = base64.b64decode(encoded)
        mode = binding.harvest.modes.get(path, 0o644)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            files[path] = {"base64": encoded, "mode": mode}
            continue
        files[path] = text if mode == 0o644 else {"text": text, "mode": mode}
    return files


def harvest_case(binding: ApprovalBinding, *, include_pending: bool = False) -> EvalCase | str:
    """One verified binding as a case, or the reason it cannot be one."""
    capture = binding.harvest
    if capture is None:
        return "recorded before harvest capture existed (no program or before-state)"
    if capture.skip_reason:
        return f"not harvestable: {capture.skip_reason}"
    if not capture.program:
        return f"tool {capture.tool!r} recorded no program"
    label = _label(binding, include_pending)
    if isinstance(label, str):
        return label
    expected, why = label
    files = _files(binding)
    # Fail closed again: a capture made by an older or buggy writer must not leak.
    texts = [capture.program, *(v if isinstance(v, str) else "" for v in files.values())]
    if any(find_secrets(text) for text in texts):
        return "not harvestable: the program or before-state holds a detected secret"
    tool = "" if capture.tool in _PROGRAM_TOOLS else f" (via {capture.tool})"
    note = _redacted(f"Production decision{tool}: {why}; transaction {binding.transaction[:16]}.")
    try:
        return EvalCase(
            id=f"{binding.end_state}-{binding.transaction[:12].lower()}",
            category="harvested",
            files=files,
            program=capture.program,
            language=capture.language,
            intent=_redacted(capture.intent),
            expected=expected,
            note=note,
        )
    except ValidationError as error:
        return f"not a valid case ({error.error_count()} problems)"


def harvest(
    workspace: str | os.PathLike[str],
    *,
    state_directory: str | os.PathLike[str] | None = None,
    include_pending: bool = False,
) -> HarvestResult:
    """Read and verify every binding of ``workspace``'s approval store; label the resolved."""
    directory = (
        Path(state_directory)
        if state_directory is not None
        else Path(workspace) / ".vsh-runtime" / "vsh-ai" / "approvals"
    )
    result = HarvestResult()
    seen: set[str] = set()
    for path, binding, problem in ApprovalStore(directory).audit():
        if binding is None:
            result.skipped.append((path.name, problem))
            continue
        case = harvest_case(binding, include_pending=include_pending)
        name = binding.transaction[:12] or path.name
        if isinstance(case, str):
            result.skipped.append((name, case))
        elif case.id in seen:
            result.skipped.append((name, "same transaction already harvested"))
        else:
            seen.add(case.id)
            result.cases.append(case)
    return result


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and value == value.rstrip(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def suite_yaml(
    cases: Iterable[EvalCase],
    *,
    scenario: str = "harvested",
    authorization: str = DEFAULT_AUTHORIZATION,
    judge: str | None = None,
    description: str = "Production approval decisions harvested by `vsh-ai harvest`.",
) -> str:
    """A suite file holding ``cases`` (validated as a :class:`Suite` before it is written)."""
    cases = list(cases)
    suite = Suite(
        scenario=scenario,
        description=description,
        authorization=authorization,
        judge=judge,
        bash=any(c.language == "bash" for c in cases),
        cases=cases,
    )
    data = suite.model_dump(mode="json", exclude_defaults=False, exclude={"path"})
    if data.get("judge") is None:
        data.pop("judge", None)
    for case in data["cases"]:
        if case.get("fixture") is None:
            case.pop("fixture", None)
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
