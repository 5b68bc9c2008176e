"""`grade export --canvas/--moodle/--moodle-gradebook`: the files the instructor downloads work as rosters,
and each export, applied by the platform's importer (emulated from its source: tests/lms_importers.py) to
a gradebook that already holds grades, changes no grade but the ones it writes, and writes them scaled to
the platform's maximum."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import cli
from grader.classroom.batch import invalid_result
from grader.classroom.outputs.lms import Grades, read_grades
from grader.classroom.outputs.lms_files import export_to
from grader.classroom.outputs.rosters import match_students, read_canvas_export, read_moodle_worksheet
from grader.classroom.outputs.spreadsheet import decimal_cell, parse_decimal, write_csv
from grader.classroom.state.gradebook import open_gradebook, record
from grader.core.course import Course, Exercise
from grader.core.errors import EnvironmentFailure
from grader.core.results import ExerciseResult, Status, TestResult
from tests.lms_importers import (
    WORKSHEET_TIME,
    CanvasCourse,
    CanvasStudent,
    MoodleGrade,
    canvas_import,
    moodle_gradebook_import,
    moodle_rows,
    worksheet_upload,
)

MANUAL = ["", "", "", "", "", "", "Manual Posting", "", "", ""]
CANVAS_STUDENT = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # lib/gradebook_exporter.rb
CANVAS_ASSIGNMENTS = [
    "01 Communication primitives (1201)",
    "Ring and tree algorithms (1202)",
]  # title_with_id
CANVAS_HEADER = [*CANVAS_STUDENT, "GitHub", *CANVAS_ASSIGNMENTS, "Current Score", "Final Score"]
"""The student columns, a custom column, the assignments, the totals."""
CANVAS_ROWS = [
    ["Liddell, Alice", "101", "A-1", "alice", "S1", "alice-gh", "40.00", "6.00", "46.00", "46.00"],
    ["Marley, Bob", "102", "", "bob", "S1", "bobgh", "", "", "", ""],
    ["Danvers, Carol", "103", "C-3", "carol", "S2", "", "", "3.00", "3.00", "3.00"],
    ["Scully, Dana", "104", "", "dana", "S2", "", "77.00", "", "77.00", "77.00"],  # entered by hand
    ["Student, Test", "999", "", "", "", "", "", "", "", ""],
]
"""As Canvas exports it (its values are the grades it holds); the gradebook knows students by login."""
CANVAS_POINTS = ["    Points Possible", "", "", "", "", "", "100.00", "10.00", "(read only)", "(read only)"]
WORKSHEET_HEADER = (
    "Identifier,Full name,Username,Email address,Status,Grade,Maximum grade,Grade can be changed,"
    "Last modified (submission),Last modified (grade),Feedback comments"
).split(",")
MON, TUE = "Monday, 2 June 2025, 10:00 AM", "Tuesday, 3 June 2025, 09:00 AM"
WORKSHEET_ROWS = [
    [
        "Participant 5001",
        "Alice Liddell",
        "alice",
        "alice@uni.edu",
        "Submitted",
        "",
        "25.00",
        "Yes",
        MON,
        "-",
        "",
    ],
    [
        "Participant 5002",
        "Bob Marley",
        "bob",
        "bob@uni.edu",
        "Submitted",
        "10.00",
        "25.00",
        "Yes",
        MON,
        MON,
        "ok",
    ],
    [
        "Participant 5003",
        "Carol Danvers",
        "carol",
        "carol@uni.edu",
        "Submitted",
        "",
        "25.00",
        "No",
        MON,
        "-",
        "",
    ],
    [
        "Participant 5004",
        "Dana Scully",
        "dana",
        "dana@uni.edu",
        "No submission",
        "20.00",
        "25.00",
        "Yes",
        "-",
        TUE,
        "",
    ],
]
"""Moodle's worksheet (mod/assign/gradingtable.php): Carol's grade is locked, Dana's entered by hand."""


