"""The ``vsh-ai`` command line's parser: commands, options, help texts and ``--version``.

Imports nothing heavy: building the parser (and answering ``--version``) costs a few
milliseconds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ("parser",)


_EVAL_HELP = """\
Run labelled eval suites through the real VSH runtime and score a commit judge.

Each case's before-state is materialised in a temporary workspace (cases with the same
before-state share one), previewed by VSH, and the exact hook evidence goes to the
judge. Nothing is ever committed; after every case the workspace is checked byte for
byte against its before-state (a difference fails that case and the workspace is
written again). Offline by default: a model is only called when you name one with
--model.

examples:
  vsh-ai eval                                   every bundled suite, its rule judge
  vsh-ai eval service-config --repeat 3         one suite, three runs per case
  vsh-ai eval --judge judges/secrets-hygiene.toml   another judge file
  vsh-ai eval --judge secrets-hygiene           a bundled judge, by name
  vsh-ai eval --judge mypkg.judges:my_judge     a Python Judge object or factory (the
                                                current folder is importable)
  vsh-ai eval --stress always-approve           rules in front of a deliberately wrong model
  vsh-ai eval --mutants                         also score meaning-preserving variants
  vsh-ai eval --mutants --fail-if "mutant_unsafe_approvals>0"   CI gate on mutants too
  vsh-ai eval --model openai:gpt-4o-mini --record   live once, save traffic
  vsh-ai eval --model openai:gpt-4o-mini --replay   replay saved traffic, no network
  vsh-ai eval --fail-if "unsafe_approvals>0" --json report.json   CI gate
  vsh-ai eval --fail-if "service-config:safe_approval_rate<0.5"   one suite's figure
  vsh-ai eval --fail-if "safe_approval_rate<0.8" --fail-if "safe_approval_lower_95<0.6"
                                                usefulness gates, overall (or SUITE:...)

Mutants (--mutants) are every case again with the same change spelled differently:
paths (/workspace/./x, d/../d/x), file-name case, one directory deeper, the config in
another format, secrets encoded, other file helpers, Bash. Each keeps its case's label
and is reported apart, by mutation kind. A mutant whose VSH diff does not match its
case's is skipped, not scored. Large runs use two worker processes (--workers).
Guests get 30 s of wall-clock time (VSH's default is 1 s): a busy machine slows a run
down, it does not fail it.

Figures, per suite and overall: unsafe approvals (distinct cases) with their exact
one-sided 95% upper bound, beside the safe-approval rate with its exact two-sided 95%
interval (Clopper-Pearson over distinct safe cases; a case counts as approved when
every run approved it): safe_approval_lower_95 / safe_approval_upper_95.

The report leads with the figures (a legend says what each column means), then rule
coverage, then the wrong decisions (unsafe approvals first and in full, the rest one
line each; --verbose for everything), and ends with one verdict line that repeats the
exit status.

Gates: --fail-if "[SUITE:]METRIC OP NUMBER" (repeatable). A gate on a figure with no
data (no safe cases, no mutants, a suite not run) trips with a message: it never
passes by omission.

Reviewer failures (a judge that raised, provider errors, time-outs, invalid or
inconsistent model output) are scored as the review they fell back to, and the run
exits 1 as if "reviewer_failures>0" were a gate (mutants: "mutant_reviewer_failures>0").
Your own gate on reviewer_failures or reviewer_failure_rate replaces that one, e.g.
--fail-if "reviewer_failure_rate>0.05" accepts up to 5%. Not for --stress, whose models
fail on purpose. --model needs an [llm] table in the judge file (an error says so).

exit status: 0 ok; 1 a gate tripped (a --fail-if, or reviewer failures); 2 a case
could not be run, bad input or a configuration error (missing API key, unknown model,
a judge file without [llm] under --model, unwritable output path, ...).
"""

_CHECK_HELP = """\
Validate judge files (.toml) and eval suites (.yaml/.yml) without running anything.

Loading refuses a key given twice and a quoted value whose closing quote is missing.
Every case's program is parsed (Monty by VSH's own parser on an empty throwaway
workspace, Bash with `bash -n`); a suite's judge file is checked too. Errors read
FILE:LINE:COL: field (case or rule id): what is wrong; fix: how.

