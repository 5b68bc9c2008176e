"""The three import files, each the platform's own columns with one exercise's grade column.

Canvas (Grades > Import): the roster's student columns, ``Student`` to ``Section``, as downloaded; the
importer finds a student by ``ID`` first (``gradebook_importer.rb``, ``process_student``), which is written
unchanged, then the assignment's column, titled as the export titles it (``Title (id)``) so that the
importer updates that assignment (``parse_assignments``: a title it does not know creates an assignment).
Without a roster column for the exercise the column is ``NN Title``, a new assignment whose points come
from the ``Points Possible`` row (``process_pp``). A name holding ``Points Possible`` would make its row the
points row (``check_for_non_student_row``), so that name cell is left empty: the ``ID`` finds the student.

Moodle, assignment worksheet (View all submissions > Upload grading worksheet): the worksheet's columns up
to ``Last modified (grade)`` (``rosters.MoodleWorksheet.kept``), each row as downloaded with ``Grade``
filled. The upload skips a row whose grade did not change, is empty or negative, is above the assignment's
maximum, whose grade was changed in Moodle since the worksheet was downloaded (its ``Last modified
(grade)``, kept here, is older), or that Moodle locks (``Grade can be changed``: No); it reads the grade with
``unformat_float``, which accepts a decimal point in any language (``locallib.php``,
``process_import_grades``). Locked rows are left out here and said.

Moodle, gradebook CSV (Grade administration > Import > CSV file): a user field column (``Email address``,
``ID number`` or ``Username``, mapped in the import form) and the grade in percent. Moodle's CSV reader
refuses a file whose rows are not all as wide as the header (``lib/csvlib.class.php``,
``load_csv_content``: ``csvweirdcolumns``), so a comment line cannot say the unit: the column's title does
(``NN Title (percent)``), which is the name the import gives a new grade item (``load_data.php``,
``import_new_grade_item``), out of 100 by default.

The instructors' side of each: Canvas's guide "How do I import grades in the Gradebook?"
(https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807),
MoodleDocs "Grade import" (https://docs.moodle.org/311/en/Grade_import) and "Using Assignment", offline
grading worksheet (https://docs.moodle.org/311/en/Using_Assignment). The code cited is the importers' own
(instructure/canvas-lms, moodle/moodle).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from grader.classroom.outputs.lms import (
    Export,
    Grades,
    Placed,
    Written,
    left_out_by_reason,
    output_path,
    place,
    unmatched,
)
from grader.classroom.outputs.rosters import (
    MOODLE_USER_FIELDS,
    CanvasAssignment,
    CanvasRoster,
    Match,
    MoodleWorksheet,
    Roster,
    match_students,
    read_canvas_export,
    read_moodle_roster,
    read_moodle_worksheet,
    with_canvas_ids,
)
from grader.classroom.outputs.spreadsheet import FORMULA_STARTS, decimal_cell, text_cell, write_csv
from grader.core.course import Exercise
from grader.core.errors import UsageError

CANVAS_POINTS_ROW = "    Points Possible"
"""As Canvas's export writes it (``lib/gradebook_exporter.rb``); its importer looks for the words."""
CANVAS_ID_COLUMN = "ID"
MOODLE_LOCKED = "Moodle locks the grade ('Grade can be changed': No)"
FORMULA_ID = "its {field} starts like a spreadsheet formula; enter the grade in Moodle"


# ---------------------------------------------------------------------------------------------------------
# Canvas


def canvas_column(roster: CanvasRoster, exercise: Exercise, column: str | None) -> CanvasAssignment:
    """The roster's column ``column`` names, else the one assignment column whose title is the exercise's
    (``NN Title``, or holding its title or slug), else a new ``NN Title`` worth the exercise's points.
    ``UsageError`` for a ``column`` the roster does not have, or several columns that could be it."""
    if column is not None:
        found = [a for a in roster.assignments if column in (a.header, _title(a.header))]
        if not found:
            titles = ", ".join(repr(a.header) for a in roster.assignments) or "none"
            raise UsageError(f"--column {column!r}: {roster.path} has no such assignment column ({titles})")
        return found[0]
    own = f"{exercise.key} {exercise.title}".casefold()
    found = [
        a
        for a in roster.assignments
        if _title(a.header).casefold() == own
        or exercise.title.casefold() in a.header.casefold()
        or exercise.slug in a.header.casefold()
    ]
    if len(found) > 1:
        names = ", ".join(repr(a.header) for a in found)
        raise UsageError(f"exercise {exercise.key} could be any of {names}: give --exercise and --column")
    return found[0] if found else CanvasAssignment(f"{exercise.key} {exercise.title}", exercise.points)


def _title(header: str) -> str:
    return re.sub(r" \(\d+\)\Z", "", header)


def write_canvas(path: Path, placed: Placed, roster: CanvasRoster, column: CanvasAssignment) -> Written:
    """Canvas's import file (module docstring); ``UsageError`` for a column with no points to scale to."""
    if not column.points or column.points <= 0:
        raise UsageError(
            f"{roster.path}: column {column.header!r} has no Points Possible; give the assignment points in "
            "Canvas and export the gradebook again"
        )
    width = roster.student_columns
    header = [*roster.header[:width], column.header]
    points = [CANVAS_POINTS_ROW, *[""] * (width - 1), decimal_cell(column.points)]
    rows = [
        [*_canvas_student(roster, row), decimal_cell(share * column.points)]
        for row, share in sorted(placed.shares.items())
    ]
    write_csv(path, [header, points, *rows])
    new = column not in roster.assignments
    note = (
        f"a new assignment, {column.points:g} points: no column of {roster.path.name} is exercise "
        f"{placed.exercise.key}'s (--column names one)"
        if new
        else f"scaled to its {column.points:g} points"
    )
    left_out = left_out_by_reason(roster, placed.left_out)
    return Written(path, placed.exercise, column.header, len(rows), left_out, note)


