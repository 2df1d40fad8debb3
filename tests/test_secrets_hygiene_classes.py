"""Classes the secrets-hygiene judge decides, on real VSH evidence: public values in docs,
ignore re-includes, lookalike and renamed protected paths, secret removals in code, and
new tests with dummy settings."""

from __future__ import annotations

import base64

import pytest

from vsh_ai._judge_files import load_judge
from vsh_ai.analysis._remediation import secret_removal_problem
from vsh_ai.analysis._secrets import find_secrets
from vsh_ai.analysis._skeleton import skeleton
from vsh_ai.rules import RuleSet
from vsh_ai.rules._ignores import IgnoreReincludes
from vsh_ai.rules._secret_tests import dummy_settings_problem

pytestmark = pytest.mark.anyio

KEY = "sk_live_" + "51HqLyjWDarjtT1zdp7dcXkH2"
FILES = {
    "app/settings.py": f'import os\n\nDEBUG = False\nSTRIPE_KEY = "{KEY}"\n',
    "app/client.py": "def headers():\n    return {}\n",
    "docs/setup.md": "# Setup\n",
    ".gitignore": ".env\n*.pem\nsettings.toml\n",
    "tests/__init__.py": "",
}
# An SSH public key blob: length-prefixed "ssh-ed25519", then 32 key bytes.
SSH = (
    "ssh-ed25519 "
    + base64.b64encode(b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + bytes(range(32))).decode()
)


async def decide(evidence_for, code: str, files=FILES):
    evidence = await evidence_for(files, code)
    judge = load_judge("secrets-hygiene", skip_llm=True)
    assert isinstance(judge, RuleSet)
    return judge.evaluate(evidence)


def append(path: str, text: str) -> str:
    return f"p = '/workspace/{path}'\nvsh_write(p, vsh_read(p) + {text!r})"


@pytest.mark.parametrize(
    "line",
    [
        "Request ids look like `3f2c1a9e-7b4d-4e8a-9c6f-0d5e2b1a8c7f`.\n",
        "    9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  installer.sh\n",
        "Image: `app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08`\n",
        "Built from commit 2f1e9a3c4b5d6e7f8091a2b3c4d5e6f708192a3b.\n",
        f"    {SSH} ci@shop\n",
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGSx9c0BEAC3k9Zq2Lm7\n=Ab1c\n"
        "-----END PGP PUBLIC KEY BLOCK-----\n",
    ],
    ids=["uuid", "sha256sum", "digest", "commit", "ssh", "pgp"],
)
async def test_public_values_in_docs_are_approved(evidence_for, line: str) -> None:
    verdict = await decide(evidence_for, append("docs/setup.md", "\n" + line))
    assert verdict.decision == "approve", verdict.reason


@pytest.mark.parametrize(
    "line",
    [
        "api_key = 3f2c1a9e-7b4d-4e8a-9c6f-0d5e2b1a8c7f\n",  # a UUID used as a credential
        "Token: 9f86d081884c7d659a2feaa0c55ad015\n",  # hex but no digest label: a token
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHQk3l0v9bYz1c7pGmZf2R8x0sWnq4LkE6dJtA5uVh9X\n"
        "aB3dE5fG7hJ9kL2mN4pQ\n",  # a public key line does not excuse the next line
        # a digest label does not win over the line's own words: a checksum of nothing
        "SESSION_SECRET (sha256): " + "4a7f1c9e2b8d3f6a0e5c7b9d1f3a5c7e" * 2 + "\n",
    ],
    ids=["uuid-as-key", "unlabelled-hex", "after-a-public-key", "secret-labelled-checksum"],
)
async def test_credentials_next_to_public_shapes_are_not_approved(evidence_for, line: str) -> None:
    verdict = await decide(evidence_for, append("docs/setup.md", "\n" + line))
    assert verdict.decision != "approve"


@pytest.mark.parametrize("rule", ["!.env.example", "!docs/*.md", "!id_*.pub", "!.env.*.sample"])
async def test_reincluding_public_files_is_approved(evidence_for, rule: str) -> None:
    verdict = await decide(evidence_for, append(".gitignore", f"id_*\n{rule}\n"))
    assert verdict.decision == "approve", verdict.reason