def graded(exercise: Exercise, student: str, share: float) -> tuple[list[TestResult], ExerciseResult]:
    """One test per part, each worth its part's points, scoring ``share`` of them."""
    cells = [
        TestResult(
            name=f"test_{p.name}",
            number=f"1.{i}",
            part=p.id,
            score=p.points * share,
            max_score=p.points,
            status=Status.PASSED if share == 1 else Status.FAILED,
        )
        for i, p in enumerate(exercise.parts, start=1)
    ]
    return cells, ExerciseResult(
        exercise=exercise.key, title=exercise.title, graded=student, device="cpu", tests=tuple(cells)
    )


@pytest.fixture(scope="module")
def gradebook_url(course: Course, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """01: alice full marks, bob a third, zed (in no roster) full; 02: carol half, alice and yan (in no
    roster, no grade at all) an invalid upload. Read only."""
    url = f"sqlite:///{tmp_path_factory.mktemp('lms') / 'gradebook.db'}"
    first, second = course.find("01"), course.find("02")
    rows = [(first, "alice", 1.0), (first, "bob", 1 / 3), (first, "zed", 1.0), (second, "carol", 0.5)]
    with open_gradebook(url, course_id=course.title) as gradebook:
        for exercise, student, share in rows:
            cells, result = graded(exercise, student, share)
            record(
                gradebook,
                exercise=exercise,
                cells=cells,
                student=student,
                result=result,
                submitted=None,
                duedate=None,
            )
        cells, _ = graded(second, "alice", 1.0)
        for student in ("alice", "yan"):
            invalid = invalid_result(second, "the archive is corrupt (not a zip file)", student, "cpu")
            record(
                gradebook,
                exercise=second,
                cells=cells,
                student=student,
                result=invalid,
                submitted=None,
                duedate=None,
            )
    yield url


@pytest.fixture(scope="module")
def grades(course: Course, gradebook_url: str) -> Grades:
    with open_gradebook(gradebook_url, course_id=course.title) as gradebook:
        return read_grades(gradebook, course)


def written(path: Path, rows: list[list[str]], *, bom: bool = False, separator: str = ",") -> Path:
    text = io.StringIO()
    csv.writer(text, delimiter=separator, lineterminator="\r\n").writerows(rows)
    path.write_text(("\ufeff" if bom else "") + text.getvalue(), encoding="utf-8")
    return path


def canvas_export(tmp_path: Path, rows: list[list[str]] = CANVAS_ROWS, **how: object) -> Path:
    return written(tmp_path / "canvas-export.csv", [CANVAS_HEADER, MANUAL, CANVAS_POINTS, *rows], **how)  # type: ignore[arg-type]


def canvas_course(rows: list[list[str]] = CANVAS_ROWS) -> CanvasCourse:
    """The Canvas course that export came from: its students, assignments and grades."""
    students = [CanvasStudent(int(r[1]), r[0], r[0], r[2], r[3]) for r in rows]
    course = CanvasCourse(
        students, {1201: ("01 Communication primitives", 100.0), 1202: ("Ring and tree algorithms", 10.0)}
    )
    for r in rows:
        for column, assignment in ((6, 1201), (7, 1202)):
            if r[column]:
                course.scores[int(r[1]), assignment] = float(r[column])
    return course


def grades_in(path: Path) -> dict[tuple[str, str], str]:
    """(first cell, column header) -> cell, for every grade cell of an import file."""
    header, *rows = list(csv.reader(path.open(newline="")))
    return {(r[1], header[-1]): r[-1] for r in rows if "Points Possible" not in r[0]}


# ---------------------------------------------------------------------------------------------------------
# Canvas


def test_canvas_import_changes_only_the_grades_it_writes(
    grades: Grades, course: Course, tmp_path: Path
) -> None:
    roster = canvas_export(tmp_path)
    out = tmp_path / "canvas.csv"
    done = export_to(grades, [course.find("01"), course.find("02")], lms="canvas", out=out, roster=roster)
    assert (done.match.column, done.match.chosen, done.unmatched) == ("SIS Login ID", True, ["zed"])
    first, second = (tmp_path / "canvas-01.csv", tmp_path / "canvas-02.csv")
    assert grades_in(first) == {  # 12/12 and 4/12 of the exercise, scaled to the column's 100 points
        ("101", "01 Communication primitives (1201)"): "100.00",
        ("102", "01 Communication primitives (1201)"): "33.33",
    }
    assert grades_in(second) == {("103", "Ring and tree algorithms (1202)"): "5.00"}
    assert done.files[0].left_out == {"no submission": ["Danvers, Carol", "Scully, Dana", "Student, Test"]}
    assert done.files[1].left_out["an invalid upload (fix it and grade it again)"] == ["Liddell, Alice"]

    before = canvas_course()
    after = canvas_import(first.read_bytes().decode(), canvas_import(second.read_bytes().decode(), before))
    assert after.scores == {
        (101, 1201): 100.0,  # last week's 40 updated
        (101, 1202): 6.0,  # kept: her upload of 02 was invalid, and the file has no cell for it
        (102, 1201): 33.33,  # new
        (103, 1202): 5.0,  # 3 updated
        (104, 1201): 77.0,  # entered by hand for a student without a submission: kept
    }
    header, points, *_ = list(csv.reader(first.open(newline="")))
    assert header == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "01 Communication primitives (1201)",
    ]
    assert points[0].strip() == "Points Possible" and points[-1] == "100.00"


