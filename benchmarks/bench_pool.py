"""How much the reusable rank pool saves: grade one exercise's reference three ways and print the figures.

    .venv/bin/python benchmarks/bench_pool.py [EXERCISE] [--no-spawn]      # default: 02

- pool (cold): a first grading run in a fresh process, its rank factory's start (one torch import) included;
- pool (warm): the same run again (each run starts its own factory; the OS's file caches are warm now);
- fresh world per test: a new factory (one torch import) and a new world for every test, the way course
  harnesses usually run (many import torch in every rank of every test, which costs more still);
- floor: one torch import (the factory's preload, measured here) plus the tests' own compute.
``--no-spawn`` skips the fresh-world-per-test baseline (minutes), for comparing cold runs before and after.
Run it by hand on a quiet machine; figures vary by about 30 % between runs on a shared 2-core box.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.core.course import load_course  # noqa: E402
from grader.core.results import ExerciseResult  # noqa: E402
from grader.runners import GradeJob  # noqa: E402
from grader.runners.local import LocalRunner  # noqa: E402


def timed_run(runner: LocalRunner, exercise_ref: str) -> tuple[float, ExerciseResult]:
    course = load_course(REPO / "course.yml")
    # No time budget: the spawn-per-test baseline would run out of it (that is the point of the pool).
    exercise = dataclasses.replace(course.find(exercise_ref), timeout=1e9)
    job = GradeJob(
        course=course, exercise=exercise, source=course.solution_dir(exercise), label="bench", device="cpu"
    )
    started = time.perf_counter()
    result = runner.run(job)
    elapsed = time.perf_counter() - started
    failures = [f"{t.name}: {t.status} {t.output[:300]}" for t in result.tests if t.status != "passed"]
    assert not failures, "the reference must pass for the figures to mean anything:\n" + "\n".join(failures)
    return elapsed, result


def torch_import_seconds() -> float:
    code = "import time; t = time.perf_counter(); import torch.distributed; print(time.perf_counter() - t)"
    return float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    ref = args[0] if args else "02"
    pooled = LocalRunner()
    cold, result = timed_run(pooled, ref)
    warm, _ = timed_run(pooled, ref)
    starts = pooled.last_pools.starts if pooled.last_pools else []
    spawned = None if "--no-spawn" in sys.argv else timed_run(LocalRunner(reuse_worlds=False), ref)[0]
    compute = sum(t.seconds for t in result.tests)
    floor = torch_import_seconds() + compute
    sizes = sorted({t.world_size for t in result.tests})
    print(f"exercise {ref}: {len(result.tests)} tests, world sizes {sizes}")
    print(f"  pool, cold (factory start included):    {cold:7.2f} s")
    print(
        f"  pool, warm:                             {warm:7.2f} s  ({len(starts)} world starts, "
        f"{sum(s for _, s in starts):.2f} s of them)"
    )
    if spawned is not None:
        print(f"  fresh world per test:                   {spawned:7.2f} s")
    print(f"  floor (one torch import + compute):     {floor:7.2f} s  (compute {compute:.2f} s)")
    ratio = f"fresh per test / pool cold: {spawned / cold:5.1f}x    " if spawned is not None else ""
    print(f"  {ratio}pool cold / floor: {cold / floor:4.2f}x")


if __name__ == "__main__":
    main()
