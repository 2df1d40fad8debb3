"""Case workspaces: materialised once per before-state, previewed by VSH, checked byte for byte."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._suite import BinaryFile, EvalCase, Suite, SymlinkFile, TextFile

if TYPE_CHECKING:
    import vsh

    from .._evidence import Evidence
    from .._simulate import Simulation
    from ._mutants import Signature

__all__ = (
    "EVAL_MAX_DURATION_MS",
    "Snapshot",
    "Workspace",
    "before_key",
    "diff_signature",
    "differences",
    "fast_scratch",
    "materialize",
    "snapshot",
)

_HOOK_ID = "vsh-ai.simulate"
EVAL_MAX_DURATION_MS = 30_000
"""Wall-clock limit of an eval guest. VSH's default (1 s) is wall time, so on a loaded box
a guest that needs a few ms of CPU can exceed it and the run would fail for the machine,
not the judge; evals score judges, so they allow 30x (VSH's other limits are unchanged)."""
_PERMISSION = re.compile(r"PermissionError: \[Errno 13\] Permission denied: '([^'\n]+)'\s*$")

Snapshot = dict[str, tuple[str, int, bytes]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root``: kind, permission bits, bytes (or link target).

    VSH's own lock/state folder ``.vsh-runtime`` is not host content and is skipped.
    Symbolic links are recorded, never followed.
    """
    entries: Snapshot = {}

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.name == ".vsh-runtime":
                    continue
                name = prefix + entry.name
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    entries[name] = ("symlink", 0, str(Path(os.readlink(entry.path))).encode())
                elif stat.S_ISDIR(info.st_mode):
                    entries[name] = ("dir", stat.S_IMODE(info.st_mode), b"")
                    walk(entry.path, name + "/")
                else:
                    with open(entry.path, "rb") as handle:
                        entries[name] = ("file", stat.S_IMODE(info.st_mode), handle.read())

    walk(str(root), "")
    return dict(sorted(entries.items()))


def materialize(suite: Suite, case: EvalCase, workspace: Path) -> None:
    """Write a case's before-state: the fixture folder first, then inline files."""
    workspace.mkdir(parents=True, exist_ok=True)
    if case.fixture:
        shutil.copytree(suite.resolve(case.fixture), workspace, symlinks=True, dirs_exist_ok=True)
    for name, spec in case.files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(spec, str):
            target.write_text(spec, encoding="utf-8")
            target.chmod(0o644)  # the same before-state whatever the umask
        elif isinstance(spec, TextFile):
            target.write_text(spec.text, encoding="utf-8")
            target.chmod(spec.mode)
        elif isinstance(spec, BinaryFile):
            target.write_bytes(spec.data)
            target.chmod(spec.mode)
        elif isinstance(spec, SymlinkFile):
            target.symlink_to(spec.symlink)


def differences(before: Snapshot, after: Snapshot) -> list[str]:
    """``+added``, ``-removed`` and ``~changed`` entry names, each group sorted."""
    changed = [n for n in sorted(before.keys() & after.keys()) if before[n] != after[n]]
    return (
        [f"+{n}" for n in sorted(after.keys() - before.keys())]
        + [f"-{n}" for n in sorted(before.keys() - after.keys())]
        + [f"~{n}" for n in changed]
    )


@functools.cache
def fast_scratch() -> Path | None:
    """Where eval workspaces go by default: RAM (``/dev/shm``) when there is one.

    VSH makes every preview durable (synced to its state folder); on a disk that costs
    about 20 ms a preview, on tmpfs about 1 ms. Eval workspaces are throwaway. Checked
    once per process.
    """
    shm = Path("/dev/shm")
    try:
        usable = os.access(shm, os.W_OK | os.X_OK) and shm.is_dir()
        info = os.statvfs(shm) if usable else None
    except OSError:
        return None
    # A container's default 64 MiB /dev/shm is too small to be worth the risk.
    if info is None or info.f_bavail * info.f_frsize < 256 << 20:
        return None
    return shm


def before_key(case: EvalCase) -> str:
    """Cases with equal keys have byte-identical before-states."""
    files = {
        name: spec if isinstance(spec, str) else spec.model_dump()
        for name, spec in case.files.items()
    }
    return json.dumps([case.fixture, files], sort_keys=True)


def diff_signature(evidence: Evidence) -> Signature:
    """What a change does, path by path: kind, resulting content digest and mode."""
    return tuple(
        sorted(
            (
                c.path,
                c.kind,
                c.after.content if c.after else None,
                c.after.mode if c.after else None,
            )
            for c in evidence.changes
        )
    )


@functools.cache
def _eval_budget() -> vsh.ExecutionBudget:
    import vsh

    return vsh.ExecutionBudget(max_duration_ms=EVAL_MAX_DURATION_MS)


@dataclass
class Workspace:
    """One materialised before-state, reused by every run of the cases that share it.

    VSH previews never commit, so each run previews on the same host folder; the runner
    compares the folder with ``before`` after every run and materialises it again when
    it differs (``restore``). A runtime is opened per language and per repeat of an
    identical program + intent (VSH refuses to preview the same transaction twice on one
    runtime). Every method here is synchronous: one thread hand-off runs a whole preview.
    """

    suite: Suite
    root: Path
    case: EvalCase
    before: Snapshot = field(default_factory=dict)
    runtimes: dict[tuple[str, int], Any] = field(default_factory=dict)
    seen: dict[tuple[str, str, str], int] = field(default_factory=dict)
    probes: dict[str, bool] = field(default_factory=dict)
    opened: int = 0

    @classmethod
    def create(cls, suite: Suite, case: EvalCase, scratch: Path | None) -> Workspace:
        root = Path(tempfile.mkdtemp(prefix=f"vsh-ai-eval-{case.id[:40]}-", dir=scratch))
        made = cls(suite, root, case)
        made.restore()
        return made

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def restore(self) -> None:
        """(Re)write the before-state from the case definition and take its snapshot."""
        self.runtimes.clear()
        self.seen.clear()
        self.probes.clear()
        if self.workspace.exists():
            shutil.rmtree(self.workspace)
        materialize(self.suite, self.case, self.workspace)
        self.before = snapshot(self.workspace)

    def changed(self) -> list[str]:
        """What differs from the before-state now (empty when byte-for-byte equal)."""
        return differences(self.before, snapshot(self.workspace))

    def runtime(self, language: str, slot: int) -> Any:
        import vsh

        from .._simulate import DEFAULT_REVIEW_CONTENT_BYTES

        key = (language, slot)
        if key not in self.runtimes:
            self.opened += 1
            state = self.root / f"state-{self.opened}-{language}-{slot}"
            self.runtimes[key] = vsh.Runtime.open(
                self.workspace,
                data_directory=state,
                policy=self.suite.policy,
                bash=vsh.BashConfig() if language == "bash" else None,
                hook_id=_HOOK_ID,
                hook_scope=vsh.HookScope.ALL_REQUESTS,
                review_content_bytes=DEFAULT_REVIEW_CONTENT_BYTES,
            )
        return self.runtimes[key]

    @staticmethod
    def request(code: str, intent: str | None, language: str) -> vsh.RunRequest:
        """The preview request VSH gets: the eval budget (``EVAL_MAX_DURATION_MS``)."""
        import vsh

        return vsh.RunRequest(
            code,
            language=vsh.Language.BASH if language == "bash" else vsh.Language.MONTY,
            intent=intent,
            mode=vsh.RunMode.PREVIEW,
            budget=_eval_budget(),
        )

    def preview(self, code: str, intent: str | None, language: str) -> Simulation:
        """Preview and prepare (never resolve: no host change), and take the hook evidence."""
        from .._evidence import Evidence
        from .._folder_notices import with_folder_notices
        from .._simulate import Simulation

        key = (language, code, intent or "")
        slot = self.seen.get(key, 0)
        self.seen[key] = slot + 1
        runtime = self.runtime(language, slot)
        receipt = runtime.preview(self.request(code, intent, language))
        evidence: Evidence | None = None
        if receipt.state in ("auto_approved", "pending_approval"):
            preparation = runtime.prepare_commit(receipt.transaction)
            try:
                if preparation.event is not None:
                    evidence = with_folder_notices(
                        Evidence.from_event(preparation.event), self.workspace
                    )
            finally:
                runtime.fail_hook(preparation)
        return Simulation(
            state=receipt.state,
            transaction=receipt.transaction,
            evidence=evidence,
            deny_reason=receipt.deny_reason,
            risk_flags=tuple(receipt.risk_flags),
        )

    def natively_protected(self, path: str) -> bool:
        """True when VSH's own policy denies access to ``path`` (probed, not guessed)."""
        import vsh

        if path not in self.probes:
            literal = repr("/workspace/" + path.lstrip("/"))
            probe = f"try:\n    vsh_read({literal})\nexcept Exception:\n    pass\n"
            denied = False
            for code in (
                probe,
                probe.replace("vsh_read(", "vsh_write(").replace(")\n", ", '')\n", 1),
            ):
                try:
                    result = self.preview(code, "vsh-ai eval: protected-path probe", "monty")
                except vsh.VshRuntimeError:
                    continue
                if result.state == "denied" and result.deny_reason == "protected_access_attempt":
                    denied = True
                    break
            self.probes[path] = denied
        return self.probes[path]

    def simulate(self, case: EvalCase) -> Simulation:
        """Preview a case; a failure on an access VSH refused natively becomes a denial.

        Monty: the guest's ``PermissionError`` names a path, and a probe confirms that VSH
        itself protects it (guest text alone proves nothing). Bash: VSH's diagnostics
        count the refused accesses.
        """
        import vsh

        from .._simulate import Simulation

        try:
            return self.preview(case.program, case.intent, case.language)
        except vsh.VshBashError as error:
            # VSH's own counter, not guest text: a Bash script that failed on a refused access
            diagnostics = getattr(error, "diagnostics", None)
            if diagnostics is None or not diagnostics.denied_accesses:
                raise
            return Simulation(
                state="denied",
                transaction="",
                evidence=None,
                deny_reason=f"protected_access_attempt (the Bash script failed on "
                f"{diagnostics.denied_accesses} access(es) VSH refused)",
                risk_flags=(),
            )
        except vsh.VshExecutionError as error:
            lines = str(error).strip().splitlines()
            match = _PERMISSION.search(lines[-1]) if lines else None
            if match is None or not self.natively_protected(match.group(1)):
                raise
            return Simulation(
                state="denied",
                transaction="",
                evidence=None,
                deny_reason=f"protected_access_attempt (the program raised VSH's "
                f"PermissionError on {match.group(1)!r})",
                risk_flags=(),
            )

    def close(self) -> None:
        """Drop the runtimes (native teardown) and the folder."""
        self.runtimes.clear()
        shutil.rmtree(self.root, ignore_errors=True)