def test_a_class_from_canvas_archive_is_named_by_canvas_ids(course: Course, tmp_path: Path) -> None:
    """Its students are Canvas user ids: the ID column matches, and a student enrolled after the roster
    was exported still gets a row, found by the ID alone."""
    first = course.find("01")
    archive = Grades([first], {"01": 12.0}, {("01", "101"): 12.0, ("01", "105"): 6.0})
    out = tmp_path / "c.csv"
    done = export_to(archive, [first], lms="canvas", out=out, roster=canvas_export(tmp_path))
    assert (done.match.column, done.match.chosen, done.unmatched) == ("ID", True, [])
    late = CanvasStudent(105, "Late, Lena", "Late, Lena")
    before = canvas_course()
    before.students.append(late)
    after = canvas_import(out.read_bytes().decode(), before)
    assert after.scores[101, 1201] == 100.0 and after.scores[105, 1201] == 50.0


def test_the_old_file_would_have_erased_a_grade(tmp_path: Path) -> None:
    """The importer table itself: a blank cell against a grade is a removal, against none no change."""
    before = canvas_course()
    blank = [
        CANVAS_HEADER[:5] + CANVAS_HEADER[6:7],
        ["Scully, Dana", "104", "", "dana", "S2", ""],
        ["Marley, Bob", "102", "", "bob", "S1", "-"],
    ]
    after = canvas_import(written(tmp_path / "old.csv", blank).read_bytes().decode(), before)
    assert (104, 1201) in before.scores and (104, 1201) not in after.scores
    assert {k: v for k, v in after.scores.items() if k != (104, 1201)} == {
        k: v for k, v in before.scores.items() if k != (104, 1201)
    }


def test_canvas_export_as_downloaded_in_any_locale_is_a_roster(tmp_path: Path) -> None:
    """A byte-order mark, ``;`` between cells and decimal commas (lib/csv_with_i18n.rb): the same roster."""
    plain = read_canvas_export(canvas_export(tmp_path))
    comma_rows = [[c.replace(".00", ",00") for c in r] for r in CANVAS_ROWS]
    local = tmp_path / "local"
    local.mkdir()
    points = [c.replace(".00", ",00") for c in CANVAS_POINTS]
    path = written(local / "export.csv", [CANVAS_HEADER, points, *comma_rows], bom=True, separator=";")
    european = read_canvas_export(path)
    assert european.assignments == plain.assignments and [a.points for a in plain.assignments] == [100, 10]
    assert european.student_columns == plain.student_columns == 5 and len(plain.rows) == 5
    assert [plain.name(i) for i in range(2)] == ["Liddell, Alice", "Marley, Bob"]
    bad = written(tmp_path / "ours.csv", [["student", "email"], ["alice", "a@x"]])
    with pytest.raises(ValueError, match="not Canvas's gradebook export"):
        read_canvas_export(bad)


def test_missing_zero_writes_zero_for_a_missing_submission_only(
    grades: Grades, course: Course, tmp_path: Path
) -> None:
    roster = canvas_export(tmp_path)
    out = tmp_path / "c.csv"
    export_to(grades, [course.find("02")], lms="canvas", out=out, roster=roster, missing="zero")
    cells = grades_in(out)
    assert cells[("102", "Ring and tree algorithms (1202)")] == "0.00"  # bob: no submission of 02
    assert ("101", "Ring and tree algorithms (1202)") not in cells  # alice: invalid, never 0