def _canvas_student(roster: CanvasRoster, row: int) -> list[str]:
    """The row's student columns: ``ID`` as downloaded, the others as text cells."""
    cells = []
    for i, cell in enumerate(roster.rows[row][: roster.student_columns]):
        if roster.header[i] == CANVAS_ID_COLUMN:
            cells.append(cell)
        elif i in roster.names and "Points Possible" in cell:
            cells.append("")
        else:
            cells.append(text_cell(cell))
    return cells


# ---------------------------------------------------------------------------------------------------------
# Moodle


def write_moodle_worksheet(path: Path, placed: Placed, sheet: MoodleWorksheet) -> Written:
    """The grading worksheet back, with ``Grade`` filled (module docstring)."""
    grade = sheet.header.index("Grade")
    changeable = sheet.column("Grade can be changed")
    left_out = dict(placed.left_out)
    rows = []
    for row, share in sorted(placed.shares.items()):
        if changeable is not None and sheet.rows[row][changeable].strip().casefold() == "no":
            left_out[row] = MOODLE_LOCKED
            continue
        cells = [_worksheet_cell(sheet, i, c) for i, c in enumerate(sheet.rows[row][: sheet.kept])]
        cells[grade] = decimal_cell(share * sheet.maximum)
        rows.append(cells)
    write_csv(path, [sheet.header[: sheet.kept], *rows])
    note = f"scaled to the assignment's maximum grade, {sheet.maximum:g}"
    return Written(path, placed.exercise, "Grade", len(rows), left_out_by_reason(sheet, left_out), note)


def _worksheet_cell(sheet: MoodleWorksheet, column: int, cell: str) -> str:
    """People's text (names, user fields) as text cells; what Moodle wrote (its ids, dates) as it was."""
    person = column in sheet.names or sheet.header[column] in MOODLE_USER_FIELDS
    return text_cell(cell) if person else cell


def write_moodle_gradebook(path: Path, placed: Placed, roster: Roster, match: Match) -> Written:
    """Moodle's CSV grade import, in percent (module docstring); ``UsageError`` when the roster has no user
    field filled for every student written."""
    field = _user_field(roster, placed, match)
    at = roster.header.index(field)
    title = f"{placed.exercise.key} {placed.exercise.title} (percent)"
    left_out = dict(placed.left_out)
    rows = []
    for row, share in sorted(placed.shares.items()):
        value = roster.rows[row][at].strip()
        if value.startswith(FORMULA_STARTS):
            left_out[row] = FORMULA_ID.format(field=field)
        else:
            rows.append([value, decimal_cell(share * 100)])
    write_csv(path, [[field, title], *rows])
    note = f"in percent; map '{field}' to the user's {field.lower()} in the import form"
    return Written(path, placed.exercise, title, len(rows), left_out_by_reason(roster, left_out), note)


def _user_field(roster: Roster, placed: Placed, match: Match) -> str:
    """The matched column when it is a user field Moodle maps by, else the first one filled for every row
    written."""
    fields = [match.column] if match.column in MOODLE_USER_FIELDS else list(MOODLE_USER_FIELDS)
    for name in fields:
        at = roster.column(name)
        if at is not None and all(roster.rows[r][at].strip() for r in placed.shares):
            return name
    raise UsageError(
        f"{roster.path}: no {' or '.join(map(repr, fields))} column filled for every student: Moodle's CSV "
        "grade import finds a user by one of them"
    )


# ---------------------------------------------------------------------------------------------------------
# one export


LMS_FILES = {
    "canvas": read_canvas_export,
    "moodle": read_moodle_worksheet,
    "moodle-gradebook": read_moodle_roster,
}
"""The file each export writes -> how its ``--roster`` is read."""


def export_to(
    grades: Grades,
    exercises: list[Exercise],
    *,
    lms: str,
    out: Path,
    roster: Path,
    match: str | None = None,
    missing: str = "leave",
    column: str | None = None,
) -> Export:
    """Read ``roster`` as ``lms``'s file (``LMS_FILES``), match its rows to the gradebook's students, and
    write one file per exercise: ``out`` for one exercise, else ``OUT-NN.csv`` beside it."""
    sheet = LMS_FILES[lms](roster)
    found = match_students(sheet, grades.students(), match)
    if isinstance(sheet, CanvasRoster) and found.key == "canvas-id":
        sheet = with_canvas_ids(sheet, unmatched(grades, exercises, found))
        found = replace(match_students(sheet, grades.students(), found.key), chosen=found.chosen)
    files = []
    for exercise in exercises:
        placed = place(grades, exercise, sheet, found, missing)
        path = output_path(out, exercise, one=len(exercises) == 1)
        if isinstance(sheet, CanvasRoster):
            files.append(write_canvas(path, placed, sheet, canvas_column(sheet, exercise, column)))
        elif isinstance(sheet, MoodleWorksheet):
            files.append(write_moodle_worksheet(path, placed, sheet))
        else:
            files.append(write_moodle_gradebook(path, placed, sheet, found))
    return Export(found, files, unmatched(grades, exercises, found))
