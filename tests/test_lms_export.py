"""`grade export --canvas/--moodle`: the files parse back as each importer reads them (its header rule, its
ids, "no grade" cells), with a student missing from the roster, a student without a submission, an invalid
upload, and rosters that cannot be used."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest

from grader import cli
from grader.classroom.batch import invalid_result
from grader.classroom.outputs.lms import (
    ROSTER,
    RosterEntry,
    load_roster,
    read_grades,
    write_canvas,
    write_moodle,
)
from grader.classroom.state.gradebook import open_gradebook, record
from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult, Status, TestResult

ROSTER_CSV = """\
student,name,section,canvas_id,sis_user_id,sis_login_id,idnumber,email,username
alice,"Liddell, Alice",S1,101,A-1,alice@uni,1001,alice@uni.edu,aliddell
bob,Bob Marley,S1,102,,bob@uni,1002,bob@uni.edu,bmarley
carol,Carol Danvers,S2,,C-3,,1003,carol@uni.edu,cdanvers
dana,Dana Scully,S2,104,,,1004,dana@uni.edu,dscully
"""
"""dana has no submission at all; zed, graded, is not in it."""


def graded(exercise: Exercise, student: str, score_share: float) -> tuple[list[TestResult], ExerciseResult]:
    """One test per part, each worth its part's points, scoring ``score_share`` of them."""
    cells = [
        TestResult(
            name=f"test_{p.name}",
            number=f"1.{i}",
            part=p.id,
            score=p.points * score_share,
            max_score=p.points,
            status=Status.PASSED if score_share == 1 else Status.FAILED,
        )
        for i, p in enumerate(exercise.parts, start=1)
    ]
    return cells, ExerciseResult(
        exercise=exercise.key, title=exercise.title, graded=student, device="cpu", tests=tuple(cells)
    )


