"""Do the checks that compare times hold under load? Grade them with every core busy and print the figures.

    .venv/bin/python benchmarks/bench_timing_checks.py [--runs 50] [--bug-runs 20] [--idle] [--processes N]
    .venv/bin/python benchmarks/bench_timing_checks.py --timeouts [NN ...] [--idle]

For each CPU check that compares times or rates (``CHECKS``; the GPU ones are listed in docs/authoring.md,
"Timing checks"), with ``burner.cpu_burner`` keeping every core busy at the ranks' priority:
- false failures: the reference's parts that hold timing checks, graded ``--runs`` times (those parts
  only); a check fails falsely when its test does not pass on the reference (goal: 0 in 50);
- catch rate: each corpus bug a check exists for, graded ``--bug-runs`` times on the parts its entry names;
  caught when the check's test fails (goal: every time).
``--timeouts`` instead grades each reference once (every graded exercise when none is named) and prints
each part's slowest test against its timeout, as `grade validate` does (``grader.authoring.timeouts``).
``--idle`` runs without the burner. One judge process and one kept rank factory per exercise, as
`grade validate` grades. Run it by hand; a full run (50 + 20 per bug) took 16 minutes on the
shared 2-core box at load 30.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from burner import cpu_burner  # noqa: E402

from grader.authoring.timeouts import HEADROOM, PartTime, part_times  # noqa: E402
from grader.authoring.validate import bug_corpus, bug_parts, mutated  # noqa: E402
from grader.core.course import Course, Exercise, load_course  # noqa: E402
from grader.core.results import ExerciseResult, Status  # noqa: E402
from grader.runners import GradeJob, SuiteError  # noqa: E402
from grader.runners.local import LocalRunner  # noqa: E402


@dataclass(frozen=True)
class TimingCheck:
    part: str
    test: str
    """The test's function name (every world size of it counts)."""
    margin: str
    """What the check allows, in a few words (docs/authoring.md explains why it holds)."""
    bugs: tuple[str, ...]
    """The corpus bugs (tests/corpus/NN_slug.yml) this check exists to catch."""


CHECKS = (
    TimingCheck(
        "03.measure",
        "test_time_is_per_call",
        "median <= 2 x the rank's own span / 32 (a hard bound)",
        ("total_over_iterations", "milliseconds"),
    ),
    TimingCheck(
        "03.measure",
        "test_seconds_and_growth",
        "1 KiB >= 1 us; 4 MiB > 2 x 1 KiB; fastest of 3, 6, 9 runs",
        ("measured_largest_first",),
    ),
    TimingCheck(
        "03.measure",
        "test_fit_predicts_held_out_sizes",
        "held-out sizes within 3x; fastest of 3, 6, 9 runs",
        ("measured_in_shuffled_order",),
    ),
    TimingCheck("03.measure", "test_measure_returns_agreed_seconds", "public: 0 < t < 1 s", ()),
)


def failed(result: ExerciseResult, test: str) -> bool:
    """Whether any test named ``test`` (any world size) did not pass; AssertionError when none ran."""
    mine = [t for t in result.tests if t.name.split("[")[0] == test]
    assert mine, f"{test} did not run: {[t.name for t in result.tests]}"
    return any(t.status is not Status.PASSED for t in mine)


def first_failure(result: ExerciseResult, test: str) -> str:
    lines = [t.output for t in result.tests if t.name.split("[")[0] == test and t.status is not Status.PASSED]
    return lines[0].splitlines()[0][:300] if lines and lines[0] else ""


def grade(
    runner: LocalRunner, course: Course, exercise: Exercise, source: Path, parts: tuple[str, ...]
) -> ExerciseResult:
    job = GradeJob(course=course, exercise=exercise, source=source, label="bench", device="cpu", parts=parts)
    return runner.run(job)


def reference_runs(runner: LocalRunner, course: Course, exercise: Exercise, runs: int) -> Counter[str]:
    """How often each check's test failed on the reference over ``runs`` gradings of the timing parts."""
    checks = [c for c in CHECKS if c.part.split(".")[0] == exercise.key]
    parts = tuple(sorted({c.part for c in checks}))
    false_failures: Counter[str] = Counter()
    for i in range(runs):
        started = time.perf_counter()
        result = grade(runner, course, exercise, course.solution_dir(exercise), parts)
        for check in checks:
            if failed(result, check.test):
                false_failures[check.test] += 1
                print(f"  reference run {i + 1}: {check.test} FAILED: {first_failure(result, check.test)}")
        others = [t.name for t in result.tests if t.status is not Status.PASSED]
        print(
            f"  reference run {i + 1}/{runs}: {time.perf_counter() - started:.1f} s, not passed: {others}",
            flush=True,
        )
    return false_failures


