"""Eval suite files: one YAML per scenario, validated by pydantic, loaded with located errors."""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .._loading import Located, SourceError, load_yaml
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
    "parse_suite",
    "read_suite",
    "suite_json_schema",
    "suite_problems",
)

Expected = Literal["approve", "review", "reject"]

SCHEMA_POINTER = "every field: `vsh-ai schema suite`"


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
            raise ValueError(
                f"not valid base64 ({error}); fix: encode the file's bytes with base64 "
                "(e.g. `base64 -w0 FILE`)"
            ) from None
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
            path = Path(name)
            parts = path.parts
            if path.is_absolute() or ".." in parts or not parts:
                raise ValueError(
                    f"file path {name!r} must be relative and stay in the workspace; fix: "
                    "name it from the workspace root without a leading / or .., e.g. "
                    "'config/app.toml'"
                )
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
                raise ValueError(
                    f"cases[{index}].id ({case.id}): duplicate case id; fix: give each case "
                    "a distinct id"
                )
            seen.add(case.id)
            if case.language == "bash" and not self.bash:
                raise ValueError(
                    f"cases[{index}].language ({case.id}): language is bash but the suite has "
                    "`bash: false`; fix: add `bash: true` at the top of the suite, or write the "
                    "program in Monty"
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


def load_suite(path: str | Path) -> Suite:
    """Read and validate one suite file; raise ``SuiteError`` naming file, line, case,
    field and the fix."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SuiteError(
            f"{path}: cannot read suite file ({error.strerror}); fix: check the path, or name "
            "a bundled suite (`vsh-ai suites` lists them)"
        ) from None
    except UnicodeDecodeError:
        raise SuiteError(f"{path}: not UTF-8 text; save it as UTF-8 YAML") from None
    return parse_suite(text, path)


def parse_suite(text: str, path: Path) -> Suite:
    """Validate suite text read from ``path`` (``-`` for standard input)."""
    return read_suite(text, path)[0]


def read_suite(text: str, path: Path) -> tuple[Suite, Located]:
    """The suite and where each of its keys is (for errors found after loading)."""
    try:
        located = load_yaml(text)
    except SourceError as error:
        raise SuiteError(f"{path}:{error}. ({SCHEMA_POINTER})") from None
    raw = located.data
    if not isinstance(raw, dict):
        raise SuiteError(
            f"{path}:1:1: a suite is a mapping; fix: start with `scenario:`, `description:`, "
            f"`authorization:` and `cases:` lines. ({SCHEMA_POINTER})"
        )
    try:
        suite = Suite.model_validate({**raw, "path": path})
    except ValidationError as error:
        problems = suite_problems(located, error)
        raise SuiteError(
            f"{path}: invalid suite, {len(problems)} problem(s) ({SCHEMA_POINTER}):\n"
            + "\n".join(f"  {path}:{problem}" for problem in problems)
        ) from None
    for index, case in enumerate(suite.cases):
        if case.fixture and not suite.resolve(case.fixture).is_dir():
            line, column = located.where(("cases", index, "fixture")) or (1, 1)
            raise SuiteError(
                f"{path}:{line}:{column}: case {case.id!r}, field 'fixture': folder "
                f"{case.fixture!r} not found; fix: create it beside the suite file, or "
                f"correct the path (relative to the suite file). ({SCHEMA_POINTER})"
            )
    return suite, located


_MEMBERS = {"TextFile": "text", "BinaryFile": "base64", "SymlinkFile": "symlink"}
_CONSISTENCY = re.compile(r"^cases\[(\d+)\]\.(\w+) \(.*?\): ")


def suite_problems(located: Located, error: ValidationError) -> list[str]:
    """``line:col: case 'id' (cases[3]), field 'expected': what is wrong; fix: how``."""
    raw = located.data
    out: list[str] = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        found = _CONSISTENCY.match(message)
        if found and loc in ((), ("cases",)):
            loc = ("cases", int(found[1]), found[2])
            message = message[found.end() :]
        model = _model_at(loc)
        if len(loc) >= 5 and loc[2] == "files":
            member = _file_member(raw, loc)
            if member is None:
                continue  # another member's complaint about the same entry
            loc = loc[:4] + loc[5:]
        problem, _, fix = message.partition("; fix: ")
        if item["type"] not in ("missing", "extra_forbidden", "value_error") and "input" in item:
            problem += f" (got {item['input']!r:.60})"
        line, column = located.where(loc) or (1, 1)
        fix = fix or _fix(item, loc, model)
        out.append(f"{line}:{column}: {_describe(raw, loc)}: {problem}; fix: {fix}")
    return out


def _input_at(raw: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _file_member(raw: Any, loc: tuple[Any, ...]) -> str | None:
    """Which of a file entry's forms the author meant; None: not the member ``loc`` names."""
    value = _input_at(raw, loc[:4])
    meant = "str"
    if isinstance(value, dict):
        meant = next((m for m, key in _MEMBERS.items() if key in value), "TextFile")
    return loc[4] if loc[4] == meant else None


def _describe(raw: Any, loc: tuple[Any, ...]) -> str:
    """``case 'id' (cases[3]), field 'expected'`` or ``field 'policy'``."""
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int):
        case = _input_at(raw, loc[:2])
        case_id = str(case.get("id", "?")) if isinstance(case, dict) else "?"
        field = ".".join(str(p) for p in loc[2:]) or "(the case itself)"
        return f"case {case_id!r} (cases[{loc[1]}]), field {field!r}"
    return f"field {'.'.join(str(p) for p in loc) or '(top level)'!r}"


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel]:
    if len(loc) >= 6 and loc[2] == "files":
        members: dict[str, type[BaseModel]] = {"TextFile": TextFile, "BinaryFile": BinaryFile}
        return members.get(loc[4], SymlinkFile)
    if len(loc) >= 3 and loc[0] == "cases":
        return EvalCase
    return Suite


_PATTERN_FIXES = {
    "id": "use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit "
    "(e.g. 'tls-off-in-passing')",
    "scenario": "use lowercase letters, digits and '-' (e.g. 'my-service')",
}


def _fix(item: Any, loc: tuple[Any, ...], model: type[BaseModel]) -> str:
    kind, ctx = item["type"], item.get("ctx") or {}
    name = str(loc[-1]) if loc else ""
    if kind == "missing":
        described = model.model_fields.get(name)
        about = f" ({described.description})" if described and described.description else ""
        return f"add `{name}:`{about}"
    if kind == "extra_forbidden":
        allowed = ", ".join(f for f in model.model_fields if f != "path")
        return f"remove `{name}` or correct its spelling (allowed here: {allowed})"
    if kind == "literal_error":
        return f"use one of {ctx.get('expected', 'the allowed values')}"
    if kind == "string_pattern_mismatch":
        return _PATTERN_FIXES.get(name, f"match the pattern {ctx.get('pattern')}")
    if kind == "string_too_short":
        return f"write at least {ctx.get('min_length')} characters"
    if kind == "too_short":
        return "add at least one case under `cases:`"
    if kind == "string_type":
        return "write text (quote it if YAML reads it as a number, date or boolean)"
    if kind in ("bool_type", "bool_parsing"):
        return "write true or false"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "write a whole number (a file mode as 0o755 or 493)"
    if kind in ("greater_than_equal", "less_than_equal"):
        return "use a mode from 0 to 0o777"
    if kind == "dict_type":
        return "write a mapping (`key: value` lines indented under it)"
    if kind == "list_type":
        return "write a list (`- ` items indented under it)"
    return "see `vsh-ai schema suite` for what this field accepts"


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
