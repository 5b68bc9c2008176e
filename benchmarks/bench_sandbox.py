"""What hardening costs: grade one reference unsandboxed, in bubblewrap and in Docker, and print the figures.

    .venv/bin/python benchmarks/bench_sandbox.py [EXERCISE] [ROUNDS] [--no-bwrap]   # default: 02, 3 rounds

- per test, bubblewrap: (bwrap run - plain run) / tests, from the median of ROUNDS runs each, alternated so
  that load drifts hit both alike (goal: at most 50 ms per test);
- per submission, Docker: container run - plain run, medians likewise (goal: at most 1 s per submission);
- per submission in a batch, Docker pre-warmed: ROUNDS gradings in a row with the next container started
  while one grades (``DockerRunner(prewarm=True)``, what ``grade batch`` uses), minus ROUNDS plain gradings
  in a row, over ROUNDS; the first (cold) grading of each row is left out of both;
- the rank factory's start, plain and in bubblewrap (once per grading run, inside the figures above).
Needs bubblewrap, a Docker engine and `grade image build`. Run it by hand on a quiet machine.
``--no-bwrap`` measures only the plain and Docker runs (the Docker figure; where bubblewrap cannot run).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.core import sandbox  # noqa: E402
from grader.core.course import load_course  # noqa: E402
from grader.harness.factory import RankFactory  # noqa: E402
from grader.runners import GradeJob  # noqa: E402
from grader.runners.docker import DockerRunner  # noqa: E402
from grader.runners.local import LocalRunner  # noqa: E402


def wall(runner: LocalRunner | DockerRunner, job: GradeJob) -> tuple[float, int]:
    started = time.perf_counter()
    result = runner.run(job)
    assert result.full_marks, "the reference must pass for the figures to mean anything"
    return time.perf_counter() - started, len(result.tests)


def in_a_row(runner: LocalRunner | DockerRunner, job: GradeJob, rounds: int) -> float:
    """Seconds per grading over ``rounds`` gradings in a row, after one that warms up (not counted)."""
    wall(runner, job)
    started = time.perf_counter()
    for _ in range(rounds):
        wall(runner, job)
    return (time.perf_counter() - started) / rounds


def factory_start(box: sandbox.Sandbox | None) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        factory = RankFactory(box, Path(scratch) / "factory.log")
        started = time.perf_counter()
        factory.start()
        elapsed = time.perf_counter() - started
        factory.close()
    return elapsed


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    ref = args[0] if args else "02"
    rounds = int(args[1]) if len(args) > 1 else 3
    with_bwrap = "--no-bwrap" not in sys.argv
    course = load_course(REPO / "course.yml")
    exercise = course.find(ref)
    job = GradeJob(
        course=course, exercise=exercise, source=course.solution_dir(exercise), label="bench", device="cpu"
    )
    runners = {
        "plain": LocalRunner(sandbox_mode="none"),
        "bwrap": LocalRunner(sandbox_mode="bwrap"),
        "docker": DockerRunner(),
    }
    if not with_bwrap:
        del runners["bwrap"]
    times: dict[str, list[float]] = {name: [] for name in runners}
    tests = 0
    for _ in range(rounds):
        for name, runner in runners.items():
            seconds, tests = wall(runner, job)
            times[name].append(seconds)
    median = {name: statistics.median(values) for name, values in times.items()}
    prewarmed = DockerRunner(prewarm=True)
    try:
        row = {"plain": in_a_row(runners["plain"], job, rounds), "docker": in_a_row(prewarmed, job, rounds)}
    finally:
        prewarmed.close()
    public = course.exercise_dir(exercise)
    starts = {"plain": factory_start(None)}
    if with_bwrap:
        starts["bwrap"] = factory_start(sandbox.for_grading_run(public, public, Path(tempfile.gettempdir())))

    print(f"exercise {ref}: {tests} tests, {rounds} rounds; medians (all runs: {times})")
    for name in runners:
        print(f"  {name:7s} {median[name]:7.2f} s per grading run")
    if with_bwrap:
        per_test_ms = (median["bwrap"] - median["plain"]) / tests * 1000
        print(f"  bubblewrap: {per_test_ms:+.1f} ms per test (goal <= 50)")
    print(f"  Docker:     {median['docker'] - median['plain']:+.2f} s per submission, one at a time")
    print(
        f"  Docker pre-warmed, {rounds} in a row: plain {row['plain']:.2f} s, docker {row['docker']:.2f} s, "
        f"{row['docker'] - row['plain']:+.2f} s per submission (goal <= 1)"
    )
    print("  factory start: " + ", ".join(f"{name} {s:.2f} s" for name, s in starts.items()))


if __name__ == "__main__":
    main()
