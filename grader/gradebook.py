"""Recording grades in nbgrader's own gradebook (SQLite by default, any SQLAlchemy URL).

Mapping: an exercise is an assignment (named ``NN_slug``) with one notebook (its slug); each graded test is
a grade cell worth its points; each student is a student. Only one process writes: the batch driver.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from grader.course import Course, Exercise
from grader.results import ExerciseResult, TestResult


def default_url(course: Course) -> str:
    return f"sqlite:///{course.root / 'gradebook.db'}"


def cell_name(test: TestResult) -> str:
    """A test's grade cell: public and hidden suites may reuse a test name, so the suite is part of it."""
    return f"{test.suite}/{test.name}"


@contextmanager
def open_gradebook(url: str, course_id: str) -> Iterator[Any]:
    """nbgrader's ``Gradebook``; a new database is created with nbgrader's own migrations (alembic)."""
    # nbgrader runs the `alembic` command for a new database: it must be on PATH even in an unactivated venv.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy 2.x warns about nbgrader's session use; harmless
        from nbgrader.api import Gradebook

        with Gradebook(url, course_id=course_id) as gradebook:
            yield gradebook


def record(
    gradebook: Any,
    *,
    exercise: Exercise,
    cells: list[TestResult],
    student: str,
    result: ExerciseResult,
    submitted: dt.datetime | None,
    duedate: dt.datetime | None,
) -> None:
    """Create or update ``student``'s submission of ``exercise`` with one auto score per grade cell.

    ``cells`` are the reference run's tests (the exercise's full list); a test missing from ``result`` (a
    container that died before its tests ran) scores 0 for that cell.
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
        gradebook.update_or_create_student(student)
        gradebook.update_or_create_submission(assignment, student, timestamp=submitted)
        scores = {cell_name(t): t.score for t in result.tests}
        for cell in cells:
            grade = gradebook.find_grade(cell_name(cell), notebook, assignment, student)
            grade.auto_score = scores.get(cell_name(cell), 0.0)
            grade.needs_manual_grade = False  # the column defaults to True; nbgrader's autograde clears it
        gradebook.db.commit()


def export_csv(gradebook: Any, path: Path) -> None:
    """Write the CSV `nbgrader export` writes, through nbgrader's own exporter."""
    from nbgrader.plugins.export import CsvExportPlugin

    CsvExportPlugin(to=str(path)).export(gradebook)
