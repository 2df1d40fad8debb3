"""Where secret bytes a program read went: back into their own file only, or elsewhere.

A program that read secret-bearing content (a config file with a credential a few lines
from the timeout it tunes, a module holding the hard-coded key it removes) is *contained*
when the evidence proves the secret's bytes went nowhere but back into the file they came
from, and nowhere anyone sees:

- the evidence is complete (effects neither missing nor truncated, every written version
  resolvable): otherwise nothing can be traced;
- no output: no stdout, stderr or output bytes, and a result no larger than a scalar
  (VSH counts a None, bool, int or float result as :data:`SCALAR_RESULT_BYTES`);
- the intent holds no secret (it is shown to reviewers and logged);
- after the first secret read, the program wrote, created, deleted, renamed, copied or
  changed the mode of no path but the file it read (each later write may carry the
  read bytes: the provenance rule of :mod:`._provenance`, by program order), and never
  renamed or copied the file it read;
- in that file, each secret still there is on a line the change left unchanged (or, in a
  config file, under the same key with the same value), and the lines the change adds
  hold no copy of a secret it read (verbatim, reversed, as character codes, in pieces,
  hex, base64 or ROT13) nor any other opaque value
  (:func:`vsh_ai.analysis._tokens.opaque_line`): a fix removes the value or replaces it
  with a placeholder or an environment lookup.

One kind of other file is contained too: a *documentation or example file* written after
the read (:func:`documented`): a created or modified regular, non-executable file named as
an example (``settings.example.toml``, ``app.sample.yaml``, ``example.env.txt``) or under a
``docs/`` folder (or a README), and the ``docs`` folders made to hold it, when its name and
its new text hold no copy of a secret read (any spelling above), no opaque value and
nothing the secret detector finds (names and placeholders only). A docs file counts only
when the change also took every read secret out of its file (the remediation it
documents); an example file, which mirrors the settings' names by design, needs no such
change.

Anything else is a *leak*: ``copy`` when the written bytes provably hold the secret (a
true statement a rule can reject on), ``maybe`` when they may (a review).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any, Literal

from .._evidence import Evidence, EvidenceGap
from ._config import ConfigSyntaxError, flatten, parse_config, typed_equal
from ._decode import compile_re2, decode_base64
from ._memo import analysis_of
from ._secrets import UNSCANNED, find_secrets
from ._tokens import opaque_line

__all__ = ("SCALAR_RESULT_BYTES", "Leak", "SecretFlow", "documented", "secret_flow")

SCALAR_RESULT_BYTES = 72
"""``result_bytes`` VSH 0.6 reports for a None, bool, int or float result (measured; a
string, bytes or container result is larger). A test pins it on real evidence."""

_READS = frozenset(("metadata_read", "directory_read", "content_read"))
_WINDOW = 12  # characters of a secret a copy must hold to count as one
_MIN_SECRET = 8  # shorter findings are not matched as copies (too many false hits)
_VALUES = 64  # secret values per evidence matched as copies (bounded work)
_DECODED = 2048  # encoded tokens decoded per text (beyond: the opaque-value check decides)
_NUMBERS = re.compile(r"(?<![\w.])(?:0x[0-9A-Fa-f]{1,2}|\d{1,3})(?![\w.])")
_QUOTED = re.compile(r"\"([^\"\n]*)\"|'([^'\n]*)'|`([^`\n]*)`")
_RUNS = re.compile(r"[A-Za-z0-9+/=_\-]{16,}")
_HEX = re.compile(r"(?:[0-9A-Fa-f]{2}){8,}")
_COMMENT = re.compile(r"^\s*(?:#|//|--|;|/\*|\*|<!--|%|rem\b)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Leak:
    """One way the read secret may have left its file: ``copy`` (provably) or ``maybe``."""

    kind: Literal["copy", "maybe"]
    path: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class SecretFlow:
    """The secret reads of one evidence and where their bytes may have gone."""

    reads: tuple[str, ...]
    """Paths whose content reads returned bytes holding secrets, in program order."""
    leaks: tuple[Leak, ...]
    """Empty when the reads are contained (see the module docs)."""

    @property
    def contained(self) -> bool:
        return not self.leaks


def secret_flow(evidence: Evidence) -> SecretFlow:
    """The :class:`SecretFlow` of ``evidence``, computed once (its analysis memo)."""
    return analysis_of(evidence).remember(("secret_flow",), lambda: _flow(evidence))


def _flow(evidence: Evidence) -> SecretFlow:
    first: dict[str, int] = {}  # secret-bearing read path -> sequence of its first read
    values: dict[str, dict[str, None]] = {}  # path -> secret texts its reads returned
    verdicts: dict[str, tuple[str, ...] | None] = {}  # blob -> secret texts (None: none)
    for effect in sorted(evidence.effects, key=lambda e: e.sequence):
        blob = effect.observed_content
        if effect.operation != "content_read" or not blob:
            continue
        if blob not in verdicts:
            verdicts[blob] = _secrets_in(evidence.blob_bytes(blob))
        found = verdicts[blob]
        if found is None:
            continue
        for path in effect.paths:
            first.setdefault(path, effect.sequence)
            values.setdefault(path, {}).update(dict.fromkeys(found))
    if not first:
        return SecretFlow((), ())
    reads = tuple(first)
    leaks: list[Leak] = []
    if not evidence.complete or evidence.evidence_truncated or not evidence.evidence_complete:
        leaks.append(
            Leak("maybe", None, "the evidence is incomplete, so where they went cannot be traced")
        )
        return SecretFlow(reads, tuple(leaks))
    leaks.extend(_outputs(evidence))
    secrets = [v for found in values.values() for v in found][:_VALUES]
    intent = evidence.intent or ""
    if intent and (find_secrets(intent) or any(v in intent for v in secrets)):
        leaks.append(
            Leak(
                "maybe",
                None,
                "the intent holds a secret (intents are logged and shown to reviewers)",
            )
        )
    remediated = all(_removed(evidence, path, list(values[path])) for path in reads)
    leaks.extend(_writes(evidence, first, [v for v in secrets if v], remediated))
    for path in reads:
        if path in evidence.written_paths and not any(leak.path == path for leak in leaks):
            leaks.extend(_own_file(evidence, path, list(values[path])[:_VALUES]))
    return SecretFlow(reads, tuple(leaks))


def _secrets_in(data: bytes | None) -> tuple[str, ...] | None:
    """The secret texts in ``data`` (None when it holds none); uncaptured bytes: none here
    (the completeness rule reports them)."""
    if not data:
        return None
    text = data.decode("utf-8", errors="replace")
    found = find_secrets(text)
    if not found:
        return None
    return tuple(text[f.start : f.end] if f.kind != UNSCANNED else "" for f in found)


def _outputs(evidence: Evidence) -> list[Leak]:
    out: list[Leak] = []
    execution, counters = evidence.execution, evidence.counters
    printed = max(execution.stdout_bytes + execution.stderr_bytes, counters.output_bytes)
    if printed:
        out.append(Leak("maybe", None, "the program printed output, which may carry them"))
    if counters.result_bytes > SCALAR_RESULT_BYTES:
        out.append(Leak("maybe", None, "the program returned a value that may carry them"))
    return out


def _writes(
    evidence: Evidence, first: dict[str, int], secrets: list[str], remediated: bool
) -> list[Leak]:
    """Writes after a secret read to any other path, and renames or copies of a read path
    (docs and example files that provably hold none of them aside: :func:`documented`)."""
    start = min(first.values())
    flagged: dict[str, None] = {}
    renamed: set[str] = set()
    for effect in evidence.effects:
        if effect.operation in _READS:
            continue
        if effect.operation in ("rename", "copy") and any(p in first for p in effect.paths):
            flagged.update(dict.fromkeys(effect.paths))  # the read bytes changed names
            renamed.update(effect.paths)
        elif effect.sequence > start and not _only_own(effect.paths, first, effect.sequence):
            flagged.update(dict.fromkeys(effect.paths))
    # A change with no write effect cannot be placed in program order: it may follow a read.
    written = {p for e in evidence.effects if e.operation not in _READS for p in e.paths}
    for change in evidence.changes:
        if change.path not in written:
            flagged.setdefault(change.path, None)
    out: list[Leak] = []
    for path in flagged:
        copy = _copy_in(evidence, path, secrets)
        if copy is not None:
            out.append(Leak("copy", path, f"{path} {copy}"))
        elif path in renamed or not documented(evidence, path, secrets, remediated=remediated):
            out.append(
                Leak(
                    "maybe",
                    path,
                    f"{path} was written after the read, so its bytes or name may carry them",
                )
            )
    return out


_DOCS = re.compile(r"(?:.+/)?docs(?:/[^/]+)*")
_README = re.compile(r"(?:.+/)?README(?:\.(?:md|rst|txt))?")
_EXAMPLE = re.compile(
    r"(?:.+/)?[^/]*[._-](?:example|sample)(?:\.[A-Za-z0-9]+)?|(?:.+/)?example\.[^/]+"
)


def documented(evidence: Evidence, path: str, secrets: list[str], *, remediated: bool) -> bool:
    """Whether ``path``, written after a secret read, is a docs or example file (or a docs
    folder) whose name and new text provably hold none of ``secrets`` nor any other value."""
    change = evidence.change(path)
    if change is None or change.after is None or change.kind not in ("create", "modify"):
        return False
    if (change.before is not None and change.before.mode != change.after.mode) or (
        change.after.mode & 0o111 and change.after.kind == "file"
    ):
        return False
    example = _EXAMPLE.fullmatch(path) is not None
    docs = _DOCS.fullmatch(path) is not None or _README.fullmatch(path) is not None
    if not (example or (docs and remediated)):
        return False
    if copied(secrets, path) is not None or find_secrets(path):
        return False  # the name itself may carry them
    if change.after.kind == "directory":
        return change.kind == "create" and _DOCS.fullmatch(path) is not None
    if change.after.kind != "file":
        return False
    try:
        data = evidence.after_bytes(path)
        before = evidence.before_bytes(path) if change.kind == "modify" else b""
    except (EvidenceGap, ValueError):
        return False
    if data is None or before is None:
        return False
    text = data.decode("utf-8", errors="replace")
    known = before.decode("utf-8", errors="replace")
    if copied(secrets, text) is not None or find_secrets(text):
        return False  # the whole file: names and placeholders only
    return opaque_line(evidence, path, data, known=known) is None


def _removed(evidence: Evidence, path: str, secrets: list[str]) -> bool:
    """Whether the change took every secret read from ``path`` out of it (modified, none of
    them left in any spelling)."""
    change = evidence.change(path)
    if change is None or change.kind != "modify" or change.after is None:
        return False
    try:
        data = evidence.after_bytes(path)
    except (EvidenceGap, ValueError):
        return False
    if data is None:
        return False
    text = data.decode("utf-8", errors="replace")
    return bool(secrets) and all(secret and secret not in text for secret in secrets)


def _only_own(paths: tuple[str, ...], first: dict[str, int], sequence: int) -> bool:
    """A write to one secret-read path while every secret read so far was of that path."""
    if len(paths) != 1 or paths[0] not in first:
        return False
    return all(p == paths[0] or first[p] > sequence for p in first)


def _copy_in(evidence: Evidence, path: str, secrets: list[str]) -> str | None:
    """How ``path``'s new lines hold a copy of a secret, or None (not provably)."""
    change = evidence.change(path)
    if change is None or change.after is None:
        return None
    try:
        lines = analysis_of(evidence).new_lines(path)
    except (EvidenceGap, ValueError):
        return None
    if not lines:
        return None
    found = copied(secrets, "\n".join(line for _, line in lines))
    return None if found is None else f"holds the secret {found}"


