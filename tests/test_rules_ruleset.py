"""RuleSet: completeness, denials beat allowances, unproven changes, digests; no gap approved."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsh_ai import Evidence, Pipeline, Verdict, as_hook
from vsh_ai._evidence import EvidenceGap
from vsh_ai._simulate import simulate
from vsh_ai.rules import (
    Allowance,
    AllowPaths,
    ChangeKinds,
    Claim,
    Completeness,
    ConfigInvariants,
    DeniedChanges,
    ExactContent,
    ForbiddenPatterns,
    Limits,
    NoExecutableChanges,
    NoRefusedAccess,
    NoSecrets,
    ProtectedReads,
    Rule,
    RuleSet,
)

if TYPE_CHECKING:
    from vsh_ai.analysis._changes import NetChange

pytestmark = pytest.mark.anyio

FILES = {"config/app.toml": "port = 80\n", "data/x.csv": "1\n", "README.md": "hi\n"}


async def test_first_reject_wins_over_reviews(evidence_for) -> None:
    evidence = await evidence_for(
        FILES,
        "vsh_write('/workspace/README.md', 'hello\\n')\nvsh_remove('/workspace/data/x.csv')",
    )
    rules = RuleSet(
        [
            AllowPaths(paths=("**",), kinds=("modify", "delete")),
            Limits(max_changed_bytes=1),
            DeniedChanges(globs=("data/**",)),
        ],
        id="demo",
    )
    verdict = await rules.review(evidence)
    assert verdict.decision == "reject", "a denial beats an allowance that claims everything"
    assert verdict.judge == "demo/denied_changes"
    assert verdict.reason.startswith("data/x.csv must not be changed")
    assert [f["rule"] for f in verdict.details["failures"]] == ["limits", "denied_changes"]


async def test_reviews_are_joined(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_write('/workspace/README.md', 'x' * 100)")
    rules = RuleSet([Limits(max_changed_bytes=10), Limits(max_touched_paths=0, id="few")])
    verdict = rules.evaluate(evidence)
    assert verdict.decision == "review"
    assert verdict.reason.count("This change is too large") == 2


async def test_every_change_must_be_claimed(evidence_for) -> None:
    evidence = await evidence_for(
        FILES,
        "vsh_write('/workspace/config/app.toml', 'port = 1\\n')\n"
        "vsh_remove('/workspace/data/x.csv')",
    )
    config_only = AllowPaths(paths=("config/**",), kinds=("modify",), id="config")
    verdict = RuleSet([config_only], id="svc").evaluate(evidence)
    assert (verdict.decision, verdict.judge) == ("review", "svc/unproven")
    assert verdict.details["unproven"] == [
        {
            "path": "data/x.csv",
            "kind": "delete",
            "reason": "no allowance covers delete of data/x.csv",
        }
    ]
    assert verdict.details["claims"] == [
        {
            "path": "config/app.toml",
            "kind": "modify",
            "allowance": "config",
            "reason": "modify of config/app.toml matches 'config/**'",
        }
    ]
    assert "Delete of data/x.csv is not proven allowed" in verdict.reason

    escalating = RuleSet([config_only], on_unproven="escalate", id="svc").evaluate(evidence)
    assert escalating.decision == "abstain"
    assert escalating.details["unproven"] == verdict.details["unproven"]

    data = AllowPaths(paths=("data/*.csv",), kinds=("delete",), id="data")
    approved = RuleSet([config_only, data]).evaluate(evidence)
    assert approved.decision == "approve"
    assert [c["allowance"] for c in approved.details["claims"]] == ["config", "data"]


async def test_failing_claims_explain_what_would_prove_the_change(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_write('/workspace/config/app.toml', 'x' * 500)")
    small = AllowPaths(paths=("config/**",), kinds=("modify",), max_bytes=100, id="small")
    verdict = RuleSet([small]).evaluate(evidence)
    assert verdict.decision == "review"
    assert verdict.details["unproven"][0]["reason"] == (
        "small: config/app.toml would be 500 bytes (at most 100)"
    )


async def test_nothing_changed_and_nothing_denied_is_approved(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_read('/workspace/README.md')")
    verdict = RuleSet().evaluate(evidence)
    assert (verdict.decision, verdict.details) == ("approve", {"claims": []})


def test_rule_set_validates_its_inputs() -> None:
    with pytest.raises(ValueError, match="on_unproven"):
        RuleSet([], on_unproven="approve")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not a vsh_ai\.rules\.Rule"):
        RuleSet([object()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="distinct ids"):
        RuleSet([NoSecrets(), NoSecrets()])
    assert isinstance(RuleSet().rules[0], Completeness), "completeness always runs first"


def test_digest_and_hook_id_follow_the_definition() -> None:
    base = RuleSet([AllowPaths(paths=("config/**",), kinds=("modify",))], id="svc")
    same = RuleSet([AllowPaths(paths=("config/**",), kinds=("modify",))], id="svc")
    changed = RuleSet([AllowPaths(paths=("config/**",), kinds=("modify", "create"))], id="svc")
    assert base.digest == same.digest
    assert base.digest != changed.digest
    assert base.digest != RuleSet(base.rules, on_unproven="escalate", id="svc").digest
    assert as_hook(base).hook_id == as_hook(same).hook_id
    assert as_hook(base).hook_id != as_hook(changed).hook_id
    assert as_hook(Pipeline(base)).hook_id != as_hook(Pipeline(changed)).hook_id


async def test_refused_write_through_an_escaping_link(make_workspace) -> None:
    workspace = make_workspace({"a.txt": "x\n"})
    (workspace / "hosts-link").symlink_to("/etc/hosts")
    code = "try:\n    vsh_write('/workspace/hosts-link', 'evil')\nexcept PermissionError:\n    pass"
    result = await simulate(workspace, code, policy="strict")
    assert result.evidence is not None
    assert result.evidence.changes == ()
    verdict = NoRefusedAccess().check(result.evidence)
    assert verdict is not None
    assert verdict.decision == "reject"
    clean = await simulate(workspace, "vsh_read('/workspace/a.txt')", policy="strict")
    assert clean.evidence is not None
    assert NoRefusedAccess().check(clean.evidence) is None


async def test_removed_lines_mode(evidence_for) -> None:
    files = {".gitignore": ".env\n*.pem\nbuild/\n"}
    rule = ForbiddenPatterns(
        patterns=("env|pem",), globs=(".gitignore",), lines="removed", description="secret ignores"
    )
    weakened = await evidence_for(files, "vsh_write('/workspace/.gitignore', 'build/\\n')")
    verdict = rule.check(weakened)
    assert verdict is not None
    assert verdict.reason == (
        ".gitignore (lines 1, 2) removes secret ignores; put those lines back and keep them."
    )
    extended = await evidence_for(
        files, "vsh_write('/workspace/.gitignore', '.env\\n*.pem\\nbuild/\\ndist/\\n')"
    )
    assert rule.check(extended) is None


async def test_completeness_rule_explains_the_gap(evidence_for) -> None:
    overwrite = await evidence_for(
        FILES,
        "vsh_write('/workspace/README.md', 'draft\\n')\nvsh_write('/workspace/README.md', 'ok\\n')",
    )
    verdict = Completeness().check(overwrite)
    assert verdict is not None
    assert verdict.decision == "review"
    assert verdict.reason == (
        "The evidence is incomplete (an intermediate write to README.md is not resolvable "
        "from captured content), so a human must review it; to avoid this, write each file "
        "once, with its final content."
    )
    combined = RuleSet([AllowPaths(paths=("**",), kinds=("modify",))]).evaluate(overwrite)
    assert (combined.decision, combined.failure) == ("review", "incomplete_evidence")

    single = await evidence_for(FILES, "vsh_write('/workspace/README.md', 'ok\\n')")
    assert Completeness().check(single) is None
    uncaptured = await evidence_for(
        FILES, "vsh_write('/workspace/README.md', 'ok\\n')", review_content_bytes=0
    )
    verdict = Completeness().check(uncaptured)
    assert verdict is not None
    assert "keep changes small enough for their bytes to be captured" in verdict.reason


class NoTodo(Rule):
    """A custom rule, written the way applications add their own."""

    type: Literal["no_todo"] = "no_todo"

    def check(self, evidence: Evidence, /) -> Verdict | None:
        todo = [p for p in evidence.written_paths if "TODO" in (evidence.after_text(p) or "")]
        return self.verdict("review", f"{todo[0]} adds a TODO; finish it.") if todo else None


async def test_custom_rules_plug_in(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_write('/workspace/README.md', 'TODO\\n')")
    rules = RuleSet([NoTodo()], id="custom")
    verdict = rules.evaluate(evidence)
    assert (verdict.decision, verdict.judge) == ("review", "custom/no_todo")
    assert rules.definition["rules"][1]["class"].endswith("test_rules_ruleset.NoTodo")


class ShortReadme(Allowance):
    """A custom allowance: claims README.md edits of at most ``limit`` bytes."""

    type: Literal["short_readme"] = "short_readme"
    limit: int = 10

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        if change.path != "README.md":
            return None
        size = len(evidence.after_bytes(change.path) or b"")
        return Claim(size <= self.limit, f"README.md is {size} bytes (limit {self.limit})")


class BrokenAllowance(Allowance):
    type: Literal["broken"] = "broken"

    def claim(self, evidence: Evidence, change: NetChange, /) -> Claim | None:
        raise EvidenceGap("no bytes")


async def test_custom_allowances_plug_in_and_fail_closed(evidence_for) -> None:
    short = await evidence_for(FILES, "vsh_write('/workspace/README.md', 'ok\\n')")
    long = await evidence_for(FILES, "vsh_write('/workspace/README.md', 'x' * 50)")
    assert RuleSet([ShortReadme()]).evaluate(short).decision == "approve"
    verdict = RuleSet([ShortReadme()]).evaluate(long)
    assert verdict.decision == "review"
    assert verdict.details["unproven"][0]["reason"] == (
        "short_readme: README.md is 50 bytes (limit 10)"
    )
    broken = RuleSet([BrokenAllowance(), ShortReadme()]).evaluate(long)
    assert broken.details["unproven"][0]["reason"].startswith(
        "broken: broken could not check it: no bytes"
    )
    assert RuleSet([BrokenAllowance(), ShortReadme()]).evaluate(short).decision == "approve"


async def test_reading_secret_bearing_content_is_never_approved(evidence_for) -> None:
    files = {
        "app/settings.py": 'KEY = "sk_live_51HqLyjWDarjtT1zdp7dcXkH2abc"\n',
        "notes/PROD.PEM": "x\n",
        "README.md": "hi\n",
    }
    code = "vsh_read('/workspace/app/settings.py')\nvsh_write('/workspace/README.md', 'ok\\n')"
    evidence = await evidence_for(files, code)
    everything = AllowPaths(paths=("**",), kinds=("modify",))
    verdict = RuleSet([everything]).evaluate(evidence)
    assert (verdict.decision, verdict.judge) == ("review", "rules/reads")
    assert "app/settings.py" in verdict.reason
    assert "sk_live" not in verdict.reason
    by_name = await evidence_for(files, "vsh_read('/workspace/notes/PROD.PEM')")
    protected = ProtectedReads(globs=("**/*.pem",), action="reject")
    assert RuleSet([protected]).evaluate(by_name).decision == "reject", "any case"
    by_content = ProtectedReads(content=True, action="reject")
    assert RuleSet([by_content, everything]).evaluate(evidence).decision == "reject"


# -- property: no rule set ever approves incomplete evidence ---------------------------

_SAMPLES: list[Evidence] = []
PROGRAMS = [
    ("vsh_write('/workspace/config/app.toml', 'port = 81\\n')", "strict", 1 << 20),
    (
        "vsh_write('/workspace/config/app.toml', 'bad\\n')\n"
        "vsh_write('/workspace/config/app.toml', 'port = 82\\n')",
        "strict",
        1 << 20,
    ),
    ("vsh_write('/workspace/config/app.toml', 'port = 80\\n')", "balanced", 1 << 20),
    ("vsh_remove('/workspace/data/x.csv')", "balanced", 1 << 20),
    ("vsh_write('/workspace/config/new.toml', 'a = 1\\n')", "strict", 0),
    ("vsh_read('/workspace/README.md')", "balanced", 0),
]


def samples(tmp_root) -> list[Evidence]:
    if not _SAMPLES:

        async def build() -> None:
            for index, (code, policy, budget) in enumerate(PROGRAMS):
                workspace = tmp_root / f"p{index}"
                for name, text in FILES.items():
                    (workspace / name).parent.mkdir(parents=True, exist_ok=True)
                    (workspace / name).write_text(text)
                result = await simulate(workspace, code, policy=policy, review_content_bytes=budget)
                assert result.evidence is not None
                _SAMPLES.append(result.evidence)

        anyio.run(build)
    return _SAMPLES


def degrade(evidence: Evidence, how: str) -> Evidence:
    if how == "structural":
        return evidence.model_copy(update={"evidence_complete": False})
    if how == "truncated":
        return evidence.model_copy(update={"evidence_truncated": True})
    if how == "content":
        return evidence.model_copy(update={"content_complete": False})
    if how == "strip_contents":
        return evidence.model_copy(update={"contents": ()})
    return evidence


RULE_CHOICES: list[Rule] = [
    AllowPaths(paths=("**",), kinds=("create", "modify", "delete", "rename", "metadata_change")),
    ConfigInvariants(globs=("*.toml",), keep=("server.tls",)),
    ExactContent(path="nothing.txt", absent=True),
    NoExecutableChanges(),
    ChangeKinds(allow=("create", "modify", "delete", "rename", "metadata_change")),
    DeniedChanges(globs=("nothing/**",)),
    NoSecrets(),
    Limits(max_touched_paths=1000),
    ForbiddenPatterns(patterns=("never-matches-anything-xyz",)),
    NoRefusedAccess(),
]


@pytest.fixture(scope="module")
def real_evidence(tmp_path_factory) -> list[Evidence]:
    return samples(tmp_path_factory.mktemp("property"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    index=st.integers(min_value=0, max_value=len(PROGRAMS) - 1),
    how=st.sampled_from(["structural", "truncated", "content", "strip_contents", "none"]),
    chosen=st.lists(st.sampled_from(range(len(RULE_CHOICES))), unique=True, max_size=8),
    include_completeness=st.booleans(),
    on_unproven=st.sampled_from(["review", "escalate"]),
)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_no_rule_set_approves_incomplete_evidence(
    real_evidence, index, how, chosen, include_completeness, on_unproven, anyio_backend
) -> None:
    evidence = degrade(real_evidence[index], how)
    rules = [RULE_CHOICES[i] for i in chosen]
    if include_completeness:
        rules.append(Completeness())
    verdict: Verdict = RuleSet(rules, on_unproven=on_unproven).evaluate(evidence)
    if not evidence.complete:
        assert verdict.decision in ("review", "reject"), (how, verdict)
    elif 0 in chosen or not evidence.changes:  # everything claimed and nothing denied
        assert verdict.decision == "approve", verdict.reason
    else:
        assert verdict.decision == ("abstain" if on_unproven == "escalate" else "review")


def test_property_samples_cover_both_complete_and_incomplete(real_evidence) -> None:
    assert any(e.complete for e in real_evidence)
    assert any(not e.complete for e in real_evidence)


async def test_a_refused_open_that_left_no_effect_is_reviewed(make_workspace) -> None:
    workspace = make_workspace({"a.txt": "x\n"})
    (workspace / "hosts-link").symlink_to("/etc/hosts")
    code = (
        "try:\n    open('/workspace/hosts-link', 'w').write('evil')\n"
        "except PermissionError:\n    pass"
    )
    result = await simulate(workspace, code, policy="strict")
    assert result.evidence is not None
    assert (result.evidence.changes, result.evidence.effects) == ((), ())
    verdict = RuleSet([NoRefusedAccess()]).evaluate(result.evidence)
    assert verdict.decision == "review"
    assert "left no effect" in verdict.reason
    missing = await simulate(
        workspace, "try:\n    vsh_read('/workspace/nope')\nexcept Exception:\n    pass"
    )
    assert missing.evidence is not None
    assert NoRefusedAccess().check(missing.evidence) is None, "a failed lookup leaves a trace"