def bug_runs(
    runner: LocalRunner, course: Course, exercise: Exercise, runs: int
) -> dict[tuple[str, str], int]:
    """How often each check caught each of its bugs over ``runs`` gradings, by (test, bug name)."""
    corpus = {b["name"]: b for b in bug_corpus(REPO / "tests", exercise)}
    caught: dict[tuple[str, str], int] = {}
    for check in (c for c in CHECKS if c.part.split(".")[0] == exercise.key):
        for name in check.bugs:
            bug = corpus[name]
            caught[check.test, name] = 0
            for _ in range(runs):
                with mutated(course.solution_dir(exercise), bug) as folder:
                    result = grade(runner, course, exercise, folder, bug_parts(exercise, bug))
                caught[check.test, name] += failed(result, check.test)
            print(f"  {name}: caught by {check.test} {caught[check.test, name]}/{runs}", flush=True)
    return caught


def timeout_rows(runner: LocalRunner, course: Course, keys: list[str]) -> list[PartTime]:
    """Grade each exercise's reference once (every part this machine runs) and return each part's slowest
    test against its timeout, as `grade validate` prints them; a test that did not pass is printed."""
    rows = []
    for key in keys:
        exercise = course.find(key)
        try:
            result = grade(runner, course, exercise, course.solution_dir(exercise), ())
        except SuiteError as exc:  # a suite being edited as this runs: say so, measure the others
            print(f"  {exercise.key} {exercise.slug}: suite error, not measured: {str(exc)[:200]}")
            continue
        lost = [
            f"{t.name}: {t.status}" for t in result.tests if t.status not in (Status.PASSED, Status.BLOCKED)
        ]
        print(
            f"  {exercise.key} {exercise.slug}: {result.execution_time:.1f} s, not passed: {lost}", flush=True
        )
        rows += part_times(exercise, [result])
    return rows


def print_timeouts(rows: list[PartTime]) -> None:
    print(f"\n{'part':28} {'slowest reference test':52} {'seconds':>8} {'timeout':>8} {'headroom':>9}")
    for row in rows:
        flag = f"  under {HEADROOM:g}x" if row.short else ""
        print(
            f"{row.part:28} {row.test[:52]:52} {row.seconds:8.2f} {row.timeout:8g} {row.headroom:8.1f}x{flag}"
        )


def report(
    runs: int, bug_count: int, false_failures: Counter[str], caught: dict[tuple[str, str], int]
) -> None:
    print(f"\n{'check':50} {'margin':55} {'false failures':>15} {'catch rate':>28}")
    for check in CHECKS:
        rates = ", ".join(f"{bug} {caught[check.test, bug]}/{bug_count}" for bug in check.bugs) or "-"
        name = f"{check.part} {check.test}"
        print(f"{name:50} {check.margin:55} {false_failures[check.test]:>8}/{runs:<6} {rates:>28}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="gradings of the reference (default 50)")
    parser.add_argument("--bug-runs", type=int, default=20, help="gradings of each bug (default 20)")
    parser.add_argument("--idle", action="store_true", help="without the CPU burner")
    parser.add_argument("--processes", type=int, default=None, help="spinners (default: one per core)")
    parser.add_argument(
        "--timeouts",
        nargs="*",
        metavar="NN",
        help="instead: grade these references once (none named: every graded exercise) and print each "
        "part's slowest test against its timeout",
    )
    args = parser.parse_args()
    course = load_course(REPO / "course.yml")
    runner = LocalRunner(keep_factory=True)
    load = contextlib.nullcontext(0) if args.idle else cpu_burner(args.processes)
    started = time.perf_counter()
    try:
        with load as spinners:
            print(f"{spinners} spinners at the ranks' priority" if spinners else "idle (no burner)")
            if args.timeouts is not None:
                keys = args.timeouts or [e.key for e in course.exercises if e.parts]
                print_timeouts(timeout_rows(runner, course, keys))
            else:
                checks(runner, course, args.runs, args.bug_runs)
    finally:
        runner.close()
    print(f"\n{time.perf_counter() - started:.0f} s in all")


def checks(runner: LocalRunner, course: Course, runs: int, bug_count: int) -> None:
    false_failures: Counter[str] = Counter()
    caught: dict[tuple[str, str], int] = {}
    for key in sorted({c.part.split(".")[0] for c in CHECKS}):
        exercise = course.find(key)
        false_failures += reference_runs(runner, course, exercise, runs)
        caught |= bug_runs(runner, course, exercise, bug_count)
    report(runs, bug_count, false_failures, caught)


if __name__ == "__main__":
    main()