def _own_file(evidence: Evidence, path: str, secrets: list[str]) -> list[Leak]:
    """The file the secret came from: secrets only on unchanged lines, no copies added."""
    change = evidence.change(path)
    if change is None or change.after is None:
        return []  # unchanged or deleted: the secret went nowhere
    if change.kind != "modify" or (
        change.before is not None and change.before.mode != change.after.mode
    ):
        return [Leak("maybe", path, f"{path} changed kind or mode after the read")]
    memo = analysis_of(evidence)
    try:
        added = memo.new_lines(path)
        data = evidence.after_bytes(path)
    except (EvidenceGap, ValueError):
        added, data = None, None
    if added is None or data is None:
        return [Leak("maybe", path, f"{path} cannot be compared line by line")]
    numbers = {number: line for number, line in added}
    text = memo.text(data)
    out: list[Leak] = []
    kept: set[str] | None = None  # secrets a config file keeps at the same key, same value
    for finding in find_secrets(text):
        number = memo.line_of(data, finding.start)
        if number not in numbers:
            continue  # on an unchanged line: the secret stayed where it was
        line = numbers[number]
        value = text[finding.start : finding.end]
        if value not in secrets:
            continue  # a new secret: no_secrets decides
        if kept is None:
            kept = _kept_in_place(evidence, path, data, secrets)
        if value in kept:
            continue  # a reformatted config line: the same value under the same key
        column = finding.start - (text.rfind("\n", 0, finding.start) + 1)
        if _in_comment(line, column):
            out.append(Leak("copy", path, f"{path} line {number} copies the secret into a comment"))
        else:
            out.append(
                Leak(
                    "maybe",
                    path,
                    f"{path} line {number} still holds the secret on "
                    "a changed line (as a fallback or another value?)",
                )
            )
    if not out:
        lines = "\n".join(line for _, line in added)
        found = copied(secrets, lines)
        if found is not None:
            if kept is None:
                kept = _kept_in_place(evidence, path, data, secrets)
            found = copied([v for v in secrets if v not in kept], lines)
        if found is not None:
            out.append(Leak("copy", path, f"{path} adds the secret {found}"))
    if not out:
        shifted = _whitespace_only(memo, path, added)
        if shifted is not None:
            out.append(
                Leak(
                    "maybe",
                    path,
                    f"{path} line {shifted} changes only whitespace after the "
                    "read (spacing can encode them)",
                )
            )
    if not out:
        before = evidence.before_bytes(path) or b""
        opaque = opaque_line(evidence, path, data, known=before.decode("utf-8", "replace"))
        if opaque is not None:
            out.append(
                Leak(
                    "maybe",
                    path,
                    f"{path} line {opaque} adds an opaque value that may "
                    "encode them (write a placeholder or an environment lookup)",
                )
            )
    return out


