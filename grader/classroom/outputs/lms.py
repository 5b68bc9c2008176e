"""Grades into the LMS, so that an import never erases or changes a grade it does not mean to.

    grade export --canvas OUT.csv --roster CANVAS_EXPORT.csv [--exercise NN] [--missing zero]
    grade export --moodle OUT.csv --roster WORKSHEET.csv --exercise NN
    grade export --moodle-gradebook OUT.csv --roster MOODLE.csv [--exercise NN]

Each file holds one exercise, and a row only for a student who has a grade in it: without ``--exercise``,
one file per exercise (``OUT-NN.csv``). No cell is ever blank or ``-``, because of what the importers do
with one, read in their source:

| importer | existing grade | cell | result |
|---|---|---|---|
| Canvas (1) | none | blank or ``-`` | no change |
| Canvas | 7 | blank or ``-`` | a change: the preview offers to remove the 7 |
| Canvas | 7 | 8 | updated to 8 |
| Moodle gradebook CSV (2) | 7 | ``''`` or ``-`` | ``finalgrade = null``: the 7 is cleared |
| Moodle gradebook CSV | 7 | 8 | updated to 8 |
| Moodle grading worksheet (3) | 7 | ``''`` | skipped: the 7 stays |

(1) instructure/canvas-lms ``app/models/gradebook_importer.rb``, ``no_change_to_value?``; (2) moodle/moodle
``grade/import/csv/classes/load_data.php``, ``update_grade_item``; (3) moodle/moodle
``mod/assign/feedback/offline/locallib.php``, ``process_import_grades``.

A roster student without a graded submission is left out and said (``--missing zero`` writes 0 for a
missing submission instead, where the course's policy says so; an invalid upload is always left out: it
is to be fixed and graded). A graded student the roster does not hold is said too, and makes the exit
status 1. Grades are scaled to the LMS's maximum: the share of the exercise's points times Canvas's
``Points Possible`` for the assignment's column, or the worksheet's ``Maximum grade`` (so 12/12 arrives
as full marks, not 12/100); ``--moodle-gradebook`` writes percent.

The rosters are the files the instructor downloads (``grader.classroom.outputs.rosters``). Their text goes
through ``spreadsheet.text_cell`` where no importer matches on it; the cells an importer matches rows by
are written as downloaded (Canvas's ``ID``, Moodle's ``Identifier``), and a Moodle user field that starts
like a formula leaves its row out, said, since Moodle's CSV import would stop at it (``check_user_exists``
fails the whole import).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.classroom.outputs.rosters import Match, Roster
from grader.classroom.state.gradebook import COMMENT_CELL, is_invalid_comment
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError

NO_SUBMISSION = "no submission"
INVALID = "an invalid upload (fix it and grade it again)"
MISSING_POLICIES = ("leave", "zero")
"""``--missing``: leave a student without a submission out of the file, or write 0 for them."""


@dataclass
class Grades:
    """What the gradebook holds: a score per (exercise, student) for the graded ones."""

    exercises: list[Exercise]
    """The course's exercises the gradebook has an assignment for, in course order."""
    maxima: dict[str, float] = field(default_factory=dict)
    """Exercise key -> the points its gradebook assignment is out of (its grade cells, summed)."""
    scores: dict[tuple[str, str], float] = field(default_factory=dict)
    """(exercise key, student) -> score, for graded submissions."""
    invalid: set[tuple[str, str]] = field(default_factory=set)
    """(exercise key, student) of uploads that could not be graded."""

    def students(self) -> set[str]:
        return {s for _, s in self.scores} | {s for _, s in self.invalid}


@dataclass(frozen=True)
class Placed:
    """One exercise's grades on a roster's rows."""

    exercise: Exercise
    shares: dict[int, float]
    """Roster row -> the share of the exercise's points it earned (0..1)."""
    left_out: dict[int, str]
    """Roster row -> why it has no grade."""


@dataclass(frozen=True)
class Written:
    """One file an export wrote."""

    path: Path
    exercise: Exercise
    column: str
    """The grade column's header."""
    rows: int
    left_out: dict[str, list[str]]
    """Why -> the students (names from the roster) left out for it."""
    note: str = ""
    """What the instructor should know about the column (its scale, an assignment the import creates)."""


@dataclass(frozen=True)
class Export:
    match: Match
    files: list[Written]
    unmatched: list[str]
    """Students with a grade in an exported exercise and no roster row: their grades are in no file."""


def read_grades(gradebook: Any, course: Course) -> Grades:
    """Every submission in ``gradebook`` of an exercise of ``course``: its score, or that it was invalid."""
    from nbgrader.api import MissingEntry

    assignments = {a.name: a for a in gradebook.assignments}
    grades = Grades([e for e in course.exercises if e.dirname in assignments])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy 2.x warns about nbgrader's session use; harmless
        for exercise in grades.exercises:
            grades.maxima[exercise.key] = float(assignments[exercise.dirname].max_score)
            for student in (s.id for s in gradebook.students):
                try:
                    submission = gradebook.find_submission(exercise.dirname, student)
                except MissingEntry:
                    continue
                if _invalid(gradebook, exercise, student):
                    grades.invalid.add((exercise.key, student))
                else:
                    grades.scores[exercise.key, student] = float(submission.score)
    return grades


def _invalid(gradebook: Any, exercise: Exercise, student: str) -> bool:
    from nbgrader.api import MissingEntry

    try:
        comment = gradebook.find_comment(COMMENT_CELL, exercise.slug, exercise.dirname, student)
    except MissingEntry:
        return False
    return is_invalid_comment(comment.auto_comment)


def place(grades: Grades, exercise: Exercise, roster: Roster, match: Match, missing: str) -> Placed:
    """Each roster row's share of ``exercise``'s points, or why it has none (module docstring)."""
    maximum = grades.maxima.get(exercise.key, 0.0)
    if maximum <= 0:
        raise UsageError(f"exercise {exercise.key} has no graded points in the gradebook")
    student_of = {row: student for student, row in match.rows.items()}
    shares: dict[int, float] = {}
    left_out: dict[int, str] = {}
    for row in range(len(roster.rows)):
        key = (exercise.key, student_of.get(row, ""))
        if key in grades.scores:
            shares[row] = min(max(grades.scores[key] / maximum, 0.0), 1.0)
        elif key in grades.invalid:
            left_out[row] = INVALID
        elif missing == "zero":
            shares[row] = 0.0
        else:
            left_out[row] = NO_SUBMISSION
    return Placed(exercise, shares, left_out)


def unmatched(grades: Grades, exercises: list[Exercise], match: Match) -> list[str]:
    keys = {e.key for e in exercises}
    return sorted({s for k, s in grades.scores if k in keys and s not in match.rows})


def output_path(out: Path, exercise: Exercise, *, one: bool) -> Path:
    """``out`` for a one-exercise export, else ``OUT-NN.csv`` beside it."""
    return out if one else out.with_name(f"{out.stem}-{exercise.key}{out.suffix}")


def left_out_by_reason(roster: Roster, left_out: dict[int, str]) -> dict[str, list[str]]:
    by_reason: dict[str, list[str]] = {}
    for row, why in sorted(left_out.items()):
        by_reason.setdefault(why, []).append(roster.name(row))
    return by_reason
