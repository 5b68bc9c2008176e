"""Grades into the LMS: Canvas's and Moodle's gradebook-import CSV, from the nbgrader gradebook and a roster.

    grade export --canvas canvas.csv --roster roster.csv
    grade export --moodle moodle.csv --roster roster.csv

The gradebook knows students by their submission folder's name; the LMS by its own ids. The roster maps
one to the other: a CSV whose ``student`` column holds the folder names, beside the LMS's ids (``ROSTER``).
Every roster student gets a row; an exercise with no submission, or an invalid upload, is an empty cell,
which both importers read as "no grade" (the LMS's own rule for missing work applies). A graded student
missing from the roster cannot be placed: the export names them, and their grades are not in the file.
Scores are rounded to two decimals, as both gradebooks show them.

The roster's text (names, sections, ids) goes through ``grader.classroom.outputs.spreadsheet.text_cell``:
a cell starting with = + - @, a tab or a carriage return gets a ``'`` in front, so that a spreadsheet the
file is opened in shows it instead of running it as a formula. That includes the ids the LMS matches rows
on, which are otherwise written unchanged: the ids an LMS issues (numbers, SIS ids, logins, email addresses,
usernames) do not start so in practice, and one that did would no longer match (Canvas then tries the row's
other ids and the name; Moodle reports a user mapping error), a row to fix by hand, where the unescaped
cell could run in the instructor's spreadsheet. Scores and Moodle's ``-`` are not text: never escaped.

Canvas. Sources: Canvas's guide "How do I import grades in the Gradebook?"
(https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807);
Ohio State's summary of its required columns ("Student Name OR Student ID OR Student SIS User ID ... SIS
Login ID ... Section ... Assignment Name",
https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/import-csv-file-carmen-grades);
and the importer itself, instructure/canvas-lms ``app/models/gradebook_importer.rb``: the header must start
``Student``, ``ID``, and with ``SIS User ID`` and ``SIS Login ID`` its student columns end at ``Section``; a
student is found by ``ID`` (Canvas's user id), else ``SIS User ID``, else ``SIS Login ID``, else by name; an
assignment column is named ``Title (id)`` for an existing assignment (``Assignment.title_and_id``), and a
bare title matches the assignment of that title or creates one; a row whose first cell is ``Points
Possible`` gives new assignments their points; an empty cell or ``-`` is no score. Columns here: Student,
ID, SIS User ID, SIS Login ID, Section, then one per exercise titled ``NN Title``.

Moodle. Sources: MoodleDocs "Grade import" (https://docs.moodle.org/311/en/Grade_import: a CSV with a
header row, one row per user; in the import form, a column is mapped to the user's email address, ID
number or username, and each grade column to an existing grade item or a new one) and the importer,
moodle/moodle ``grade/import/csv/classes/load_data.php`` (``-`` is no grade for a new grade item, ``''``
and ``-`` for an existing one, so empty cells are written ``-`` here). Columns: the roster's identity
columns among ID number, Email address and Username, then one per exercise titled ``NN Title``.
"""

from __future__ import annotations

import csv
import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.classroom.outputs.spreadsheet import text_cell
from grader.classroom.state.gradebook import COMMENT_CELL, is_invalid_comment
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError

ROSTER = {
    "student": "the submission folder's name: the gradebook's student id (required)",
    "name": "the student's name (Canvas: Student)",
    "section": "Canvas: Section",
    "canvas_id": "Canvas: ID, Canvas's user id",
    "sis_user_id": "Canvas: SIS User ID",
    "sis_login_id": "Canvas: SIS Login ID",
    "idnumber": "Moodle: ID number",
    "email": "Moodle: Email address",
    "username": "Moodle: Username",
}
"""The roster's columns; only ``student`` is required, but each row needs one of the LMS's ids."""
CANVAS_IDS = ("canvas_id", "sis_user_id", "sis_login_id")
MOODLE_IDS = {"idnumber": "ID number", "email": "Email address", "username": "Username"}


@dataclass(frozen=True)
class RosterEntry:
    student: str
    name: str = ""
    section: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    idnumber: str = ""
    email: str = ""
    username: str = ""


@dataclass
class Grades:
    """What the gradebook holds: a score per (exercise, student) for the graded ones."""

    exercises: list[Exercise]
    """The course's exercises the gradebook has an assignment for, in course order."""
    scores: dict[tuple[str, str], float] = field(default_factory=dict)
    """(exercise key, student) -> score, for graded submissions."""
    invalid: set[tuple[str, str]] = field(default_factory=set)
    """(exercise key, student) of uploads that could not be graded."""