def _whitespace_only(memo: Any, path: str, added: tuple[tuple[int, str], ...]) -> int | None:
    """The first added line with trailing whitespace or equal to a removed line but for
    its spacing, or None.

    One shape of respacing is let through: a uniform re-indent (each respaced line keeps
    its text and inner spacing exactly, and its new indent is one function of its old
    one: a whole file dedented by two spaces) and every line of a re-indented indent was
    re-indented (which lines move would be a bit per line). Such a change cannot spell a
    secret; anything else (spacing inside a line, indents that differ between lines of
    one old indent, trailing spaces, some lines of an indent moved) may, and is reported.
    """
    try:
        removed = memo.new_lines(path, removed=True) or ()
    except (EvidenceGap, ValueError):
        removed = ()
    dropped = {" ".join(line.split()) for _, line in removed}
    indents: dict[str, set[str]] = {}  # a removed line's text -> its indents
    for _, line in removed:
        text = line.lstrip()
        indents.setdefault(text, set()).add(line[: len(line) - len(text)])
    mapping: dict[str, str] = {}
    for number, line in added:
        if line != line.rstrip():
            return number
        if not (line.strip() and " ".join(line.split()) in dropped):
            continue
        text = line.lstrip()
        old = indents.get(text)
        if old is None or len(old) != 1:
            return number  # inner spacing changed, or the old indent is not one
        (was,) = old
        now = line[: len(line) - len(text)]
        if mapping.setdefault(was, now) != now:
            return number  # lines of one old indent got different new ones
    if mapping and _indent_counts(removed, mapping) != _indent_counts(
        enumerate(memo.lines(memo.evidence.before_bytes(path))), mapping
    ):
        return added[0][0]  # some lines of a re-indented indent kept it
    return None


