"""RuleSet: completeness first, severity ordering, on_pass, digests; no approval of gaps."""

from __future__ import annotations

from typing import Literal

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsh_ai import Evidence, Pipeline, Verdict, as_hook
from vsh_ai._simulate import simulate
from vsh_ai.rules import (
    AllowedChanges,
    ChangeKinds,
    Completeness,
    ConfigInvariants,
    DeniedChanges,
    DependencyVersionsOnly,
    ExactContent,
    ForbiddenPatterns,
    Limits,
    NoExecutableChanges,
    NoRefusedAccess,
    NoSecrets,
    Rule,
    RuleSet,
)

pytestmark = pytest.mark.anyio

FILES = {"config/app.toml": "port = 80\n", "data/x.csv": "1\n", "README.md": "hi\n"}


async def test_first_reject_wins_over_reviews(evidence_for) -> None:
    evidence = await evidence_for(
        FILES,
        "vsh_write('/workspace/README.md', 'hello\\n')\nvsh_remove('/workspace/data/x.csv')",
    )
    rules = RuleSet(
        [AllowedChanges(globs=("config/**",)), DeniedChanges(globs=("data/**",))], id="demo"
    )
    verdict = await rules.review(evidence)
    assert verdict.decision == "reject"
    assert verdict.judge == "demo/denied_changes"
    assert verdict.reason.startswith("data/x.csv must not be changed")
    assert [f["rule"] for f in verdict.details["failures"]] == ["allowed_changes", "denied_changes"]


async def test_reviews_are_joined(evidence_for) -> None:
    evidence = await evidence_for(FILES, "vsh_write('/workspace/README.md', 'x' * 100)")
    rules = RuleSet([AllowedChanges(globs=("config/**",)), Limits(max_changed_bytes=10)])
    verdict = rules.evaluate(evidence)
    assert verdict.decision == "review"
    assert "README.md is outside" in verdict.reason
    assert "This change is too large" in verdict.reason


@pytest.mark.parametrize(
    ("on_pass", "decision", "reason"),
    [
        ("approve", "approve", "All 2 rules passed (completeness, allowed_changes)."),
        ("follow_policy", "abstain", "All 2 rules passed; VSH policy decides."),
        ("escalate", "abstain", "All 2 rules passed; escalating to the next judge."),
    ],
)
async def test_on_pass(evidence_for, on_pass, decision, reason) -> None:
    evidence = await evidence_for(FILES, "vsh_write('/workspace/config/app.toml', 'port = 1\\n')")
    verdict = RuleSet([AllowedChanges(globs=("config/**",))], on_pass=on_pass).evaluate(evidence)
    assert (verdict.decision, verdict.reason) == (decision, reason)


def test_rule_set_validates_its_inputs() -> None:
    with pytest.raises(ValueError, match="on_pass"):
        RuleSet([], on_pass="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not a vsh_ai\.rules\.Rule"):
        RuleSet([object()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="distinct ids"):
        RuleSet([NoSecrets(), NoSecrets()])
    assert isinstance(RuleSet().rules[0], Completeness), "completeness always runs first"


def test_digest_and_hook_id_follow_the_definition() -> None:
    base = RuleSet([AllowedChanges(globs=("config/**",))], id="svc")
    same = RuleSet([AllowedChanges(globs=("config/**",))], id="svc")
    changed = RuleSet([AllowedChanges(globs=("config/**", "docs/**"))], id="svc")
    assert base.digest == same.digest
    assert base.digest != changed.digest
    assert base.digest != RuleSet(base.rules, on_pass="escalate", id="svc").digest
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
    combined = RuleSet([], on_pass="approve").evaluate(overwrite)
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
    AllowedChanges(globs=("**",)),
    ConfigInvariants(globs=("*.toml",), keep=("server.tls",)),
    DependencyVersionsOnly(),
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
    on_pass=st.sampled_from(["approve", "follow_policy", "escalate"]),
)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_no_rule_set_approves_incomplete_evidence(
    real_evidence, index, how, chosen, include_completeness, on_pass, anyio_backend
) -> None:
    evidence = degrade(real_evidence[index], how)
    rules = [RULE_CHOICES[i] for i in chosen]
    if include_completeness:
        rules.append(Completeness())
    verdict: Verdict = RuleSet(rules, on_pass=on_pass).evaluate(evidence)
    if not evidence.complete:
        assert verdict.decision in ("review", "reject"), (how, verdict)
        assert verdict.decision != "approve"
    elif on_pass == "approve":
        assert verdict.decision == "approve", verdict.reason


def test_property_samples_cover_both_complete_and_incomplete(real_evidence) -> None:
    assert any(e.complete for e in real_evidence)
    assert any(not e.complete for e in real_evidence)
