"""The LMS importers, emulated from their source, so that a test can apply an export to a gradebook that
already holds grades and see what the instructor would get. Each follows the lines cited; what they do
not need (custom columns, pass/fail and letter grades, scales, feedback) is left out.

- Canvas: instructure/canvas-lms ``app/models/gradebook_importer.rb`` (``semicolon_delimited?`` and
  ``identify_delimiter``, the ``decimal_comma_to_period`` converter, ``header?``/``update_column_count``,
  ``check_for_non_student_row``, ``process_student``, ``no_change_to_value?``).
- Moodle's CSV grade import: moodle/moodle ``lib/csvlib.class.php`` (``load_csv_content``) and
  ``grade/import/csv/classes/load_data.php`` (``prepare_import_grade_data``, ``update_grade_item``,
  ``import_new_grade_item``, ``check_user_exists``, ``insert_grade_record``).
- Moodle's grading worksheet upload: ``mod/assign/feedback/offline/importgradeslib.php`` (``init``,
  ``next``) and ``locallib.php`` (``process_import_grades``).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------------------
# Canvas


@dataclass
class CanvasStudent:
    id: int
    name: str
    sortable_name: str
    sis_user_id: str = ""
    login_id: str = ""


@dataclass
class CanvasCourse:
    students: list[CanvasStudent]
    assignments: dict[int, tuple[str, float]]
    """Assignment id -> (title, points possible)."""
    scores: dict[tuple[int, int], float] = field(default_factory=dict)
    """(student id, assignment id) -> score; a missing key is no grade."""


def _ruby_rows(text: str, separator: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=separator, strict=True))


def canvas_separator(text: str) -> str:
    """``identify_delimiter`` over the file's first three lines: the separator whose field count is the same
    on each of them, the larger count winning, ``,`` on a tie; a line that does not parse leaves it 0."""
    lines = text.splitlines(keepends=True)[:3]
    counts = {}
    for separator in (";", ","):
        counts[separator] = 0
        try:
            widths = [len(_ruby_rows(line, separator)[0]) if line.strip() else 0 for line in lines]
        except csv.Error:
            continue
        if len(set(widths)) == 1:
            counts[separator] = widths[0]
    return ";" if counts[";"] > counts[","] else ","


def _decimal_comma_to_period(cell: str) -> str:
    if re.fullmatch(r"-?[0-9.,]+%?", cell):
        *head, last = re.split(r"[,.]", cell)
        return f"{''.join(head)}.{last}" if head else last
    return cell


def _canvas_student_columns(header: list[str]) -> int:
    """``header?`` and ``update_column_count``: the student columns, or AssertionError ("Invalid header
    row")."""
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1], "Invalid header row"
    count = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        count += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        integration = 1 if re.search(r"Integration\s+ID", header[4]) else 0
        count += 2 + integration
        count += 1 if re.search(r"Root\s+Account", header[4 + integration]) else 0
    assert "Section" in header[count - 1], "Invalid header row"
    return count


def canvas_import(text: str, course: CanvasCourse) -> CanvasCourse:
    """``course`` after the instructor imports ``text`` and accepts every change the preview shows."""
    rows = [
        [_decimal_comma_to_period(c) for c in row]
        for row in _ruby_rows(text, canvas_separator(text))
        if not re.fullmatch(r"[;, ]*", ",".join(row))
    ]
    header, *rows = rows
    first = _canvas_student_columns(header)
    assignments = [(i, _canvas_assignment(h, course)) for i, h in enumerate(header) if i >= first]
    scores = dict(course.scores)
    for row in rows:
        if "Points Possible" in row[0]:
            for i, assignment in assignments:
                if assignment not in course.assignments and row[i]:
                    course.assignments[assignment] = (header[i], float(row[i]))
            continue
        if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", c, re.I) for c in row if c):
            continue
        student = _canvas_student(header, row, course)
        for i, assignment in assignments:
            new, current = row[i].strip(), scores.get((student, assignment))
            if not _no_change(new, current):
                if new in ("", "-"):
                    scores.pop((student, assignment), None)
                else:
                    scores[student, assignment] = float(new)
    return CanvasCourse(course.students, course.assignments, scores)


def _canvas_assignment(header: str, course: CanvasCourse) -> int:
    """``parse_assignments``: ``Title (id)`` is that assignment; a bare title is the one of that title, else
    a new one (a negative id here)."""
    found = re.fullmatch(r"(.*) \((\d+)\)", header)
    if found and int(found[2]) in course.assignments:
        return int(found[2])
    titled = [i for i, (title, _) in course.assignments.items() if title == header]
    return titled[0] if titled else -1 - len(course.assignments)


