"""Evidence costs that grow with the change: ``written_versions`` and a pipeline stage's copy.

    .venv/bin/python benchmarks/evidence.py [files ...]

For each size (default 1,000 and 5,000 new files, plus one edit of an existing file) a real
VSH preview produces the evidence; printed are the median ms of ``written_versions``
(memoised per evidence object: forgotten before each run), of the copy each pipeline stage
gets (:func:`vsh_ai._hooks.isolated`), of ``Evidence.from_event``'s result dumped and
validated again (the copy before), and each as a fraction of the preview's wall time.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

import vsh

from vsh_ai import Evidence
from vsh_ai._hooks import isolated
from vsh_ai._simulate import simulate


def median_ms(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


BUDGET = vsh.ExecutionBudget(max_duration_ms=120_000, max_os_calls=1_000_000)


def prepare(root: Path) -> None:
    (root / "new").mkdir()
    (root / "old.txt").write_text("old\n")


async def evidence_of(files: int) -> tuple[Evidence, float]:
    code = (
        f"for i in range({files}):\n"
        "    vsh_write(f'/workspace/new/f{i:05d}.txt', f'line {i}\\n')\n"
        "p = '/workspace/old.txt'\n"
        "vsh_write(p, vsh_read(p) + 'more\\n')\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        prepare(Path(tmp))
        started = time.perf_counter()
        result = await simulate(tmp, code, intent="benchmark", policy="strict", budget=BUDGET)
        wall = time.perf_counter() - started
    assert result.evidence is not None, result.state
    return result.evidence, wall


def written(evidence: Evidence) -> object:
    evidence.__dict__.pop("written_versions", None)  # memoised per object: forget it
    return evidence.written_versions


async def main(sizes: list[int]) -> None:
    print("files  preview ms  written_versions ms  stage copy ms  dump+validate ms")
    for files in sizes:
        evidence, wall = await evidence_of(files)
        repeat = 20 if files <= 1000 else 7
        fresh = isolated(evidence)
        versions = median_ms(partial(written, fresh()), repeat)
        copy = median_ms(fresh, repeat)
        validate = median_ms(partial(Evidence.model_validate, evidence.model_dump()), repeat)
        print(
            f"{files:5d}  {wall * 1000:10.1f}  {versions:8.2f} ({versions / wall / 10:4.1f}%)"
            f"  {copy:8.2f} ({copy / wall / 10:4.1f}%)  {validate:8.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [1000, 5000]))
