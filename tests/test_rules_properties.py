"""Properties of rule sets that prove (hypothesis, on real VSH evidence).

(a) a rule set approves exactly when every net change is claimed ok by an allowance;
(b) allow_config compares typed values: ``true`` -> ``1``, ``1`` -> ``1.0``, ``"1"`` -> ``1``
    are changes that an allowance for other keys never proves;
(c) globs are root-anchored: a one-segment glob never matches a path with a ``/``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsh_ai import Evidence
from vsh_ai._simulate import simulate
from vsh_ai.analysis._changes import net_changes
from vsh_ai.rules import AllowConfig, AllowPaths, KeyConstraint, RuleSet, glob_matches

NAMES = ["a.txt", "b.log", "docs/c.md", "docs/d.md", "tmp/e.txt", "tmp/x/f.txt"]
GLOBS = ["*.txt", "*.log", "docs/**", "docs/*.md", "tmp/**", "**/*.txt", "**", "tmp/*"]
KINDS = ["create", "modify", "delete", "rename", "metadata_change"]


def evidence(files: dict[str, str], code: str) -> Evidence | None:
    async def build() -> Evidence | None:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for name, text in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(text)
            try:
                result = await simulate(root, code, policy="balanced")
            except Exception:  # a random program may fail in the guest: not a sample
                return None
            return result.evidence

    return anyio.run(build)


operation = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(["x\n", "y\n", ""])),
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("move"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
)
allowance = st.builds(
    lambda paths, kinds, destructive: AllowPaths(
        paths=tuple(paths), kinds=tuple(kinds), destructive=destructive
    ),
    st.lists(st.sampled_from(GLOBS), min_size=1, max_size=3, unique=True),
    st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True),
    st.booleans(),
)


def program(ops: list[tuple[str, str, str]]) -> str:
    lines = []
    for op, path, arg in ops:
        target = f"/workspace/{path}"
        if op == "write":
            lines.append(f"vsh_write({target!r}, {arg!r})")
        elif op == "remove":
            lines.append(f"vsh_remove({target!r})")
        else:
            lines.append(f"vsh_move({target!r}, {'/workspace/' + arg!r})")
    return "\n".join(f"try:\n    {line}\nexcept Exception:\n    pass" for line in lines)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    present=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True),
    ops=st.lists(operation, min_size=1, max_size=4),
    allowances=st.lists(allowance, min_size=0, max_size=3),
    on_unproven=st.sampled_from(["review", "escalate"]),
)
def test_approves_exactly_when_every_net_change_is_claimed(
    present, ops, allowances, on_unproven
) -> None:
    sample = evidence(dict.fromkeys(present, "old\n"), program(ops))
    if sample is None or not sample.complete:
        return
    rules = [a.model_copy(update={"id": f"a{i}"}) for i, a in enumerate(allowances)]
    verdict = RuleSet(rules, on_unproven=on_unproven).evaluate(sample)
    claimed = [
        any((c := a.claim(sample, change)) is not None and c.ok for a in rules)
        for change in net_changes(sample)
    ]
    if verdict.decision == "approve":
        assert all(claimed), verdict
        assert len(verdict.details["claims"]) == len(claimed)
    else:
        assert not all(claimed), verdict
        assert verdict.decision == ("abstain" if on_unproven == "escalate" else "review")
        unproven = {u["path"] for u in verdict.details["unproven"]}
        changes = net_changes(sample)
        assert unproven == {ch.path for ch, ok in zip(changes, claimed, strict=True) if not ok}


SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([0.0, 1.0, -1.0, 2.5]),
    st.sampled_from(["1", "0", "true", "", "1.0"]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(old=SCALARS, new=SCALARS, fmt=st.sampled_from(["json", "yaml"]))
def test_allow_config_uses_typed_equality(old, new, fmt) -> None:
    name = f"c.{fmt}"

    def dump(value: object) -> str:
        return json.dumps({"keep": value, "free": 1})  # JSON is valid YAML too

    after = dump(new).replace('"free": 1', '"free": 2')
    sample = evidence({name: dump(old)}, f"vsh_write('/workspace/{name}', {after!r})")
    assert sample is not None
    free = AllowConfig(paths=(name,), may_change={"free": KeyConstraint(type="integer")})
    verdict = RuleSet([free]).evaluate(sample)
    same = type(old) is type(new) and old == new
    assert (verdict.decision == "approve") is same, (old, new, verdict.reason)


@settings(max_examples=300)
@given(
    segment=st.text(alphabet="ab*?.[]!", min_size=1, max_size=6),
    path=st.lists(st.text(alphabet="ab.", min_size=1, max_size=4), min_size=2, max_size=4),
    ignore_case=st.booleans(),
)
def test_one_segment_globs_are_root_anchored(segment, path, ignore_case) -> None:
    if "**" in segment or segment.startswith("!") or set(segment) <= {"."}:
        return
    try:
        matched = glob_matches(segment, "/".join(path), ignore_case=ignore_case)
    except ValueError:
        return  # refused globs never match anything
    assert not matched


@given(path=st.lists(st.sampled_from(["a", "logs", "x.log", "B.LOG"]), min_size=1, max_size=4))
def test_star_log_matches_only_root_files(path) -> None:
    joined = "/".join(path)
    assert glob_matches("*.log", joined) is (len(path) == 1 and joined.endswith(".log"))
    any_depth = glob_matches("**/*.log", joined, ignore_case=True)
    assert any_depth is joined.lower().endswith(".log")