def test_a_canvas_column_is_found_named_or_new(grades: Grades, course: Course, tmp_path: Path) -> None:
    roster = canvas_export(tmp_path)
    out = tmp_path / "c.csv"
    done = export_to(
        grades, [course.find("01")], lms="canvas", out=out, roster=roster, column="Ring and tree algorithms"
    )
    assert (
        done.files[0].column == "Ring and tree algorithms (1202)"
        and "scaled to its 10 points" in done.files[0].note
    )
    assert grades_in(out)[("101", "Ring and tree algorithms (1202)")] == "10.00"
    with pytest.raises(ValueError, match=r"--column 'HW9': .* has no such assignment column"):
        export_to(grades, [course.find("01")], lms="canvas", out=out, roster=roster, column="HW9")
    lean = [r[:6] + r[8:] for r in [CANVAS_HEADER, CANVAS_POINTS, *CANVAS_ROWS]]  # no assignment columns
    done = export_to(
        grades, [course.find("01")], lms="canvas", out=out, roster=written(tmp_path / "lean.csv", lean)
    )
    assert (
        done.files[0].column == "01 Communication primitives"
        and "a new assignment, 12 points" in done.files[0].note
    )
    empty = canvas_course()  # the course that export came from: no assignment yet
    empty.assignments.clear()
    empty.scores.clear()
    after = canvas_import(out.read_bytes().decode(), empty)
    new = [a for a in after.assignments if a < 0]
    assert len(new) == 1 and after.assignments[new[0]] == ("01 Communication primitives", 12.0)
    assert after.scores[101, new[0]] == 12.0 and after.scores[102, new[0]] == 4.0


# ---------------------------------------------------------------------------------------------------------
# Moodle


def worksheet(tmp_path: Path, rows: list[list[str]] = WORKSHEET_ROWS) -> Path:
    return written(tmp_path / "worksheet.csv", [WORKSHEET_HEADER, *rows])


def moodle_before() -> dict[str, MoodleGrade]:
    at = lambda text: dt.datetime.strptime(text, WORKSHEET_TIME)  # noqa: E731
    return {
        "bob": MoodleGrade(10.0, at(MON)),
        "carol": MoodleGrade(15.0, at(MON)),
        "dana": MoodleGrade(20.0, at(TUE)),
    }


def test_worksheet_upload_fills_grades_scaled_to_the_maximum(
    grades: Grades, course: Course, tmp_path: Path
) -> None:
    out = tmp_path / "ws.csv"
    done = export_to(grades, [course.find("01")], lms="moodle", out=out, roster=worksheet(tmp_path))
    header, *rows = moodle_rows(out.read_bytes().decode())
    assert header == WORKSHEET_HEADER[:10]  # the feedback column left out: its old text would overwrite
    assert [(r[0], r[5]) for r in rows] == [("Participant 5001", "25.00"), ("Participant 5002", "8.33")]
    assert done.files[0].left_out == {"no submission": ["Carol Danvers", "Dana Scully"]}
    participants = {5001: "alice", 5002: "bob", 5003: "carol", 5004: "dana"}
    now = dt.datetime(2025, 6, 4, 12, 0)
    after = worksheet_upload(out.read_bytes().decode(), participants, moodle_before(), 25.0, now)
    assert {u: g.grade for u, g in after.items()} == {"alice": 25.0, "bob": 8.33, "carol": 15.0, "dana": 20.0}


def test_a_locked_moodle_grade_is_left_out_and_said(grades: Grades, course: Course, tmp_path: Path) -> None:
    rows = [r[:] for r in WORKSHEET_ROWS]
    rows[1][7] = "No"  # bob's grade is locked
    out = tmp_path / "ws.csv"
    done = export_to(grades, [course.find("01")], lms="moodle", out=out, roster=worksheet(tmp_path, rows))
    assert done.files[0].left_out["Moodle locks the grade ('Grade can be changed': No)"] == ["Bob Marley"]
    assert [r[0] for r in moodle_rows(out.read_bytes().decode())[1:]] == ["Participant 5001"]
    scale = tmp_path / "scale.csv"
    written(scale, [[h if h != "Maximum grade" else "Scale" for h in WORKSHEET_HEADER], *WORKSHEET_ROWS])
    with pytest.raises(ValueError, match="graded on a scale"):
        read_moodle_worksheet(scale)


