"""Tables of risky Python calls and names of files that tools execute.

:data:`CALL_CATEGORIES` maps each risky fact kind to the module attributes that
produce it (``subprocess.run`` is ``process``); :func:`is_tooling_code` names files
that build, test or CI tools execute; :func:`is_python_source` says what is Python.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal, get_args

__all__ = (
    "CALL_CATEGORIES",
    "FLAGGED_FACTS",
    "FactKind",
    "in_flat_package",
    "is_python_source",
    "is_tooling_code",
)


FactKind = Literal[
    "unparsable",
    "process",
    "eval",
    "dynamic_import",
    "download",
    "deserialise",
    "socket",
    "native",
    "skip",
    "test_hook",
    "collection",
    "assertion_removed",
    "assertion_weakened",
    "definition_removed",
    "definition_added",
    "emptied",
    "commented_out",
    "unreachable",
    "tautology",
    "swallowed",
    "patched",
]
# Everything but additions of plain definitions is worth a human's look by default.
FLAGGED_FACTS: tuple[FactKind, ...] = tuple(
    kind for kind in get_args(FactKind) if kind != "definition_added"
)

_PROCESS = {
    "subprocess": {
        "run",
        "call",
        "check_call",
        "check_output",
        "Popen",
        "getoutput",
        "getstatusoutput",
    },
    "os": {
        "system",
        "popen",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "spawnl",
        "spawnle",
        "spawnlp",
        "spawnlpe",
        "spawnv",
        "spawnve",
        "spawnvp",
        "spawnvpe",
        "posix_spawn",
        "posix_spawnp",
        "startfile",
        "fork",
        "forkpty",
    },
    "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "commands": {"getoutput", "getstatusoutput"},
    "platform": {"popen"},
    "posix": {"system", "popen", "execv", "execve", "posix_spawn", "fork"},
    "nt": {"system", "popen", "execv", "execve", "startfile"},
}
_EVAL = {
    "builtins": {"eval", "exec", "compile", "execfile"},
    "code": {"interact", "InteractiveInterpreter", "InteractiveConsole"},
    "runpy": {"run_path", "run_module"},
}
_DYNAMIC = {
    "builtins": {"__import__"},
    "importlib": {"import_module", "__import__", "reload"},
    "importlib.util": {"spec_from_file_location", "module_from_spec"},
    "imp": {"load_source", "load_module"},
}
_DOWNLOAD = {
    "urllib.request": {
        "urlretrieve",
        "urlopen",
        "Request",
        "build_opener",
        "URLopener",
        "FancyURLopener",
    },
    "urllib": {"urlretrieve", "urlopen"},
    "urllib2": {"urlopen", "Request"},
    "requests": {"get", "post", "put", "patch", "delete", "head", "request", "Session", "session"},
    "httpx": {
        "get",
        "post",
        "put",
        "patch",
        "delete",
        "head",
        "request",
        "stream",
        "Client",
        "AsyncClient",
    },
    "http.client": {"HTTPConnection", "HTTPSConnection"},
    "aiohttp": {"ClientSession", "request"},
    "urllib3": {"PoolManager", "request", "HTTPConnectionPool", "HTTPSConnectionPool"},
    "ftplib": {"FTP", "FTP_TLS"},
    "wget": {"download"},
    "pycurl": {"Curl"},
    "smtplib": {"SMTP", "SMTP_SSL"},
    "telnetlib": {"Telnet"},
    "paramiko": {"SSHClient", "Transport"},
    "xmlrpc.client": {"ServerProxy"},
}
_DESERIALISE = {
    "pickle": {"load", "loads", "Unpickler"},
    "_pickle": {"load", "loads", "Unpickler"},
    "cPickle": {"load", "loads", "Unpickler"},
    "dill": {"load", "loads"},
    "cloudpickle": {"load", "loads"},
    "marshal": {"load", "loads"},
    "shelve": {"open"},
    "yaml": {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"},
    "jsonpickle": {"decode"},
    "joblib": {"load"},
    "torch": {"load"},
    "pandas": {"read_pickle"},
}
_SOCKET = {
    "socket": {"socket", "create_connection", "create_server", "socketpair", "fromfd"},
    "ssl": {"wrap_socket"},
    "asyncio": {"open_connection", "start_server"},
}
_NATIVE = {
    "ctypes": {"CDLL", "PyDLL", "WinDLL", "OleDLL", "cdll.LoadLibrary", "windll.LoadLibrary"},
    "cffi": {"FFI"},
}

CALL_CATEGORIES: dict[FactKind, dict[str, set[str]]] = {
    "process": _PROCESS,
    "eval": _EVAL,
    "dynamic_import": _DYNAMIC,
    "download": _DOWNLOAD,
    "deserialise": _DESERIALISE,
    "socket": _SOCKET,
    "native": _NATIVE,
}
_CATEGORY_OF: dict[str, FactKind] = {
    f"{module}.{attr}": kind
    for kind, table in CALL_CATEGORIES.items()
    for module, attrs in table.items()
    for attr in attrs
}
_SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}
_BUILTINS = {"eval", "exec", "compile", "__import__", "getattr", "execfile", "open"}
_SKIPS = {
    "pytest.mark.skip",
    "pytest.mark.skipif",
    "pytest.mark.xfail",
    "pytest.skip",
    "pytest.xfail",
    "pytest.importorskip",
    "pytest.skip.Exception",
    "unittest.skip",
    "unittest.skipIf",
    "unittest.skipUnless",
    "unittest.expectedFailure",
    "unittest.SkipTest",
    "unittest.case.skip",
    "unittest.case.skipIf",
    "unittest.case.skipUnless",
    "unittest.case.SkipTest",
    "_pytest.outcomes.skip",
    "nose.SkipTest",
    "nose.tools.nottest",
}
_CHECK_CALLS = {"fail", "raises", "warns", "approx"}
_COLLECTION_NAMES = {"collect_ignore", "collect_ignore_glob", "__test__"}
_TOOLING_NAMES = {
    "conftest.py",
    "setup.py",
    "noxfile.py",
    "tasks.py",
    "fabfile.py",
    "dodo.py",
    "sitecustomize.py",
    "usercustomize.py",
    "hatch_build.py",
    "manage.py",
    "package.json",
    "makefile",
    "gnumakefile",
    "tox.ini",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    "justfile",
    "dockerfile",
}
_COMMENT_PREFIX = re.compile(r"^\s*#\s?")


def is_tooling_code(path: str) -> bool:
    """True for files that build, test or CI tools execute, wherever they live.

    ``conftest.py``, ``setup.py``, ``noxfile.py``, ``tasks.py``, ``sitecustomize.py``,
    ``*.pth`` (run at interpreter start), ``docs/conf.py`` (Sphinx), CI workflows and
    actions, ``package.json`` (npm scripts), Makefiles, ``tox.ini``, pre-commit configs.
    """
    parts = PurePosixPath(path.lower()).parts
    if not parts:
        return False
    name = parts[-1]
    if name in _TOOLING_NAMES or name.endswith(".pth"):
        return True
    if name == "conf.py" and any(
        p in ("doc", "docs", "documentation", "sphinx") for p in parts[:-1]
    ):
        return True
    if len(parts) >= 3 and parts[0] == ".github" and parts[1] in ("workflows", "actions"):
        return True
    return parts[0] in (".circleci", ".gitlab-ci.yml", ".buildkite") or name == ".gitlab-ci.yml"


# Root folders that hold no importable package: scripts, docs, tooling, CI, build output,
# environments, data, examples and benchmarks.
_NOT_PACKAGES = frozenset(
    [
        "scripts",
        "script",
        "bin",
        "tools",
        "tool",
        "tooling",
        "ci",
        "build",
        "dist",
        "docs",
        "doc",
        "documentation",
        "sphinx",
        "site",
        "examples",
        "example",
        "samples",
        "sample",
        "benchmarks",
        "benchmark",
        "bench",
        "data",
        "datasets",
        "fixtures",
        "migrations",
        "alembic",
        "notebooks",
        "venv",
        "env",
        "node_modules",
        "site_packages",
        "vendor",
        "third_party",
        "debian",
        "packaging",
        "deploy",
        "deployment",
        "infra",
        "ops",
    ]
)


def in_flat_package(path: str) -> bool:
    """True for a module of a package folder at the repository root (a flat layout:
    ``slugify/core.py``, ``mypkg/sub/util.py``): every folder an importable name (an
    identifier, not private, not hidden), the top one no folder of scripts, docs, tooling,
    CI, build output, environments or data, and the file a ``.py`` module that no build,
    test or CI tool runs (:func:`is_tooling_code`)."""
    parts = path.split("/")
    if len(parts) < 2 or not parts[-1].endswith(".py") or not parts[-1][:-3].isidentifier():
        return False
    folders = parts[:-1]
    if any(not f.isidentifier() or f.startswith("_") for f in folders):
        return False
    return folders[0].lower() not in _NOT_PACKAGES and not is_tooling_code(path)


def is_python_source(path: str, data: bytes | None = None) -> bool:
    """``*.py``/``*.pyw``/``*.pyi``/``*.pth`` files, or a script whose shebang names python."""
    if path.lower().endswith((".py", ".pyw", ".pyi", ".pth")):
        return True
    if data is None:
        return False
    first = data[:200].split(b"\n", 1)[0]
    return first.startswith(b"#!") and b"python" in first
