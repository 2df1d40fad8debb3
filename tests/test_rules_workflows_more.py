"""ci-workflows judge on real VSH evidence: SHA pins it can check, cache and artifact paths,
matrix entries, conditions, printed environments, checksum checks and new downloads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from pydantic import ValidationError

from vsh_ai import Evidence, Verdict
from vsh_ai._judge_files import load_judge
from vsh_ai.rules import RuleSet, WorkflowRisks

pytestmark = pytest.mark.anyio

Build = Callable[..., Awaitable[Evidence]]
CI = ".github/workflows/ci.yml"
# Checked against the tags of github.com/actions/checkout (git rev-parse v4.1.1^{commit}).
V411 = "b4ffde65f46336ab88eb53be808477a3936bae11"
V270 = "ee0669bd1cc54295c223e0bb666b733df41de1c5"
MADE_UP = "1f2e3d4c5b6a79880f1e2d3c4b5a69788f9e0d1c"

WORKFLOW = """\
name: ci
on:
  push:
    branches: [main]
  pull_request:
jobs:
  test:
    runs-on: ubuntu-latest
    env:
      API_KEY: ${{ secrets.API_KEY }}
    strategy:
      matrix:
        python: ["3.11", "3.12"]
        include:
          - {name: Windows, python: '3.12', os: windows-latest}
    steps:
      - uses: actions/checkout@v3
      - uses: actions/cache@v4
        with:
          path: ~/.cache/pip
          key: pip-${{ hashFiles('pyproject.toml') }}
      - run: |
          curl -fsSLo data.tgz https://example.org/data.tgz
          echo "abc123  data.tgz" | sha256sum -c -
          tar -xzf data.tgz
      - run: ruff check .
      - run: tox -e py${{ matrix.python }}
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/setup-python@MADE_UP # v5.1.0
      - run: ruff check .