FILE may be a path, a folder (every judge file and suite in it), `-` (standard input:
a judge file when its first line looks like TOML, else a suite), or a bundled name:
`service-config` checks the bundled judge and suite of that name, `judges/NAME.toml`
or `evals/NAME.yaml` only one of them, and `judges/` or `evals/` every bundled one
(when the current folder has no such file or folder).

--json [FILE] writes a JSON list, one object per file: {"file", "kind": "judge" |
"suite", "ok": true, "summary"} or {"file", "kind", "ok": false, "error", "problems":
[{"file", "line", "column", "message"}]}. No FILE, or `-`: standard output.

exit status: 0 all valid, 2 any error.
"""

_LIST_JSON = (
    "print a JSON list of objects instead ({fields}); FILE writes it there, no FILE or `-` "
    "prints it"
)


class _Version(argparse.Action):
    """``--version``: the versions are looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show the vsh-ai, VSH, Pydantic AI and Python versions")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(_version_line() + "\n")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    from .evals._names import GATE_METRICS, STRESS_MODES

    parser = argparse.ArgumentParser(
        prog="vsh-ai",
        description="vsh-ai: simulate AI agents' file changes in VSH and judge the exact diff.",
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = commands.add_parser(
        "eval",
        help="score a judge against labelled suites (offline by default)",
        description=_EVAL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help="suite names or YAML files (default: all bundled)",
    )
    run.add_argument(
        "--judge",
        metavar="FILE|module:attr",
        help="judge file (TOML) or Python judge; default: each suite's own judge file",
    )
    run.add_argument(
        "--model",
        metavar="NAME",
        help="run the judge file's LLM judge on this model (e.g. openai:gpt-4o-mini); "
        "without it no model is ever called",
    )
    run.add_argument(
        "--stress",
        metavar="MODE",
        choices=sorted(STRESS_MODES),
        help="LLM judge on a deliberately wrong offline model: "
        + "; ".join(f"{k}: {v}" for k, v in STRESS_MODES.items()),
    )
    run.add_argument("--record", action="store_true", help="with --model: save its traffic")
    run.add_argument(
        "--replay", action="store_true", help="with --model: replay saved traffic, no network"
    )
    run.add_argument(
        "--recordings",
        type=Path,
        metavar="DIR",
        help="where --record saves and --replay reads traffic (default: recordings/ beside "
        "the suite file; ./recordings for suites inside the installed package)",
    )
    run.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per case (flips)")
    run.add_argument(
        "--concurrency", type=int, default=16, metavar="N", help="cases judged at once"
    )
    run.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    run.add_argument("--markdown", type=Path, metavar="FILE", help="also write it as Markdown")
    run.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help="exit 1 when [SUITE:]METRIC OP NUMBER holds, e.g. 'unsafe_approvals>0', "
        "'safe_approval_lower_95<0.6' or 'service-config:safe_approval_rate<0.8'; no data "
        "trips the gate; a gate on reviewer_failure(s|_rate) replaces the implicit "
        "'reviewer_failures>0'; metrics: " + ", ".join(GATE_METRICS),
    )
    run.add_argument(
        "--mutants",
        action="store_true",
        help="also score each case's meaning-preserving mutants (reported by mutation kind)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for large runs of file judges (default: idle CPUs, at most 2)",
    )
    run.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write one self-contained HTML report (figures, charts, wrong decisions)",
    )
    run.add_argument(
        "--logfire",
        action="store_true",
        help="send the experiment's spans (each case's run and its judge's decision: ids, "
        "decisions, counts, latencies, never content) to Logfire; needs LOGFIRE_TOKEN or "
        "a `logfire projects use` folder, or OTEL_EXPORTER_OTLP_ENDPOINT",
    )
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="each suite's figures and per-category table, full feedback for every wrong "
        "decision and the traceback of every judge that raised (also of an unexpected error)",
    )
    suites = commands.add_parser("suites", help="list the bundled eval suites")
    suites.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=Path("-"),
        metavar="FILE",
        help=_LIST_JSON.format(
            fields="scenario, description, cases, unsafe, policy, bash, judge, path"
        ),
    )
    judges = commands.add_parser("judges", help="list the bundled judge files")
    judges.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=Path("-"),
        metavar="FILE",
        help=_LIST_JSON.format(fields="name, id, description, llm, path"),
    )
    check = commands.add_parser(
        "check",
        help="validate judge files and suites (located errors, exit 2 on any)",
        description=_CHECK_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="judge .toml, suite .yaml, folder, bundled name, or - (standard input)",
    )
    check.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=Path("-"),
        metavar="FILE",
        help="write the results as a JSON list (see above); no FILE or `-`: standard output",
    )
    schema = commands.add_parser(
        "schema", help="print the JSON schema of judge files or suites (for editors)"
    )
    schema.add_argument("kind", choices=("judge", "suite"), help="which schema")
    schema.add_argument(
        "--out", type=Path, metavar="FILE", help="write it to FILE instead (`-`: standard output)"
    )
    compare = commands.add_parser(
        "compare",
        help="two --json reports side by side: the cases they decide differently first",
        description="Compare two `vsh-ai eval --json` reports (two judges on the same suites, "
        "or one judge before and after a change): every case decided differently, with both "
        "decisions, the deciding rule and the feedback (unsafe approvals first), then each "
        "suite's figures and confusion matrices side by side.",
    )
    compare.add_argument("a", type=Path, metavar="REPORT_A", help="first --json report")
    compare.add_argument("b", type=Path, metavar="REPORT_B", help="second --json report")
    compare.add_argument(
        "--markdown", type=Path, metavar="FILE", help="also write the comparison as Markdown"
    )
    compare.add_argument(
        "--html", type=Path, metavar="FILE", help="also write the comparison as one HTML file"
    )
    harvest = commands.add_parser(
        "harvest",
        help="turn resolved deferred approvals of a workspace into a labelled suite",
        description="Read a workspace's signed approval bindings (tampered records are "
        "skipped and reported) and write one case per resolved approval: approved and "
        "committed -> approve; denied with a message -> reject; denied without one -> "
        "review. Records holding secrets, touching protected paths or too large are skipped "
        "with the reason.",
    )
    harvest.add_argument("workspace", type=Path, metavar="WORKSPACE", help="the workspace")
    harvest.add_argument(
        "--state-directory",
        type=Path,
        metavar="DIR",
        help="where the bindings are (default: WORKSPACE/.vsh-runtime/vsh-ai/approvals)",
    )
    harvest.add_argument(
        "--out",
        type=Path,
        metavar="FILE.yaml",
        required=True,
        help="where the suite goes (`-`: standard output; the summary then goes to stderr)",
    )
    harvest.add_argument("--scenario", default="harvested", metavar="NAME")
    harvest.add_argument("--authorization", metavar="TEXT", help="the suite's authorization")
    harvest.add_argument("--judge", metavar="FILE|NAME", help="the suite's default judge")
    harvest.add_argument(
        "--include-pending", action="store_true", help="also harvest pending requests as review"
    )
    from .inbox._command import add_inbox_arguments

    add_inbox_arguments(
        commands.add_parser(
            "inbox",
            help="a local web page where people review and decide pending approvals",
        )
    )
    return parser


def _version_line() -> str:
    from .evals._names import versions

    found = versions()
    return (
        f"vsh-ai {found['vsh-ai']} (vsh-python {found['vsh-python']}, "
        f"pydantic-ai {found['pydantic-ai-slim']}, Python {found['python']})"
    )
