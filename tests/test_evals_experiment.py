"""Evals are pydantic-evals experiments: each case's span holds its judge's work, the spans
carry no content, and identifier attributes survive Logfire's scrubbing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import logfire
import pytest
from logfire.testing import TestExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from vsh_ai import load_judge
from vsh_ai.evals import (
    EvalOptions,
    Suite,
    evaluate_suite,
    find_suites,
    load_suite,
    logfire_scrubbing,
    run_evals,
    run_evals_sync,
)

pytestmark = pytest.mark.anyio

SECRET = "sk_live_51HqLyjWDarjtT1zdp7dcXkH2"  # the Stripe key in the secrets-hygiene suite
PICKED = ("sh-env-lookup", "sh-copy-key-to-docs", "sh-move-key-to-example")


@pytest.fixture
def exporter() -> Iterator[TestExporter]:
    """Logfire as ``vsh-ai eval --logfire`` configures it (default patterns plus
    ``logfire_scrubbing``), exporting to memory."""
    spans = TestExporter()
    logfire.configure(
        send_to_logfire=False,
        console=False,
        scrubbing=logfire_scrubbing(),
        additional_span_processors=[SimpleSpanProcessor(spans)],
    )
    yield spans
    spans.clear()


def secrets_suite() -> Suite:
    suite = load_suite(find_suites(["secrets-hygiene"])[0])
    return suite.model_copy(update={"cases": [c for c in suite.cases if c.id in PICKED]})


def inside(span: dict[str, Any], outer: dict[str, Any], by_id: dict[int, dict[str, Any]]) -> bool:
    """Whether ``span`` descends from ``outer`` (parent links, same trace)."""
    parent = span.get("parent")
    while parent is not None:
        if parent["span_id"] == outer["context"]["span_id"]:
            return True
        parent = by_id[parent["span_id"]].get("parent") if parent["span_id"] in by_id else None
    return False


async def test_each_case_span_holds_its_judge_decision_without_content(
    exporter: TestExporter,
) -> None:
    suite = secrets_suite()
    judge = load_judge(suite.judge_path or "", skip_llm=True)
    result = await evaluate_suite(suite, judge)
    assert result.run_failures == []
    spans = exporter.exported_spans_as_dict()
    by_id = {s["context"]["span_id"]: s for s in spans}
    cases = {s["attributes"]["case_name"]: s for s in spans if s["name"] == "case: {case_name}"}
    decisions = [s for s in spans if s["name"] == "vsh-ai judge {judge_id}"]
    assert sorted(cases) == sorted(PICKED)
    assert len(decisions) == len(PICKED)
    outcomes = {o.case_id: o for o in result.outcomes}
    for name, case_span in cases.items():
        [decision] = [d for d in decisions if inside(d, case_span, by_id)]
        assert case_span["start_time"] <= decision["start_time"]
        assert decision["end_time"] <= case_span["end_time"]
        # who decided, readable although the rule ids name secrets
        assert decision["attributes"]["decided_by"] == outcomes[name].decided_by
        assert decision["attributes"]["verdict"] == outcomes[name].decided
        output = json.loads(case_span["attributes"]["output"])
        assert output["decided_by"] == outcomes[name].decided_by
        assert output["rules"] == outcomes[name].rules
        assert "reason" not in output
    assert any("secret" in o.decided_by for o in result.outcomes)
    flat = json.dumps(spans)
    assert "Scrubbed" not in flat
    for case in suite.cases:  # no file content, program, intent or note on any span
        assert case.intent
        assert case.intent not in flat
        assert case.program.strip().splitlines()[0] not in flat
        assert case.note not in flat
    assert SECRET not in flat
    for outcome in result.outcomes:
        assert outcome.reason not in flat


async def test_the_experiment_report_is_the_runs_it_made(exporter: TestExporter) -> None:
    """One experiment span per suite, with the confusion matrix of the real decisions."""
    suite = secrets_suite()
    report = await run_evals([suite], EvalOptions(workers=1))
    [experiment] = [s for s in exporter.exported_spans_as_dict() if s["name"] == "evaluate {name}"]
    assert experiment["attributes"]["dataset_name"] == "secrets-hygiene"
    analyses = json.loads(experiment["attributes"]["logfire.experiment.analyses"])
    [matrix] = [a for a in analyses if a["type"] == "confusion_matrix"]
    total = sum(sum(row) for row in matrix["matrix"])
    assert total == report.overall.runs == len(PICKED)


async def test_llm_judge_spans_sit_in_the_case_span(exporter: TestExporter, tmp_path: Path) -> None:
    (tmp_path / "nothing-proven.toml").write_text(
        'id = "nothing-proven"\ndescription = "Everything to the model."\n'
        '[rules]\non_unproven = "escalate"\n'
    )
    suite = secrets_suite()
    options = EvalOptions(judge=str(tmp_path / "nothing-proven.toml"), stress="always-reject")
    report = await run_evals([suite], options)
    assert report.run_failures == []
    spans = exporter.exported_spans_as_dict()
    by_id = {s["context"]["span_id"]: s for s in spans}
    by_model = {o.case_id for o in report.suites[0].outcomes if o.by_model}
    assert by_model  # the model decided some cases (VSH itself denies the others)
    for case_span in (s for s in spans if s["name"] == "case: {case_name}"):
        inner = {s["name"] for s in spans if inside(s, case_span, by_id)}
        if case_span["attributes"]["case_name"] in by_model:
            assert {"vsh-ai judge {judge_id}", "vsh-ai llm judge {judge_id}"} <= inner
    flat = json.dumps(spans)
    assert SECRET not in flat
    assert suite.authorization.splitlines()[0] not in flat


def test_identifier_values_are_kept_and_nothing_else(exporter: TestExporter) -> None:
    with logfire.span(
        "probe",
        decided_by="secrets-hygiene/no-secret-plumbing",
        rules=["labelled-credentials", "protect-secrets"],
        failure="password=hunter2",  # not an identifier: redacted
        note="the secret rule",  # not a vsh-ai identifier attribute: redacted
        model="pylf_v1_us_secrettoken",  # a Logfire token is never kept
        api_key="abc",  # a key that matches a pattern stays redacted
    ):
        pass
    [probe] = [s for s in exporter.exported_spans_as_dict() if s["name"] == "probe"]
    attributes = probe["attributes"]
    assert attributes["decided_by"] == "secrets-hygiene/no-secret-plumbing"
    assert json.loads(attributes["rules"]) == ["labelled-credentials", "protect-secrets"]
    for key in ("failure", "note", "model", "api_key"):
        assert "Scrubbed" in attributes[key], key


def test_run_evals_sync_needs_no_event_loop() -> None:
    report = run_evals_sync([secrets_suite()], EvalOptions(workers=1))
    assert report.overall.runs == len(PICKED)
    assert report.run_failures == []


def test_logfire_without_a_token_says_what_to_set(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("LOGFIRE_", "OTEL_EXPORTER_OTLP"))
    }
    done = subprocess.run(
        [sys.executable, "-m", "vsh_ai", "eval", "secrets-hygiene", "--logfire", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "LOGFIRE_TOKEN" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / ".logfire").exists()  # no project was created


async def test_a_failed_run_is_a_case_failure_whose_span_names_no_guest_text(
    exporter: TestExporter,
) -> None:
    marker = "CANARY-7f3a-guest-text"
    suite = Suite.model_validate(
        {
            "scenario": "broken",
            "description": "d",
            "authorization": "The agent may edit notes.txt.",
            "cases": [
                {
                    "id": "raises",
                    "category": "harmless-edit",
                    "files": {"notes.txt": "a\n"},
                    "program": f"raise ValueError({marker!r})",
                    "intent": "Nothing.",
                    "expected": "approve",
                    "note": "The guest raises.",
                }
            ],
        }
    )
    judge = load_judge(secrets_suite().judge_path or "", skip_llm=True)
    result = await evaluate_suite(suite, judge)
    [failure] = result.run_failures
    assert marker in failure.error  # the report keeps the full error
    [case_span] = [s for s in exporter.exported_spans_as_dict() if s["name"] == "case: {case_name}"]
    [event] = [e for e in case_span["events"] if e["name"] == "exception"]
    assert event["attributes"]["exception.type"].endswith("CaseRunError")
    assert "VshExecutionError" in event["attributes"]["exception.message"]
    assert marker not in json.dumps(exporter.exported_spans_as_dict())


def test_logfire_flag_sends_the_experiment_to_an_opentelemetry_backend(tmp_path: Path) -> None:
    """``vsh-ai eval --logfire`` with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a local receiver):
    the case and judge spans arrive, readable, and no content of the suite does."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path == "/v1/traces":
                bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            else:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("LOGFIRE_", "OTEL_"))},
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "vsh_ai", "eval", "secrets-hygiene", "--logfire"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env=env,
        )
    finally:
        server.shutdown()
    assert done.returncode in (0, 1), done.stdout + done.stderr
    sent = b"".join(bodies)
    assert b"case: {case_name}" in sent
    assert b"vsh-ai judge {judge_id}" in sent
    assert b"secrets-hygiene/no_secrets" in sent  # a decided_by, not scrubbed
    assert SECRET.encode() not in sent
    suite = load_suite(find_suites(["secrets-hygiene"])[0])
    for case in suite.cases:
        assert case.intent is None or case.intent.encode() not in sent


@pytest.mark.parametrize(
    ("expected", "decided", "matches", "safe"),
    [
        ("approve", "approve", True, True),
        ("reject", "approve", False, False),
        ("review", "reject", False, True),
        ("reject", "reject", True, True),
    ],
)
async def test_each_run_is_scored_by_one_evaluator_with_three_results(
    expected: str, decided: str, matches: bool, safe: bool
) -> None:
    from pydantic_evals import Case, Dataset

    from vsh_ai.evals._experiment import CaseDecision, CaseRef, CaseScore

    ref = CaseRef(case_id="c", category="x", expected=expected)

    async def task(_: CaseRef) -> CaseDecision:
        return CaseDecision(case_id="c", state="s", decided=decided, decided_by="j")

    dataset = Dataset(name="one", cases=[Case(name="c", inputs=ref)], evaluators=[CaseScore()])
    report = await dataset.evaluate(task, progress=False)
    [case] = report.cases
    assert {name: r.value for name, r in case.assertions.items()} == {
        "DecisionMatches": matches,
        "NoUnsafeApproval": safe,
    }
    assert {name: r.value for name, r in case.labels.items()} == {"decided": decided}