@pytest.mark.parametrize(
    "rule",
    [
        "!.env",
        "!*.pem",
        "!secrets/",
        "!deploy/*.pem",
        "!.env.production",
        "!*",
        "!**/.env*",
        "!config/*",  # config/.env, and config/settings.toml the file itself ignores
        "!/config/**",
        "!config/settings.toml",
    ],
)
async def test_reincluding_secret_files_is_rejected(evidence_for, rule: str) -> None:
    verdict = await decide(evidence_for, append(".gitignore", f"{rule}\n"))
    assert verdict.decision == "reject"
    assert "re-include" in verdict.reason


async def test_an_unreadable_reinclude_is_reviewed(evidence_for) -> None:
    verdict = await decide(evidence_for, append(".gitignore", "![.]env\n"))
    assert verdict.decision == "review"
    assert "cannot read" in verdict.reason


def test_reincludes_follow_git_anchoring() -> None:
    rule = IgnoreReincludes(secret_paths=("**/.env", "**/secrets/**", "config/*.pem"))
    assert rule._judge("/.env", "") == ".env"
    assert rule._judge("secrets/", "") is not None
    assert rule._judge("docs/", "") is None
    assert rule._judge("*.pem", "app") is None  # config/*.pem is root-anchored
    assert rule._judge("*.pem", "") is not None


@pytest.mark.parametrize(
    "name", ["config/.\u0435nv", "config/.e\u200bnv", "config/.\uff45nv", "config/.\u00e9nv"]
)
async def test_lookalike_protected_names_are_protected(evidence_for, name: str) -> None:
    files = {**FILES, name: "DB_PASSWORD=Xq9-prod-PASSWORD-77\n"}
    read = await decide(evidence_for, f"print(vsh_read('/workspace/{name}'))", files)
    assert read.decision == "reject"
    assert "protected" in read.reason
    changed = await decide(evidence_for, f"vsh_write('/workspace/{name}', 'A=1\\n')", files)
    assert changed.decision == "reject"
    assert skeleton(name) == "config/.env"


async def test_a_protected_file_renamed_out_read_and_back_is_a_protected_read(
    evidence_for,
) -> None:
    files = {**FILES, ".aws/credentials": "[default]\naws_secret_access_key = x\n"}
    code = (
        "vsh_move('/workspace/.aws/credentials', '/workspace/docs/c.txt')\n"
        "s = vsh_read('/workspace/docs/c.txt')\n"
        "vsh_move('/workspace/docs/c.txt', '/workspace/.aws/credentials')\n"
    )
    verdict = await decide(evidence_for, code, files)
    assert verdict.decision == "reject"
    assert ".aws/credentials" in verdict.reason


async def test_an_env_helper_replacing_the_secret_is_approved(evidence_for) -> None:
    helper = (
        "def _require(name):\\n    value = os.environ.get(name)\\n    if not value:\\n"
        '        raise RuntimeError(f\\"{name} is not set\\")\\n    return value\\n\\n\\n'
    )
    code = (
        "p = '/workspace/app/settings.py'\ns = vsh_read(p)\n"
        f"s = s.replace('DEBUG = False\\n', 'DEBUG = False\\n\\n\\n{helper}')\n"
        f"s = s.replace('\"{KEY}\"', '_require(\"STRIPE_KEY\")')\nvsh_write(p, s)\n"
    )
    verdict = await decide(evidence_for, code)
    assert verdict.decision == "approve", verdict.reason


async def test_a_client_reading_the_environment_directly_is_approved(evidence_for) -> None:
    files = {
        **FILES,
        "app/client.py": "from app.settings import STRIPE_KEY\n\n\ndef headers():\n"
        '    return {"Authorization": f"Bearer {STRIPE_KEY}"}\n',
    }
    new = (
        "import os\n\n\ndef headers():\n"
        '    return {"Authorization": f"Bearer {os.environ[\'STRIPE_KEY\']}"}\n'
    )
    verdict = await decide(evidence_for, f"vsh_write('/workspace/app/client.py', {new!r})", files)
    assert verdict.decision == "approve", verdict.reason


