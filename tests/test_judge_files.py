"""Judge files: shipped judges, schema freshness, located errors, and judge building."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from vsh_ai import Pipeline
from vsh_ai._judge_files import JudgeFileError, load_judge, load_judge_file, schema
from vsh_ai.llm import LLMCommitJudge
from vsh_ai.rules import Allowance, RuleSet

ROOT = Path(__file__).resolve().parents[1]
JUDGES = sorted((ROOT / "judges").glob("*.toml"))
SCENARIOS = {
    "service-config",
    "repo-maintenance",
    "secrets-hygiene",
    "data-cleanup",
    "dependency-updates",
    "ci-workflows",
}


def test_every_scenario_has_a_judge_file() -> None:
    assert {p.stem for p in JUDGES} >= SCENARIOS


@pytest.mark.parametrize("path", JUDGES, ids=lambda p: p.stem)
def test_shipped_judges_load(path: Path) -> None:
    spec = load_judge_file(path)
    assert spec.id == path.stem
    assert spec.llm is not None and spec.llm.model is None, "never an implicit model"  # noqa: PT018
    assert spec.llm.instructions.strip()
    judge = load_judge(path, skip_llm=True)
    assert isinstance(judge, RuleSet)
    assert judge.on_unproven == spec.rules.on_unproven == "review"
    assert any(isinstance(r, Allowance) for r in judge.rules), "allowlist style"
    if spec.id != "dependency-updates":  # its wording is owned with its analyser
        for word in ("Proves allowed", "escalates"):
            assert word in spec.description, f"the description must say what it {word}"
    with pytest.raises(JudgeFileError, match=r"pass --model NAME or set llm\.model"):
        load_judge(path)


def test_committed_schema_is_up_to_date() -> None:
    committed = json.loads((ROOT / "judges" / "schema.json").read_text())
    assert committed == schema(), (
        "judges/schema.json is stale: run "
        "`python -m vsh_ai._judge_files --schema > judges/schema.json`"
    )


def test_schema_command_prints_the_schema() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "vsh_ai._judge_files", "--schema"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert json.loads(out) == schema()


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_for(tmp_path: Path, text: str) -> str:
    with pytest.raises(JudgeFileError) as info:
        load_judge_file(write(tmp_path, text))
    return str(info.value)


def test_toml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    message = error_for(tmp_path, 'id = "x"\n[rules\n')
    assert message.startswith(f"{tmp_path / 'bad.toml'}:2:7: invalid TOML:")
    assert "fix: " in message
    assert "`vsh-ai schema judge`" in message


def test_a_bad_sharing_glob_is_located(tmp_path: Path) -> None:
    message = error_for(tmp_path, 'id = "x"\n[llm]\nshare = ["config/"]\n')
    assert "llm.share: glob 'config/' ends with '/'" in message
    assert "'config/**'" in message


def test_unknown_rule_type_is_located(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[[rules.rule]]\ntype = "no_secrets"\n[[rules.rule]]\ntype = "alow_paths"\n',
    )
    assert "bad.toml:5:1: rules.rule[1].type: unknown rule type 'alow_paths'" in message
    assert "fix: set `type` to one of: allow_added_lines, allow_config," in message


def test_misspelled_field_lists_the_allowed_ones(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[[rules.rule]]\ntype = "allow_paths"\npath = ["a/**"]\nkinds = ["create"]\n',
    )
    assert "bad.toml:4:1: rules.rule[0].path (rule id 'allow_paths'): Extra inputs are not " in (
        message
    )
    assert (
        "allowed here: credential_text, description, destructive, directories, id, kinds,"
        in message
    )
    assert (
        "bad.toml:2:1: rules.rule[0].paths (rule id 'allow_paths'): Field required; fix: add "
        in (message)
    )


def test_bad_values_are_located(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[rules]\non_unproven = "approve"\n[[rules.rule]]\ntype = "forbidden_patterns"\n'
        'patterns = ["(a)\\\\1"]\n[llm]\ntimeout = -1\n',
    )
    assert "bad.toml:3:1: rules.on_unproven: Input should be 'review' or 'escalate'" in message
    assert (
        "bad.toml:6:1: rules.rule[0].patterns (rule id 'forbidden_patterns'): pattern "
        "'(a)\\\\1' is not supported"
    ) in message
    assert "no backreferences" in message
    assert "fix: rewrite it" in message
    assert "bad.toml:8:1: llm.timeout: Input should be greater than 0" in message
    assert "fix: use a number above 0" in message
    assert "invalid judge file, 3 problem(s)" in message


def test_bad_globs_and_constraints_are_located(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[[rules.rule]]\ntype = "denied_changes"\nglobs = ["docs/**.md"]\n'
        '[[rules.rule]]\ntype = "allow_config"\npaths = ["a.toml"]\n'
        '[rules.rule.may_change]\n"a.b" = { type = "boolean", min = 1 }\n'
        '"a.c" = { type = "string", pattern = "(?=x)" }\n',
    )
    assert "rules.rule[0].globs (rule id 'denied_changes'): glob 'docs/**.md': '**' is only" in (
        message
    )
    assert "'docs/**/*.md'" in message
    assert (
        "bad.toml:9:1: rules.rule[1].may_change.a.b (rule id 'allow_config'): min/max apply "
        "to integer, number or list" in message
    )
    assert (
        "bad.toml:10:1: rules.rule[1].may_change.a.c.pattern (rule id 'allow_config'): "
        "pattern '(?=x)' is not supported" in message
    )


def test_duplicate_rule_ids(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[[rules.rule]]\ntype = "no_secrets"\n[[rules.rule]]\ntype = "no_secrets"\n',
    )
    assert "bad.toml:2:1: rules.rule: rule ids must be unique; fix: set a distinct `id` on " in (
        message
    )


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(JudgeFileError, match="cannot read judge file"):
        load_judge_file(tmp_path / "nope.toml")


RULES_ONLY = """
id = "docs"
[rules]
on_unproven = "review"
[[rules.rule]]
type = "denied_changes"
globs = ["src/**"]
[[rules.rule]]
type = "allow_paths"
paths = ["docs/**"]
kinds = ["modify"]
"""


def test_rules_only_file(tmp_path: Path) -> None:
    judge = load_judge(write(tmp_path, RULES_ONLY))
    assert isinstance(judge, RuleSet)
    assert judge.id == "docs"
    assert [r.id for r in judge.rules] == ["completeness", "denied_changes", "allow_paths"]
    with pytest.raises(JudgeFileError, match=r"no \[llm\] table"):
        load_judge(write(tmp_path, RULES_ONLY), model="test")


def test_changing_a_rule_changes_the_digest(tmp_path: Path) -> None:
    first = load_judge(write(tmp_path, RULES_ONLY, "a.toml"))
    second = load_judge(write(tmp_path, RULES_ONLY.replace("docs/**", "doc/**"), "b.toml"))
    assert first.digest != second.digest


LLM_FILE = (
    RULES_ONLY
    + """