@pytest.fixture(scope="module")
def gradebook_url(course: Course, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """01: alice full marks, bob a third, zed full; 02: alice and yan (not in the roster, no grade at all) an
    invalid upload each, carol half. Read only."""
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


@pytest.fixture
def roster(tmp_path: Path) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(ROSTER_CSV)
    return path


def parse(path: Path) -> list[list[str]]:
    return list(csv.reader(path.open(newline="")))


def canvas_accepts_header(row: list[str]) -> int:
    """How many student columns Canvas's importer finds before the assignments (its header rule in
    app/models/gradebook_importer.rb: row_has_student_headers?, update_column_count, the Section check)."""
    assert len(row) > 3 and "Student" in row[0] and "ID" in row[1]
    columns = 3
    if re.search(r"SIS\s+Login\s+ID", row[2]):
        columns += 1
    elif re.search(r"SIS\s+User\s+ID", row[2]) and re.search(r"SIS\s+Login\s+ID", row[3]):
        columns += 2
    assert "Section" in row[columns - 1], "Canvas: Invalid header row"
    return columns


def test_canvas_file_parses_back_as_canvas_reads_it(
    course: Course, gradebook_url: str, roster: Path, tmp_path: Path
) -> None:
    with open_gradebook(gradebook_url, course_id=course.title) as gradebook:
        grades = read_grades(gradebook, course)
    done = write_canvas(tmp_path / "canvas.csv", grades, load_roster(roster))
    header, points, *rows = parse(tmp_path / "canvas.csv")
    first = canvas_accepts_header(header)
    assert header[:first] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    one, two = course.find("01"), course.find("02")
    assert header[first:] == [f"01 {one.title}", f"02 {two.title}"]
    assert not re.search(r"\s\(\d+\)\Z", header[first]), "a bare title, not Canvas's 'Title (id)'"
    assert points == ["Points Possible", "", "", "", "", f"{one.points:g}", f"{two.points:g}"]
    table = {row[0]: row for row in rows}
    assert table["Liddell, Alice"] == [
        "Liddell, Alice",
        "101",
        "A-1",
        "alice@uni",
        "S1",
        f"{one.points:g}",
        "",
    ]
    assert table["Bob Marley"][first:] == [f"{round(one.points / 3, 2):g}", ""]  # no submission of 02
    assert table["Carol Danvers"][1:] == ["", "C-3", "", "S2", "", f"{two.points / 2:g}"]
    assert table["Dana Scully"][first:] == ["", ""]  # no submission at all: a row with no grade
    assert (done.rows, done.exercises, done.unmatched, done.invalid) == (4, 2, ["zed"], ["02 alice"])


def test_moodle_file_parses_back_with_its_id_column_and_no_grade_marks(
    course: Course, gradebook_url: str, roster: Path, tmp_path: Path
) -> None:
    with open_gradebook(gradebook_url, course_id=course.title) as gradebook:
        grades = read_grades(gradebook, course)
    done = write_moodle(tmp_path / "moodle.csv", grades, load_roster(roster))
    header, *rows = parse(tmp_path / "moodle.csv")
    assert header == [
        "ID number",
        "Email address",
        "Username",
        "01 " + course.find("01").title,
        "02 " + course.find("02").title,
    ]
    table = {row[1]: row[3:] for row in rows}
    assert table == {
        "alice@uni.edu": [f"{course.find('01').points:g}", "-"],  # "-": no grade, new or existing item
        "bob@uni.edu": [f"{round(course.find('01').points / 3, 2):g}", "-"],
        "carol@uni.edu": ["-", f"{course.find('02').points / 2:g}"],
        "dana@uni.edu": ["-", "-"],
    }
    assert done.unmatched == ["zed"] and done.invalid == ["02 alice"]


def test_roster_text_cannot_run_as_a_formula(course: Course, gradebook_url: str, tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student,name,section,canvas_id,email\n"
        'alice,"=HYPERLINK(""http://evil.example"",""open"")",@S1,101,-a@uni.edu\n'
        "bob,Bob Marley,+S2,102,bob@uni.edu\n"
    )
    with open_gradebook(gradebook_url, course_id=course.title) as gradebook:
        grades = read_grades(gradebook, course)
    write_canvas(tmp_path / "canvas.csv", grades, load_roster(roster))
    _, _, *rows = parse(tmp_path / "canvas.csv")
    points = f"{course.find('01').points:g}"
    assert rows[0] == ['\'=HYPERLINK("http://evil.example","open")', "101", "", "", "'@S1", points, ""]
    assert rows[1][:5] == ["Bob Marley", "102", "", "", "'+S2"]
    write_moodle(tmp_path / "moodle.csv", grades, load_roster(roster))
    _, *rows = parse(tmp_path / "moodle.csv")
    assert rows == [["'-a@uni.edu", points, "-"], ["bob@uni.edu", f"{round(float(points) / 3, 2):g}", "-"]]


def test_rosters_that_cannot_be_used(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    for text, message in [
        ("student,emial\nalice,a@x\n", "unknown column 'emial'; the roster's columns are student, name"),
        ("name,email\nAlice,a@x\n", "no 'student' column"),
        ("student,email\nalice,a@x\nalice,b@x\n", "line 3: 'alice' again"),
        ("student,email\n,a@x\n", "line 2: no student"),
    ]:
        bad.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)):
            load_roster(bad)
    bad.write_text("\ufeffstudent,email\nalice,a@x\n")  # Excel's byte-order mark is fine
    assert load_roster(bad) == [RosterEntry("alice", email="a@x")]
    assert [f.name for f in fields(RosterEntry)] == list(ROSTER)

    from grader.classroom.outputs.lms import Grades

    with pytest.raises(ValueError, match="no canvas_id, sis_user_id or sis_login_id for alice"):
        write_canvas(tmp_path / "c.csv", Grades([]), load_roster(bad))
    bad.write_text("student,email,idnumber\nalice,a@x,\nbob,,7\n")
    with pytest.raises(ValueError, match="Moodle finds a user by idnumber, email or username"):
        write_moodle(tmp_path / "m.csv", Grades([]), load_roster(bad))


def test_grade_export_writes_both_and_says_who_is_missing(
    course: Course, gradebook_url: str, roster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--course", str(course.root / "course.yml"), "export", "--gradebook", gradebook_url]
    out = [
        "--canvas",
        str(tmp_path / "c.csv"),
        "--moodle",
        str(tmp_path / "m.csv"),
        "--csv",
        str(tmp_path / "n.csv"),
    ]
    assert cli.main([*argv, *out, "--roster", str(roster)]) == 1  # zed is graded but not in the roster
    said = capsys.readouterr().out
    assert f"wrote {tmp_path / 'c.csv'}: 4 students, 2 exercises" in said and "yan" not in said
    assert (
        "no grade for an invalid upload: 02 alice" in said
        and "not in the roster, so not in the file: zed" in said
    )
    assert {row["student_id"] for row in csv.DictReader((tmp_path / "n.csv").open())} >= {"alice", "zed"}

    roster.write_text(ROSTER_CSV + "zed,Zed,S3,105,,,1005,zed@uni.edu,zed\n")
    assert cli.main([*argv, "--canvas", str(tmp_path / "c.csv"), "--roster", str(roster)]) == 0
    assert cli.main([*argv, "--canvas", str(tmp_path / "c.csv")]) == 2
    assert "--canvas and --moodle need --roster" in capsys.readouterr().out
    assert cli.main(argv) == 2
