"""Non-interference of refused work, as a property (issue 16 item 2; DESIGN "One renderer").

Hypothesis generates programs from a grammar of channels (names, counts, order, which
file is modified/deleted/renamed/copied, directories, sizes, contents, modes, stdout,
stderr, and the program's ending: a return value, an exception whose type, line and
message are chosen by S, a missing path, a PermissionError, a budget overrun, a Bash
exit status), each driven by a byte (or the length) of a file S the program may not see.
Every program runs through a real agent on two workspaces that differ only in S, in
Monty and in Bash, under ``judge_scope="mutations"`` and ``"all"``, with a rule judge
(``protected_reads`` reject on ``private/**``) and with an LLM judge whose sharing
allowlist excludes S (its model a recording FunctionModel with a fixed reject). Both
judges refuse any transaction that read S, so their decisions never depend on its bytes.

The property: for work that is not committed, the worker model's view, the Logfire spans
and the ``VshResult`` fields are byte-identical on both sides (``channel_support``).

Grammar rules that keep the property about the renderer, not about the program's
outcome: every ending kind is chosen by the generator, never by S (S only picks its
details: the exception's type, line, message, status); each step owns its own files, so
no path is written twice (an overwritten intermediate write is reviewed as incomplete
evidence before any rule runs: ``test_toolset_channel_attacks`` covers that separately);
under ``judge_scope="mutations"`` a fixed marker write makes every run a judged mutation.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from channel_support import (
    GUARDS,
    SECRET_PAIRS,
    assert_noninterference,
    budget,
    observe_pair,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.anyio

SLOTS = 3  # at most three channel steps per program; slot k owns public/k{k}_*.txt
SLOT_FILES = {f"public/k{k}_{j}.txt": f"line {k}{j}\n" for k in range(SLOTS) for j in range(3)}
# 25 examples x 8 cases: about 20 s on an idle 2-core box (two agent runs per example).
# Set VSH_AI_NONINTERFERENCE_EXAMPLES for a deeper local search.
EXAMPLES = int(os.environ.get("VSH_AI_NONINTERFERENCE_EXAMPLES", "25"))
_counter = itertools.count()

PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- Monty grammar ----------------------------------------------------------------------
# ``v{k}`` is the driver of slot k: one byte of S (by index) or S's length or byte sum.

MONTY_DRIVERS = {
    "byte": "v{k} = ord(s[{i} % n])\n",
    "length": "v{k} = n + {i}\n",
    "sum": "v{k} = {i}\nfor ch in s:\n    v{k} = v{k} + ord(ch)\n",
}

MONTY_STEPS = {
    "name": "vsh_write('/workspace/public/k{k}-' + str(v{k} % 7) + '.txt', 'x\\n')\n",
    "secret-name": "vsh_write('/workspace/public/k{k}-' + t[: v{k} % 5 + 1] + '.txt', 'x\\n')\n",
    "count": (
        "for i in range(v{k} % 4 + 1):\n"
        "    vsh_write('/workspace/public/k{k}-c' + str(i) + '.txt', 'x\\n')\n"
    ),
    "order": (
        "names = ['p', 'q', 'r']\nr = v{k} % 3\nnames = names[r:] + names[:r]\n"
        "for name in names:\n    vsh_write('/workspace/public/k{k}-' + name + '.txt', name)\n"
    ),
    "modify": "vsh_write('/workspace/public/k{k}_' + str(v{k} % 3) + '.txt', 'changed\\n')\n",
    "patch": "vsh_patch('/workspace/public/k{k}_' + str(v{k} % 3) + '.txt', 'line', 'patched')\n",
    "patch-secret": "vsh_patch('/workspace/public/k{k}_0.txt', 'line', t)\n",
    "delete": "vsh_remove('/workspace/public/k{k}_' + str(v{k} % 3) + '.txt')\n",
    "delete-or-modify": (
        "if v{k} % 2:\n    vsh_remove('/workspace/public/k{k}_0.txt')\n"
        "else:\n    vsh_write('/workspace/public/k{k}_0.txt', 'changed\\n')\n"
    ),
    "rename-which": (
        "vsh_move('/workspace/public/k{k}_' + str(v{k} "
        "% 3) + '.txt', '/workspace/public/k{k}-moved')\n"
    ),
    "rename-to": (
        "vsh_move('/workspace/public/k{k}_0.txt', '/workspace/public/k{k}-' + str(v{k} % 7))\n"
    ),
    "copy-which": (
        "vsh_copy('/workspace/public/k{k}_' + str(v{k} "
        "% 3) + '.txt', '/workspace/public/k{k}-copy')\n"
    ),
    "copy-or-move": (
        "if v{k} % 2:\n    vsh_copy('/workspace/public/k{k}_0.txt', '/workspace/public/k{k}-z')\n"
        "else:\n    vsh_move('/workspace/public/k{k}_0.txt', '/workspace/public/k{k}-z')\n"
    ),
    "mkdir": "vsh_mkdir('/workspace/public/k{k}-d' + str(v{k} % 5))\n",
    "mkdir-or-write": (
        "if v{k} % 2:\n    vsh_mkdir('/workspace/public/k{k}-thing')\n"
        "else:\n    vsh_write('/workspace/public/k{k}-thing', 'x\\n')\n"
    ),
    "size": "vsh_write('/workspace/public/k{k}-size.txt', 'x' * (v{k} % 64 * 100))\n",
    "lines": "vsh_write('/workspace/public/k{k}-lines.txt', 'l\\n' * (v{k} % 40))\n",
    "content": "vsh_write('/workspace/public/k{k}-content.txt', str(v{k}) + '\\n')\n",
    "secret-content": "vsh_write('/workspace/public/k{k}-secret.txt', s)\n",
    "read-which": "vsh_read('/workspace/public/k{k}_' + str(v{k} % 3) + '.txt')\n",
    "stdout": "print('x' * (v{k} % 100), v{k})\n",
    "stdout-secret": "print(s)\n",
}

MONTY_ENDINGS = {  # normal endings first, then the ones that fail inside VSH
    "none": "",
    "return": "[v0, t]\n",
    "return-size": "'r' * (v0 % 50 * 100)\n",
    "raise-type-by-line": (
        "if v0 % 3 == 0:\n    raise KeyError('boom')\n"
        "elif v0 % 3 == 1:\n    raise ValueError('boom')\n"
        "raise NameError('boom')\n"
    ),
    "raise-type-same-line": (
        "raise [KeyError, ValueError, FileNotFoundError, SyntaxError][v0 % 4]('boom')\n"
    ),
    "raise-message": "raise ValueError(t[: v0 % 6 + 1])\n",
    "raise-budget-lookalike": (
        "raise RuntimeError(['time limit exceeded: 1.1s > 1s', 'plain'][v0 % 2])\n"
    ),
    "missing-absolute": "vsh_read('/workspace/public/missing-' + str(v0 % 7))\n",
    "missing-relative": "vsh_read('missing-' + t[: v0 % 4 + 1])\n",
    "permission": "raise PermissionError('p' * (v0 % 9))\n",
    # Exhausts the OS-call budget (deterministic, unlike the time budget, whose overrun
    # figure varies run to run; test_toolset_channel_attacks covers that one).
    "os-calls-budget": "while True:\n    vsh_list('/workspace/public')\n",
}
MONTY_NORMAL = ("none", "return", "return-size")

# -- Bash grammar -----------------------------------------------------------------------
# ``v{k}`` is numeric (S's length, or a class of one character); ``c{k}`` is one character.

BASH_DRIVERS = {
    "length": 'v{k}=$(( ${{#s}} + {i} ))\nc{k}="${{s:{i}:1}}"\n',
    "char": (
        'c{k}="${{s:{i}:1}}"\n'
        'case "$c{k}" in [a-h]*) v{k}=1;; [i-p]*) v{k}=2;; [q-z]*) v{k}=3;; '
        "[0-9]*) v{k}=4;; *) v{k}=5;; esac\n"
    ),
}

BASH_STEPS = {
    "name": 'echo x > "public/k{k}-$(( v{k} % 7 )).txt"\n',
    "char-name": 'echo x > "public/k{k}-c$c{k}.txt"\n',
    "secret-name": 'echo x > "public/k{k}-$s.txt"\n',
    "count": 'for i in $(seq 1 $(( v{k} % 4 + 1 ))); do echo x > "public/k{k}-c$i.txt"; done\n',
    "delete": 'rm "public/k{k}_$(( v{k} % 3 )).txt"\n',
    "modify": 'echo changed >> "public/k{k}_$(( v{k} % 3 )).txt"\n',
    "sed": 'sed -i "s/line/$s/" public/k{k}_0.txt\n',
    "chmod": 'chmod +x "public/k{k}_$(( v{k} % 3 )).txt"\n',
    "chmod-or-write": (
        "if [ $(( v{k} % 2 )) -eq 0 ]; then chmod +x public/k{k}_0.txt; "
        "else echo x >> public/k{k}_0.txt; fi\n"
    ),
    "move": 'mv "public/k{k}_$(( v{k} % 3 )).txt" public/k{k}-moved\n',
    "copy": 'cp public/k{k}_0.txt "public/k{k}-$(( v{k} % 7 ))"\n',
    "mkdir": 'mkdir "public/k{k}-d$(( v{k} % 5 ))"\n',
    "size": (
        "i=0; while [ $i -lt $(( v{k} % 20 )) ]; do echo 0123456789 >> public/k{k}-size.txt; "
        "i=$((i+1)); done\n"
    ),
    "content": 'echo "$s" > public/k{k}-content.txt\n',
    "stdout": 'echo "$s $v{k}"\n',
    "stderr": 'echo "$s $v{k}" >&2\n',
}

BASH_ENDINGS = {
    "none": "",
    "stdout": 'echo "$s"\n',
    "exit-status": "exit $(( v0 % 5 + 1 ))\n",
    "stderr-and-fail": 'echo "$s" >&2; exit 1\n',
    "missing-file": 'cat "public/missing-$c0"\n',
    "bad-command": 'case "$v0" in 1|3|5) no_such_cmd_a;; *) no_such_cmd_b;; esac\n',
}
BASH_NORMAL = ("none", "stdout")


@st.composite
def programs(draw: st.DrawFn, language: str, marker: bool) -> str:
    """One program: read S, 1-3 channel steps (each with its own driver), an ending."""
    path = GUARDS["rules"].secret_path  # "llm" protects the same path
    drivers = MONTY_DRIVERS if language == "monty" else BASH_DRIVERS
    steps = MONTY_STEPS if language == "monty" else BASH_STEPS
    endings = MONTY_ENDINGS if language == "monty" else BASH_ENDINGS
    if language == "monty":
        code = f"s = vsh_read('/workspace/{path}')\nn = len(s)\nt = s.strip()\n"
        if marker:
            code += "vsh_write('/workspace/public/marker.txt', 'm\\n')\n"
    else:
        code = f"s=$(cat {path})\n"
        if marker:
            code += "echo m > public/marker.txt\n"
    count = draw(st.integers(1, SLOTS))
    for k in range(count):
        driver = draw(st.sampled_from(sorted(drivers)))
        index = draw(st.integers(0, 5))
        code += drivers[driver].format(k=k, i=index)
        code += steps[draw(st.sampled_from(sorted(steps)))].format(k=k)
    normal = MONTY_NORMAL if language == "monty" else BASH_NORMAL
    failing = sorted(set(endings) - set(normal))
    # Half the programs end normally (judged: pending/rejected), half fail inside VSH.
    code += endings[draw(st.one_of(st.sampled_from(normal), st.sampled_from(failing)))]
    return code


CASES = [
    pytest.param(guard, scope, language, id=f"{guard}-{scope}-{language}")
    for guard in ("rules", "llm")
    for scope in ("mutations", "all")
    for language in ("monty", "bash")
]


@pytest.mark.parametrize(("guard", "scope", "language"), CASES)
@PROPERTY_SETTINGS
@given(data=st.data())
async def test_refused_work_looks_the_same_whatever_the_secret(
    tmp_path: Path, capfire: Any, guard: str, scope: str, language: str, data: st.DataObject
) -> None:
    program = data.draw(programs(language, marker=scope == "mutations"), label="program")
    secrets = data.draw(st.sampled_from(SECRET_PAIRS), label="secrets")
    a, b = await observe_pair(
        tmp_path / f"example-{next(_counter)}",
        GUARDS[guard],
        program,
        capfire=capfire,
        secrets=secrets,
        language=language,
        options={"judge_scope": scope, "budget": budget(ms=3000, os_calls=2000)},
        extra=SLOT_FILES,
    )
    assert_noninterference(a, b)
