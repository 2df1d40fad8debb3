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
from vsh_ai.rules import RuleSet

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
    assert judge.on_pass == spec.rules.on_pass
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
    assert message.startswith(f"{tmp_path / 'bad.toml'}: invalid TOML:")
    assert "line 2, column 7" in message


def test_a_bad_sharing_glob_is_located(tmp_path: Path) -> None:
    message = error_for(tmp_path, 'id = "x"\n[llm]\nshare = ["config/"]\n')
    assert "llm.share: glob 'config/' ends with '/'" in message
    assert "'config/**'" in message


def test_unknown_rule_type_is_located(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[[rules.rule]]\ntype = "no_secrets"\n[[rules.rule]]\ntype = "alowed_changes"\n',
    )
    assert "rules.rule[1].type: unknown rule type 'alowed_changes'" in message
    assert "fix: set `type` to one of: allowed_changes," in message


def test_misspelled_field_lists_the_allowed_ones(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[[rules.rule]]\ntype = "allowed_changes"\nglob = ["a/**"]\n',
    )
    assert "rules.rule[0].glob: Extra inputs are not permitted" in message
    assert "allowed here: action, globs, id, type" in message
    assert "rules.rule[0].globs: Field required; fix: add this key" in message


def test_bad_values_are_located(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[rules]\non_pass = "yes"\n[[rules.rule]]\ntype = "forbidden_patterns"\n'
        'patterns = ["("]\n[llm]\ntimeout = -1\n',
    )
    assert "rules.on_pass: Input should be 'approve', 'follow_policy' or 'escalate'" in message
    assert "rules.rule[0].patterns: invalid regular expression '('" in message
    assert "llm.timeout: Input should be greater than 0" in message
    assert "(3 problem(s))" in message


def test_duplicate_rule_ids(tmp_path: Path) -> None:
    message = error_for(
        tmp_path,
        'id = "x"\n[[rules.rule]]\ntype = "no_secrets"\n[[rules.rule]]\ntype = "no_secrets"\n',
    )
    assert "rule ids must be unique; set a distinct `id` on ['no_secrets']" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(JudgeFileError, match="cannot read judge file"):
        load_judge_file(tmp_path / "nope.toml")


RULES_ONLY = """
id = "docs"
[rules]
on_pass = "approve"
[[rules.rule]]
type = "allowed_changes"
globs = ["docs/**"]
"""


def test_rules_only_file(tmp_path: Path) -> None:
    judge = load_judge(write(tmp_path, RULES_ONLY))
    assert isinstance(judge, RuleSet)
    assert judge.id == "docs"
    assert [r.id for r in judge.rules] == ["completeness", "allowed_changes"]
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
    assert isinstance(rules, RuleSet) and rules.on_pass == "escalate"  # noqa: PT018
    assert isinstance(llm, LLMCommitJudge)
    assert isinstance(load_judge(path, model="test", skip_llm=True), RuleSet)

    outside = await evidence_for({"src/a.py": "x\n"}, "vsh_write('/workspace/src/a.py', 'y\\n')")
    verdict = await judge.review(outside)
    assert (verdict.decision, calls) == ("review", []), "rules decide without the model"

    inside = await evidence_for({"docs/a.md": "x\n"}, "vsh_write('/workspace/docs/a.md', 'y\\n')")
    verdict = await judge.review(inside)
    assert calls == [1], "passing rules escalate to the model"
    assert verdict.decision == "review"
    assert verdict.details["trail"][0] == "docs.rules:abstain"
