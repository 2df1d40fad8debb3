"""Guest error text for the worker model: redacted, and withheld where it may carry data.

A program's exception message is whatever the program put there: possibly bytes it read.
With a judge configured, only what provably comes from the program itself is shown.
"""

from __future__ import annotations

import re

from ._result import redact

__all__ = ("guest_text",)

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt)):", re.M)


# Errors whose text VSH or Monty writes from the program's own names, never from file bytes.
_STRUCTURAL = (
    "SyntaxError",
    "NameError",
    "FileNotFoundError",
    "FileExistsError",
    "IsADirectoryError",
    "NotADirectoryError",
)


_EMBEDDED_EXCEPTION = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:Error|Exception)):")


_BUDGET = re.compile(r"limit exceeded|budget|unsupported Monty external function", re.I)


_FRAME = re.compile(r'^  File "<vsh>", line \d+, in [\w<>.]+$')


_CARETS = re.compile(r"^[\s~^]+$")


_TB_HEADERS = (
    "Traceback (most recent call last):",
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


_WORKSPACE_PATH = re.compile(r"/workspace/[^'\"\n]*")


def _own_paths(line: str, code: str) -> str:
    """``line`` with every /workspace path the program did not spell out withheld."""

    def check(match: re.Match[str]) -> str:
        path = match.group(0).rstrip(" .,:;)")
        return match.group(0) if path in code else "[path withheld]"

    return _WORKSPACE_PATH.sub(check, line)


def guest_text(text: str, stderr: str, code: str, *, withhold: bool) -> str:
    """A guest error for the model: redacted, and without data-bearing text if judged.

    Without a judge the whole text (secrets redacted) is returned. With one, only what
    provably comes from the program itself survives: traceback headers, frame lines, the
    program's own source lines, the exception type, and the message of errors VSH or
    Monty phrase from the program's names (syntax, names, missing paths, budgets) with
    any path the program did not spell out withheld. Everything else (exception
    messages, which may hold bytes the program read, and stderr) is withheld.
    """
    text, stderr = redact(text), redact(stderr)
    if not withhold:
        return f"{text}\n{stderr}" if stderr else text
    source = {line.strip() for line in code.splitlines() if line.strip()}
    kept: list[str] = []
    dropped = 0
    in_message = False
    for index, raw in enumerate(text.splitlines()):
        line = raw
        if index == 0 and ": Traceback (most recent call last):" in line:
            kept.append(line)  # "Monty Runtime failure: Traceback (most recent call last):"
            in_message = False
            continue
        if in_message:  # once a message starts, nothing after it is trusted
            dropped += 1
            continue
        if line in _TB_HEADERS:
            kept.append(line)
            continue
        if _FRAME.match(line) or _CARETS.match(line) or line.strip() in source:
            kept.append(line)
            continue
        header = _EXCEPTION_LINE.match(line) or (
            _EMBEDDED_EXCEPTION.search(line) if index == 0 else None
        )
        if header is not None or index == 0:
            kind = header.group(1).rsplit(".", 1)[-1] if header else ""
            if (header is None or kind in _STRUCTURAL) and _BUDGET.search(line) is None:
                kept.append(_own_paths(line, code) if header or index == 0 else "")
            elif _BUDGET.search(line):
                kept.append(_own_paths(line, code))
            else:
                kept.append(
                    f"{kind}: (message withheld: it may contain bytes the program read, "
                    "which the reviewer has not cleared; make the program's errors explain "
                    "themselves with your own text)"
                )
            in_message = header is not None
            continue
        dropped += 1
    if dropped:
        kept.append(f"({dropped} more line(s) withheld)")
    if stderr:
        kept.append(
            f"(stderr withheld, {len(stderr.encode())} bytes: it may contain bytes the "
            "program read)"
        )
    return "\n".join(kept)
