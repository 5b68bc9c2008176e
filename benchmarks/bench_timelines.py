"""What timing every call for space-time diagrams costs, and how big a 16-rank diagram is.

    .venv/bin/python benchmarks/bench_timelines.py [--rounds N] [EXERCISE ...]  # 5 rounds of 01 02 07
    .venv/bin/python benchmarks/bench_timelines.py --size16                  # only the 16-rank diagram
    .venv/bin/python benchmarks/bench_timelines.py --calls [EXERCISE ...]    # only calls and their cost

- overhead: grade each exercise's reference with ranks that time every call into their flight file
  (``LocalRunner()``, the default) and with ranks that time nothing (``LocalRunner(timelines=False)``),
  ROUNDS times each, the two alternated so that load drifts hit both alike; per exercise and over all three,
  the ratio of the median wall times (goal: at most 1.02). Outside ``--trace`` the judge reads no flight file
  for a passing test, so this is the ranks' cost: two short writes per call.
- cost per call: the CPU one call's recording takes (in this process), times the calls a --trace grading
  of each exercise records: the ranks' CPU spent recording, which a loaded machine cannot blur;
- size: exercise 02's reference ring all-reduce on a world of 16 ranks, its page as ``grade exercise`` writes
  it for a failing test (and its Chrome trace).
Run it by hand; the figures go to docs/benchmarks.md with the load they were taken under.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.core.course import Course, load_course  # noqa: E402
from grader.core.diagrams.chrome import chrome_trace  # noqa: E402
from grader.core.diagrams.page import html_page  # noqa: E402
from grader.harness.flight import FlightLog  # noqa: E402
from grader.harness.patterns import ring  # noqa: E402
from grader.harness.pool import Pools  # noqa: E402
from grader.harness.testing import World  # noqa: E402
from grader.harness.timelines import TestFacts, timeline_of  # noqa: E402
from grader.harness.world import WorldConfig  # noqa: E402
from grader.runners import GradeJob  # noqa: E402
from grader.runners.local import LocalRunner  # noqa: E402


def wall(runner: LocalRunner, job: GradeJob) -> float:
    started = time.perf_counter()
    result = runner.run(job)
    assert result.full_marks, "the reference must pass for the figures to mean anything"
    return time.perf_counter() - started


def overhead(keys: list[str], rounds: int) -> None:
    course = load_course(REPO / "course.yml")
    timed, plain = LocalRunner(), LocalRunner(timelines=False)
    runs: dict[str, dict[str, list[float]]] = {k: {"timed": [], "plain": []} for k in keys}
    for i in range(rounds):
        for key in keys:
            job = reference_job(course, key)
            order = (
                [("timed", timed), ("plain", plain)] if i % 2 == 0 else [("plain", plain), ("timed", timed)]
            )
            for name, runner in order:
                runs[key][name].append(wall(runner, job))
            t, p, load = runs[key]["timed"][-1], runs[key]["plain"][-1], os.getloadavg()[0]
            print(f"round {i + 1}: {key} timed {t:.1f} s, plain {p:.1f} s, load {load:.1f}", flush=True)
    print("\nexercise  timed median  plain median  ratio")
    for key in [*keys, "all"]:
        chosen = keys if key == "all" else [key]
        t = statistics.median(sum(runs[k]["timed"][i] for k in chosen) for i in range(rounds))
        p = statistics.median(sum(runs[k]["plain"][i] for k in chosen) for i in range(rounds))
        print(f"{key:>8}  {t:11.2f}s  {p:11.2f}s  {t / p:.3f}")


def reference_job(course: Course, key: str, *, trace: bool = False) -> GradeJob:
    exercise = course.find(key)
    source = course.solution_dir(exercise)
    return GradeJob(course=course, exercise=exercise, source=source, label="ref", device="cpu", trace=trace)


def calls_and_cost(keys: list[str]) -> None:
    """The recording's CPU per call (this process, a flight file like a rank's), and the calls each
    grading records (a --trace grading keeps every multi-rank test's whole timeline): their product is
    what the ranks spend recording, whatever the load does to the wall clock."""
    with tempfile.TemporaryDirectory() as folder:
        log, fd = FlightLog(), os.open(Path(folder) / "flight", os.O_RDWR | os.O_CREAT)
        log.open(fd)
        os.close(fd)
        log.reset(2)
        started = time.process_time()
        for _ in range(5000):
            log.end(log.begin("isend", peer=1, group_peer=1, nbytes=64, tag=0, group=("0", (0, 1))), ok=True)
        per_call = (time.process_time() - started) / 5000
    print(f"\nrecording one call: {per_call * 1e6:.1f} us of CPU (begin and end)")
    course, runner = load_course(REPO / "course.yml"), LocalRunner()
    for key in keys:
        result = runner.run(reference_job(course, key, trace=True))
        calls = sum(len(t.calls) for t in result.timelines)
        print(
            f"{key}: {calls} calls recorded in {len(result.timelines)} multi-rank tests: "
            f"{calls * per_call:.2f} s of CPU over all ranks"
        )


def size16() -> None:
    """The page and the trace of exercise 02's reference ring all-reduce on 16 ranks."""
    with tempfile.TemporaryDirectory() as scratch:
        config = WorldConfig(
            backend="gloo",
            device="cpu",
            impl_dir=REPO / "solutions" / "02_ring_tree",
            programs_dir=REPO / "tests" / "fixtures" / "diagram_programs",
            scratch_dir=Path(scratch),
            pg_timeout_s=300,
        )
        pools = Pools(config)
        try:
            world = World(pools.get(16), 300.0, test="test_ring[16ranks]")
            world.expect(ring(messages=lambda p: 2 * (p - 1)))
            world.run("programs:ring", inputs={"numel": 16 * 64})
            facts = TestFacts("test_ring[16ranks]", "1.1", "02.ring_allreduce", "ring", "", "failed", "", {})
            timeline = timeline_of(world.read_flights(), facts, pattern=world.expected)
        finally:
            pools.close()
    page, trace = html_page(timeline).encode(), json.dumps(chrome_trace(timeline)).encode()
    print(
        f"16 ranks, {len(timeline.calls)} calls: page {len(page):,} bytes, Chrome trace {len(trace):,} bytes"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--size16"]:
        size16()
    elif args[:1] == ["--calls"]:
        calls_and_cost(args[1:] or ["01", "02", "07"])
    else:
        rounds = 5
        if args[:1] == ["--rounds"]:  # an option: exercise keys are numbers too
            rounds, args = int(args[1]), args[2:]
        keys = args or ["01", "02", "07"]
        overhead(keys, rounds)
        calls_and_cost(keys)
        size16()
