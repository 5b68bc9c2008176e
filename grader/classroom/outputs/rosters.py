"""The rosters an instructor downloads, read as they are, and matched to the gradebook's students.

Canvas: the gradebook export (Grades > Export > Export Entire Gradebook), written by instructure/canvas-lms
``lib/gradebook_exporter.rb``: a header ``Student`` (or ``LastName``, ``FirstName``), ``ID``, then ``SIS User
ID`` (when the user may see SIS ids), ``SIS Login ID``, ``Integration ID`` and ``Root Account`` (when the
account shows them), ``Section``; then the custom columns, one column per assignment titled ``Title (id)``
(``Assignment#title_with_id``), and the totals (``Current Score``, ``Final Grade``, ...). A row of "Manual
Posting" marks may follow the header; then a row whose first cell is ``    Points Possible`` with each
assignment's points (``I18n.n(points, precision: 2)``: ``10,00`` in a locale with a decimal comma, whose
file is then ``;``-separated, ``lib/csv_with_i18n.rb``); then one row per student. A name starting with
``=`` is exported as ``="name"``.

Moodle: the assignment's grading worksheet (Assignment > View all submissions > Grading action: Download
grading worksheet), written by moodle/moodle ``mod/assign/gradingtable.php`` for a download: ``Identifier``
(``Participant N``, N the participant's id in the assignment), ``Full name``, the identity fields the site
shows (``Email address``, ``ID number``, ``Username``, ...), ``Status``, ``Grade``, ``Maximum grade`` (or
``Scale`` for an assignment graded on a scale), ``Grade can be changed``, ``Last modified (submission)``,
``Last modified (grade)``, then a column per feedback plugin's text (``Feedback comments``). The headers are
in the instructor's language; the English ones are read here. For ``--moodle-gradebook`` any Moodle CSV with
one of the user fields Moodle's CSV grade import maps a row by (``Email address``, ``ID number``,
``Username``) will do: the worksheet, or the gradebook's own "Plain text file" export.

Matching (``--match``): which roster column holds the gradebook's student id, the name of each submission's
folder. Each choice names the columns that hold it (``MATCH_COLUMNS``); by default the one that matches the
most students is taken (the platform's own id first on a tie: a class taken from a platform's archive is
named by it), and said. A value found in two rows is refused, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from grader.classroom.outputs.spreadsheet import parse_decimal, read_csv
from grader.core.errors import UsageError

MATCH_COLUMNS = {
    "canvas-id": ("ID",),
    "moodle-participant": ("Identifier",),
    "sis": ("SIS User ID", "ID number"),
    "login": ("SIS Login ID", "Username"),
    "email": ("Email address",),
    "github": (),
}
"""``--match`` -> the roster columns that hold it, Canvas's and Moodle's. ``github``: the one column whose
header says GitHub (a Canvas custom column or a Moodle profile field the instructor added)."""
CASE_FREE = ("login", "email", "github")
"""Ids compared without case: logins, email addresses and GitHub usernames are case-insensitive."""
PARTICIPANT = "Participant "
"""Moodle's ``hiddenuser`` string: the worksheet's Identifier is this followed by the participant id."""
CANVAS_NON_ASSIGNMENT = re.compile(
    r"Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|Override Score|"
    r"Override Grade|Override Status"
)
"""Canvas's importer skips these columns (``NON_ASSIGNMENT_COLUMN_HEADERS``, matched anywhere in a header)."""
CANVAS_ASSIGNMENT = re.compile(r"\A(?P<title>.*) \((?P<id>\d+)\)\Z", re.DOTALL)
WORKSHEET_REQUIRED = ("Identifier", "Grade", "Last modified (grade)")
"""The columns Moodle's worksheet upload looks for; without one it refuses the file
(``mod/assign/feedback/offline/importgradeslib.php``, ``init``)."""
MOODLE_USER_FIELDS = ("Email address", "ID number", "Username")


