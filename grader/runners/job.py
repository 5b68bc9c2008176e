"""A grading job, the runner that grades it, and the error that means the course itself is broken."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from grader.core.course import Course, Exercise
from grader.core.errors import UsageError
from grader.core.results import ExerciseResult


class SuiteError(UsageError):
    """The exercise's own tests are broken (they do not import, or name unknown parts): a course bug, the
    author's to fix (a configuration error)."""


@dataclass(frozen=True, kw_only=True)
class GradeJob:
    course: Course
    exercise: Exercise
    source: Path
    """A folder or .zip with the exercise's editable files: the student's folder, a submission, solutions/."""
    label: str
    """How the report names what was graded."""
    device: str = "auto"
    """'auto' (CUDA when available), 'cpu' (gloo) or 'cuda' (NCCL, one GPU per rank)."""
    parts: tuple[str, ...] = ()
    """Grade only these parts ('02.ring_allreduce', ...); empty grades them all. The local runner only."""
    on_progress: Callable[[int, int], None] | None = None
    """Called with (tests finished, tests in all) as tests end; the local runner only."""


def grade_job(
    *,
    course: Course,
    exercise: Exercise,
    submission: Path | None,
    solution: bool,
    device: str,
    part: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> GradeJob:
    """The job that grades the student's folder, a submission (folder or zip) or, with ``solution``, the
    reference; ``part`` ('ring_allreduce' or '02.ring_allreduce') grades that part alone. ``UsageError``
    for an exercise without graded parts or an unknown part."""
    if not exercise.parts:
        raise UsageError(f"exercise {exercise.key} ({exercise.slug}) has no graded parts yet")
    part_id = resolve_part(exercise, part) if part is not None else None
    if solution:
        source, label = course.solution_dir(exercise), "the reference solution"
    elif submission is not None:
        source, label = submission, f"submission {submission}"
    else:
        source = course.exercise_dir(exercise)
        label = f"your work in exercises/{exercise.dirname}"
    return GradeJob(
        course=course,
        exercise=exercise,
        source=source,
        label=label,
        device=device,
        parts=(part_id,) if part_id else (),
        on_progress=on_progress,
    )


def resolve_part(exercise: Exercise, ref: str) -> str:
    """'ring_allreduce' or '02.ring_allreduce' -> the part's id; ``UsageError`` naming the parts otherwise."""
    for part in exercise.parts:
        if ref in (part.id, part.id.split(".", 1)[1]):
            return part.id
    names = ", ".join(p.id.split(".", 1)[1] for p in exercise.parts)
    raise UsageError(f"exercise {exercise.key} has no part {ref!r}; its parts are {names}")


class Runner(Protocol):
    def run(self, job: GradeJob) -> ExerciseResult:
        """Grade ``job``. Submission faults become verdicts; only course bugs raise (``SuiteError``)."""
        ...

    def close(self) -> None:
        """Let go of what the runner keeps between jobs (a spare container, a kept rank factory)."""
        ...
