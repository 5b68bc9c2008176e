"""Section checkpoints: grade every exercise of a section and pass at the threshold in course.yml.

A checkpoint writes a shareable record, ``.grade/checkpoints/section-N.json`` in the course folder: the
scores, the sha256 of every graded file, which suites ran, and a ``digest`` (sha256 of the record's other
fields as canonical JSON) so that an edited record no longer matches its digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise, Section
from grader.core.errors import UsageError
from grader.core.results import ExerciseResult, Status
from grader.core.submission import file_hashes
from grader.learner.grade import grade_exercise
from grader.learner.progress import CheckpointRow, ProgressError, ProgressStore, now
from grader.runners import Runner

RECORDS_DIR = ".grade/checkpoints"


@dataclass(frozen=True)
class CheckpointOutcome:
    section: Section
    results: list[ExerciseResult]
    passed: bool
    score: float
    max_score: float
    record_path: Path
    notes: list[str]
    """E.g. that the progress store could not be written."""
    not_graded: float = 0.0
    """Points of tests blocked here (GPU parts on a machine without a GPU): outside ``max_score``, neither
    earned nor lost; the record says how many."""
    missed: list[str] = field(default_factory=list)
    """'04 nccl_internals, 04.selector: protocol_choice' for each concept below the floor: each one alone
    keeps the checkpoint from passing, whatever the score."""


def run_checkpoint(
    *,
    course: Course,
    section: Section,
    runner: Runner,
    device: str,
    on_exercise: Callable[[Exercise], None] = lambda exercise: None,
    on_progress: Callable[[int, int], None] | None = None,
) -> CheckpointOutcome:
    """Grade the learner's folder for each gradable exercise of ``section``; record and return the outcome.

    ``UsageError`` when the section has no checkpoint in course.yml, or an exercise of it cannot be used
    (``Exercise.problem``): nothing is graded then. Each grading is an attempt in the
    progress store as well, as with ``grade exercise``.
    """
    if section.checkpoint is None:
        raise UsageError(f"section {section.number} ({section.title}) has no checkpoint in course.yml")
    exercises = [e.usable() for e in section.exercises if e.parts]  # all whole, before any grading
    results = []
    for exercise in exercises:
        on_exercise(exercise)
        results.append(
            grade_exercise(
                course=course,
                exercise=exercise,
                runner=runner,
                submission=None,
                solution=False,
                device=device,
                on_progress=on_progress,
            )
        )
    score, max_score = sum(r.score for r in results), graded_points(results)
    not_graded = round(sum(r.max_score for r in results) - max_score, 6)
    missed = missed_concepts(results, section, section.checkpoint.concept_floor)
    passed = max_score > 0 and score >= section.checkpoint.threshold * max_score - 1e-9 and not missed
    record = _record(course, section, results, passed)
    path = course.root / RECORDS_DIR / f"section-{section.number}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, indent=1) + "\n")
    notes = []
    row = CheckpointRow(
        section=section.number,
        time=record["time"],
        passed=passed,
        score=score,
        max_score=max_score,
        record=str(path),
    )
    try:
        ProgressStore().add_checkpoint(course.title, row)
    except ProgressError as exc:
        notes.append(f"your progress was not saved: {exc}")
    return CheckpointOutcome(section, results, passed, score, max_score, path, notes, not_graded, missed)


def graded_points(results: list[ExerciseResult]) -> float:
    """The points of the tests that could run here: a blocked test (a GPU part without a GPU) counts for
    nothing either way, so a learner without a GPU can pass a section on what it grades."""
    return round(sum(t.max_score for r in results for t in r.tests if t.status is not Status.BLOCKED), 6)


def missed_concepts(results: list[ExerciseResult], section: Section, floor: float) -> list[str]:
    """Concepts that scored under ``floor`` of their points, except those only a GPU could grade here."""
    slugs = {e.key: e.slug for e in section.exercises}
    missed = []
    for result in results:
        for concept in result.concepts:
            if concept.score >= floor * concept.max_score - 1e-9:
                continue
            tests = [t for t in result.tests if (t.part, t.concept) == (concept.part, concept.name)]
            if all(t.status in (Status.PASSED, Status.BLOCKED) for t in tests):
                continue  # blocked (no GPU here): nothing was shown wrong
            missed.append(f"{result.exercise} {slugs[result.exercise]}, {concept.part}: {concept.name}")
    return missed


def _record(course: Course, section: Section, results: list[ExerciseResult], passed: bool) -> dict[str, Any]:
    assert section.checkpoint is not None
    exercises = {e.key: e for e in section.exercises}
    body: dict[str, Any] = {
        "course": course.title,
        "section": section.number,
        "title": section.title,
        "passed": passed,
        "threshold": section.checkpoint.threshold,
        "score": round(sum(r.score for r in results), 6),
        "max_score": graded_points(results),
        "not_graded_here": round(sum(r.max_score for r in results) - graded_points(results), 6),
        "time": now(),
        "grader": version("distgpu"),
        "exercises": [
            {
                "exercise": r.exercise,
                "slug": exercises[r.exercise].slug,
                "score": r.score,
                "max_score": r.max_score,
                "suites": "public+hidden" if any(t.suite == "hidden" for t in r.tests) else "public",
                "files": file_hashes(course.exercise_dir(exercises[r.exercise]), exercises[r.exercise].files),
            }
            for r in results
        ],
    }
    return body | {"digest": record_digest(body)}


def record_digest(body: dict[str, Any]) -> str:
    """sha256 of ``body`` without its ``digest`` field, as canonical JSON (sorted keys, no spaces)."""
    fields = {k: v for k, v in body.items() if k != "digest"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
