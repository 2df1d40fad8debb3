"""Judge files: declarative TOML definitions of a rule set and an optional LLM judge.

A judge file has a top-level ``id`` and ``description``, a ``[rules]`` table with
``on_unproven`` and ``[[rules.rule]]`` entries (each tagged by ``type``), and an optional
``[llm]`` table. ``vsh-ai schema judge`` prints the schema of every field (the
checkout's ``judges/schema.json`` is regenerated with ``--out judges/schema.json``).
"""

from __future__ import annotations

import json
import re
import sys
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._hooks import Pipeline
from ._loading import Located, SourceError, load_toml
from .rules import AnyRule, OnUnproven, RuleSet
from .rules._glob import check_globs

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from .llm import LLMCommitJudge

__all__ = (
    "JudgeFile",
    "JudgeFileError",
    "LLMSection",
    "RulesSection",
    "bundled_judges",
    "load_judge",
    "load_judge_file",
    "parse_judge_file",
    "resolve_judge_path",
    "schema",
)

SCHEMA_POINTER = "every field: `vsh-ai schema judge`"
_IMPERATIVE = re.compile(r"^(give|set|use|write|name|rewrite|add|remove|choose)\b")


class JudgeFileError(ValueError):
    """A judge file is missing, malformed or unusable; the message says where and how to fix it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RulesSection(_Strict):
    """``[rules]``: the deterministic rule set."""

    on_unproven: OnUnproven = Field(
        default="review",
        description="A change no allowance proves allowed: review (a human decides) or "
        "escalate (the next judge decides; always used in front of the LLM judge). Rules "
        "approve only when every change is proven allowed and no denial fires.",
    )
    rule: tuple[AnyRule, ...] = Field(default=(), description="Rules, each tagged by `type`.")

    @field_validator("rule")
    @classmethod
    def _unique_ids(cls, rules: tuple[Any, ...]) -> tuple[Any, ...]:
        ids = [r.id for r in rules]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"rule ids must be unique; set a distinct `id` on {duplicates}")
        return rules


class LLMSection(_Strict):
    """``[llm]``: an LLM judge deciding the changes the rules could not prove (needs a model)."""

    model: str | None = Field(
        default=None, description="Model name, e.g. 'openai:gpt-4o-mini'; or pass --model."
    )
    instructions: str = Field(default="", description="Review instructions: what is authorized.")
    share: tuple[str, ...] = Field(
        default=(), description="Globs of paths whose contents may be sent to the provider."
    )
    redact_secrets: bool = True
    timeout: float = Field(default=30.0, gt=0)
    max_input_bytes: int = Field(default=65536, gt=0)
    max_output_tokens: int = Field(default=1024, gt=0)
    max_output_bytes: int | None = Field(
        default=None, gt=0, description="Bound on the answer's bytes (default: 8 per token)."
    )
    max_concurrency: int = Field(default=4, ge=1)

    _globs_compile = field_validator("share")(check_globs)  # errors point at llm.share

    def build(
        self,
        model: Model | str,
        *,
        id: str,
        instructions: str | None = None,
        timeout: float | None = None,
        max_concurrency: int | None = None,
    ) -> LLMCommitJudge:
        """The LLM judge this section configures; a given keyword replaces its setting."""
        from .llm import LLMCommitJudge, SharingPolicy

        return LLMCommitJudge(
            model,
            id=id,
            instructions=self.instructions if instructions is None else instructions,
            sharing=SharingPolicy(share=self.share, redact_secrets=self.redact_secrets),
            timeout=self.timeout if timeout is None else timeout,
            max_input_bytes=self.max_input_bytes,
            max_output_tokens=self.max_output_tokens,
            max_output_bytes=self.max_output_bytes,
            max_concurrency=self.max_concurrency if max_concurrency is None else max_concurrency,
        )


class JudgeFile(_Strict):
    """A judge definition file (``judges/<scenario>.toml``)."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    rules: RulesSection = RulesSection()
    llm: LLMSection | None = None

    def rule_set(
        self,
        *,
        on_unproven: OnUnproven | None = None,
        id: str | None = None,
    ) -> RuleSet:
        """The rule set this file defines (``on_unproven`` overrides the file's)."""
        return RuleSet(
            self.rules.rule,
            on_unproven=on_unproven or self.rules.on_unproven,
            id=id or self.id,
        )


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(previous, int) and isinstance(part, str) and out.startswith("rules.rule"):
            pass  # the union tag pydantic inserts after a rule index, e.g. 'allow_paths'
        else:
            out += f".{part}" if out else part
        previous = part
    return out or "(top level)"


