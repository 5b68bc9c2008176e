"""What timing every call for space-time diagrams costs, and how big a 16-rank diagram is.

    .venv/bin/python benchmarks/bench_timelines.py [ROUNDS] [EXERCISE ...]   # default: 5 rounds of 01 02 07
    .venv/bin/python benchmarks/bench_timelines.py --size16                  # only the 16-rank diagram

- overhead: grade each exercise's reference with ranks that time every call into their flight file
  (``LocalRunner()``, the default) and with ranks that time nothing (``LocalRunner(timelines=False)``),
  ROUNDS times each, the two alternated so that load drifts hit both alike; per exercise and over all three,
  the ratio of the median wall times (goal: at most 1.02). Outside ``--trace`` the judge reads no flight file
  for a passing test, so this is the ranks' cost: two short writes per call.
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

from grader.core.course import load_course  # noqa: E402
from grader.core.diagrams.chrome import chrome_trace  # noqa: E402
from grader.core.diagrams.page import html_page  # noqa: E402
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
            exercise = course.find(key)
            job = GradeJob(
                course=course,
                exercise=exercise,
                source=course.solution_dir(exercise),
                label="ref",
                device="cpu",
            )
            order = (
                [("timed", timed), ("plain", plain)] if i % 2 == 0 else [("plain", plain), ("timed", timed)]
            )
            for name, runner in order:
                runs[key][name].append(wall(runner, job))
            timed_s, plain_s = runs[key]["timed"][-1], runs[key]["plain"][-1]
            load = os.getloadavg()[0]
            print(
                f"round {i + 1}: {key} timed {timed_s:.1f} s, plain {plain_s:.1f} s, load {load:.1f}",
                flush=True,
            )
    print("\nexercise  timed median  plain median  ratio")
    for key in keys:
        t, p = statistics.median(runs[key]["timed"]), statistics.median(runs[key]["plain"])
        print(f"{key:>8}  {t:11.2f}s  {p:11.2f}s  {t / p:.3f}")
    total_t = statistics.median([sum(runs[k]["timed"][i] for k in keys) for i in range(rounds)])
    total_p = statistics.median([sum(runs[k]["plain"][i] for k in keys) for i in range(rounds)])
    print(f"{'all':>8}  {total_t:11.2f}s  {total_p:11.2f}s  {total_t / total_p:.3f}")
    for key in keys:
        shown = {name: [round(x, 1) for x in values] for name, values in runs[key].items()}
        print(f"{key}: timed {shown['timed']}, plain {shown['plain']}")


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
    else:
        rounds = int(args[0]) if args and args[0].isdigit() else 5
        overhead([a for a in args if not a.isdigit()] or ["01", "02", "07"], rounds)
        size16()