def _canvas_student(header: list[str], row: list[str], course: CanvasCourse) -> int:
    """``process_student``: by ID, else SIS User ID, else SIS Login ID, else name; AssertionError for a
    row Canvas would not find (the preview would offer it as a new student)."""
    by_id = {s.id: s for s in course.students}
    if row[1].strip().isdigit() and int(row[1]) in by_id:
        return int(row[1])
    for column, attribute in (("SIS User ID", "sis_user_id"), ("SIS Login ID", "login_id")):
        if column in header and row[header.index(column)]:
            found = [s for s in course.students if getattr(s, attribute) == row[header.index(column)]]
            if found:
                return found[0].id
    found = [s for s in course.students if row[0] in (s.name, s.sortable_name)]
    assert found, f"Canvas finds no student for {row[:2]}"
    return found[0].id


def _no_change(new: str, current: float | None) -> bool:
    """``no_change_to_value?``: a blank or ``-`` against no grade is no change; anything against a grade is
    a change unless equal at two decimals."""
    if new in ("", "-") and current is None:
        return True
    if new in ("", "-") or current is None:
        return False
    return f"{float(new):.2f}" == f"{current:.2f}"


# ---------------------------------------------------------------------------------------------------------
# Moodle


def moodle_rows(text: str) -> list[list[str]]:
    """``csv_import_reader::load_csv_content``: the byte-order mark dropped, CR LF and CR made LF, the
    text trimmed, empty lines skipped; ValueError ("csvweirdcolumns") when a row is not the header's width."""
    text = re.sub(r"\r\n?", "\n", text.removeprefix("\ufeff")).strip()
    rows = [r for r in csv.reader(io.StringIO(text)) if r != []]
    if any(len(r) != len(rows[0]) for r in rows):
        raise ValueError("csvweirdcolumns")
    return rows


def unformat_float(value: str, strict: bool = False) -> float | bool | None:
    """moodlelib's ``unformat_float`` for an English site (decimal separator ``.``)."""
    value = value.strip().replace(" ", "")
    if value == "":
        return None
    try:
        return float(value)
    except ValueError:
        return False if strict else 0.0


def moodle_gradebook_import(
    text: str, users: dict[str, int], grades: dict[tuple[int, str], float], items: dict[int, str]
) -> dict[tuple[int, str], float]:
    """The CSV grade import with column 0 mapped to the user field ``users`` is keyed by and column ``i``
    to ``items[i]`` (an existing grade item's name, or ``new``); the grades after it, or ValueError (the
    whole import refused) for a user it does not find or a grade it cannot read."""
    header, *rows = moodle_rows(text)
    after = dict(grades)
    for row in rows:
        if len(row) <= 1:
            continue
        value = row[0].strip()
        if value not in users:  # check_user_exists: usermappingerror, the import stops
            raise ValueError(f"usermappingerror: {value!r}")
        for i, item in items.items():
            cell = row[i].strip()
            if item == "new":
                if cell != "-":
                    after[users[value], header[i]] = _checked(float(cell))
            elif cell in ("", "-"):
                after.pop((users[value], item), None)  # finalgrade = null
            else:
                number = unformat_float(cell, strict=True)
                if number is False or number is None:
                    raise ValueError("badgrade")
                after[users[value], item] = _checked(float(number))
    return after


def _checked(grade: float) -> float:
    if grade > 100:  # insert_grade_record: gradevaluetoobig, above $CFG->gradepointmax's default
        raise ValueError("gradevaluetoobig")
    return grade


@dataclass
class MoodleGrade:
    grade: float
    modified: dt.datetime


WORKSHEET_TIME = "%A, %d %B %Y, %I:%M %p"
"""How the worksheet writes ``Last modified (grade)`` (``userdate``), and ``strtotime`` reads it back."""


def worksheet_upload(
    text: str, participants: dict[int, str], grades: dict[str, MoodleGrade], maximum: float, now: dt.datetime
) -> dict[str, MoodleGrade]:
    """Upload grading worksheet (``ignoremodified`` unticked): ``participants`` maps the uniqueid to the
    user; the grades after it. ValueError for a file without the three columns (invalidgradeimport)."""
    header, *rows = moodle_rows(text)
    if not all(c in header for c in ("Identifier", "Grade", "Last modified (grade)")):
        raise ValueError("invalidgradeimport")
    at = {c: header.index(c) for c in ("Identifier", "Grade", "Last modified (grade)")}
    after = dict(grades)
    for row in rows:
        uniqueid = row[at["Identifier"]][len("Participant ") :]
        user = participants.get(int(uniqueid)) if uniqueid.isdigit() else None
        if user is None:
            continue
        grade = unformat_float(row[at["Grade"]])
        written = row[at["Last modified (grade)"]].strip()
        modified = dt.datetime.strptime(written, WORKSHEET_TIME) if written != "-" else dt.datetime.min
        current = after.get(user)
        stale = current is not None and current.modified > modified + dt.timedelta(seconds=60)
        if current is not None and current.grade == grade:
            continue  # not modified
        if grade is None or grade is False or grade < 0 or stale or grade > maximum:
            continue  # no value, changed in Moodle since the download, or out of range
        after[user] = MoodleGrade(float(grade), now)
    return after