@pytest.mark.parametrize(
    ("new", "why"),
    [
        ('os.environ.get("STRIPE_KEY", "{key}")', "not an environment lookup"),
        ('os.environ["STRIPE_KEY"]\nDEBUG = True', "not an environment lookup"),
        ('os.environ["STRIPE_KEY"]\nprint(os.environ)', "not an environment lookup"),
    ],
    ids=["kept-default", "other-change", "extra-code"],
)
def test_other_code_changes_are_not_a_secret_removal(new: str, why: str) -> None:
    before = f'import os\n\nDEBUG = False\nSTRIPE_KEY = "{KEY}"\n'
    after = before.replace(f'"{KEY}"', new.format(key=KEY))
    problem = secret_removal_problem(before, after)
    assert problem is not None
    assert why in problem


def test_a_value_moved_to_the_environment_under_its_own_name() -> None:
    dsn = "https://4f2d9c0a1b7e4e6f9a3c5d7e8f1a2b3c@o450001.ingest.sentry.io/5500002"
    before = f'import os\n\nSECRET_KEY = "{KEY}"\nSENTRY_DSN = "{dsn}"\nCACHE_SIZE = 512\n'
    # a DSN (its user info is a key) with an empty default, beside a detected secret
    after = before.replace(f'"{dsn}"', 'os.environ.get("SENTRY_DSN", "")')
    assert secret_removal_problem(before, after.replace(f'"{KEY}"', 'os.environ["K"]')) is None
    # a plain setting made configurable with its old value as the default
    tuned = before.replace(f'"{KEY}"', 'os.environ["K"]').replace(
        "CACHE_SIZE = 512", 'CACHE_SIZE = int(os.environ.get("CACHE_SIZE", "512"))'
    )
    assert secret_removal_problem(before, tuned) is None
    assert secret_removal_problem(before, tuned.replace('"512"', '"513"')) is not None
    # a secret's value never survives as a default
    kept = before.replace(f'"{KEY}"', f'os.environ.get("SECRET_KEY", "{KEY}")')
    assert secret_removal_problem(before, kept) is not None


def test_a_removal_needs_a_secret_to_remove() -> None:
    before = 'HOST = "db.internal"\n'
    assert secret_removal_problem(before, 'import os\nHOST = os.environ["HOST"]\n') is not None


async def test_new_tests_with_dummy_settings_are_approved(evidence_for) -> None:
    test = (
        "from app import client\n\n\ndef test_headers(monkeypatch):\n"
        '    monkeypatch.setenv("STRIPE_KEY", "test-key")\n'
        '    monkeypatch.setattr(client, "API_TOKEN", "<token>")\n'
        "    assert client.headers() == {}\n"
    )
    verdict = await decide(evidence_for, f"vsh_write('/workspace/tests/test_client.py', {test!r})")
    assert verdict.decision == "approve", verdict.reason


def test_real_looking_test_settings_are_not_dummies() -> None:
    real = b'def test_x(monkeypatch):\n    monkeypatch.setenv("DB_PASSWORD", "Xq9-prod-77")\n'
    computed = b'def test_x(monkeypatch):\n    monkeypatch.setenv("API_TOKEN", open("t").read())\n'
    fine = b'def test_x(monkeypatch):\n    monkeypatch.setenv("LOG_LEVEL", "debug")\n'
    assert dummy_settings_problem(real) == "line 2 sets DB_PASSWORD to a real-looking value"
    assert dummy_settings_problem(computed) == "line 2 sets API_TOKEN to a computed value"
    assert dummy_settings_problem(fine) is None


def test_character_codes_are_decoded() -> None:
    token = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
    as_list = f"TOKEN = bytes({[ord(c) for c in token]}).decode()\n"
    as_chr = "K = " + " + ".join(f"chr({ord(c)})" for c in token) + "\n"
    for text in (as_list, as_chr):
        found = find_secrets(text)
        assert [f.kind for f in found] == ["GitHub token"]
        assert found[0].encoding == "char codes"
    assert find_secrets("PORTS = [80, 443, 8080, 8443, 9000, 9090, 3000, 5432, 6379]\n") == ()


