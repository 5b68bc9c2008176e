"""Recording grades in nbgrader's own gradebook (SQLite by default, any SQLAlchemy URL).

Mapping: an exercise is an assignment (named ``NN_slug``) with one notebook (its slug); each graded test is
a grade cell worth its points; each student is a student. One solution cell, ``submission``, holds the
comment: why an invalid upload was not graded, so the instructor sees it next to the 0, or which concepts a
graded one lost (each test cell's score already follows its concept: see grader/core/scoring.py). Only one
process writes: the batch driver.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.classroom.state.gradebook_faults import corrupt, database_errors, nbgrader_log_muted
from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult, Status, TestResult

COMMENT_CELL = "submission"
"""The solution cell whose comment says why an upload was not graded."""
INVALID_MARK = "not graded: "
"""How that comment begins for an invalid upload, and only then: nbgrader's gradebook has no field of its own
for a verdict, so this mark is the gradebook's record of one (``is_invalid_comment`` reads it back)."""
SCORE_COLUMNS = ("raw_score", "late_submission_penalty", "score", "max_score")
DECIMALS = 6
"""Scores are sums of per-test shares (2/3 of a point...): the CSV rounds them as results.json does."""


def default_url(course: Course) -> str:
    return f"sqlite:///{course.root / 'gradebook.db'}"


def cell_name(test: TestResult) -> str:
    """A test's grade cell: public and hidden suites may reuse a test name, so the suite is part of it."""
    return f"{test.suite}/{test.name}"


@contextmanager
def open_gradebook(url: str, course_id: str, *, check: bool = False) -> Iterator[Any]:
    """nbgrader's ``Gradebook``; a new database is created with nbgrader's own migrations (alembic).

    A database that does not open, is corrupt or fails a write (a full disk), in here or in the block, is
    an ``EnvironmentFailure``: one line naming the database and what to do (``gradebook_failure``).
    ``check``: read every page first (SQLite's ``PRAGMA quick_check``), so that damage in the middle of the
    file stops the command before it writes anything, not halfway through an export."""
    # nbgrader runs the `alembic` command for a new database: it must be on PATH even in an unactivated venv.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    with warnings.catch_warnings(), database_errors(database_location(url)), nbgrader_log_muted():
        warnings.simplefilter("ignore")  # SQLAlchemy 2.x warns about nbgrader's session use; harmless
        from nbgrader.api import Gradebook

        with Gradebook(url, course_id=course_id) as gradebook:
            if check and gradebook.engine.dialect.name == "sqlite":
                _quick_check(gradebook, url)
            yield gradebook


def database_location(url: str) -> str:
    """What an error names: the SQLite file, else the URL without its password."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        return parsed.database
    return parsed.render_as_string(hide_password=True)


def _quick_check(gradebook: Any, url: str) -> None:
    from sqlalchemy import text

    found = [row[0] for row in gradebook.db.execute(text("PRAGMA quick_check"))]
    if found != ["ok"]:
        raise corrupt(database_location(url), "; ".join(found))


@dataclass(frozen=True)
class StudentInfo:
    """What the gradebook keeps beside a student's id (the platform's id: ``grader.classroom.intake``)."""

    name: str | None = None
    """The name as the platform gives it: nbgrader's ``last_name`` (no platform splits names alike)."""
    platform: str = "folders"
    """Where the id comes from; a Canvas id is also nbgrader's ``lms_user_id``."""
    late: bool | None = None
    """The platform's own late flag: said in the ``submission`` cell's comment."""