def _rule_classes() -> dict[str, type[BaseModel]]:
    union = get_args(get_args(AnyRule)[0])
    return {cls.model_fields["type"].default: cls for cls in union}


def _allowed_fields(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = JudgeFile
    if loc[:2] == ("rules", "rule") and len(loc) > 3 and isinstance(loc[3], str):
        model = _rule_classes().get(loc[3], model)
    elif loc[:1] == ("rules",):
        model = RulesSection
    elif loc[:1] == ("llm",):
        model = LLMSection
    return sorted(model.model_fields)


def _fix(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(_allowed_fields(error["loc"]))
        return f"remove this key or correct its spelling (allowed here: {allowed})"
    if kind == "missing":
        return f"add `{error['loc'][-1]} = ...`"
    if kind == "union_tag_invalid":
        return "set `type` to one of: " + ", ".join(sorted(_rule_classes()))
    if kind == "union_tag_not_found":
        return 'give the rule a `type`, e.g. type = "allow_paths"'
    if kind in ("literal_error", "enum"):
        return "use " + str(error.get("ctx", {}).get("expected", "an allowed value"))
    if kind in ("greater_than", "greater_than_equal"):
        bound = error.get("ctx", {}).get("gt", error.get("ctx", {}).get("ge"))
        return f"use a number {'above' if kind == 'greater_than' else 'of at least'} {bound}"
    if kind in ("string_type", "int_type", "float_type", "bool_type", "list_type", "dict_type"):
        wanted = {
            "string": 'a quoted string ("...")',
            "int": "a whole number",
            "float": "a number",
            "bool": "true or false",
            "list": "an array [...]",
            "dict": "a table",
        }
        return f"write {wanted[kind.removesuffix('_type')]}"
    if kind in ("int_parsing", "float_parsing", "bool_parsing"):
        return "write the value without quotes (e.g. 30, 1.5, true)"
    if kind == "string_pattern_mismatch":
        return "use letters, digits, '_', '.' and '-' only"
    if kind in ("too_short", "string_too_short"):
        return "give at least one item" if kind == "too_short" else "give a non-empty string"
    return f"change this value ({SCHEMA_POINTER} shows what it accepts)"


def _message(error: Any) -> tuple[str, str]:
    """What is wrong and how to fix it."""
    if error["type"] == "union_tag_invalid":
        tag = error.get("ctx", {}).get("tag", error.get("input"))
        return f"unknown rule type {tag!r}", _fix(error)
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "value_error":
        problem, _, advice = message.partition("; ")
        if advice:
            return problem, advice
        if _IMPERATIVE.match(message):
            return "invalid value", message
        return message, _fix(error)
    if error["type"] not in ("missing", "extra_forbidden") and "input" in error:
        message += f" (got {error['input']!r:.60})"
    return message, _fix(error)


def _rule_id(data: Any, loc: tuple[int | str, ...]) -> str:
    if loc[:2] != ("rules", "rule") or len(loc) < 3 or not isinstance(loc[2], int):
        return ""
    try:
        rule = data["rules"]["rule"][loc[2]]
    except (KeyError, IndexError, TypeError):
        return ""
    if not isinstance(rule, dict):
        return ""
    rule_id = rule.get("id")
    if rule_id is None and rule.get("type") in _rule_classes():
        rule_id = rule["type"]  # a rule's id defaults to its type
    return f" (rule id {rule_id!r})" if isinstance(rule_id, str) else ""


def _source_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The key path in the file: pydantic's union tag after a rule index removed."""
    if loc[:2] == ("rules", "rule") and len(loc) > 3 and isinstance(loc[2], int):
        return loc[:3] + loc[4:]
    return loc


def _format_errors(path: Path, located: Located, error: ValidationError) -> str:
    lines = [f"{path}: invalid judge file, {error.error_count()} problem(s) ({SCHEMA_POINTER}):"]
    for item in error.errors():
        loc = tuple(item["loc"])
        where = _location(loc)
        source = _source_loc(loc)
        if item["type"] in ("union_tag_invalid", "union_tag_not_found"):
            where += ".type"
            source = (*source, "type")
        line, column = located.where(source) or (1, 1)
        problem, fix = _message(item)
        lines.append(
            f"  {path}:{line}:{column}: {where}{_rule_id(located.data, loc)}: {problem}; fix: {fix}"
        )
    return "\n".join(lines)


def load_judge_file(path: str | PathLike[str]) -> JudgeFile:
    """Read and validate a judge file; raise :class:`JudgeFileError` saying where and how to fix."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise JudgeFileError(
            f"{file}: cannot read judge file ({error.strerror}); fix: check the path, or name "
            "a bundled judge (`vsh-ai judges` lists them)"
        ) from None
    except UnicodeDecodeError:
        raise JudgeFileError(f"{file}: not UTF-8 text; save it as UTF-8 TOML") from None
    return parse_judge_file(text, file)


def parse_judge_file(text: str, path: Path) -> JudgeFile:
    """Validate judge-file text read from ``path`` (``-`` for standard input)."""
    try:
        located = load_toml(text)
    except SourceError as error:
        raise JudgeFileError(f"{path}:{error}. ({SCHEMA_POINTER})") from None
    try:
        return JudgeFile.model_validate(located.data)
    except ValidationError as error:
        raise JudgeFileError(_format_errors(path, located, error)) from None


def bundled_judges() -> dict[str, Path]:
    """The bundled judge files by name (``service-config`` -> its ``judges/*.toml`` path)."""
    from .evals._names import bundled_root

    return {p.stem: p for p in sorted((bundled_root() / "judges").glob("*.toml"))}


_BUNDLED_SPELLING = re.compile(r"^(?:judges/)?([a-z0-9][a-z0-9-]*)(?:\.toml)?$")


def resolve_judge_path(path: str | PathLike[str]) -> Path:
    """A judge file: ``path`` when it exists, else the bundled judge it names.

    ``service-config``, ``service-config.toml`` and ``judges/service-config.toml`` name the
    bundled judge when no such file exists relative to the current folder, so examples
    work from anywhere. Anything else is returned unchanged (and fails to load there).
    """
    file = Path(path)
    if file.exists():
        return file
    match = _BUNDLED_SPELLING.match(str(path).replace("\\", "/"))
    if match is not None:
        bundled = bundled_judges().get(match.group(1))
        if bundled is not None:
            return bundled
    return file


def load_judge(
    path: str | PathLike[str],
    *,
    model: Model | str | None = None,
    skip_llm: bool = False,
) -> RuleSet | Pipeline:
    """Build the judge a file describes.

    Without ``[llm]`` (or with ``skip_llm``), the rule set alone, with the file's
    ``on_unproven``. With ``[llm]``: ``Pipeline(rules escalating what they cannot prove,
    LLMCommitJudge)``
    using ``model`` (a name or pydantic-ai Model) or ``llm.model``; naming no model is
    an error, since a judge file never creates an LLM implicitly. ``path`` may name a
    bundled judge (``"service-config"``) when no such file exists (see
    :func:`resolve_judge_path`).
    """
    path = resolve_judge_path(path)
    spec = load_judge_file(path)
    if spec.llm is None:
        if model is not None and not skip_llm:
            raise JudgeFileError(
                f"{path}: a model was given but the file has no [llm] table; "
                "add an [llm] table with instructions, or do not pass a model"
            )
        return spec.rule_set()
    if skip_llm:
        return spec.rule_set()
    chosen = model if model is not None else spec.llm.model
    if chosen is None:
        raise JudgeFileError(
            f"{path}: llm: no model named for the LLM judge; pass --model NAME or set "
            "llm.model (or skip the LLM judge to use the rules alone)"
        )
    rules = spec.rule_set(on_unproven="escalate", id=f"{spec.id}.rules")
    return Pipeline(rules, spec.llm.build(chosen, id=f"{spec.id}.llm"), id=spec.id)


def schema() -> dict[str, Any]:
    """The JSON schema of judge files (committed as ``judges/schema.json``)."""
    out = JudgeFile.model_json_schema()
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["title"] = "vsh-ai judge file"
    return out


def _main(argv: list[str]) -> int:
    if argv == ["--schema"]:
        print(json.dumps(schema(), indent=2, sort_keys=True))
        return 0
    for name in argv:
        try:
            spec = load_judge_file(name)
        except JudgeFileError as error:
            print(error, file=sys.stderr)
            return 1
        print(f"{name}: ok ({len(spec.rules.rule)} rules, llm={'yes' if spec.llm else 'no'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