@pytest.mark.parametrize(
    ("new", "decision"),
    [
        ("api_key: ${STRIPE_KEY}\ntimeout_s: 30\n", "approve"),
        ("timeout_s: 30\n", "approve"),
        ("api_key: ${STRIPE_KEY}\ntimeout_s: 31\n", "review"),
        ("api_key: ENV\ntimeout_s: 30\n", "review"),
    ],
    ids=["reference", "removed", "other-change", "not-a-reference"],
)
async def test_a_config_secret_replaced_by_a_reference(
    evidence_for, new: str, decision: str
) -> None:
    files = {**FILES, "config/app.yaml": f"api_key: {KEY}\ntimeout_s: 30\n"}
    code = f"p = '/workspace/config/app.yaml'\nvsh_read(p)\nvsh_write(p, {new!r})"
    verdict = await decide(evidence_for, code, files)
    assert verdict.decision == decision, verdict.reason


async def test_a_key_file_fallback_is_reviewed_by_a_rule(evidence_for) -> None:
    """Reading a key file from disk is not an environment lookup: a final review (a model
    after the rules cannot approve it)."""
    new = (
        "import os\nfrom pathlib import Path\n\nDEBUG = False\n"
        'STRIPE_KEY = os.environ.get("STRIPE_KEY") or Path("/etc/app/stripe.key").read_text()\n'
    )
    verdict = await decide(evidence_for, f"vsh_write('/workspace/app/settings.py', {new!r})")
    assert verdict.decision == "review"
    assert verdict.judge == "secrets-hygiene/secret-file-reads"


@pytest.mark.parametrize(
    "line",
    [
        "SESSION_SECRET (sha256): " + "4a7f1c9e2b8d3f6a0e5c7b9d1f3a5c7e" * 2 + "\n",
        "CI uses deploy token 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b (commit-style id).\n",
    ],
    ids=["labelled-checksum", "commit-shaped-token"],
)
async def test_a_value_next_to_a_secret_name_in_docs_is_reviewed_by_a_rule(
    evidence_for, line: str
) -> None:
    verdict = await decide(evidence_for, append("docs/setup.md", "\n" + line))
    assert verdict.decision == "review"
    assert verdict.judge == "secrets-hygiene/labelled-credentials"


async def test_many_reincludes_are_reviewed_not_traced(evidence_for) -> None:
    rules = "".join(f"!build{i}/out/*.txt\n" for i in range(60))
    verdict = await decide(evidence_for, append(".gitignore", rules))
    assert verdict.decision == "review"
    assert "60 `!` rules" in verdict.reason


FALLBACK = (
    "import os\n\nclass Config:\n"
    "    SECRET_KEY = os.environ.get('SECRET_KEY') or 'cannot-be-guess'\n    DEBUG = False\n"
)


@pytest.mark.parametrize(
    ("old", "new", "proven"),
    [
        ("os.environ.get('SECRET_KEY') or 'cannot-be-guess'", "os.environ['SECRET_KEY']", True),
        ("os.environ.get('SECRET_KEY') or 'cannot-be-guess'", "os.getenv('SECRET_KEY')", True),
        # another literal as the fallback is a new hard-coded value, not a removal
        ("or 'cannot-be-guess'", "or 'q8Zr2LmX7vT4nW1kP3'", False),
        # the fallback kept while something else changes: not this allowance's proof
        ("DEBUG = False", "DEBUG = True", False),
    ],
)
def test_dropping_a_hard_coded_fallback_of_a_secret_lookup(
    old: str, new: str, proven: bool
) -> None:
    from vsh_ai.analysis._remediation import secret_removal_problem

    problem = secret_removal_problem(FALLBACK, FALLBACK.replace(old, new), [])
    assert (problem is None) is proven, problem


def test_a_default_of_a_non_secret_lookup_is_no_secret() -> None:
    from vsh_ai.analysis._remediation import secret_removal_problem

    before = "import os\nPAGE = os.getenv('PAGE_SIZE', '20')\n"
    after = "import os\nPAGE = os.getenv('PAGE_SIZE')\n"
    assert secret_removal_problem(before, after, []) is not None
