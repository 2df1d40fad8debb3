"""How long does each analyser take per MiB, on normal and on adversarial input?

Prints one table row per (analyser, input): CPU milliseconds per MiB (best of a few runs),
plus the worst single-line time (one 20,000- and one 1,000,000-character line of each
adversarial shape) and the time for input at the analyser's scan cap.
Targets (issue 9): no input over 100 ms per MiB; nothing within the cap over 1 s.

    .venv/bin/python benchmarks/analysis.py            # every analyser
    .venv/bin/python benchmarks/analysis.py secrets    # only the named ones

To add an analyser, append one ``(name, callable taking the text)`` to ANALYSERS.
"""

from __future__ import annotations

import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

from vsh_ai.analysis._secrets import MAX_SCAN_CHARS, find_secrets, redact_text

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20

# (analyser name, callable): one line per analyser.
ANALYSERS: list[tuple[str, Callable[[str], object]]] = [
    ("secrets.find_secrets", find_secrets),
    ("secrets.redact_text", redact_text),
    ("dependencies.parse", __import__("vsh_ai.analysis._deps", fromlist=["_"]).benchmark_text),
    ("python.code_changes", __import__("vsh_ai.analysis._python", fromlist=["_"]).benchmark_text),
]


def _sized(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _random(alphabet: str, size: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choices(alphabet, k=size))


def _normal_text() -> str:
    sources = sorted((ROOT / "vsh_ai").rglob("*.py")) + sorted((ROOT / "judges").glob("*"))
    return "\n".join(p.read_text(errors="replace") for p in sources if p.is_file())


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


def _timed(function: Callable[[str], object], text: str, repeat: int = 3) -> float:
    """Best CPU seconds of this process over ``repeat`` runs.

    CPU time, not wall time: on a shared, loaded machine wall time mostly measures the
    other processes; CPU time is what the analysis itself costs.
    """
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function(text)
        best = min(best, time.process_time() - start)
    return best


def main(selected: list[str]) -> None:
    analysers = [(n, f) for n, f in ANALYSERS if not selected or n.split(".")[0] in selected]
    print(f"{'analyser':24} {'input':28} {'ms/MiB':>8}")
    worst_per_mib = 0.0
    for name, function in analysers:
        for label, make in INPUTS.items():
            per_mib = _timed(function, make(MIB)) * 1000
            worst_per_mib = max(worst_per_mib, per_mib)
            flag = "  OVER 100" if per_mib > 100 else ""
            print(f"{name:24} {label:28} {per_mib:8.1f}{flag}")
    print()
    print(f"{'analyser':24} {'single line':28} {'chars':>9} {'ms':>8}")
    worst_line = 0.0
    for name, function in analysers:
        for label in ADVERSARIAL_LINES:
            for size in (20_000, 1_000_000):
                ms = _timed(function, INPUTS[label](size)) * 1000
                worst_line = max(worst_line, ms)
                print(f"{name:24} {label:28} {size:9d} {ms:8.1f}")
    print()
    print(f"cap: MAX_SCAN_CHARS = {MAX_SCAN_CHARS} characters")
    worst_cap = 0.0
    for name, function in analysers:
        for label in ("normal (this repo's code)", "base64-like one line", "key=value pairs"):
            seconds = _timed(function, INPUTS[label](MAX_SCAN_CHARS), repeat=1)
            worst_cap = max(worst_cap, seconds)
            flag = "  OVER 1 s" if seconds > 1 else ""
            print(f"{name:24} {label:28} at the cap: {seconds:6.2f} s{flag}")
    print()
    print(
        f"worst: {worst_per_mib:.1f} ms/MiB; worst single line {worst_line:.1f} ms; "
        f"worst at the cap {worst_cap:.2f} s"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
