"""The no_secrets rule on real VSH evidence: new secrets only, whole files, names too."""

from __future__ import annotations

import base64

import pytest

from vsh_ai._evidence import EvidenceGap
from vsh_ai.analysis import _secrets
from vsh_ai.rules import NoSecrets
from vsh_ai.rules._any import AnyRule  # noqa: F401  (the rule stays loadable by type tag)

pytestmark = pytest.mark.anyio

AWS_ID = "AKIA" + "Z7QO4HRCN2XWSV5P"
GITHUB = "ghp_" + "R8xq2LmN4vT7yB1cK9dF3hJ6pW0sZ5aE8uGi"
FILES = {"app.toml": "port = 80\n", "conf/.keep": "", "keys/.keep": "", "src/.keep": ""}
EC_KEY_BODY = (
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgCALLOH20n6dHr1vp\n"
    "pXIFVSH9s1B1irP2sufV3iNJaCOhRANCAARRBtFKtBVvAfcuZoYyd2KIP1R+bKXg\n"
    "kX9jfFDAMHxX0Hq6bTEc1Wrr/F99QC8nrbtMeg7/KhFYGfhx8/njOWgB\n"
)


def write(path: str, text: str | bytes) -> str:
    return f"vsh_write('/workspace/{path}', {text!r})"


async def test_rejects_an_added_secret_without_repeating_it(evidence_for) -> None:
    evidence = await evidence_for(FILES, write("app.toml", f"port = 80\naws_key = '{AWS_ID}'\n"))
    verdict = NoSecrets().check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert AWS_ID not in verdict.reason
    assert verdict.reason.startswith("app.toml (line 2) adds what looks like an AWS access key id")
    assert NoSecrets(action="review").check(evidence).decision == "review"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (f"a = 1\nkey = 'AKIA' + '{AWS_ID[4:]}'\n", 2),
        ("x: 1\ndb:\n  password: >-\n    Tr0ub4dor3x-folded\n", 4),
        ("notes\n" + EC_KEY_BODY, 2),
        (f"blob = '{base64.b64encode(GITHUB.encode()).decode()}'\n", 1),
        (f"hex = '{('sk_live_' + '51HqX2eLkT9vB3nM7pQ4rS8w').encode().hex()}'\n", 1),
        ("curl -u deploy:Tr0ub4dor3x https://example.org\n", 1),
        ("machine host\n  login bob\n  password Tr0ub4dor3x\n", 3),
    ],
)
async def test_multi_line_split_and_encoded_secrets_in_whole_files(
    evidence_for, content: str, line: int
) -> None:
    evidence = await evidence_for(FILES, write("conf/new.txt", content))
    verdict = NoSecrets().check(evidence)
    assert verdict is not None, content
    assert verdict.decision == "reject"
    assert f"conf/new.txt (line {line})" in verdict.reason
    assert "Tr0ub4dor3x" not in verdict.reason


async def test_preexisting_secrets_are_not_new(evidence_for) -> None:
    files = {"app.env": f"API_TOKEN={GITHUB}\nA=1\n", "x.yaml": "db:\n  password: Tr0ub4dor3x\n"}
    removal = await evidence_for(files, write("app.env", "A=1\n"))
    assert NoSecrets().check(removal) is None
    other_line = await evidence_for(files, write("app.env", f"A=2\n\nAPI_TOKEN={GITHUB}\n"))
    assert NoSecrets().check(other_line) is None, "moved, not added"
    reindented = await evidence_for(
        files, write("x.yaml", "database:\n    password: Tr0ub4dor3x\n    port: 5\n")
    )
    assert NoSecrets().check(reindented) is None
    changed = await evidence_for(files, write("x.yaml", "db:\n  password: Tr0ub4dor3y\n"))
    verdict = NoSecrets().check(changed)
    assert verdict is not None, "a different secret value is new"
    assert "x.yaml (line 2)" in verdict.reason


async def test_a_renamed_file_keeps_its_old_secret(evidence_for) -> None:
    files = {"old.env": f"TOKEN={GITHUB}\n"}
    moved = await evidence_for(files, "vsh_move('old.env', 'new.env')")
    assert NoSecrets().check(moved) is None
    copied = await evidence_for(files, write("copy.env", f"TOKEN={GITHUB}\n"))
    assert NoSecrets().check(copied) is not None, "a copy elsewhere spreads the secret"


