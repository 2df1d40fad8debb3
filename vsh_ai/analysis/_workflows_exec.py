"""Download-then-execute in GitHub Actions jobs, across steps and within one script.

A job's steps share one runner, so a file fetched in one step (``curl -o f``, ``wget``,
``gh release download``, ``Invoke-WebRequest -OutFile``, ``actions/download-artifact``) and
run in a later one (``bash f``, ``sh ./f``, ``chmod +x f; ./f``, ``python f``, ``source f``)
executes whatever the server sent. Pipes into a shell are caught by the judge's patterns;
this module follows files by name. A checksum or signature check of the file between
download and run is recorded (``verified``), and a file fetched but never run (uploaded,
inspected, checksummed) is no finding at all.

Commands are read with :mod:`shlex` (POSIX rules; a script it cannot split is read word by
word), per line, split at ``&&``, ``||``, ``;`` and ``|``.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ._workflows import Workflow, job_steps, parse_action, run_text

__all__ = ("Execution", "downloads_executed", "executions_added", "script_executions")

_INTERPRETERS = frozenset(
    {
        "bash", "sh", "zsh", "dash", "ksh", "fish", "source", ".", "exec", "python", "python2",
        "python3", "py", "node", "deno", "bun", "perl", "ruby", "php", "pwsh", "powershell",
        "lua", "Rscript", "java", "osascript",
    }
)  # fmt: skip
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "nice", "xargs", "doas"})
_VERIFIERS = re.compile(
    r"(?i)\b(sha(1|224|256|384|512)sum|shasum|md5sum|b2sum|gpg|gpgv|cosign|minisign|"
    r"slsa-verifier|Get-FileHash|certutil|openssl\s+dgst)\b"
)
_TRACKED = 64  # downloaded files followed per job: bounded work on any script
_SEPARATORS = re.compile(r"&&|\|\||;|\|")
_DOWNLOAD_ACTIONS = re.compile(
    r"(?i)^(actions/download-artifact|dawidd6/action-download-artifact)$"
)


@dataclass(frozen=True, slots=True)
class Execution:
    """A downloaded file run by a later command of the same job."""

    job: str
    file: str
    command: str
    verified: bool

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.job, self.file, " ".join(self.command.split()))


def _norm(path: str) -> str:
    path = path.strip().strip("'\"")
    for prefix in ("${{ github.workspace }}/", "${{github.workspace}}/", "$GITHUB_WORKSPACE/",
                   "${GITHUB_WORKSPACE}/", "$PWD/", "${PWD}/"):  # fmt: skip
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return posixpath.normpath(path) if path else path


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def _commands(script: str) -> Iterator[list[str]]:
    for line in script.replace("\\\n", " ").replace("`\n", " ").splitlines():
        for part in _SEPARATORS.split(line):
            words = _words(part)
            while words and (
                ("=" in words[0] and not words[0].startswith("-")) or words[0] in _WRAPPERS
            ):
                words = words[1:]  # FOO=1 sudo env ... : the command itself
            if words:
                yield words


def _url_name(url: str) -> str:
    tail = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    return posixpath.basename(tail)


def _after(words: list[str], *flags: str) -> str | None:
    """The value of the first of ``flags`` (``-o f``, ``-sLo f``, ``-of``, ``--output=f``)."""
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else None
        for flag in flags:
            if word == flag:
                return following
            if flag.startswith("--"):
                if word.startswith(flag + "="):
                    return word[len(flag) + 1 :]
                continue
            letter = flag[1:]
            if len(letter) != 1 or word.startswith("--") or not word.startswith("-"):
                continue
            if word.endswith(letter) and word[1:-1].isalpha():
                return following  # -sLo f: combined short options, the value follows
            if word[1:2] == letter and len(word) > 2:
                return word[2:]  # -of
    return None


def _downloaded(words: list[str], redirect: str | None) -> list[str]:
    """Files a command writes from the network (empty when it downloads nothing)."""
    tool = posixpath.basename(words[0]).lower().removesuffix(".exe")
    urls = [w for w in words[1:] if "://" in w]
    if tool == "curl":
        out = _after(words, "-o", "--output")
        if out is not None:
            return [out]
        if any(
            w in ("-O", "--remote-name", "--remote-name-all")
            or re.fullmatch(r"-[a-zA-Z]*O[a-zA-Z]*", w)
            for w in words[1:]
        ):
            return [_url_name(u) for u in urls]
        return [redirect] if redirect and urls else []
    if tool == "wget":
        out = _after(words, "-O", "--output-document")
        for w in words[1:]:
            combined = re.fullmatch(r"-[a-zA-Z]*O", w)
            if combined and out is None:
                i = words.index(w)
                out = words[i + 1] if i + 1 < len(words) else None
        if out is not None and out != "-":
            return [out]
        if out == "-":
            return [redirect] if redirect else []
        return [_url_name(u) for u in urls]
    if tool in ("invoke-webrequest", "iwr", "invoke-restmethod", "irm", "start-bitstransfer"):
        out = _after(
            [w if not w.startswith("-") else w.lower() for w in words], "-outfile", "-destination"
        )
        return [out] if out else []
    if tool == "aria2c":
        out = _after(words, "-o", "--out")
        return [out] if out else [_url_name(u) for u in urls]
    if tool == "gh" and len(words) > 2 and words[2] == "download":
        out = _after(words, "-O", "--output")
        if out:
            return [out]
        return [p for p in (_after(words, "-p", "--pattern"),) if p] or ["*"]
    if tool == "gh" and redirect and len(words) > 1 and words[1] in ("api", "gist"):
        return [redirect]
    return []


def _redirect(command: str) -> str | None:
    match = re.search(r"(?<![0-9&])>>?\s*([^\s;&|]+)", command)
    return match.group(1) if match else None


def _runs(words: list[str]) -> str | None:
    """The file a command executes (``bash f``, ``./f``, ``source f``), or None."""
    head = words[0]
    if head in _INTERPRETERS or posixpath.basename(head) in _INTERPRETERS:
        args = [w for w in words[1:] if not w.startswith("-")]
        if head in ("python", "python3", "py") and "-m" in words:
            return None
        return args[0] if args else None
    if "/" in head or head.startswith("."):
        return head
    return None


def _same(downloaded: str, run: str) -> bool:
    a, b = _norm(downloaded), _norm(run)
    if not a or not b:
        return False
    if a == b:
        return True
    if "*" in a:  # gh release download -p 'tool-*.sh': a pattern of names
        return re.fullmatch(re.escape(a).replace(r"\*", ".*"), posixpath.basename(b)) is not None
    if posixpath.dirname(a) == "" or posixpath.dirname(b) == "":
        return posixpath.basename(a) == posixpath.basename(b)
    return a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def downloads_executed(workflow: Workflow) -> list[Execution]:
    """Every downloaded file a later command of the same job runs, in order."""
    found: list[Execution] = []
    for jid, job in workflow.jobs.items():
        fetched: dict[str, bool] = {}  # file -> verified since
        for step in job_steps(job):
            action = parse_action(step.get("uses"))
            if action is not None and _DOWNLOAD_ACTIONS.match(f"{action.owner}/{action.repo}"):
                args = step.get("with")
                where = args.get("path") if isinstance(args, Mapping) else None
                if isinstance(where, str) and where.strip() not in ("", "."):
                    fetched[where.strip()] = False
                continue
            _scan(jid, run_text(step), fetched, found)
    return found


def _scan(jid: str, script: str, fetched: dict[str, bool], found: list[Execution]) -> None:
    for line in script.replace("\\\n", " ").splitlines():
        redirect = _redirect(line) if ">" in line else None
        for words in _commands(line):
            for name in _downloaded(words, redirect):
                if name and (name in fetched or len(fetched) < _TRACKED):
                    fetched[name] = False
            if not fetched:
                continue
            text = " ".join(words)
            if _VERIFIERS.search(text):
                for name in fetched:
                    if _mentions(text, name):
                        fetched[name] = True
            target = _runs(words)
            if target is None:
                continue
            for name, verified in fetched.items():
                if _same(name, target):
                    found.append(Execution(jid, name, text[:120], verified))
                    break


def _mentions(text: str, name: str) -> bool:
    base = posixpath.basename(_norm(name))
    return bool(base) and (base in text or "-c" in text.split() or "--check" in text)


def executions_added(before: Workflow | None, after: Workflow) -> list[Execution]:
    """Executions of downloads in ``after`` that ``before`` did not already have."""
    if not after.fetches:
        return []
    found = downloads_executed(after)
    if not found or before is None or not before.fetches:
        return found
    known = {e.key for e in downloads_executed(before)}
    return [e for e in found if e.key not in known]


def script_executions(script: str, *, where: str = "script") -> list[Execution]:
    """Every file ``script`` (a shell script's text) downloads and later runs, in order."""
    found: list[Execution] = []
    _scan(where, script, {}, found)
    return found
