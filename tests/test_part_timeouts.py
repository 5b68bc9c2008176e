"""`grade validate` on timeouts: each part's slowest reference test against its timeout, under 3x flagged."""

from __future__ import annotations

from pathlib import Path

from grader.authoring.timeouts import HEADROOM, WHOLE_RUN, part_times, timeout_problems
from grader.core.course import load_course
from grader.core.results import ExerciseResult, Status, TestResult

COURSE = load_course(Path(__file__).parent.parent / "course.yml")
EXERCISE = COURSE.find("03")
TIMEOUTS = {p.id: p.timeout for p in EXERCISE.parts}


def result(
    seconds: dict[str, float], *, blocked: tuple[str, ...] = (), total: float = 10.0
) -> ExerciseResult:
    tests = tuple(
        TestResult(
            name=name,
            number="1.1",
            part=name.split(":")[0],
            score=1.0,
            max_score=1.0,
            status=Status.BLOCKED if name.split(":")[0] in blocked else Status.PASSED,
            seconds=s,
        )
        for name, s in seconds.items()
    )
    return ExerciseResult(exercise="03", title="", graded="", device="cpu", tests=tests, execution_time=total)


def test_the_slowest_test_of_each_part_over_all_runs() -> None:
    runs = [
        result({"03.fit:a": 0.5, "03.fit:b": 1.0, "03.measure:c": 2.0}, total=12.0),
        result({"03.fit:a": 1.5, "03.fit:b": 0.2, "03.measure:c": 1.0}, total=20.0),
    ]
    rows = {r.part: r for r in part_times(EXERCISE, runs)}
    assert (rows["03.fit"].test, rows["03.fit"].seconds) == ("03.fit:a", 1.5)
    assert (rows["03.measure"].test, rows["03.measure"].seconds) == ("03.measure:c", 2.0)
    assert rows["03.measure"].timeout == TIMEOUTS["03.measure"]
    assert (rows[WHOLE_RUN].seconds, rows[WHOLE_RUN].timeout) == (20.0, EXERCISE.timeout)
    assert "03.alpha_beta" not in rows  # no test of it ran: nothing measured
    assert timeout_problems(list(rows.values())) == []


def test_a_part_under_three_times_its_reference_is_a_problem() -> None:
    slow = TIMEOUTS["03.measure"] / HEADROOM * 1.01
    rows = part_times(EXERCISE, [result({"03.measure:c": slow, "03.fit:a": 0.1})])
    [problem] = timeout_problems(rows)
    assert problem.startswith("timeout: 03.measure allows") and "03.measure:c" in problem, problem
    assert [r.part for r in rows if r.short] == ["03.measure"]


def test_a_whole_run_near_the_exercise_budget_is_a_problem() -> None:
    rows = part_times(EXERCISE, [result({"03.fit:a": 0.1}, total=EXERCISE.timeout / 2)])
    [problem] = timeout_problems(rows)
    assert problem.startswith(f"timeout: {WHOLE_RUN} allows {EXERCISE.timeout:g} s"), problem


def test_blocked_parts_have_no_row() -> None:
    rows = part_times(
        EXERCISE, [result({"03.device_copies:g": 0.0, "03.fit:a": 0.1}, blocked=("03.device_copies",))]
    )
    assert [r.part for r in rows] == ["03.fit", WHOLE_RUN]