def test_moodle_gradebook_csv_is_percent_and_keeps_other_grades(
    grades: Grades, course: Course, tmp_path: Path
) -> None:
    out = tmp_path / "m.csv"
    done = export_to(grades, [course.find("01")], lms="moodle-gradebook", out=out, roster=worksheet(tmp_path))
    text = out.read_bytes().decode()
    title = "01 Communication primitives (percent)"
    assert moodle_rows(text) == [["Username", title], ["alice", "100.00"], ["bob", "33.33"]]
    assert "in percent" in done.files[0].note
    users = {"alice": 1, "bob": 2, "carol": 3, "dana": 4}
    created = moodle_gradebook_import(text, users, {}, {1: "new"})
    assert created == {(1, title): 100.0, (2, title): 33.33}
    before = {(1, "ex01"): 40.0, (4, "ex01"): 55.0, (3, "other"): 9.0}
    after = moodle_gradebook_import(text, users, before, {1: "ex01"})
    assert after == {(1, "ex01"): 100.0, (2, "ex01"): 33.33, (4, "ex01"): 55.0, (3, "other"): 9.0}
    with pytest.raises(ValueError, match="csvweirdcolumns"):  # why the unit is in the title, not a comment
        moodle_gradebook_import("# grades in percent\n" + text, users, before, {1: "ex01"})


# ---------------------------------------------------------------------------------------------------------
# matching, hostile names, the command


def test_matching_takes_the_column_that_matches_most_and_refuses_to_guess(tmp_path: Path) -> None:
    canvas = read_canvas_export(canvas_export(tmp_path))
    assert match_students(canvas, ["101", "103"], None).column == "ID"  # a class from Canvas's archive
    assert match_students(canvas, ["alice-gh", "bobgh"], None).column == "GitHub"
    assert match_students(canvas, ["ALICE"], "login").rows == {"ALICE": 0}  # logins ignore case
    with pytest.raises(ValueError, match=r"--match email: .* has no Email address column"):
        match_students(canvas, ["alice"], "email")
    with pytest.raises(ValueError, match="no column holds the gradebook's student ids"):
        match_students(canvas, ["nobody"], None)
    sheet = read_moodle_worksheet(worksheet(tmp_path))
    assert match_students(sheet, ["5001", "Participant 5004"], None).column == "Identifier"
    assert match_students(sheet, ["dana@UNI.edu"], None).rows == {"dana@UNI.edu": 3}
    twice = [
        *WORKSHEET_ROWS,
        ["Participant 5005", "Alice Two", "alice", "a2@uni.edu", *WORKSHEET_ROWS[0][4:]],
    ]
    with pytest.raises(ValueError, match=r"'alice' is in column 'Username' of lines 2, 6; one student per"):
        match_students(read_moodle_worksheet(worksheet(tmp_path, twice)), ["alice"], None)


HOSTILE = [
    "Doe; Jane",
    "Line\rBreak",
    "Two\nLines",
    'Quote "Q", Esq.',
    '=HYPERLINK("http://x")',
    "-minus",
    "Points Possible Jr.",
    "Zoë, Ünïcödé",
]


