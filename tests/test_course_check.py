"""`grade check` on the real course: every reference scores 100 %, every fresh stub 0 %, stubs in sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.course import load_course
from grader.grading import check_exercise
from grader.runners.local import LocalRunner

COURSE = load_course(Path(__file__).parent.parent / "course.yml")


@pytest.mark.parametrize("exercise", [e for e in COURSE.exercises if e.parts], ids=lambda e: e.dirname)
def test_reference_full_marks_and_stub_zero(runner: LocalRunner, exercise) -> None:  # type: ignore[no-untyped-def]
    found = check_exercise(course=COURSE, exercise=exercise, runner=runner, device="cpu")
    assert found.problems == ()
    assert found.reference is not None and found.reference.score == exercise.points
    assert found.stubs is not None and found.stubs.score == 0
