"""How long does each analyser take per MiB, on normal and on adversarial input?

One table row per (analyser, input): CPU milliseconds per MiB of input (best of a few
runs, analysis caches cleared before each), and the CPU time of that one input. Sections:

* secrets: find_secrets / redact_text on text shapes built to be slow for regexes, the
  worst single line (20,000 and 1,000,000 characters) and input at the scan cap;
* config: parse_config + flatten + config_changes per format (TOML, JSON, YAML, INI,
  .env, .properties), normal files and deep nesting, long lines, many keys, YAML aliases
  and merge keys;
* dependencies: requirement files (huge, hashes, markers, continuations), package.json
  (long ``||`` ranges) and package-lock, parsed and compared with themselves;
* python: code_changes of a new module and of an edit, normal code and deeply nested
  expressions, long operator chains, many calls and aliases (inputs at the 256 KiB cap);
* globs: matching() of many paths against the shipped judges' protected set, and long
  segments and deep paths against star-heavy globs;
* changes: destructive_edit on whole files (difflib pairing: many equal lines, every
  line edited, every line commented out) and net_changes on real VSH evidence;
* provenance: unshared_paths / derived_paths on real VSH evidence with many renames of
  a directory, copies, and reads followed by writes.

Targets (issue 9): no input over 100 ms per MiB; nothing within the review budget
(the analyser's own cap, or 1 MiB of captured content) over 1 s. Rows over a target are
flagged. The whole run takes one to two minutes on a loaded 2-core machine.

    .venv/bin/python benchmarks/analysis.py                  # every section
    .venv/bin/python benchmarks/analysis.py config globs     # only the named sections

To add an analyser to the secrets section, append ``(name, callable taking the text)``
to ANALYSERS; for a new kind of input, add a :class:`Section` to SECTIONS.
"""

from __future__ import annotations

import json
import os
import random
import string
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vsh_ai.analysis import _changes, _config, _secrets
from vsh_ai.analysis._secrets import MAX_SCAN_CHARS, find_secrets, redact_text

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
KIB = 1 << 10
SIZE = 256 * KIB  # input size outside the secrets section: rates are scaled to one MiB

# (analyser name, callable): the secrets section, one line per analyser.
ANALYSERS: list[tuple[str, Callable[[str], object]]] = [
    ("secrets.find_secrets", find_secrets),
    ("secrets.redact_text", redact_text),
]


