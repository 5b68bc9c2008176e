"""Reading submissions as each platform hands them over (grader/classroom/intake/): the platform's ids,
names and late flags, every member in an upload or named as left over, nothing written outside --out."""

from __future__ import annotations

import datetime as dt
import zipfile
from pathlib import Path

import pytest
from intake_archives import (
    canvas_members,
    classroom_tree,
    gradescope_members,
    moodle_flat_members,
    moodle_members,
    write_zip,
)

from grader.classroom.intake import canvas
from grader.classroom.intake.discovery import discover, hidden_entries
from grader.classroom.intake.platforms import LEFTOVERS, detect, read_submissions
from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.reasons import Reason
from grader.core.submission import stage

DUE = dt.datetime(2026, 3, 2, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=-8)))


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def rows(intake_folder: Path) -> dict[str, tuple[str | None, bool | None, list[str]]]:
    """{id: (name, late, files in the upload)} of the folder the intake wrote."""
    return {
        s.student: (s.name, s.late, sorted(files_under(s.path) - {"timestamp.txt"}))
        for s in discover(intake_folder)
    }


def read(toy_course: Course, source: Path, out: Path, **options: object):  # type: ignore[no-untyped-def]
    return read_submissions(source, course=toy_course, exercise=toy_course.find("toy"), out=out, **options)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# Canvas


def test_canvas_ids_names_late_flags_and_files(toy_course: Course, tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "canvas.zip", canvas_members())
    out = tmp_path / "out"
    intake = read(toy_course, archive, out)
    assert intake.platform == "canvas" and intake.detected.startswith("detected: Canvas's")
    assert rows(intake.folder) == {
        "12345": ("smithjane", False, ["notes.txt", "toy.py"]),
        "23456": ("doejohn", True, ["toy.py"]),
        "34567": ("müllerjürgen", False, ["toy-1.py"]),
        "anon_aB3dE": (None, False, ["toy.py"]),
        "anon_xY9zQ": (None, True, ["toy.py"]),
        "45678": ("oldcanvas", True, ["toy.py"]),
        "56789": ("leejin", False, ["text.html"]),
    }
    assert intake.leftovers == ()
    assert {p for p in files_under(tmp_path) if not p.startswith("out/")} == {"canvas.zip"}  # only in --out
    late = next(s for s in discover(intake.folder) if s.student == "23456")
    assert late.platform == "canvas" and late.notes == ("Canvas marks this submission LATE",)


def test_canvas_names_that_end_in_digits_follow_canvas_unless_a_roster_knows_better() -> None:
    name = "smith_42_67890_678907_toy.py"
    assert canvas.parse(name) == canvas.CanvasName("42", "smith", False, "678907_toy.py")  # Canvas's rule
    assert canvas.parse(name, roster={"67890"}) == canvas.CanvasName("67890", "smith_42", False, "toy.py")
    assert canvas.parse("readme.txt") is None
    assert canvas.parse("LATE_anon_k9_1_a_b.py") == canvas.CanvasName("anon_k9", None, True, "a_b.py")


def test_a_renamed_canvas_copy_is_staged_with_a_note(toy_course: Course, tmp_path: Path) -> None:
    intake = read(toy_course, write_zip(tmp_path / "c.zip", canvas_members()), tmp_path / "out")
    renamed = stage(intake.folder / "34567", ("toy.py",), tmp_path / "impl")
    assert renamed.taken == ("toy.py",) and renamed.invalid is None
    assert renamed.notes[0].reason is Reason.RENAMED
    text_only = stage(intake.folder / "56789", ("toy.py",), tmp_path / "impl2")
    assert text_only.invalid is not None and text_only.invalid.reason is Reason.NO_EXERCISE_FILE
    assert "text.html" in text_only.invalid.text  # the text entry is named in the student's feedback


# ---------------------------------------------------------------------------------------------------------
# Moodle


def test_moodle_folders_blind_marking_pre_41_and_teams(toy_course: Course, tmp_path: Path) -> None:
    intake = read(toy_course, write_zip(tmp_path / "moodle.zip", moodle_members()), tmp_path / "out")
    assert intake.platform == "moodle"
    assert rows(intake.folder) == {
        "101": ("Jane Smith", None, ["onlinetext.html", "toy.py"]),
        "102": ("Jürgen Müller", None, ["toy (1).py"]),
        "103": (None, None, ["toy.py"]),
        "104": ("Old Name", None, ["toy.py"]),
        "7": ("Team Rocket", None, ["toy.py"]),
    }


def test_moodle_flat_download(toy_course: Course, tmp_path: Path) -> None:
    intake = read(toy_course, write_zip(tmp_path / "flat.zip", moodle_flat_members()), tmp_path / "out")
    assert rows(intake.folder) == {
        "101": ("Jane Smith", None, ["toy.py"]),
        "106": ("Ann Lee", None, ["toy-2.py"]),
    }


def test_an_unzipped_download_reads_like_the_zip(toy_course: Course, tmp_path: Path) -> None:
    folder = tmp_path / "unzipped"
    for name, data in moodle_members().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    zipped = read(toy_course, write_zip(tmp_path / "m.zip", moodle_members()), tmp_path / "a")
    assert rows(read(toy_course, folder, tmp_path / "b").folder) == rows(zipped.folder)


# ---------------------------------------------------------------------------------------------------------
# Gradescope


