"""A grading job, the runner that grades it, and the error that means the course itself is broken."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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
    concept: str | None = None
    """Grade only this concept's tests (of the one part in ``parts``); the local runner only."""
    on_progress: Callable[[int, int], None] | None = None
    """Called with (tests finished, tests in all) as tests end; the local runner only."""
    trace: bool = False
    """Keep the space-time timeline of every multi-rank test, passed ones too, whole (``--trace``); the
    local runner only."""
    staging_notes: tuple[str, ...] | None = None
    """What staging said of the upload, when the caller staged it already (``grade batch`` stages each upload
    once): ``source`` is then that staged copy, and these notes replace what copying it would say (the copy
    has lost the upload's refused members and near-miss names)."""


def grade_job(
    *,
    course: Course,
    exercise: Exercise,
    submission: Path | None,
    solution: bool,
    device: str,
    part: str | None = None,
    concept: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    trace: bool = False,
) -> GradeJob:
    """The job that grades the student's folder, a submission (folder or zip) or, with ``solution``, the
    reference; ``part`` ('ring_allreduce' or '02.ring_allreduce') grades that part alone, ``concept`` that
    concept of it alone (its part found when ``part`` is None); ``trace`` keeps every multi-rank test's
    timeline. ``UsageError`` for an exercise without graded parts, an unknown part or concept."""
    if not exercise.parts:
        raise UsageError(f"exercise {exercise.key} ({exercise.slug}) has no graded parts yet")
    part_id = resolve_part(exercise, part) if part is not None else None
    if concept is not None:
        part_id = resolve_concept(exercise, concept, part_id)
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
        concept=concept,
        on_progress=on_progress,
        trace=trace,
    )


def resolve_part(exercise: Exercise, ref: str) -> str:
    """'ring_allreduce' or '02.ring_allreduce' -> the part's id; ``UsageError`` naming the parts otherwise."""
    for part in exercise.parts:
        if ref in (part.id, part.id.split(".", 1)[1]):
            return part.id
    names = ", ".join(p.id.split(".", 1)[1] for p in exercise.parts)
    raise UsageError(f"exercise {exercise.key} has no part {ref!r}; its parts are {names}")


def resolve_concept(exercise: Exercise, concept: str, part_id: str | None) -> str:
    """The id of the part that grades ``concept`` (a part without concepts is one, named as the part);
    ``UsageError`` naming the concepts of ``part_id`` (or of the exercise) otherwise."""
    parts = [p for p in exercise.parts if part_id in (None, p.id)]
    for part in parts:
        if concept in [c.name for c in part.concepts] or (not part.concepts and concept == part.name):
            return part.id
    names = ", ".join(c for p in parts for c in ([c.name for c in p.concepts] or [p.name]))
    where = f"part {part_id}" if part_id else f"exercise {exercise.key}"
    raise UsageError(f"{where} has no concept {concept!r}; its concepts are {names}")


class Runner(Protocol):
    def run(self, job: GradeJob) -> ExerciseResult:
        """Grade ``job``. Submission faults become verdicts; only course bugs raise (``SuiteError``)."""
        ...

    def close(self) -> None:
        """Let go of what the runner keeps between jobs (a spare container, a kept rank factory)."""
        ...


# ---------------------------------------------------------------------------------------------------------
# the envelope: what a grading in a process of its own (a container, a batch slot) hands back, as JSON


def graded_envelope(runner: Runner, job: GradeJob) -> dict[str, Any]:
    """Grade ``job`` into its envelope: ``{"result": ...}`` (``ExerciseResult.to_dict``), or
    ``{"suite_error": ...}`` when the exercise's own suite is broken."""
    try:
        return {"result": runner.run(job).to_dict()}
    except SuiteError as exc:
        return {"suite_error": str(exc)}


def opened_envelope(payload: object) -> ExerciseResult | None:
    """The result in an envelope of ``graded_envelope``; ``SuiteError`` for a broken suite; None when
    ``payload`` is no envelope (the grading ended without writing one)."""
    if isinstance(payload, dict) and "suite_error" in payload:
        raise SuiteError(str(payload["suite_error"]))
    if isinstance(payload, dict) and "result" in payload:
        return ExerciseResult.from_dict(payload["result"])
    return None