def _indent_counts(lines: Any, indents: dict[str, str]) -> dict[str, int]:
    """How many non-blank ``lines`` ((number, text) pairs) have each indent of ``indents``."""
    counts = dict.fromkeys(indents, 0)
    for _, line in lines:
        text = line.lstrip()
        if text and line[: len(line) - len(text)] in counts:
            counts[line[: len(line) - len(text)]] += 1
    return counts


def _kept_in_place(evidence: Evidence, path: str, data: bytes, secrets: list[str]) -> set[str]:
    """Secrets a config file holds under the same key with the same value on both sides
    and no more often than before (rewritten by a serialiser, for instance)."""
    before = evidence.before_bytes(path)
    if before is None:
        return set()
    try:
        old = flatten(parse_config(before, "auto", path))
        new = flatten(parse_config(data, "auto", path))
    except (ConfigSyntaxError, ValueError, RecursionError):
        return set()
    old_text, new_text = before.decode("utf-8", "replace"), data.decode("utf-8", "replace")
    out: set[str] = set()
    for secret in secrets:
        if new_text.count(secret) > old_text.count(secret):
            continue
        holders = [k for k, v in new.items() if isinstance(v, str) and secret in v]
        if holders and all(k in old and typed_equal(old[k], new[k]) for k in holders):
            out.add(secret)
    return out


