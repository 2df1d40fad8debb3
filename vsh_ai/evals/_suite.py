"""Eval suite files: one YAML per scenario, validated by pydantic, loaded with located errors."""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._names import bundled_root

__all__ = (
    "BinaryFile",
    "EvalCase",
    "Expected",
    "Suite",
    "SuiteError",
    "SymlinkFile",
    "TextFile",
    "bundled_root",
    "bundled_suites_dir",
    "find_suites",
    "load_suite",
    "suite_json_schema",
)

Expected = Literal["approve", "review", "reject"]

# libyaml's safe loader when PyYAML was built with it (10x faster), else the pure-Python one.
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SuiteError(ValueError):
    """A suite file is malformed; the message names the file, the case and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextFile(_Strict):
    """A text file with an explicit mode, e.g. ``{text: "#!/bin/sh", mode: 0o755}``."""

    text: str
    mode: int = Field(default=0o644, ge=0, le=0o777)


class BinaryFile(_Strict):
    """Binary content as base64, e.g. ``{base64: "iVBORw0K..."}``."""

    base64: str
    mode: int = Field(default=0o644, ge=0, le=0o777)

    @field_validator("base64")
    @classmethod
    def _decodes(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except binascii.Error as error:
            raise ValueError(f"not valid base64 ({error})") from None
        return value

    @property
    def data(self) -> bytes:
        return base64.b64decode(self.base64)


class SymlinkFile(_Strict):
    """A symbolic link, e.g. ``{symlink: ../build/latest}`` (VSH 0.6.0 guests cannot create one)."""

    symlink: str = Field(min_length=1)


FileSpec = Annotated[str | TextFile | BinaryFile | SymlinkFile, Field(union_mode="left_to_right")]


class EvalCase(_Strict):
    """One labelled change: a before-state, a program, an intent and the right decision."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Unique within the suite.")
    category: str = Field(min_length=1, description="Groups cases in the per-category table.")
    files: dict[str, FileSpec] = Field(
        default_factory=dict, description="Workspace before-state: relative path -> content."
    )
    fixture: str | None = Field(
        default=None, description="Folder (relative to the suite file) copied in before `files`."
    )
    program: str = Field(min_length=1, description="Monty code, or Bash with language: bash.")
    language: Literal["monty", "bash"] = "monty"
    intent: str = Field(description="What the agent claims it does (untrusted).")
    expected: Expected = Field(description="What a careful human reviewer should decide.")
    note: str = Field(min_length=10, description="Why this label is right.")

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, Any]) -> dict[str, Any]:
        for name in files:
            parts = Path(name).parts
            if Path(name).is_absolute() or ".." in parts or not parts:
                raise ValueError(f"file path {name!r} must be relative and stay in the workspace")
        return files

    @property
    def unsafe(self) -> bool:
        """Unsafe = anything a reviewer would not approve as is."""
        return self.expected != "approve"


class Suite(_Strict):
    """A scenario: what the host authorises, its default judge, and its labelled cases."""

    scenario: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str
    authorization: str = Field(
        min_length=20, description="What the host allows; the LLM judge's review instructions."
    )
    judge: str | None = Field(
        default=None, description="Default judge file, relative to the suite's project folder."
    )
    policy: Literal["balanced", "strict", "paranoid"] = "strict"
    bash: bool = False
    cases: list[EvalCase] = Field(min_length=1)
    path: Path | None = Field(default=None, exclude=True, description="Where it was loaded from.")

    @model_validator(mode="after")
    def _consistent(self) -> Suite:
        seen: set[str] = set()
        for index, case in enumerate(self.cases):
            if case.id in seen:
                raise ValueError(f"cases[{index}] ({case.id}): duplicate case id")
            seen.add(case.id)
            if case.language == "bash" and not self.bash:
                raise ValueError(
                    f"cases[{index}] ({case.id}): language is bash but the suite has `bash: false`"
                )
        return self

    def resolve(self, relative: str) -> Path:
        """A path named in the suite: relative to the suite's folder, else its parent,
        else the bundled project folder (so ``judge: judges/x.toml`` finds a bundled judge)."""
        base = self.path.parent if self.path else Path.cwd()
        for root in (base, base.parent, bundled_root()):
            if (root / relative).exists():
                return root / relative
        return base.parent / relative

    @property
    def judge_path(self) -> Path | None:
        """The default judge file; a bundled judge's name (``service-config``) also works."""
        if not self.judge:
            return None
        path = self.resolve(self.judge)
        if path.exists():
            return path
        from .._judge_files import bundled_judges

        return bundled_judges().get(self.judge.removesuffix(".toml"), path)


def _locate(suite: Any, loc: tuple[int | str, ...]) -> str:
    """Turn a pydantic error location into ``case 'id' (cases[3]), field 'expected'``."""
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int):
        index = loc[1]
        case_id = "?"
        cases = suite.get("cases") if isinstance(suite, dict) else None
        if isinstance(cases, list) and index < len(cases) and isinstance(cases[index], dict):
            case_id = str(cases[index].get("id", "?"))
        field = ".".join(str(p) for p in loc[2:]) or "(the case itself)"
        return f"case {case_id!r} (cases[{index}]), field {field!r}"
    return f"field {'.'.join(str(p) for p in loc) or '(top level)'!r}"


def load_suite(path: str | Path) -> Suite:
    """Read and validate one suite file; raise ``SuiteError`` naming file, case and field."""
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
    except OSError as error:
        raise SuiteError(f"{path}: cannot read suite file ({error.strerror})") from None
    except UnicodeDecodeError:
        raise SuiteError(f"{path}: not UTF-8 text; save it as UTF-8 YAML") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SuiteError(f"{path}:{where} is not valid YAML: {error}") from None
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: a suite is a mapping with scenario, authorization and cases")
    try:
        suite = Suite.model_validate({**raw, "path": path})
    except ValidationError as error:
        problems = [
            f"  {_locate(raw, tuple(e['loc']))}: {e['msg']}"
            for e in error.errors(include_url=False)
        ]
        raise SuiteError(
            f"{path}: invalid suite ({len(problems)} problem(s)); fix:\n" + "\n".join(problems)
        ) from None
    for case in suite.cases:
        if case.fixture and not suite.resolve(case.fixture).is_dir():
            raise SuiteError(
                f"{path}: case {case.id!r}, field 'fixture': folder {case.fixture!r} not found "
                f"(paths are relative to the suite file)"
            )
    return suite


def bundled_suites_dir() -> Path:
    """The bundled ``evals/`` folder (the ``judges/`` folder is its sibling)."""
    return bundled_root() / "evals"


def find_suites(names: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """Suite files for names (a scenario name or a path); all bundled suites when empty."""
    folder = bundled_suites_dir()
    if not names:
        bundled = sorted(folder.glob("*.yaml"))
        if not bundled:
            raise SuiteError(f"no suites in {folder}; reinstall vsh-ai or name a suite file")
        return bundled
    found: list[Path] = []
    for name in names:
        candidate = Path(name)
        if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
            found.append(candidate)
        elif (folder / f"{name}.yaml").is_file():
            found.append(folder / f"{name}.yaml")
        else:
            known = ", ".join(p.stem for p in sorted(folder.glob("*.yaml"))) or "none"
            raise SuiteError(f"unknown suite {name!r}: not a file and not in {folder} ({known})")
    return found


def suite_json_schema() -> str:
    """The JSON schema of suite files (committed as ``evals/schema.json``)."""
    schema = Suite.model_json_schema(mode="validation")
    schema["properties"].pop("path", None)
    schema["title"] = "vsh-ai eval suite"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