@dataclass(frozen=True)
class Roster:
    """A roster's header and its student rows, as downloaded."""

    path: Path
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    names: tuple[int, ...]
    """The columns that together name a student (Canvas's ``Student``, Moodle's ``Full name``)."""

    def column(self, name: str) -> int | None:
        return self.header.index(name) if name in self.header else None

    def name(self, row: int) -> str:
        """The row's student as the roster names them; a row without a name by its cells."""
        return " ".join(self.rows[row][i] for i in self.names).strip() or " ".join(
            filter(None, self.rows[row])
        )

    def columns_for(self, key: str) -> list[int]:
        if key == "github":
            return [i for i, h in enumerate(self.header) if "github" in h.casefold()]
        return [i for i in (self.column(h) for h in MATCH_COLUMNS[key]) if i is not None]


@dataclass(frozen=True)
class CanvasAssignment:
    header: str
    """As the export titles it: ``Title (id)``."""
    points: float | None
    """From the ``Points Possible`` row; None when the export has none for it."""


@dataclass(frozen=True)
class CanvasRoster(Roster):
    student_columns: int
    """``header[:student_columns]``: Canvas's student columns, ``Student`` to ``Section``."""
    assignments: tuple[CanvasAssignment, ...]


@dataclass(frozen=True)
class MoodleWorksheet(Roster):
    kept: int
    """``header[:kept]`` is written back: every column up to ``Last modified (grade)``. The feedback columns
    after it are left out: the upload writes a feedback text wherever it differs from Moodle's, so a
    comment written in Moodle after the download would be replaced by the worksheet's older one
    (``mod/assign/feedback/offline/locallib.php``, ``process_import_grades``)."""
    maximum: float
    """``Maximum grade``: the assignment's, the same on every row."""


# ---------------------------------------------------------------------------------------------------------
# reading


def read_canvas_export(path: Path) -> CanvasRoster:
    """Canvas's gradebook export (module docstring); ``UsageError`` naming the file when it is not one."""
    header, *rest = read_csv(path)
    names = (0, 1) if header[:2] == ["LastName", "FirstName"] else (0,)
    named = names == (0, 1) or "Student" in header[0]
    if not named or header[len(names)] != "ID" or "Section" not in header:
        raise UsageError(
            f"{path}: not Canvas's gradebook export (Grades > Export): its header starts Student, ID, and "
            f"its student columns end at Section; this one starts {', '.join(header[:4])}"
        )
    student_columns = header.index("Section") + 1
    points = next((r for r in rest if r[0].strip().startswith("Points Possible")), None)
    rows = [r for r in rest if r is not points and not _canvas_posting_row(r)]
    assignments = tuple(
        CanvasAssignment(h, parse_decimal(points[i]) if points else None)
        for i, h in enumerate(header)
        if i >= student_columns and CANVAS_ASSIGNMENT.match(h) and not CANVAS_NON_ASSIGNMENT.search(h)
    )
    return CanvasRoster(path, tuple(header), tuple(map(tuple, rows)), names, student_columns, assignments)


def with_canvas_ids(roster: CanvasRoster, students: Iterable[str]) -> CanvasRoster:
    """``roster`` with a row for each of ``students`` it lacks, named by nothing but its ``ID``: a class
    taken from Canvas's archive is named by Canvas's user ids, which the importer finds a student by
    first (``process_student``), so a student enrolled after the export still gets a row."""
    at = roster.header.index("ID")
    known = {row[at].strip() for row in roster.rows}
    extra = [
        tuple(student if i == at else "" for i in range(len(roster.header)))
        for student in sorted(set(students) - known)
        if student.isdigit()
    ]
    return replace(roster, rows=roster.rows + tuple(extra))


def _canvas_posting_row(row: list[str]) -> bool:
    """The row of "Manual Posting" marks, which Canvas's importer skips (``check_for_non_student_row``)."""
    return all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", c, re.I | re.S) for c in row)