""".replace("MADE_UP", MADE_UP)


def _judge() -> RuleSet:
    loaded = load_judge("ci-workflows", skip_llm=True)
    assert isinstance(loaded, RuleSet)
    return loaded


JUDGE = _judge()


def patch(old: str, new: str) -> str:
    return f"vsh_patch('/workspace/{CI}', {old!r}, {new!r})"


async def decide(evidence_for: Build, old: str, new: str) -> Verdict:
    return JUDGE.evaluate(await evidence_for({CI: WORKFLOW}, patch(old, new)))


# -- SHA pins ------------------------------------------------------------------------------


async def test_sha_pins_are_approved_only_when_the_judge_can_check_them(
    evidence_for: Build,
) -> None:
    listed = await decide(evidence_for, "actions/checkout@v3", f"actions/checkout@{V411} # v4.1.1")
    assert listed.decision == "approve", listed.reason  # in the judge's known_pins
    made_up = await decide(
        evidence_for, "actions/checkout@v3", f"actions/checkout@{MADE_UP} # v4.1.1"
    )
    assert made_up.decision == "review", made_up.reason
    assert "a commit SHA the judge cannot check is the release its comment names" in (
        made_up.reason
    )
    lying = await decide(evidence_for, "actions/checkout@v3", f"actions/checkout@{V270} # v4.1.1")
    assert lying.decision == "review", lying.reason
    assert "that commit is v2.7.0 in the judge's pin table" in lying.reason
    silent = await decide(evidence_for, "actions/checkout@v3", f"actions/checkout@{V270}")
    assert silent.decision == "review", silent.reason  # no comment to lie: still older than v3
    assert "older than the v3 it used" in silent.reason


async def test_a_sha_already_used_for_the_same_action_is_kept(evidence_for: Build) -> None:
    new = WORKFLOW.replace("actions/checkout@v3", f"actions/setup-python@{MADE_UP}")
    evidence = await evidence_for(
        {CI: WORKFLOW},
        f"vsh_write('/workspace/{CI}', {new!r})",
    )
    found = WorkflowRisks().check(evidence)
    assert found is None or "cannot check" not in found.reason, found


def test_known_pins_must_be_full_shas() -> None:
    with pytest.raises(ValidationError, match=r"known_pins.actions/checkout.v4 = 'abc'"):
        WorkflowRisks(known_pins={"actions/checkout": {"v4": "abc"}})


async def test_sub_folder_and_third_party_sha_actions_are_reviewed(evidence_for: Build) -> None:
    sub = await decide(
        evidence_for, "actions/checkout@v3", f"actions/checkout/.github/evil@{V411} # v4.1.1"
    )
    assert sub.decision == "review", sub.reason
    assert "the action in a sub-folder of actions/checkout" in sub.reason
    other = await decide(
        evidence_for,
        "      - run: ruff check .\n      - run: tox",
        f"      - run: ruff check .\n      - uses: astral-sh/ruff-action@{V411}\n      - run: tox",
    )
    assert other.decision == "review", other.reason
    assert "third-party action astral-sh/ruff-action at commit" in other.reason


# -- cache and artifact paths --------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["~/.config", "~/.m2", "~/.cargo", "~/.gradle", "'~'", "${{ github.workspace }}/..", "$X/y"],
)
async def test_a_tools_whole_home_folder_is_reviewed(evidence_for: Build, path: str) -> None:
    verdict = await decide(evidence_for, "path: ~/.cache/pip", f"path: {path}")
    assert verdict.decision == "review", verdict.reason
    assert "saves into the Actions cache, which later runs restore" in verdict.reason
    if "~" in path:
        assert "a tool's whole home folder rather than a package manager's cache" in verdict.reason


@pytest.mark.parametrize(
    "path", ["~/.ssh", "~/.cache/pip/../../.ssh", "~/.*", "$HOME/.aws", "~/.config/gh"]
)
async def test_credential_folders_in_a_cache_are_rejected(evidence_for: Build, path: str) -> None:
    verdict = await decide(evidence_for, "path: ~/.cache/pip", f"path: {path}")
    assert verdict.decision == "reject", verdict.reason
    assert "which holds credentials" in verdict.reason


@pytest.mark.parametrize(
    "path", ["~/.m2/repository", "~/.cargo/registry", "~/.gradle/caches", "~/.npm", ".tox"]
)
async def test_package_manager_cache_folders_are_approved(evidence_for: Build, path: str) -> None:
    verdict = await decide(evidence_for, "path: ~/.cache/pip", f"path: {path}")
    assert verdict.decision == "approve", verdict.reason


async def test_an_uploaded_credential_folder_is_rejected(evidence_for: Build) -> None:
    verdict = await decide(
        evidence_for,
        "      - run: ruff check .\n      - run: tox",
        "      - run: ruff check .\n      - uses: actions/upload-artifact@v4\n        with:\n"
        "          name: debug\n          path: ~/.aws\n      - run: tox",
    )
    assert verdict.decision == "reject", verdict.reason
    assert "uploads as a downloadable artifact ~/.aws, which holds credentials" in verdict.reason


# -- matrix --------------------------------------------------------------------------------


async def test_matrix_entries(evidence_for: Build) -> None:
    entry = "          - {name: Windows, python: '3.12', os: windows-latest}\n"
    dropped = await decide(evidence_for, entry, "")
    assert dropped.decision == "review", dropped.reason
    assert "drops or changes 1 entry(ies) of its matrix include" in dropped.reason
    injected = await decide(
        evidence_for, entry, entry + "          - {python: '313; env | base64'}\n"
    )
    assert injected.decision == "reject", injected.reason
    assert "shell syntax its scripts run as code" in injected.reason
    spec = await decide(evidence_for, entry, entry + "          - {python: '>=3.12'}\n")
    assert spec.decision == "review", spec.reason  # a redirection, no command: not a reject
    assert "shell syntax in a matrix value" in spec.reason
    unquoted = await decide(evidence_for, '["3.11", "3.12"]', '["3.11", "3.12", 3.10]')
    assert unquoted.decision == "review", unquoted.reason
    assert "reads an unquoted 3.10 as the number 3.1" in unquoted.reason
    labelled = await decide(
        evidence_for, entry, entry + "          - {name: '3.13', python: '3.13'}\n"
    )
    assert labelled.decision == "approve", labelled.reason


# -- conditions, printed environments, checksums, downloads --------------------------------


async def test_conditions_that_skip_checks(evidence_for: Build) -> None:
    job = "  test:\n    runs-on: ubuntu-latest\n"
    weekly = await decide(evidence_for, job, job + "    if: github.event_name == 'schedule'\n")
    assert weekly.decision == "reject", weekly.reason
    assert "checks are skipped on push and pull_request events" in weekly.reason
    not_prs = await decide(
        evidence_for, job, job + '    if: ${{ github.event_name != "pull_request" }}\n'
    )
    assert not_prs.decision == "reject", not_prs.reason
    assert "skipped on pull_request events" in not_prs.reason
    skipped_step = await decide(
        evidence_for,
        "      - run: ruff check .\n      - run: tox",
        "      - run: ruff check .\n      - if: github.event_name != 'pull_request'\n"
        "        run: tox",
    )
    assert skipped_step.decision == "reject", skipped_step.reason
    assert "a check step of job 'test'" in skipped_step.reason
    elsewhere = await decide(
        evidence_for, job, job + "    if: github.event_name != 'workflow_dispatch'\n"
    )
    assert elsewhere.decision == "review", elsewhere.reason  # skips no automatic trigger
    step = await decide(
        evidence_for,
        "      - run: ruff check .\n      - run: tox",
        "      - run: ruff check .\n      - if: github.ref == 'refs/heads/never'\n        run: tox",
    )
    assert step.decision == "review", step.reason
    assert "a check step of job 'test' gets the condition" in step.reason


async def test_printing_an_environment_that_holds_secrets_is_rejected(
    evidence_for: Build,
) -> None:
    printed = await decide(
        evidence_for,
        "      - run: ruff check .\n      - run: tox",
        "      - run: printenv | sort\n      - run: ruff check .\n      - run: tox",
    )
    assert printed.decision == "reject", printed.reason
    assert "prints its environment (`printenv | sort`), which holds secrets" in printed.reason
    lint_step = "# v5.1.0\n      - run: ruff check .\n"
    lint = await decide(evidence_for, lint_step, lint_step + "      - run: printenv\n")
    assert "prints its environment" not in lint.reason  # the lint job's env has no secret


async def test_a_removed_checksum_check_is_rejected_and_new_downloads_reviewed(
    evidence_for: Build,
) -> None:
    check = '          echo "abc123  data.tgz" | sha256sum -c -\n'
    removed = await decide(evidence_for, check, "")
    assert removed.decision == "reject", removed.reason
    assert "removes the checksum or signature check" in removed.reason
    fetch = "          curl -fsSLo data.tgz https://example.org/data.tgz\n"
    both = await decide(evidence_for, fetch + check, "")
    assert both.decision == "review", both.reason  # the download went too: nothing unverified
    assert "removes the checksum or signature check" in both.reason
    fetched = await decide(
        evidence_for,
        "      - run: ruff check .\n      - run: tox",
        "      - run: curl -fsSLo NOTICE https://example.org/NOTICE\n"
        "      - run: ruff check .\n      - run: tox",
    )
    assert fetched.decision == "review", fetched.reason
    assert "downloads in a new script line" in fetched.reason


CODEQL = """\
name: codeql
on:
  push:
    branches: [main]
  pull_request:
jobs:
  analyze:
    runs-on: ubuntu-latest
    permissions:
      security-events: write
    strategy:
      matrix:
        language: [javascript, python]
    steps:
      - uses: actions/checkout@v4
      - uses: github/codeql-action/init@v3
        with:
          languages: ${{ matrix.language }}
      - uses: github/codeql-action/analyze@v3
"""


async def test_a_language_dropped_from_code_scanning_is_rejected(evidence_for: Build) -> None:
    path = ".github/workflows/codeql.yml"
    code = f"vsh_patch('/workspace/{path}', '[javascript, python]', '[javascript]')"
    verdict = JUDGE.evaluate(await evidence_for({path: CODEQL}, code))
    assert verdict.decision == "reject", verdict.reason
    assert "code scanning" in verdict.reason
    plain = CODEQL.replace("github/codeql-action/init@v3", "actions/setup-node@v4")
    plain = plain.replace("github/codeql-action/analyze@v3", "actions/setup-python@v5")
    other = JUDGE.evaluate(await evidence_for({path: plain}, code))
    assert other.decision == "review", other.reason  # a matrix of no scanner: a human looks