def test_hostile_names_round_trip_through_csv_and_each_importer(course: Course, tmp_path: Path) -> None:
    first = course.find("01")
    rows = [[name, str(200 + i), "", f"s{i}", "S;1", "", "", "", "", ""] for i, name in enumerate(HOSTILE)]
    hostile = Grades([first], {"01": first.points}, {("01", f"s{i}"): float(i) for i in range(len(HOSTILE))})
    out = tmp_path / "c.csv"
    export_to(hostile, [first], lms="canvas", out=out, roster=canvas_export(tmp_path, rows))
    raw = out.read_bytes().decode()
    assert '"Doe; Jane"' in raw and '"S;1"' in raw and '"Line\rBreak"' in raw and '"Two\nLines"' in raw
    parsed = list(csv.reader(io.StringIO(raw, newline="")))[2:]
    expected_names = [
        "Doe; Jane",
        "Line\rBreak",
        "Two\nLines",
        'Quote "Q", Esq.',
        '\'=HYPERLINK("http://x")',
        "'-minus",
        "",
        "Zoë, Ünïcödé",
    ]
    assert [r[0] for r in parsed] == expected_names
    after = canvas_import(raw, canvas_course(rows))
    assert {s: v for (s, a), v in after.scores.items()} == {
        200 + i: pytest.approx(i / first.points * 100, abs=0.005) for i in range(len(HOSTILE))
    }
    sheet_rows = [
        [f"Participant {7000 + i}", name, f"s{i}", "", "Submitted", "", "10.00", "Yes", MON, "-", ""]
        for i, name in enumerate(HOSTILE)
    ]
    ws = tmp_path / "ws.csv"
    export_to(hostile, [first], lms="moodle", out=ws, roster=worksheet(tmp_path, sheet_rows))
    people = {7000 + i: f"s{i}" for i in range(len(HOSTILE))}
    uploaded = worksheet_upload(ws.read_bytes().decode(), people, {}, 10.0, dt.datetime(2025, 6, 4))
    assert {u: g.grade for u, g in uploaded.items()} == {
        f"s{i}": pytest.approx(i / first.points * 10, abs=0.005) for i in range(len(HOSTILE))
    }


def test_grade_export_writes_a_file_per_exercise_and_says_who_is_left_out(
    course: Course, gradebook_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--course", str(course.root / "course.yml"), "export", "--gradebook", gradebook_url]
    roster = str(canvas_export(tmp_path))
    assert (
        cli.main(
            [*argv, "--canvas", str(tmp_path / "c.csv"), "--roster", roster, "--csv", str(tmp_path / "n.csv")]
        )
        == 1
    )
    said = capsys.readouterr().out
    assert "students found by the roster's 'SIS Login ID' column (the column matching the most: 3)" in said
    assert (
        f"wrote {tmp_path / 'c-01.csv'}: exercise 01, 2 students in '01 Communication primitives (1201)'"
        in said
    )
    assert "  left out, no submission: Danvers, Carol, Scully, Dana, Student, Test" in said
    assert "  left out, an invalid upload (fix it and grade it again): Liddell, Alice" in said
    assert "graded but not in the roster, so in no file: zed" in said and "yan" not in said
    assert {row["student_id"] for row in csv.DictReader((tmp_path / "n.csv").open())} >= {"alice", "zed"}
    assert cli.main([*argv, "--moodle", str(tmp_path / "m.csv"), "--roster", roster]) == 2
    assert "--moodle needs --exercise" in capsys.readouterr().out
    assert cli.main([*argv, "--canvas", str(tmp_path / "c.csv")]) == 2
    assert "--canvas and --moodle need --roster" in capsys.readouterr().out
    assert cli.main(argv) == 2
    with pytest.raises(SystemExit):  # one LMS at a time: each reads its own roster
        cli.main([*argv, "--canvas", "a.csv", "--moodle", "b.csv", "--roster", roster])
    assert re.search(r"not allowed with argument", capsys.readouterr().err)


def test_numbers_are_plain_two_place_decimals_and_files_are_replaced_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cells = [decimal_cell(v) for v in (12345.67, 1e6, 123456789.125, 2 / 3 * 10, 1e-7, -0.0001, 0.75)]
    assert cells == ["12345.67", "1000000.00", "123456789.12", "6.67", "0.00", "0.00", "0.75"]
    assert [parse_decimal(t) for t in ("10,00", " 12.50 ", "1e3", "N/A", "-", "", "nan")] == [
        10.0,
        12.5,
        1000.0,
        None,
        None,
        None,
        None,
    ]
    path = tmp_path / "grades.csv"
    write_csv(path, [["a", "b"], ["1", "2"]])
    assert path.read_bytes() == b"a,b\r\n1,2\r\n"

    def full_disk(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("grader.core.atomic.os.replace", full_disk)  # the one atomic writer
    with pytest.raises(EnvironmentFailure, match=f"^{path}: No space left"):
        write_csv(path, [["new"]])
    assert path.read_bytes() == b"a,b\r\n1,2\r\n" and [p.name for p in tmp_path.iterdir()] == ["grades.csv"]
