"""``grade check``: the stubs are in sync, the reference earns full marks and untouched stubs earn none."""

from __future__ import annotations

from dataclasses import dataclass

from grader.authoring.stubs import fresh_stubs, stale_stubs
from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult, Status
from grader.runners import Runner, grade_job


@dataclass(frozen=True)
class ExerciseCheck:
    """``grade check``'s findings for one exercise; ``ok`` when there are no problems."""

    exercise: Exercise
    problems: tuple[str, ...]
    reference: ExerciseResult | None
    stubs: ExerciseResult | None

    @property
    def ok(self) -> bool:
        return not self.problems


def check_exercise(*, course: Course, exercise: Exercise, runner: Runner, device: str) -> ExerciseCheck:
    """Stubs in sync; the reference scores 100 %; fresh stubs score 0 %, each test a NotImplementedError."""
    problems = [
        f"stale stub: {p.relative_to(course.root)} (run `grade stubs`)" for p in stale_stubs(course, exercise)
    ]
    reference = runner.run(
        grade_job(course=course, exercise=exercise, submission=None, solution=True, device=device)
    )
    problems += _reference_problems(reference, exercise)
    with fresh_stubs(course, exercise) as folder:
        stubs = runner.run(
            grade_job(course=course, exercise=exercise, submission=folder, solution=False, device=device)
        )
    problems += stub_problems(stubs)
    return ExerciseCheck(exercise, tuple(problems), reference, stubs)


def _reference_problems(result: ExerciseResult, exercise: Exercise) -> list[str]:
    problems = [
        f"reference: {t.number} {t.name} {t.status}: {t.output.splitlines()[0] if t.output else ''}"
        for t in result.tests
        if t.status not in (Status.PASSED, Status.BLOCKED)
    ]
    tested = {t.part for t in result.tests}
    problems += [f"part {p.id} has no tests" for p in exercise.parts if p.id not in tested]
    return problems


def stub_problems(result: ExerciseResult) -> list[str]:
    """Each test of an untouched stub that does not fail with NotImplementedError (blocked ones aside)."""
    return [
        f"stub: {t.number} {t.name} should fail with NotImplementedError, got {t.status}"
        + (f": {t.output.splitlines()[0]}" if t.output else "")
        for t in result.tests
        if t.status is not Status.BLOCKED
        and (t.status is not Status.FAILED or "NotImplementedError" not in t.output)
    ]