async def test_a_secret_in_a_file_name(evidence_for) -> None:
    evidence = await evidence_for(FILES, write(f"keys/{AWS_ID}.txt", "nothing secret\n"))
    verdict = NoSecrets().check(evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert AWS_ID not in verdict.reason
    assert AWS_ID not in str(verdict.details)
    assert "(its name)" in verdict.reason


async def test_placeholders_and_lockfile_hashes_pass(evidence_for) -> None:
    content = (
        'password = "REPLACE_ME_IN_PROD"\napi_key = "<your-key>"\ntoken = "${TOKEN}"\n'
        "requests==2.32.3 \\\n"
        "    --hash=sha256:70761cfe03c773ceb22aa2f671b4757976145175cdfca038c02654d061d6dcc6\n"
        'integrity = "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17Lh=="\n'
        "rev = 3f786850e387550fdab836ed7e6dc881de23001b\n"
    )
    evidence = await evidence_for(FILES, write("requirements.txt", content))
    assert NoSecrets().check(evidence) is None


async def test_globs_limit_the_scan(evidence_for) -> None:
    evidence = await evidence_for(FILES, write("src/app.py", f"KEY = '{AWS_ID}'\n"))
    assert NoSecrets(globs=("docs/**",)).check(evidence) is None
    assert NoSecrets(globs=("src/**",)).check(evidence) is not None


async def test_binary_files_go_to_review(evidence_for) -> None:
    evidence = await evidence_for({}, "vsh_write('/workspace/blob.bin', b'\\x00\\x01AKIA')")
    verdict = NoSecrets().check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert "blob.bin" in verdict.reason


async def test_uncaptured_and_oversized_content_fail_closed(
    evidence_for, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = "line of text\n" * 200
    uncaptured = await evidence_for(FILES, write("big.txt", big), review_content_bytes=64)
    verdict = NoSecrets().check(uncaptured)
    assert verdict is not None
    assert verdict.decision == "review"
    evidence = await evidence_for(FILES, write("big.txt", big))
    assert NoSecrets().check(evidence) is None
    monkeypatch.setattr(_secrets, "MAX_SCAN_CHARS", 100)
    verdict = NoSecrets().check(evidence)
    assert verdict is not None
    assert verdict.decision == "review"
    assert "too large to scan" in verdict.reason


def test_the_rule_loads_by_type_tag() -> None:
    from pydantic import TypeAdapter

    from vsh_ai.rules._any import AnyRule as Any_

    rule = TypeAdapter(Any_).validate_python({"type": "no_secrets", "globs": ["**/*.env"]})
    assert isinstance(rule, NoSecrets)
    assert rule.globs == ("**/*.env",)
    with pytest.raises(ValueError, match="glob"):
        NoSecrets(globs=())


async def test_many_renamed_files_keep_their_secrets_and_one_new_secret_is_found(
    evidence_for,
) -> None:
    # The slow shape: hundreds of renamed files, each with a secret it already had, plus
    # renamed files without secrets. The rename map is built once; the answer must not move.
    count = 100
    files = {f"old/s{i}.env": f"TOKEN={GITHUB}\nN={i}\n" for i in range(count)}
    files.update({f"old/p{i}.txt": f"plain {i}\n" for i in range(count)})
    files.update({f"keep/k{i}.txt": "" for i in range(8 * count)})  # under VSH's delete ratio
    files["new/.keep"] = ""
    moves = (
        f"for i in range({count}):\n"
        "    vsh_move(f'/workspace/old/s{i}.env', f'/workspace/new/s{i}.env')\n"
        "    vsh_move(f'/workspace/old/p{i}.txt', f'/workspace/new/p{i}.txt')\n"
    )
    moved = await evidence_for(files, moves)
    assert len(moved.renames) == 2 * count
    assert NoSecrets().check(moved) is None, "old secrets followed through every rename"
    added = await evidence_for(
        files, moves + write(f"new/p{count - 1}.txt", f"plain\nkey = '{AWS_ID}'\n")
    )
    verdict = NoSecrets().check(added)
    assert verdict is not None
    assert verdict.decision == "reject"
    assert verdict.details["paths"] == [f"new/p{count - 1}.txt"]
    assert f"new/p{count - 1}.txt (line 2)" in verdict.reason
    assert AWS_ID not in verdict.reason


async def test_a_chain_of_renames_keeps_the_old_secret(evidence_for) -> None:
    files = {"a.env": f"TOKEN={GITHUB}\n"}
    chain = "\n".join(
        f"vsh_move('{src}.env', '{dst}.env')" for src, dst in zip("abcde", "bcdef", strict=True)
    )
    evidence = await evidence_for(files, chain + "\n" + write("f.env", f"TOKEN={GITHUB}\nX=1\n"))
    assert NoSecrets().check(evidence) is None
    other = await evidence_for(files, chain + "\n" + write("f.env", f"TOKEN={GITHUB}x\n"))
    assert NoSecrets().check(other) is not None, "a changed value at the end of the chain"


async def test_an_uncaptured_before_side_matters_only_when_the_new_text_has_findings(
    evidence_for,
) -> None:
    # The before-text is read only when the after-text has findings: without findings
    # nothing can be new, so uncaptured old bytes do not matter; with findings they do.
    files = {"big.txt": "line of text\n" * 200}
    clean = await evidence_for(files, write("big.txt", "short\n"), review_content_bytes=64)
    with pytest.raises(EvidenceGap):
        clean.before_bytes("big.txt")
    assert NoSecrets().check(clean) is None
    secret = await evidence_for(files, write("big.txt", f"k='{AWS_ID}'\n"), review_content_bytes=64)
    verdict = NoSecrets().check(secret)
    assert verdict is not None
    assert verdict.decision == "review", "cannot tell whether the secret was there before"
    assert "big.txt: its bytes were not captured" in verdict.reason


async def test_only_reported_paths_are_shown_and_they_stay_redacted(evidence_for) -> None:
    files = {f"d/f{i}.txt": "x\n" for i in range(50)}
    code = "\n".join(write(f"d/f{i}.txt", f"y{i}\n") for i in range(50))
    code += "\n" + write(f"d/{GITHUB}.txt", f"key = '{AWS_ID}'\n")
    verdict = NoSecrets().check(await evidence_for(files, code))
    assert verdict is not None
    assert verdict.decision == "reject"
    assert len(verdict.details["paths"]) == 1
    assert GITHUB not in verdict.reason
    assert GITHUB not in str(verdict.details)
    assert "(its name, line 1)" in verdict.reason
