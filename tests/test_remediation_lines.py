"""Secret literals swapped for environment lookups in other languages, on real VSH evidence
with the bundled secrets-hygiene judge, and the line-by-line proof's refusals."""

from __future__ import annotations

import pytest

from vsh_ai._judge_files import load_judge
from vsh_ai.analysis._remediation_lines import line_lookup_problem

pytestmark = pytest.mark.anyio

KEY = "Xb7rT2mQ9vL4kP8wZc3nH6yD"
TS = (
    "import crypto from 'crypto'\n\n"
    f"export const hmac = (d: string) => crypto.createHmac('sha256', '{KEY}').update(d)\n"
)
GO = f'package types\n\nvar (\n\tJWT_SECRET = []byte("{KEY}")\n\tPORT = 8080\n)\n'


def patch(path: str, old: str, new: str) -> str:
    return f"vsh_patch('/workspace/{path}', {old!r}, {new!r})\n"


@pytest.mark.parametrize(
    ("path", "text", "code"),
    [
        ("lib/hmac.ts", TS, patch("lib/hmac.ts", f"'{KEY}'", "process.env.HMAC_SECRET as string")),
        ("lib/hmac.ts", TS, patch("lib/hmac.ts", f"'{KEY}'", "process.env['HMAC_SECRET']!")),
        (
            "types/config.go",
            GO,
            patch("types/config.go", "var (", 'import "os"\n\nvar (')
            + patch("types/config.go", f'"{KEY}"', 'os.Getenv("JWT_SECRET")'),
        ),
    ],
    ids=["ts-cast", "ts-index", "go-import"],
)
async def test_a_secret_literal_swapped_for_a_lookup_is_approved(evidence_for, path, text, code):
    evidence = await evidence_for({path: text}, code)
    verdict = load_judge("secrets-hygiene", skip_llm=True).evaluate(evidence)  # type: ignore[union-attr]
    assert verdict.decision == "approve", verdict.reason


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (f"'{KEY}'", f"process.env.HMAC_SECRET || '{KEY}'", "the literal survives as a fallback"),
        (f"'{KEY}'", "process.env.PAGE_SIZE", "the variable's name is no secret's"),
        (
            f"'{KEY}').update(d)",
            "process.env.HMAC_SECRET).update(d).digest('hex')",
            "more than the literal changes",
        ),
    ],
)
async def test_other_edits_of_the_line_are_not_proven(evidence_for, old, new, why) -> None:
    evidence = await evidence_for({"lib/hmac.ts": TS}, patch("lib/hmac.ts", old, new))
    verdict = load_judge("secrets-hygiene", skip_llm=True).evaluate(evidence)  # type: ignore[union-attr]
    assert verdict.decision == "review", why
    assert "lib/hmac.ts" in verdict.reason, verdict.reason


@pytest.mark.parametrize(
    ("after", "says"),
    [
        (TS.replace("'sha256'", "process.env.HMAC_SECRET"), "changes more"),  # a word, no secret
        (TS.replace(f"'{KEY}'", "process.env.HMAC_SECRET") + "console.log(1)\n", "one for one"),
        (TS.replace("import crypto from 'crypto'\n", ""), "removes line"),
        (TS, "replaces no hard-coded secret"),
        (GO.replace("var (", 'import "net/http"\n\nvar ('), "not an environment lookup"),
    ],
)
def test_the_line_proof_refuses(after: str, says: str) -> None:
    before = GO if "package" in after else TS
    problem = line_lookup_problem(before, after)
    assert problem is not None
    assert says in problem, problem