def read_moodle_worksheet(path: Path) -> MoodleWorksheet:
    """Moodle's grading worksheet (module docstring); ``UsageError`` naming the file and the problem."""
    header, *rows = read_csv(path)
    missing = [c for c in WORKSHEET_REQUIRED if c not in header]
    if missing:
        raise UsageError(
            f"{path}: not a Moodle grading worksheet in English (no {', '.join(map(repr, missing))} column; "
            "download it from the assignment: View all submissions > Download grading worksheet)"
        )
    if "Maximum grade" not in header:
        raise UsageError(f"{path}: the assignment is graded on a scale; give it a maximum grade (points)")
    at = header.index("Maximum grade")
    maxima = {parse_decimal(r[at]) for r in rows}
    if len(maxima) != 1 or not next(iter(maxima)):
        raise UsageError(f"{path}: 'Maximum grade' is not one positive number on every row")
    maximum = maxima.pop()
    assert maximum is not None
    kept = header.index("Last modified (grade)") + 1
    names = _moodle_names(header)
    return MoodleWorksheet(path, tuple(header), tuple(map(tuple, rows)), names, kept, maximum)


def read_moodle_roster(path: Path) -> Roster:
    """Any Moodle CSV with a user field its CSV grade import maps rows by (``MOODLE_USER_FIELDS``)."""
    header, *rows = read_csv(path)
    if not any(f in header for f in MOODLE_USER_FIELDS):
        raise UsageError(
            f"{path}: no {', '.join(map(repr, MOODLE_USER_FIELDS))} column, the user fields Moodle's CSV "
            "grade import finds a user by; download the grading worksheet or the gradebook's export"
        )
    return Roster(path, tuple(header), tuple(map(tuple, rows)), _moodle_names(header))


def _moodle_names(header: list[str]) -> tuple[int, ...]:
    if "Full name" in header:
        return (header.index("Full name"),)
    return tuple(header.index(h) for h in ("First name", "Last name", "Surname") if h in header)


# ---------------------------------------------------------------------------------------------------------
# matching


@dataclass(frozen=True)
class Match:
    key: str
    column: str
    rows: dict[str, int]
    """Gradebook student id -> its roster row."""
    chosen: bool
    """Whether the column was chosen here (no ``--match``)."""
    ambiguous: dict[str, list[int]]
    """Gradebook student id -> the rows that all hold it: refused, never guessed."""


def match_students(roster: Roster, students: Iterable[str], key: str | None) -> Match:
    """Each of ``students`` that one roster row holds in ``key``'s column (module docstring); ``UsageError``
    when that column is missing, when no column matches anyone, or when a value is in two rows."""
    students = sorted(set(students))
    keys = [key] if key else list(MATCH_COLUMNS)
    found = [_matched(roster, k, c, students) for k in keys for c in roster.columns_for(k)]
    if key and not found:
        wanted = "a column whose header says GitHub" if key == "github" else " or ".join(MATCH_COLUMNS[key])
        raise UsageError(f"--match {key}: {roster.path} has no {wanted} column")
    # the first of the most matched: MATCH_COLUMNS order puts the platforms' own ids first
    best = max(found, key=lambda m: len(m.rows) + len(m.ambiguous), default=None)
    if best is None or (students and not best.rows and not best.ambiguous):
        tried = ", ".join(f"{m.column!r}" for m in found) or "none"
        raise UsageError(
            f"{roster.path}: no column holds the gradebook's student ids ({', '.join(students[:3])}, ...); "
            f"columns tried: {tried}. Give --match"
        )
    if best.ambiguous:
        student, rows = next(iter(best.ambiguous.items()))
        lines = ", ".join(str(r + 2) for r in rows)
        raise UsageError(
            f"{roster.path}: {student!r} is in column {best.column!r} of lines {lines}; one student per "
            "row, or the grade could go to either"
        )
    return Match(best.key, best.column, best.rows, chosen=key is None, ambiguous={})


def _matched(roster: Roster, key: str, column: int, students: list[str]) -> Match:
    where: dict[str, list[int]] = {}
    for row, cells in enumerate(roster.rows):
        value = _normal(key, cells[column])
        if value:
            where.setdefault(value, []).append(row)
    found = {s: where[_normal(key, s)] for s in students if _normal(key, s) in where}
    rows = {s: r[0] for s, r in found.items() if len(r) == 1}
    ambiguous = {s: r for s, r in found.items() if len(r) > 1}
    return Match(key, roster.header[column], rows, chosen=False, ambiguous=ambiguous)


def _normal(key: str, value: str) -> str:
    value = value.strip()
    if key == "moodle-participant":
        value = value.removeprefix(PARTICIPANT).strip()
    return value.casefold() if key in CASE_FREE else value