def _in_comment(line: str, column: int) -> bool:
    prefix = line[:column]
    if _COMMENT.match(prefix):
        return True
    hashes = prefix.find("#")
    if hashes < 0:
        return False
    head = prefix[:hashes]
    return head.count('"') % 2 == 0 and head.count("'") % 2 == 0


def copied(secrets: list[str], text: str) -> str | None:
    """How ``text`` holds (part of) one of ``secrets``: "verbatim", "reversed", "with
    separators", "spelled out", "as character codes", "in pieces", "hex-encoded",
    "base64-encoded", "in ROT13"; or None. Case is ignored.

    A part is :data:`_WINDOW` consecutive characters of a secret (the whole of a shorter
    one) at every half-window step, so any copy of 17 characters or more is found. One
    RE2 scan per spelling: linear in ``text``.
    """
    windows = sorted({window.casefold() for window in _windows(secrets)})
    if not windows or not text:
        return None
    # One RE2 alternation of every window: each candidate is scanned once, in linear time.
    finder = compile_re2("(?i)" + "|".join(re.escape(w) for w in windows))
    for how, candidate in _candidates(text):
        if finder.search(candidate) is not None:  # a copy in other case still gives it away
            return how
    return None


def _windows(secrets: list[str]) -> set[str]:
    out: set[str] = set()
    for secret in secrets:
        secret = secret.strip()
        if len(secret) < _MIN_SECRET:
            continue
        width = min(_WINDOW, len(secret))
        step = max(1, width // 2)  # any copy of width + step - 1 characters holds one
        last = len(secret) - width
        out.update(secret[i : i + width] for i in [*range(0, last + 1, step), last])
    return out


_SEPARATORS = re.compile(r"[\s'\"`,+;|]+")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_WORDS = """
    alpha alfa bravo charlie delta echo foxtrot golf hotel india juliet juliett kilo lima
    mike november oscar papa quebec romeo sierra tango uniform victor whiskey whisky xray
    yankee zulu zero one two three four five six seven eight nine underscore dash hyphen dot
"""
_SPELLING = dict(zip(_WORDS.split(), "aabcdefghijjklmnopqrstuvwwxyz0123456789_--.", strict=True))


def _spelled(text: str) -> str:
    """Single characters and spelling-alphabet words read as the characters they spell."""
    out: list[str] = []
    for token in _TOKEN.findall(text):
        if len(token) == 1:
            out.append(token)
        else:
            out.append(_SPELLING.get(token.lower(), " "))
    return "".join(out)


def _candidates(text: str) -> list[tuple[str, str]]:
    out = [("verbatim", text), ("reversed", text[::-1])]
    joined = _SEPARATORS.sub("", text)
    out += [("with separators", joined), ("reversed with separators", joined[::-1])]
    spelled = _spelled(text)
    if len(spelled.replace(" ", "")) >= _MIN_SECRET:
        out += [("spelled out", spelled), ("spelled out reversed", spelled[::-1])]
    numbers = [int(n, 16) if n.lower().startswith("0x") else int(n) for n in _NUMBERS.findall(text)]
    codes = "".join(chr(n) for n in numbers if 32 <= n < 127)
    if len(codes) >= _MIN_SECRET:
        out += [("as character codes", codes), ("as reversed character codes", codes[::-1])]
    pieces = "".join(next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(text))
    if pieces:
        out += [("in pieces", pieces), ("in reversed pieces", pieces[::-1])]
    decoded: list[str] = []
    for token in _HEX.findall(text)[:_DECODED]:
        try:
            decoded.append(bytes.fromhex(token).decode("utf-8", "replace"))
        except ValueError:
            continue
    if decoded:
        out.append(("hex-encoded", "\n".join(decoded)))
    decoded = []
    for token in _RUNS.findall(text)[:_DECODED]:
        data = decode_base64(token)
        if data is not None:
            decoded.append(data.decode("utf-8", "replace"))
    if decoded:
        out.append(("base64-encoded", "\n".join(decoded)))
    out.append(("in ROT13", codecs.decode(text, "rot13")))
    return out
