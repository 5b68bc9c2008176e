"""The operations behind the CLI: grade one exercise, check the course, list exercises, write stubs."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.course import Course, Exercise
from grader.results import ExerciseResult, Status
from grader.runners import GradeJob, Runner
from grader.stubs import render_stub, stale_stubs

RESULTS_DIR = ".grade/results"
"""Where the student's own last results live, for ``grade list``."""


def grade_exercise(
    *,
    course: Course,
    exercise: Exercise,
    runner: Runner,
    submission: Path | None,
    solution: bool,
    device: str,
) -> ExerciseResult:
    """Grade the student's folder, a submission (folder or zip) or, with ``solution``, the reference."""
    if not exercise.parts:
        raise ValueError(f"exercise {exercise.key} ({exercise.slug}) has no graded parts yet")
    if solution:
        source, label = course.solution_dir(exercise), "the reference solution"
    elif submission is not None:
        source, label = submission, f"submission {submission}"
    else:
        source = course.exercise_dir(exercise)
        label = f"your work in exercises/{exercise.dirname}"
    result = runner.run(GradeJob(course=course, exercise=exercise, source=source, label=label, device=device))
    if not solution and submission is None:
        _remember(course, result)
    return result


def _remember(course: Course, result: ExerciseResult) -> None:
    folder = course.root / RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result.exercise}.json").write_text(json.dumps(result.to_dict(), indent=1))


def last_result(course: Course, exercise: Exercise) -> ExerciseResult | None:
    """The student's last graded result for ``exercise``, if any."""
    path = course.root / RESULTS_DIR / f"{exercise.key}.json"
    try:
        return ExerciseResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------
# grade check


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
    reference = grade_exercise(
        course=course, exercise=exercise, runner=runner, submission=None, solution=True, device=device
    )
    problems += _reference_problems(reference, exercise)
    with tempfile.TemporaryDirectory(prefix="distgpu-stubs-") as folder:
        for name in exercise.files:
            source = (course.solution_dir(exercise) / name).read_text()
            (Path(folder) / name).write_text(render_stub(source, name))
        stubs = grade_exercise(
            course=course,
            exercise=exercise,
            runner=runner,
            submission=Path(folder),
            solution=False,
            device=device,
        )
    problems += _stub_problems(stubs)
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


def _stub_problems(result: ExerciseResult) -> list[str]:
    return [
        f"stub: {t.number} {t.name} should fail with NotImplementedError, got {t.status}"
        + (f": {t.output.splitlines()[0]}" if t.output else "")
        for t in result.tests
        if t.status is not Status.BLOCKED
        and (t.status is not Status.FAILED or "NotImplementedError" not in t.output)
    ]