def record(
    gradebook: Any,
    *,
    exercise: Exercise,
    cells: list[TestResult],
    student: str,
    result: ExerciseResult,
    submitted: dt.datetime | None,
    duedate: dt.datetime | None,
    who: StudentInfo = StudentInfo(),
) -> None:
    """Create or update ``student``'s submission of ``exercise`` with one auto score per grade cell.

    ``cells`` are the reference run's tests (the exercise's full list); a test missing from ``result`` (a
    container that died before its tests ran) scores 0 for that cell. An invalid upload scores 0 in every
    cell, and its reason is the comment of the ``submission`` cell; a graded one gets the concepts it lost.
    The student's name and, from Canvas, the LMS id are kept beside the id (``who``).
    """
    assignment, notebook = exercise.dirname, exercise.slug
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gradebook.update_or_create_assignment(assignment, duedate=duedate)
        gradebook.update_or_create_notebook(notebook, assignment)
        for cell in cells:
            gradebook.update_or_create_grade_cell(
                cell_name(cell), notebook, assignment, max_score=cell.max_score, cell_type="code"
            )
        gradebook.update_or_create_solution_cell(COMMENT_CELL, notebook, assignment)
        lms_id = student if who.platform == "canvas" else None
        gradebook.update_or_create_student(student, last_name=who.name, lms_user_id=lms_id)
        gradebook.update_or_create_submission(assignment, student, timestamp=submitted)
        scores = {cell_name(t): t.score for t in result.tests}
        for cell in cells:
            grade = gradebook.find_grade(cell_name(cell), notebook, assignment, student)
            grade.auto_score = scores.get(cell_name(cell), 0.0)
            grade.needs_manual_grade = False  # the column defaults to True; nbgrader's autograde clears it
        _comment(gradebook, notebook, assignment, student).auto_comment = _comment_text(result, who)
        gradebook.db.commit()


def remove_submissions(gradebook: Any, exercise: Exercise, students: Iterable[str]) -> None:
    """Remove ``exercise``'s submission of each of ``students`` that has one (their other exercises stay)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        held = {s.student.id for s in gradebook.assignment_submissions(exercise.dirname)}
        for student in sorted(held.intersection(students)):
            gradebook.remove_submission(exercise.dirname, student)


def _comment_text(result: ExerciseResult, who: StudentInfo) -> str | None:
    """Why an upload was not graded, or the concepts a graded one lost (None with every concept earned and
    no late flag); the platform's late flag first."""
    late = [f"late ({who.platform})"] if who.late else []
    if result.verdict is Status.INVALID:
        reason = result.notes[0] if result.notes else "invalid upload"
        return INVALID_MARK + "; ".join([reason, *late])
    lost = [
        f"{c.part}: {c.name} (0/{c.max_score:g}, {c.tests - c.passed} of {c.tests} tests not passed)"
        for c in result.concepts
        if not c.earned
    ]
    said = [*late, "concepts lost: " + "; ".join(lost)] if lost else late
    return "; ".join(said) or None


def is_invalid_comment(comment: str | None) -> bool:
    """Whether a ``submission`` cell's comment records an invalid upload (``INVALID_MARK``)."""
    return (comment or "").startswith(INVALID_MARK)


def _comment(gradebook: Any, notebook: str, assignment: str, student: str) -> Any:
    """The ``submission`` cell's comment; a submission made before that cell existed gets one now."""
    from nbgrader.api import Comment, MissingEntry

    try:
        return gradebook.find_comment(COMMENT_CELL, notebook, assignment, student)
    except MissingEntry:
        cell = gradebook.find_solution_cell(COMMENT_CELL, notebook, assignment)
        comment = Comment(
            cell_id=cell.id, notebook=gradebook.find_submission_notebook(notebook, assignment, student)
        )
        gradebook.db.add(comment)
        return comment


def export_csv(gradebook: Any) -> str:
    """The CSV `nbgrader export` writes, made by nbgrader's own exporter, with scores rounded to
    ``DECIMALS`` places (a sum of thirds is 10.0, not 9.999999999999996). The caller writes it (atomically,
    once every other read of the gradebook has succeeded)."""
    from nbgrader.plugins.export import CsvExportPlugin

    with tempfile.TemporaryDirectory(prefix="distgpu-export-") as folder:
        exported = Path(folder) / "grades.csv"
        CsvExportPlugin(to=str(exported)).export(gradebook)
        rows = list(csv.DictReader(io.StringIO(exported.read_text())))
        if not rows:
            return exported.read_text()
    for row in rows:
        for column in SCORE_COLUMNS:
            if row.get(column):
                row[column] = str(round(float(row[column]), DECIMALS))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()
