"""The "not started" view: a part whose every test stopped at the untouched stub is one line, not a report."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from grader.core.course import Course
from grader.core.results import ExerciseResult, Status, TestResult
from grader.learner.grade import task_section
from grader.learner.views import to_terminal
from grader.runners import GradeJob
from grader.runners.local import LocalRunner


def stopped_at(part: str, stub: str, number: str) -> TestResult:
    return TestResult(
        name=f"test_{part.split('.')[1]}_{number}",
        number=number,
        part=part,
        score=0,
        max_score=1,
        status=Status.FAILED,
        output=f"[{part} rank 0/1] NotImplementedError: TODO({stub}): not implemented yet (at x.py:3 in f)",
    )


def shown(result: ExerciseResult, readme: str = "") -> list[str]:
    out = io.StringIO()
    to_terminal(result, Console(file=out, width=100, color_system=None), readme=readme)
    return out.getvalue().splitlines()


def test_a_part_is_not_started_only_when_its_own_stub_stopped_every_test() -> None:
    tests = (
        stopped_at("05.a", "05.a", "1.1"),  # not started
        stopped_at("05.a", "05.a", "1.2"),
        stopped_at("05.b", "05.a", "2.1"),  # its own code ran into part a's stub: started
        stopped_at("05.c", "05.c", "3.1"),  # one test stopped at its stub, the other failed on its own
        replace(stopped_at("05.c", "05.c", "3.2"), output="[05.c] wrong value"),
        stopped_at("05.d", "05.d", "4.1"),  # a GPU test blocked here does not make the part started
        replace(stopped_at("05.d", "05.d", "4.2"), status=Status.BLOCKED, output="blocked: needs a GPU"),
        replace(stopped_at("05.e", "05.e", "5.1"), status=Status.BLOCKED, output="blocked: needs a GPU"),
    )
    result = ExerciseResult(exercise="05", title="t", graded="g", device="cpu", tests=tests)
    assert result.not_started() == ("05.a", "05.d")


def test_fresh_stubs_print_one_line_per_part(runner: LocalRunner, toy_course: Course) -> None:
    exercise = toy_course.find("toy")
    source = toy_course.exercise_dir(exercise)  # the committed stubs
    result = runner.run(
        GradeJob(course=toy_course, exercise=exercise, source=source, label="stubs", device="cpu")
    )
    lines = shown(result, readme='exercises/01_toy/README.md, section "What to implement"')
    # the title, a line per part, where to start, the score
    assert len(lines) == 3 + len(exercise.parts), "\n".join(lines)
    assert lines[1] == "01.allreduce: not started (0 / 4); stuck? `grade hint 01 allreduce`"
    assert lines[2] == "01.square: not started (0 / 1); stuck? `grade hint 01 square`"
    assert lines[3] == 'Start at exercises/01_toy/README.md, section "What to implement".'
    assert lines[-1].startswith("Score: 0 / 5")


def test_a_started_part_keeps_its_full_report(
    runner: LocalRunner, toy_course: Course, tmp_path: Path
) -> None:
    exercise = toy_course.find("toy")
    stub = (toy_course.exercise_dir(exercise) / "toy.py").read_text()
    started = 'raise NotImplementedError("TODO(01.square): not implemented yet")'
    (tmp_path / "toy.py").write_text(stub.replace(started, "return x + x  # doubled, not squared"))
    result = runner.run(
        GradeJob(course=toy_course, exercise=exercise, source=tmp_path, label="half", device="cpu")
    )
    text = "\n".join(shown(result))
    assert "01.allreduce: not started" in text and "01.square: not started" not in text
    assert "lost 1 point on 01.square" in text  # the started part's concept, with its idea
    assert "TODO(01.allreduce)" not in text  # the part not started shows no failure messages


def test_the_pointer_is_the_readme_section_that_lists_the_tasks(course: Course) -> None:
    assert task_section(course, course.find("06")) == (
        'exercises/06_rdma_concepts/README.md, section "What to implement"'
    )
    # 24 has no such section: its first one
    assert task_section(course, course.find("24")).startswith(
        "exercises/24_worked_examples/README.md, section"
    )
