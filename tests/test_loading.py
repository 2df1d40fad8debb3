"""Issue 19, point 3: suites and judge files refuse what YAML/TOML accept silently, and
every error names the file, line, column, field and a fix, and points at `vsh-ai schema`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vsh_ai._judge_files import JudgeFileError, load_judge_file
from vsh_ai._loading import SourceError, load_toml, load_yaml
from vsh_ai.evals import SuiteError, load_suite

HEADER = (
    "scenario: dup\ndescription: d\n"
    "authorization: The agent may edit a.txt and nothing else at all.\ncases:\n"
)
CASE = """\
  - id: {id}
    category: harmless-edit
    files: {{a.txt: "hi\\n"}}
    program: vsh_write('/workspace/a.txt', 'yo\\n')
    intent: Say yo.
    expected: approve
    note: {note}
"""


def suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(HEADER + text)
    return path


def test_a_duplicate_key_is_refused_with_both_lines(tmp_path: Path) -> None:
    case = CASE.format(id="twice", note="A harmless one-line edit.").replace(
        "    expected: approve\n", "    expected: review\n    expected: approve\n"
    )
    with pytest.raises(SuiteError) as caught:
        load_suite(suite(tmp_path, case))
    message = str(caught.value)
    assert f"{tmp_path / 'suite.yaml'}:11:5: key 'expected' appears twice" in message
    assert "(first at line 10)" in message
    assert "fix: delete one of the two `expected:` lines" in message
    assert "`vsh-ai schema suite`" in message


def test_a_duplicate_top_level_key_is_refused(tmp_path: Path) -> None:
    path = suite(tmp_path, CASE.format(id="a", note="A harmless one-line edit."))
    path.write_text(path.read_text() + "scenario: other\n")
    with pytest.raises(SuiteError, match=r"suite.yaml:12:1: key 'scenario' appears twice"):
        load_suite(path)


def test_an_unclosed_quote_does_not_merge_two_cases(tmp_path: Path) -> None:
    """PyYAML reads this as ONE case whose note swallowed the second case."""
    text = CASE.format(id="first", note='"unclosed, a harmless edit') + (
        "  - id: second\n    category: harmless-edit\n"
        "    program: vsh_write('/workspace/a.txt', 'yo')\n    intent: Say yo.\n"
        '    expected: approve\n    note: Ends with a quote"\n'
    )
    import yaml

    assert len(yaml.safe_load(HEADER + text)["cases"]) == 1  # what PyYAML alone does
    with pytest.raises(SuiteError) as caught:
        load_suite(suite(tmp_path, text))
    message = str(caught.value)
    assert 'suite.yaml:11:11: the "-quoted value starting here runs on to line 17' in message
    assert "past line 12 ('- id: second')" in message
    assert "fix: close the quote on line 11" in message


def test_multi_line_quoted_values_indented_under_their_key_still_load(tmp_path: Path) -> None:
    case = CASE.format(id="folded", note='"A harmless edit whose note\n      goes on here."')
    loaded = load_suite(suite(tmp_path, case))
    assert loaded.cases[0].note == "A harmless edit whose note goes on here."


def test_toml_duplicate_key_and_table_are_located(tmp_path: Path) -> None:
    path = tmp_path / "judge.toml"
    path.write_text('id = "x"\n[rules]\non_unproven = "review"\non_unproven = "escalate"\n')
    with pytest.raises(JudgeFileError) as caught:
        load_judge_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4:")
    assert "fix: this key or table is defined twice" in message
    path.write_text('id = "x"\n[llm]\n[llm]\n')
    with pytest.raises(JudgeFileError, match=r"judge.toml:3:\d+: invalid TOML"):
        load_judge_file(path)


def test_schema_errors_name_line_rule_id_and_a_real_fix(tmp_path: Path) -> None:
    path = tmp_path / "judge.toml"
    path.write_text(
        'id = "x"\n[[rules.rule]]\ntype = "no_secrets"\n[[rules.rule]]\nid = "docs"\n'
        'type = "allow_paths"\npaths = ["docs/**"]\nkinds = ["create"]\nmax_byts = 10\n'
    )
    with pytest.raises(JudgeFileError) as caught:
        load_judge_file(path)
    message = str(caught.value)
    assert f"{path}:9:1: rules.rule[1].max_byts (rule id 'docs'): Extra inputs" in message
    assert "fix: remove this key or correct its spelling (allowed here:" in message
    assert "max_bytes" in message
    assert "`vsh-ai schema judge`" in message


def test_no_error_points_at_a_repository_path_or_says_fix_without_one(tmp_path: Path) -> None:
    path = tmp_path / "judge.toml"
    bad = [
        'id = "x"\n[llm]\ntimeout = "soon"\nmax_concurrency = 0\nshare = "a"\n',
        'id = "x y"\n[rules]\non_unproven = "approve"\n',
        'id = "x"\n[[rules.rule]]\ntype = "limits"\n',
    ]
    for text in bad:
        path.write_text(text)
        with pytest.raises(JudgeFileError) as caught:
            load_judge_file(path)
        message = str(caught.value)
        assert "judges/schema.json" not in message
        for fix in re.findall(r"fix: ([^\n]*)", message):
            assert len(fix.split()) >= 3, (fix, message)
            assert "as the message says" not in fix


def test_the_loaders_keep_positions_for_nested_keys() -> None:
    located = load_yaml("a:\n  - b: 1\n    c: {d: 2}\n")
    assert located.where(("a", 0, "c", "d")) == (3, 9)
    assert located.where(("a", 0, "c", "missing")) == (3, 5)
    toml = load_toml('[[r]]\nx = 1\n[[r]]\ny = 2\n[r.t]\n"k.z" = 3\n')
    assert toml.where(("r", 1, "t", "k.z")) == (6, 1)
    assert toml.where(("r", 0, "x")) == (2, 1)
    with pytest.raises(SourceError) as caught:
        load_yaml("a: 1\na: 2\n")
    assert (caught.value.line, caught.value.column) == (2, 1)


def test_every_bundled_judge_rule_key_is_located_on_its_own_line() -> None:
    """The TOML scan (multi-line strings, arrays, dotted and quoted keys) finds each
    rule's keys on the line that writes them, in every shipped judge file."""
    root = Path(__file__).resolve().parents[1] / "judges"
    checked = 0
    for path in sorted(root.glob("*.toml")):
        text = path.read_text()
        lines = text.splitlines()
        located = load_toml(text)
        for index, rule in enumerate(located.data.get("rules", {}).get("rule", [])):
            for key in rule:
                line, column = located.positions[("rules", "rule", index, key)]
                source = lines[line - 1][column - 1 :]
                assert re.match(rf'["\']?{re.escape(key)}["\']?\s*[=.]', source) or (
                    source.startswith("[") and key in source
                ), (path.name, index, key, source)
                checked += 1
    assert checked > 100


def test_every_bundled_case_field_is_located_on_its_own_line() -> None:
    root = Path(__file__).resolve().parents[1] / "evals"
    checked = 0
    for path in sorted(root.rglob("*.yaml")):
        text = path.read_text()
        lines = text.splitlines()
        located = load_yaml(text)
        for index, case in enumerate(located.data["cases"]):
            for key in case:
                line, column = located.positions[("cases", index, key)]
                assert lines[line - 1][column - 1 :].startswith(f"{key}:"), (path.name, key)
                checked += 1
    assert checked > 1000
