"""Grade a learner's own exercise folder: remember the result for ``grade list`` and count the attempt."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult
from grader.core.submission import file_hashes
from grader.learner.progress import Attempt, ProgressError, ProgressStore, now
from grader.runners import Runner, grade_job

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
    part: str | None = None,
    concept: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    trace: bool = False,
) -> ExerciseResult:
    """Grade the student's folder, a submission (folder or zip) or, with ``solution``, the reference.

    ``part`` ('ring_allreduce' or '02.ring_allreduce') grades that part alone, ``concept`` that concept
    alone (a check, as GitHub Classroom's steps run it: not an attempt); ``trace`` keeps the timeline of
    every multi-rank test, passed ones too (``--trace``). Grading the student's own folder remembers the
    result for ``grade list`` and adds an attempt to their progress store; a store that fails adds a note to
    the result instead of failing the grade.
    """
    job = grade_job(
        course=course,
        exercise=exercise,
        submission=submission,
        solution=solution,
        device=device,
        part=part,
        concept=concept,
        on_progress=on_progress,
        trace=trace,
    )
    result = runner.run(job)
    if not solution and submission is None and concept is None:
        part_id = job.parts[0] if job.parts else None
        if part_id is None:
            _remember(course, result)
        result = _record_attempt(course, exercise, result, part_id, job.source)
    return result


def _record_attempt(
    course: Course, exercise: Exercise, result: ExerciseResult, part: str | None, source: Path
) -> ExerciseResult:
    attempt = Attempt(
        exercise=exercise.key,
        time=now(),
        score=result.score,
        max_score=result.max_score,
        full_marks=result.all_graded_passed,
        part=part,
        suites="public+hidden" if any(t.suite == "hidden" for t in result.tests) else "public",
        files=file_hashes(source, exercise.files),
    )
    try:
        ProgressStore().add_attempt(course.title, attempt)
    except ProgressError as exc:
        return replace(result, notes=(*result.notes, f"your progress was not saved: {exc}"))
    return result


def _remember(course: Course, result: ExerciseResult) -> None:
    folder = course.root / RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{result.exercise}.json", json.dumps(result.to_dict(), indent=1))


def last_result(course: Course, exercise: Exercise) -> ExerciseResult | None:
    """The student's last graded result for ``exercise``, if any."""
    path = course.root / RESULTS_DIR / f"{exercise.key}.json"
    try:
        return ExerciseResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


TASK_SECTION = "What to implement"
"""The README section that lists each part's task, in every exercise that has one."""


def task_section(course: Course, exercise: Exercise) -> str:
    """Where a learner reads what to do, for a part not started: 'exercises/NN_slug/README.md, section
    "What to implement"', else the README's first '## ' section (an exercise laid out otherwise)."""
    readme = course.exercise_dir(exercise) / "README.md"
    try:
        headings = [line[3:].strip() for line in readme.read_text().splitlines() if line.startswith("## ")]
    except OSError:
        return ""
    where = readme.relative_to(course.root) if readme.is_relative_to(course.root) else readme
    section = TASK_SECTION if TASK_SECTION in headings else next(iter(headings), "")
    return f'{where}, section "{section}"' if section else str(where)