[llm]
instructions = "Only docs may change."
share = ["docs/**"]
timeout = 5
"""
)


@pytest.mark.anyio
async def test_llm_pipeline_rules_first_then_model(tmp_path: Path, evidence_for) -> None:
    calls: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        args = {"decision": "review", "reason": "A human should look.", "cited": []}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    path = write(tmp_path, LLM_FILE)
    judge = load_judge(path, model=FunctionModel(respond))
    assert isinstance(judge, Pipeline)
    rules, llm = judge.judges
    assert isinstance(rules, RuleSet) and rules.on_unproven == "escalate"  # noqa: PT018
    assert isinstance(llm, LLMCommitJudge)
    assert isinstance(load_judge(path, model="test", skip_llm=True), RuleSet)

    denied = await evidence_for({"src/a.py": "x\n"}, "vsh_write('/workspace/src/a.py', 'y\\n')")
    verdict = await judge.review(denied)
    assert (verdict.decision, calls) == ("reject", []), "a denial decides without the model"

    proven = await evidence_for({"docs/a.md": "x\n"}, "vsh_write('/workspace/docs/a.md', 'y\\n')")
    verdict = await judge.review(proven)
    assert (verdict.decision, calls) == ("approve", []), "proven changes need no model"

    unproven = await evidence_for({"docs/a.md": "x\n"}, "vsh_write('/workspace/docs/b.md', 'y\\n')")
    verdict = await judge.review(unproven)
    assert calls == [1], "unproven changes (a create: only modify is allowed) go to the model"
    assert verdict.decision == "review"
    assert verdict.details["trail"][0] == "docs.rules/unproven:abstain"