def _sized(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _random(alphabet: str, size: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choices(alphabet, k=size))


_NORMAL: list[str] = []


def _normal_text() -> str:
    if not _NORMAL:
        sources = sorted((ROOT / "vsh_ai").rglob("*.py")) + sorted((ROOT / "judges").glob("*"))
        _NORMAL.append("\n".join(p.read_text(errors="replace") for p in sources if p.is_file()))
    return _NORMAL[0]


ALNUM = string.ascii_letters + string.digits
INPUTS: dict[str, Callable[[int], str]] = {
    "normal (this repo's code)": lambda n: _sized(_normal_text(), n),
    "a.a.a. one line": lambda n: _sized("a.", n),
    "alphanumerics one line": lambda n: _random(ALNUM, n),
    "'-' one line": lambda n: "-" * n,
    "base64-like one line": lambda n: _random(ALNUM + "+/", n),
    "hex-like one line": lambda n: _random("0123456789abcdef", n),
    "base64 wrapped lines": lambda n: _sized(_random(ALNUM + "+/", 76) + "\n", n),
    "hex of text (decodes)": lambda n: _sized("61", n),
    "key=value pairs": lambda n: _sized("a=b ", n),
    "password=x pairs (dense)": lambda n: _sized("password=x ", n),
    "quoted pieces joined": lambda n: _sized('"ab"+', n),
    "percent-encoded": lambda n: _sized("%41", n),
    "URL-like one line": lambda n: _sized("http://a:", n),
}
ADVERSARIAL_LINES = ("a.a.a. one line", "alphanumerics one line", "'-' one line")


def clear_caches() -> None:
    """Forget parsed config trees, flattened keys, net changes and module facts."""
    _config._PARSED.clear()
    _config._FLAT.clear()
    _secrets.clear_cache()
    from vsh_ai.analysis._python_facts import remembered_facts

    remembered_facts.cache_clear()


def _timed(function: Callable[[Any], object], argument: Any, repeat: int = 3) -> float:
    """Best CPU seconds of this process over ``repeat`` runs (caches cleared before each).

    CPU time, not wall time: on a shared, loaded machine wall time mostly measures the
    other processes; CPU time is what the analysis itself costs.
    """
    best = float("inf")
    for _ in range(repeat):
        clear_caches()
        start = time.process_time()
        function(argument)
        best = min(best, time.process_time() - start)
        if best > 0.5:  # slow inputs run once: the whole script stays near two minutes
            break
    return best


@dataclass
class Worst:
    """The worst figures seen, for the summary."""

    per_mib: tuple[float, str] = (0.0, "")
    one_input: tuple[float, str] = (0.0, "")
    rows: list[str] = field(default_factory=list)

    def note(self, where: str, seconds: float, size: int) -> str:
        per_mib = seconds * 1000 * MIB / max(size, 1)
        flags = []
        if size >= 8 * KIB and per_mib > 100:
            flags.append("OVER 100 ms/MiB")
            self.rows.append(f"{where}: {per_mib:.0f} ms/MiB")
        if seconds > 1:
            flags.append("OVER 1 s")
            self.rows.append(f"{where}: {seconds:.2f} s")
        if size >= 8 * KIB:
            self.per_mib = max(self.per_mib, (per_mib, where))
        self.one_input = max(self.one_input, (seconds * 1000, where))
        return ("  " + ", ".join(flags)) if flags else ""


WORST = Worst()


def _row(analyser: str, label: str, function: Callable[[Any], object], text: Any, size: int,
         repeat: int = 2) -> None:  # fmt: skip
    seconds = _timed(function, text, repeat)
    flag = WORST.note(f"{analyser} / {label}", seconds, size)
    per_mib = seconds * 1000 * MIB / max(size, 1)
    print(f"{analyser:22} {label:38} {size / KIB:8.0f} {seconds * 1000:9.1f} {per_mib:8.1f}{flag}")


def _header(title: str) -> None:
    print(f"\n== {title}")
    print(f"{'analyser':22} {'input':38} {'KiB':>8} {'ms':>9} {'ms/MiB':>8}")


# -- secrets ----------------------------------------------------------------------------


def secrets_section() -> None:
    _header("secrets (1 MiB of each shape; then single lines and the scan cap)")
    for name, function in ANALYSERS:
        for label, make in INPUTS.items():
            _row(name, label, function, make(MIB), MIB)
    print(f"\n{'analyser':22} {'single line':38} {'chars':>9} {'ms':>8}")
    for name, function in ANALYSERS:
        for label in ADVERSARIAL_LINES:
            for size in (20_000, 1_000_000):
                seconds = _timed(function, INPUTS[label](size), 2)
                WORST.note(f"{name} / single line {label} {size}", seconds, 0)
                print(f"{name:22} {label:38} {size:9d} {seconds * 1000:8.1f}")
    print(f"\ncap: MAX_SCAN_CHARS = {MAX_SCAN_CHARS} characters")
    for name, function in ANALYSERS:
        for label in ("normal (this repo's code)", "base64-like one line", "key=value pairs"):
            seconds = _timed(function, INPUTS[label](MAX_SCAN_CHARS), repeat=1)
            flag = WORST.note(f"{name} / {label} at the cap", seconds, MAX_SCAN_CHARS)
            print(f"{name:22} {label:38} at the cap: {seconds:6.2f} s{flag}")


# -- config -----------------------------------------------------------------------------


def _config_run(fmt: str) -> Callable[[str], object]:
    from vsh_ai.analysis._config import MISSING, ConfigSyntaxError, config_changes, parse_config

    def run(text: str) -> object:
        try:
            tree = parse_config(text.encode(), fmt)  # type: ignore[arg-type]
            return config_changes(MISSING, tree)  # flattens and lists every key
        except ConfigSyntaxError as error:
            return error  # refused input is an outcome too: it must be refused fast

    return run


def _toml_normal(n: int) -> str:
    return _lines_to(
        n,
        lambda i: (
            f'[service_{i}]\nname = "svc-{i}"\nworkers = {i % 64}\ntimeout_s = 30\n'
            f'hosts = ["a{i}.example.com", "b{i}.example.com"]\ntls = {{ verify = true }}\n\n'
        ),
    )


def _yaml_normal(n: int) -> str:
    unit = (
        "- name: web-{i}\n  image: registry.example.com/web:1.{i}\n  replicas: 3\n"
        "  env:\n    - {{name: LOG_LEVEL, value: info}}\n    - {{name: PORT, value: '80{i}'}}\n"
        "  resources: {{limits: {{cpu: 500m, memory: 256Mi}}}}\n"
    )
    return _lines_to(n, lambda i: unit.format(i=i))


def _lines_to(n: int, make: Callable[[int], str]) -> str:
    parts: list[str] = []
    size = i = 0
    while size < n:
        part = make(i)
        parts.append(part)
        size += len(part)
        i += 1
    return "".join(parts)


def _yaml_aliases(levels: int) -> str:
    """An alias ladder: each level lists the previous one 9 times (9**levels nodes)."""
    lines = ["a0: &a0 [x, y, z, w, v, u, t, s, r]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _yaml_merges(n: int) -> str:
    base = "base: &base {" + ", ".join(f"k{i}: {i}" for i in range(50)) + "}\n"
    return base + _lines_to(n - len(base), lambda i: f"s{i}:\n  <<: *base\n  own: {i}\n")


CONFIG_INPUTS: list[tuple[str, str, Callable[[int], str]]] = [
    ("toml", "normal (tables of services)", _toml_normal),
    ("toml", "many keys (one table)", lambda n: _lines_to(n, lambda i: f"key_{i} = {i}\n")),
    ("toml", "long string value (one line)", lambda n: 'k = "' + "a" * (n - 8) + '"\n'),
    (
        "toml",
        "deep inline tables (nesting 5000)",
        lambda n: "a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n",
    ),
    ("toml", "deep arrays (nesting 100000)", lambda n: "a = " + "[" * 100_000 + "]" * 100_000),
    ("toml", "long dotted keys", lambda n: _lines_to(n, lambda i: "a." * 200 + f"k{i} = 1\n")),
    ("toml", "arrays of tables", lambda n: _lines_to(n, lambda i: f"[[up]]\nweight = {i}\n")),
    (
        "json",
        "normal (pretty, nested)",
        lambda n: (
            "["
            + ",\n".join(
                json.dumps(
                    {
                        "name": f"svc{i}",
                        "port": 8000 + i,
                        "tls": {"verify": True, "ciphers": ["a", "b"]},
                    },
                    indent=2,
                )
                for i in range(n // 110)
            )
            + "]"
        ),
    ),
    (
        "json",
        "many keys (one object)",
        lambda n: "{" + ",".join(f'"k{i}": {i}' for i in range(n // 12)) + "}",
    ),
    ("json", "long string (one line)", lambda n: '{"k": "' + "a" * (n - 10) + '"}'),
    ("json", "deep nesting (100000)", lambda n: "[" * 100_000 + "]" * 100_000),
    ("json", "deep objects (190 levels, wide)", lambda n: _deep_json(n)),
    ("yaml", "normal (k8s-like list)", _yaml_normal),
    ("yaml", "many keys (one mapping)", lambda n: _lines_to(n, lambda i: f"key_{i}: {i}\n")),
    ("yaml", "long plain scalar (one line)", lambda n: "k: " + "a" * (n - 4) + "\n"),
    ("yaml", "deep flow nesting (5000)", lambda n: "a: " + "[" * 5000 + "]" * 5000 + "\n"),
    ("yaml", "alias ladder (9^5 nodes, parsed)", lambda n: _yaml_aliases(5)),
    ("yaml", "alias bomb (9^9 nodes, refused)", lambda n: _yaml_aliases(9)),
    ("yaml", "merge keys (<<: *base many times)", _yaml_merges),
    (
        "ini",
        "normal (sections)",
        lambda n: _lines_to(n, lambda i: f"[s{i}]\nhost = h{i}\nport = 80\ndebug = false\n"),
    ),
    (
        "ini",
        "many options (one section)",
        lambda n: "[s]\n" + _lines_to(n, lambda i: f"opt_{i} = {i}\n"),
    ),
    ("ini", "long value (one line)", lambda n: "[s]\nk = " + "a" * (n - 10) + "\n"),
    ("env", "normal (KEY=value)", lambda n: _lines_to(n, lambda i: f"export APP_{i}=v{i}\n")),
    ("env", "escaped double quotes", lambda n: 'K="' + "\\\\\\n" * (n // 4) + '"\n'),
    ("env", "unterminated quote (one line)", lambda n: 'K="' + "a" * (n - 3)),
    ("properties", "normal (a.b=c)", lambda n: _lines_to(n, lambda i: f"app.svc{i}.port={i}\n")),
    ("properties", "4000 continuation lines (16 KiB)", lambda n: "k=" + "a\\\n " * 4000 + "\n"),
    ("properties", "unicode escapes", lambda n: "k=" + "\\u0041" * (n // 6) + "\n"),
]


def _deep_json(n: int) -> str:
    inner: Any = {"leaf": 1}
    for level in range(190):
        inner = {f"k{level}": inner, "x": level}
    one = json.dumps(inner)
    return "[" + ",".join([one] * max(1, n // len(one))) + "]"


def config_section() -> None:
    _header(f"config: parse_config + flatten + config_changes ({SIZE // KIB} KiB each)")
    for fmt, label, make in CONFIG_INPUTS:
        text = make(SIZE)
        _row(f"config.{fmt}", label, _config_run(fmt), text, len(text.encode()))


# -- dependencies -------------------------------------------------------------------------


def _deps_run(path: str) -> Callable[[str], object]:
    from vsh_ai.analysis._deps import DependencySyntaxError, compare_manifests
    from vsh_ai.analysis._deps import parse_dependency_file as parse

    def run(text: str) -> object:
        try:
            before = parse(path, text.encode())
            after = parse(path, text.replace("==", ">=", 1).encode())
            return compare_manifests(before, after)
        except (DependencySyntaxError, ValueError) as error:
            return error

    return run


_HASH = "--hash=sha256:" + "0123456789abcdef" * 4


def _requirement(i: int) -> str:
    return f"package-{i}[extra-a,extra-b]==1.{i % 50}.{i % 7} ; python_version >= '3.9'\n"


def _package_json(n: int, spec: Callable[[int], str]) -> str:
    deps, size, i = {}, 0, 0
    while size < n:
        deps[f"pkg-{i}"] = spec(i)
        size += len(deps[f"pkg-{i}"]) + 12
        i += 1
    return json.dumps({"name": "app", "version": "1.0.0", "dependencies": deps}, indent=2)


def _package_lock(n: int) -> str:
    packages: dict[str, Any] = {"": {"name": "app", "dependencies": {}}}
    i = 0
    while len(packages) * 230 < n:
        packages[f"node_modules/pkg-{i}"] = {
            "version": f"1.{i % 50}.0",
            "resolved": f"https://registry.npmjs.org/pkg-{i}/-/pkg-{i}-1.{i % 50}.0.tgz",
            "integrity": "sha512-" + "A" * 86 + "==",
        }
        packages[""]["dependencies"][f"pkg-{i}"] = f"^1.{i % 50}.0"
        i += 1
    return json.dumps({"name": "app", "lockfileVersion": 3, "packages": packages}, indent=2)


DEPS_INPUTS: list[tuple[str, str, Callable[[int], str]]] = [
    ("requirements.txt", "normal (extras, markers, pins)", lambda n: _lines_to(n, _requirement)),
    (
        "requirements.txt",
        "huge (short pins, 100k lines)",
        lambda n: _lines_to(n, lambda i: f"p{i}==1.0\n"),
    ),
    (
        "requirements.txt",
        "hashes (3 per requirement)",
        lambda n: _lines_to(
            n, lambda i: f"p{i}==1.{i % 9} \\\n    " + " \\\n    ".join([_HASH] * 3) + "\n"
        ),
    ),
    (
        "requirements.txt",
        "one line, 10000 hashes",
        lambda n: "p==1.0 " + " ".join([_HASH] * min(10_000, n // 80)) + "\n",
    ),
    (
        "requirements.txt",
        "continuations (one requirement)",
        lambda n: "p" + "\\\n" * (n // 2) + "==1.0\n",
    ),
    (
        "requirements.txt",
        "distinct markers (every line)",
        lambda n: _lines_to(
            n,
            lambda i: f"p{i}==1.0 ; python_version < '3.{i % 20}' and platform_machine != 'm{i}'\n",
        ),
    ),
    (
        "requirements.txt",
        "nested marker parentheses",
        lambda n: _lines_to(
            n, lambda i: f"p{i}==1.0 ; " + "(" * 40 + "python_version > '3'" + ")" * 40 + "\n"
        ),
    ),
    (
        "requirements.txt",
        "long quoted option line",
        lambda n: "--index-url '" + "a" * (n - 20) + "'\n",
    ),
    (
        "package.json",
        "normal (caret ranges)",
        lambda n: _package_json(n, lambda i: f"^{i % 20}.{i % 9}.0"),
    ),
    (
        "package.json",
        "long || ranges (250 chars)",
        lambda n: _package_json(n, lambda i: " || ".join(f"{j}.x" for j in range(40))[:250]),
    ),
    (
        "package.json",
        "hyphen and x-ranges",
        lambda n: _package_json(n, lambda i: f"1.{i % 9}.x - 2.x || >=3.0.0-rc.{i} <3.1"),
    ),
    ("package-lock.json", "normal (v3 lock)", _package_lock),
    (
        "pyproject.toml",
        "normal (project.dependencies)",
        lambda n: (
            "[project]\nname = 'a'\n"
            "dependencies = [\n"
            + _lines_to(n - 60, lambda i: f"  'p{i}[x]>=1.{i % 9},<2',\n")
            + "]\n"
        ),
    ),
]


def dependencies_section() -> None:
    _header(f"dependencies: parse both sides and compare (about {SIZE // KIB} KiB each)")
    for path, label, make in DEPS_INPUTS:
        text = make(SIZE)
        _row(f"deps.{path}", label, _deps_run(path), text, len(text.encode()))


# -- python ------------------------------------------------------------------------------


def _python_runs() -> tuple[Callable[[str], object], Callable[[str], object]]:
    from vsh_ai.analysis._python import code_changes

    def new_module(text: str) -> object:
        return code_changes(None, text)

    def edit(text: str) -> object:
        lines = text.splitlines()
        edited = [line + "  # edited" if i % 10 == 3 else line for i, line in enumerate(lines)]
        return code_changes(text, "\n".join(edited) + "\n")

    return new_module, edit


def _python_normal(n: int) -> str:
    source = "\n".join(
        p.read_text()
        for p in sorted((ROOT / "vsh_ai").rglob("*.py"))
        if "from __future__" in p.read_text()
    )
    lines, size = [], 0
    for line in source.splitlines():
        if size + len(line) + 1 > n:
            break
        if line.startswith("from __future__"):
            continue
        lines.append(line)
        size += len(line) + 1
    # drop a trailing partial block: keep up to the last top-level statement
    text = "\n".join(lines)
    cut = text.rfind("\ndef ")
    return text[:cut] + "\n" if cut > 0 else text + "\n"


PY_INPUTS: list[tuple[str, Callable[[int], str]]] = [
    ("normal (this repo's modules)", _python_normal),
    (
        "nested parentheses (190 deep)",
        lambda n: _lines_to(n, lambda i: f"x{i} = " + "(" * 190 + "1" + ")" * 190 + "\n"),
    ),
    (
        "nested calls f(f(f(...))) 90 deep",
        lambda n: _lines_to(n, lambda i: f"x{i} = " + "f(" * 90 + "1" + ")" * 90 + "\n"),
    ),
    ("long operator chain (one line)", lambda n: "x = " + "+".join(["a"] * (n // 2 - 4)) + "\n"),
    ("long attribute chain (one line)", lambda n: "x = a" + ".b" * (n // 2 - 4) + "\n"),
    (
        "many calls via aliases",
        lambda n: (
            "from subprocess import run as r\nimport os as o\n"
            + _lines_to(n - 60, lambda i: f"r(['x{i}'])\no.system('y')\n")
        ),
    ),
    (
        "many imports and aliases",
        lambda n: _lines_to(n, lambda i: f"from m{i} import a as b{i}\nb{i}()\n"),
    ),
    ("many tiny functions", lambda n: _lines_to(n, lambda i: f"def f{i}(x):\n    return x\n")),
    (
        "deeply nested blocks (90 levels)",
        lambda n: _lines_to(
            n, lambda i: "".join(" " * d + f"if x{d}:\n" for d in range(90)) + " " * 90 + "pass\n"
        ),
    ),
    ("one long string literal", lambda n: "x = '" + "a" * (n - 8) + "'\n"),
    ("commented-out module", lambda n: _lines_to(n, lambda i: f"# x{i} = call({i})\n")),
]


PY_EDITS = ("normal (this repo's modules)", "many calls via aliases", "many tiny functions")


def python_section() -> None:
    from vsh_ai.analysis._python import MAX_ANALYSED_BYTES

    size = MAX_ANALYSED_BYTES - 64
    _header(f"python: code_changes, inputs at the {MAX_ANALYSED_BYTES // KIB} KiB cap")
    new_module, edit = _python_runs()
    for label, make in PY_INPUTS:
        text = make(size)
        length = len(text.encode())
        _row("python.new_module", label, new_module, text, length)
        if label in PY_EDITS:
            _row("python.edit", label, edit, text, length)


# -- globs ------------------------------------------------------------------------------

PROTECTED = (
    "**/.env",
    "**/.env.*",
    "**/*.env",
    "**/.envrc",
    "**/id_{rsa,dsa,ecdsa,ed25519}*",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/*credentials*",
    "**/*service-account*.json",
    "**/.netrc",
    "**/.npmrc",
    "**/.pypirc",
    "**/.ssh/**",
    "**/.pgpass",
    "**/*pgpass*",
    "**/.my.cnf",
    "**/.git-credentials",
    "**/.docker/config.json",
    "**/.kube/config",
    "**/*.keystore",
    "**/*.jks",
    "**/.htpasswd",
    "**/*.kdbx",
    "**/.aws/**",
    "**/secrets/**",
)
STARRY = ("**/*a*a*a*b*", "**/a/**/a/**/a/**/b/**", "src/**/*.{py,pyi,pyx,c,h,js,ts}")


def _globs_run(patterns: tuple[str, ...], ignore_case: bool) -> Callable[[list[str]], object]:
    from vsh_ai.analysis._globs import fold, matching

    def run(paths: list[str]) -> object:
        fold.cache_clear()
        return [matching(patterns, path, ignore_case=ignore_case) for path in paths]

    return run


def _paths(n: int, make: Callable[[int], str]) -> list[str]:
    out: list[str] = []
    size = 0
    while size < n:
        out.append(make(len(out)))
        size += len(out[-1]) + 1
    return out


GLOB_INPUTS: list[tuple[str, tuple[str, ...], Callable[[int], list[str]]]] = [
    (
        "normal repo paths",
        PROTECTED,
        lambda n: _paths(
            n, lambda i: f"src/pkg{i % 40}/mod_{i}.py" if i % 3 else f"docs/guide/part{i}.md"
        ),
    ),
    (
        "deep paths (255-char names, 4 KiB)",
        PROTECTED,
        lambda n: _paths(n, lambda i: "/".join(["a" * 254 + str(i % 10)] * 16)),
    ),
    (
        "near-miss names (*.pem.bak)",
        PROTECTED,
        lambda n: _paths(n, lambda i: f"keys/SERVER{i}.PEM.bak"),
    ),
]


def globs_section() -> None:
    _header(f"globs: matching() of {SIZE // KIB} KiB of paths (ignore_case for protected sets)")
    for label, patterns, make in GLOB_INPUTS:
        paths = make(SIZE)
        size = sum(len(p) + 1 for p in paths)
        _row("globs.matching", label, _globs_run(patterns, patterns is PROTECTED), paths, size)
    one = "/".join(["a" * 255] * 16)
    _row(
        "globs.matching",
        "one 4 KiB path, star-heavy globs",
        _globs_run(STARRY, True),
        [one],
        len(one),
    )
    for depth in (50, 100, 200):  # several '**': the pre-filter backtracks as depth**4
        deep = "/".join(["a"] * depth) + "/c"
        _row("globs.matching", f"{depth}-segment a/a/.. path vs {STARRY[1]}",
             _globs_run(STARRY[1:2], False), [deep], len(deep))  # fmt: skip
    for stars in (3, 4, 5):  # the pre-filter regex backtracks: time grows as name**stars
        glob = "**/" + "*a" * (stars - 1) + "*b*"
        name = "x/" + "a" * 255
        _row(
            "globs.matching",
            f"255-char name vs {glob}",
            _globs_run((glob,), False),
            [name],
            len(name),
        )


# -- net changes and provenance -------------------------------------------------------------


def _destructive_run(pair: tuple[str, str]) -> object:
    return _changes.destructive_edit(*pair)


def _code_lines(n: int) -> str:
    return _sized(_normal_text(), n)


# (label, size, make): difflib pairing is superlinear on repeated lines, so the
# pathological pairs run small (today 64 KiB of "few distinct lines" takes minutes).
CHANGE_INPUTS: list[tuple[str, int, Callable[[int], tuple[str, str]]]] = [
    (
        "normal code, every 20th line edited",
        64 * KIB,
        lambda n: (
            t := _code_lines(n),
            "\n".join(line + " x" if i % 20 == 0 else line for i, line in enumerate(t.split("\n"))),
        ),
    ),
    (
        "every line edited",
        SIZE,
        lambda n: (t := _code_lines(n), "\n".join(line + " x" for line in t.split("\n"))),
    ),
    (
        "every line commented out",
        SIZE,
        lambda n: (t := _code_lines(n), "\n".join("# " + line for line in t.split("\n"))),
    ),
    (
        "repeated equal lines, shifted",
        SIZE,
        lambda n: ("a = 1\n" * (n // 6), "b = 2\n" + "a = 1\n" * (n // 6 - 1)),
    ),
    (
        "two alternating lines, interleaved",
        8 * KIB,
        lambda n: ("a\nb\n" * (n // 4), "b\na\n" * (n // 4)),
    ),
    (
        "few distinct lines, reordered",
        8 * KIB,
        lambda n: (
            "".join(f"v{i % 50}\n" for i in range(n // 4)),
            "".join(f"v{(i * 7) % 50}\n" for i in range(n // 4)),
        ),
    ),
    ("unclosed block comments", SIZE, lambda n: ("x = 1\n" * (n // 6), "/* x = 1\n" * (n // 9))),
]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _evidence(files: dict[str, str], code: str) -> Any:
    import anyio
    import vsh

    from vsh_ai._simulate import simulate

    async def build() -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in files.items():
                _write(Path(tmp, name), text)
            budget = vsh.ExecutionBudget(max_duration_ms=120_000, max_os_calls=200_000)
            try:
                result = await simulate(tmp, code, policy="balanced", budget=budget)
            except vsh.VshExecutionError as error:
                return str(error).strip().splitlines()[-1]
            return result.evidence if result.evidence is not None else result.deny_reason

    return anyio.run(build)


def _captured(evidence: Any) -> int:
    return sum(len(evidence.blob_bytes(c.blob) or b"") for c in evidence.contents)


def _evidence_cases() -> list[tuple[str, Any]]:
    text = _code_lines(10 * KIB)
    edits = {f"src/m{i:03d}.py": text for i in range(100)}
    many = {f"data/d{j}/f{i:03d}.txt": f"row {i}\n" * 20 for j in range(2) for i in range(250)}
    many["out/.keep"] = ""
    many.update({f"keep/k{i:04d}.txt": "kept\n" for i in range(2000)})  # under the delete ratio
    return [
        (
            "100 files of 10 KiB edited",
            _evidence(
                edits,
                "for i in range(100):\n    p = f'/workspace/src/m{i:03d}.py'\n"
                "    vsh_write(p, vsh_read(p).replace('def ', 'def  '))",
            ),
        ),
        (
            "dir of 500 files renamed 20x",
            _evidence(
                many,
                "for k in range(20):\n"
                "    vsh_move('/workspace/data' if k == 0 else f'/workspace/m{k - 1}',"
                " f'/workspace/m{k}')\n",
            ),
        ),
        (
            "500 reads, then 500 writes",
            _evidence(
                many,
                "s = [vsh_read(f'/workspace/data/d0/f{i:03d}.txt') for i in range(250)]\n"
                "s += [vsh_read(f'/workspace/data/d1/f{i:03d}.txt') for i in range(250)]\n"
                "for i in range(500):\n    vsh_write(f'/workspace/out/o{i:03d}.txt', s[i])\n",
            ),
        ),
        (
            "500 copies and 500 deletes",
            _evidence(
                many,
                "for j in range(2):\n    for i in range(250):\n"
                "        p = f'/workspace/data/d{j}/f{i:03d}.txt'\n"
                "        vsh_copy(p, f'/workspace/c{j}_{i:03d}.txt')\n        vsh_remove(p)\n",
            ),
        ),
    ]


def changes_section() -> None:
    _header("changes: destructive_edit on one file pair (KiB: both sides)")
    for label, size, make in CHANGE_INPUTS:
        pair = make(size)
        size = len(pair[0].encode()) + len(pair[1].encode())
        _row("changes.destructive", label, _destructive_run, pair, size)
    _evidence_section()


_EVIDENCE: list[tuple[str, Any]] = []


def _evidence_section() -> None:
    from vsh_ai.analysis._changes import net_changes
    from vsh_ai.analysis._provenance import derived_paths, unshared_paths

    if not _EVIDENCE:
        _EVIDENCE.extend(_evidence_cases())
    _header("changes and provenance on real VSH evidence (size: captured content)")

    def unshared(evidence: Any) -> object:
        return unshared_paths(evidence, lambda path: not path.startswith("data/d0"))

    for label, evidence in _EVIDENCE:
        if isinstance(evidence, str):
            print(f"{'(skipped)':22} {label:38} VSH denied it: {evidence}")
            continue
        size = max(_captured(evidence), 1)
        label = f"{label} ({len(evidence.effects)} effects)"
        for name, function in (
            ("changes.net_changes", net_changes),
            ("provenance.unshared", unshared),
            ("provenance.derived", derived_paths),
        ):
            _row(name, label, function, evidence, size)


SECTIONS: dict[str, Callable[[], None]] = {
    "secrets": secrets_section,
    "config": config_section,
    "dependencies": dependencies_section,
    "python": python_section,
    "globs": globs_section,
    "changes": changes_section,
    "provenance": _evidence_section,
}


def main(selected: list[str]) -> None:
    unknown = [name for name in selected if name not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    names = selected or [name for name in SECTIONS if name != "provenance"]  # in changes
    began = time.perf_counter()
    print("CPU ms of this process, best of 2 (caches cleared before each run);")
    print("ms/MiB: that time scaled to one MiB of input (under 8 KiB not flagged: fixed costs).")
    for name in names:
        SECTIONS[name]()
    print("\n== summary (targets: 100 ms per MiB, 1 s per input)")
    worst, where = WORST.per_mib
    print(f"worst per MiB (inputs of 8 KiB or more): {worst:.1f} ms  {where}")
    print(f"worst single input: {WORST.one_input[0]:.1f} ms  {WORST.one_input[1]}")
    print(f"over a target: {len(WORST.rows)}")
    for row in WORST.rows:
        print(f"  {row}")
    print(f"(whole run: {time.perf_counter() - began:.0f} s wall)")


if __name__ == "__main__":
    main(sys.argv[1:])