@dataclass(frozen=True)
class Export:
    """What an export wrote, and what it could not place."""

    rows: int
    exercises: int
    unmatched: list[str]
    """Students with a grade in the gradebook but no roster row: their grades are not in the file (one whose
    uploads were all invalid has no grade to lose)."""
    invalid: list[str]
    """'exercise student' of invalid uploads, left without a grade."""


def load_roster(path: Path) -> list[RosterEntry]:
    """The roster's rows; ``UsageError`` naming the file and the problem for an unknown column, a missing
    ``student`` column, an empty or repeated student."""
    with path.open(newline="", encoding="utf-8-sig") as handle:  # -sig: Excel writes a byte-order mark
        reader = csv.DictReader(handle)
        columns = [c.strip() for c in reader.fieldnames or []]
        unknown = [c for c in columns if c not in ROSTER]
        if unknown or "student" not in columns:
            problem = f"unknown column {unknown[0]!r}" if unknown else "no 'student' column"
            raise UsageError(f"{path}: {problem}; the roster's columns are {', '.join(ROSTER)}")
        entries = [
            RosterEntry(**{k.strip(): (v or "").strip() for k, v in row.items() if k}) for row in reader
        ]
    seen: set[str] = set()
    for line, entry in enumerate(entries, start=2):
        if not entry.student or entry.student in seen:
            what = "no student" if not entry.student else f"{entry.student!r} again"
            raise UsageError(f"{path}, line {line}: {what}; each student appears once")
        seen.add(entry.student)
    return entries


def read_grades(gradebook: Any, course: Course) -> Grades:
    """Every submission in ``gradebook`` of an exercise of ``course``: its score, or that it was invalid."""
    from nbgrader.api import MissingEntry

    names = {a.name for a in gradebook.assignments}
    grades = Grades([e for e in course.exercises if e.dirname in names])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy 2.x warns about nbgrader's session use; harmless
        for exercise in grades.exercises:
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


# ---------------------------------------------------------------------------------------------------------
# the two formats


def write_canvas(path: Path, grades: Grades, roster: list[RosterEntry]) -> Export:
    """Canvas's gradebook-import CSV (module docstring); ``UsageError`` for a roster row without any of
    Canvas's ids."""
    missing = [e.student for e in roster if not any(getattr(e, k) for k in CANVAS_IDS)]
    if missing:
        raise UsageError(
            f"--roster: no canvas_id, sis_user_id or sis_login_id for {', '.join(missing)}: Canvas would "
            "match them by name alone"
        )
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *_titles(grades)]
    points = ["Points Possible", "", "", "", "", *(_number(e.points) for e in grades.exercises)]
    rows = [
        [
            *map(text_cell, (e.name, e.canvas_id, e.sis_user_id, e.sis_login_id, e.section)),
            *_cells(grades, e.student, ""),
        ]
        for e in roster
    ]
    return _write(path, [header, points, *rows], grades, roster)


def write_moodle(path: Path, grades: Grades, roster: list[RosterEntry]) -> Export:
    """Moodle's grade-import CSV (module docstring); ``UsageError`` unless one of Moodle's ids is given for
    every roster row."""
    ids = [k for k in MOODLE_IDS if all(getattr(e, k) for e in roster)]
    if not ids:
        raise UsageError(
            "--roster: Moodle finds a user by idnumber, email or username; give one of those columns, "
            "filled for every student"
        )
    header = [*(MOODLE_IDS[k] for k in ids), *_titles(grades)]
    rows = [[*(text_cell(getattr(e, k)) for k in ids), *_cells(grades, e.student, "-")] for e in roster]
    return _write(path, [header, *rows], grades, roster)


def _titles(grades: Grades) -> list[str]:
    return [f"{e.key} {e.title}" for e in grades.exercises]


def _cells(grades: Grades, student: str, empty: str) -> list[str]:
    return [
        _number(grades.scores[e.key, student]) if (e.key, student) in grades.scores else empty
        for e in grades.exercises
    ]


def _number(value: float) -> str:
    return f"{round(value, 2):g}"


def _write(path: Path, table: list[list[str]], grades: Grades, roster: list[RosterEntry]) -> Export:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(table)
    path.write_text(text.getvalue(), encoding="utf-8")
    listed = {e.student for e in roster}
    graded = {student for _, student in grades.scores}
    return Export(
        rows=len(roster),
        exercises=len(grades.exercises),
        unmatched=sorted(graded - listed),
        invalid=sorted(f"{key} {student}" for key, student in grades.invalid if student in listed),
    )