def test_gradescope_groups_emails_times_and_late(toy_course: Course, tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "export.zip", gradescope_members())
    intake = read(toy_course, archive, tmp_path / "out", due=DUE)
    assert intake.platform == "gradescope"
    assert rows(intake.folder) == {
        "12345": ("Jane Smith", False, ["toy.py"]),
        "200": ("Zoë Ångström", False, ["toy.py"]),  # a group: each member gets the group's upload
        "pat@example.edu": ("Pat Noid", False, ["toy.py"]),  # no sid: the email
        "300": ("Late Comer", True, ["toy-1.py"]),
    }
    jane = next(s for s in discover(intake.folder) if s.student == "12345")
    assert jane.submitted == dt.datetime(2026, 3, 1, 23, 59, 58, 123456, tzinfo=DUE.tzinfo)
    assert intake.leftovers == (("assignment_9100_export/submission_metadata.yml", intake.leftovers[0][1]),)
    undated = read(toy_course, archive, tmp_path / "out2")
    assert {s.late for s in discover(undated.folder)} == {None}  # no --due: no late flag


# ---------------------------------------------------------------------------------------------------------
# GitHub Classroom


def test_classroom_logins_team_slugs_and_the_students_own_files(toy_course: Course, tmp_path: Path) -> None:
    root = classroom_tree(tmp_path / "clones", toy_course.find("toy").dirname)
    (root / "toy-assignment-octocat" / "exercises" / "01_toy" / "scratch.py").write_text("mine\n")
    intake = read(toy_course, tmp_path / "clones", tmp_path / "out")
    assert intake.platform == "classroom"
    assert rows(intake.folder) == {
        "octocat": (None, None, ["scratch.py", "toy.py"]),
        "team-rocket": (None, None, ["toy.py"]),
    }
    why = dict(intake.leftovers)
    assert why["toy-assignment-submissions/toy-assignment-octocat/exercises/01_toy/test_public.py"] == (
        "given by the course in the starter"
    )
    assert "toy-assignment-submissions/toy-assignment-octocat/README.md" in why
    assert (tmp_path / "out" / LEFTOVERS).read_text().count("\n") == len(intake.leftovers) + 2


# ---------------------------------------------------------------------------------------------------------
# every member somewhere, and two submissions of one id


def test_every_member_ends_in_an_upload_or_a_named_leftover(toy_course: Course, tmp_path: Path) -> None:
    members = {**canvas_members(), "__MACOSX/._smithjane_12345_678901_toy.py": b"fork", "index.html": b"x"}
    archive = write_zip(tmp_path / "c.zip", members)
    intake = read(toy_course, archive, tmp_path / "out", platform="canvas")
    uploaded = {e for s in discover(intake.folder) for e in s.entries}
    left = {member for member, _ in intake.leftovers}
    assert uploaded | left == set(members) and not uploaded & left
    assert (
        dict(intake.leftovers)["__MACOSX/._smithjane_12345_678901_toy.py"] == "macOS, editor or git clutter"
    )


def test_two_submissions_of_one_id_are_one_invalid_row(toy_course: Course, tmp_path: Path) -> None:
    members = {
        "Jane Smith_101_assignsubmission_file/toy.py": b"a\n",
        "Jane Doe_101_assignsubmission_file/toy.py": b"b\n",
    }
    intake = read(toy_course, write_zip(tmp_path / "m.zip", members), tmp_path / "out")
    [row] = discover(intake.folder)
    assert row.student == "101" and row.problem is not None and row.problem.reason is Reason.DUPLICATE
    assert "Jane Doe_101, Jane Smith_101" in row.problem.text


def test_detection_and_its_refusals(toy_course: Course, tmp_path: Path) -> None:
    assert detect(write_zip(tmp_path / "g.zip", gradescope_members())) == "gradescope"
    (tmp_path / "plain" / "alice").mkdir(parents=True)
    assert detect(tmp_path / "plain") == "folders"
    with pytest.raises(UsageError, match="in no platform's layout"):
        detect(write_zip(tmp_path / "other.zip", {"alice/toy.py": b""}))
    with pytest.raises(UsageError, match="takes a folder"):
        read(toy_course, tmp_path / "g.zip", tmp_path / "out", platform="folders")
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04 cut")
    with pytest.raises(UsageError, match="corrupt"):
        read(toy_course, bad, tmp_path / "out", platform="canvas")


# ---------------------------------------------------------------------------------------------------------
# a plain folder: every entry a row


def test_every_entry_of_a_folder_is_a_row(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "toy.py").write_text("x\n")
    with zipfile.ZipFile(subs / "UPPER.ZIP", "w") as zf:
        zf.writestr("toy.py", "x\n")
    (subs / "bob.tar.gz").write_bytes(b"")
    (subs / "toy.py").write_text("x\n")
    (subs / "notes.txt").write_text("x\n")
    (subs / "carol").mkdir()
    (subs / "carol.zip").write_bytes(b"")
    (subs / ".DS_Store").write_bytes(b"")
    found = {s.student: s for s in discover(subs)}
    assert sorted(found) == ["UPPER", "alice", "bob", "carol", "notes", "toy"]
    assert found["carol"].problem is not None and found["carol"].problem.reason is Reason.DUPLICATE
    assert found["carol"].entries == ("carol", "carol.zip")
    assert hidden_entries(subs) == [".DS_Store"]
    verdicts = {s: stage(row.path, ("toy.py",), tmp_path / "impl" / s).invalid for s, row in found.items()}
    assert verdicts["UPPER"] is None and verdicts["toy"] is None and verdicts["alice"] is None
    assert verdicts["notes"] is not None and verdicts["notes"].reason is Reason.NOT_AN_UPLOAD
    assert verdicts["bob"] is not None and verdicts["bob"].reason is Reason.EMPTY
