"""`grade batch` on an instructor's bad day, end to end: a full disk under the gradebook, a record copied
over another student's, two batches on one --out. Each ends in one line and its own status, the export
refuses what is not whole, and every student keeps one grade across the reruns."""

from __future__ import annotations

import csv
import io
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from faults import fill, tmpfs

from grader import cli
from grader.classroom.state.lock import LOCK_FILE
from grader.core.course import Course

pytestmark = pytest.mark.slow  # whole batches: grading processes, gradebook, reports

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"
INVALID = 30
"""Uploads that cannot be graded: they cost no grading, and fill the gradebook's transaction all the same."""


def make_class(folder: Path, course: Course, *, invalid: int = 0) -> Path:
    """s01 (the reference, zipped), s02 (the reference), s03 (wrong), then ``invalid`` corrupt zips."""
    reference = course.solution_dir(course.find("toy")) / "toy.py"
    folder.mkdir(exist_ok=True)
    with zipfile.ZipFile(folder / "s01.zip", "w") as archive:
        archive.write(reference, "s01/toy.py")
    (folder / "s02").mkdir()
    shutil.copyfile(reference, folder / "s02" / "toy.py")
    shutil.copytree(SUBMISSIONS / "wrong", folder / "s03")
    add_invalid(folder, invalid)
    return folder


def add_invalid(folder: Path, count: int) -> None:
    for n in range(count):
        (folder / f"x{n:02d}.zip").write_bytes(b"PK\x03\x04 cut short")


def grade(course: Course, *argv: str) -> int:
    return cli.main(["--course", str(course.root / "course.yml"), *argv])


def batch_argv(subs: Path, out: Path, url: str) -> list[str]:
    return ["batch", str(subs), "--exercise", "toy", "--device", "cpu", "--out", str(out), "--gradebook", url]


def grades_csv(out: Path) -> dict[str, tuple[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "grades.csv").read_text()))
    return {row["student"]: (row["score"], row["verdict"]) for row in rows}


def error_lines(text: str) -> list[str]:
    assert "Traceback" not in text, text
    return [line for line in text.splitlines() if line.startswith("error:")]


def test_a_full_disk_a_copied_record_and_three_reruns_give_each_student_one_grade(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    subs, out, export = make_class(tmp_path / "subs", course), tmp_path / "out", tmp_path / "export.csv"
    with tmpfs(tmp_path / "disk", size="2m") as disk:
        url = f"sqlite:///{disk / 'gradebook.db'}"
        assert grade(course, *batch_argv(subs, out, url)) == 0
        capsys.readouterr()

        add_invalid(subs, INVALID)
        filler = fill(disk, leave=16384)  # the started mark fits; thirty more students' grades do not
        assert grade(course, *batch_argv(subs, out, url)) == 3
        [said] = error_lines(capsys.readouterr().out)
        assert said.startswith(f"error: {disk / 'gradebook.db'}: the disk is full; free space there"), said
        assert grade(course, "export", "--csv", str(export), "--gradebook", url) == 3
        [said] = error_lines(capsys.readouterr().out)
        assert "the last batch of 01_toy" in said and "has not finished" in said
        assert not export.exists()

        filler.unlink()
        assert grade(course, *batch_argv(subs, out, url)) == 0  # rerun 1: the records were kept
        assert f"graded 0 of {INVALID + 3}, {INVALID + 3} unchanged" in capsys.readouterr().out
        first = grades_csv(out)
        assert first["s01"] == first["s02"] == ("5", "passed") and first["s03"] == ("2", "failed")
        assert len(first) == INVALID + 3 and all(
            first[f"x{n:02d}"] == ("0", "invalid") for n in range(INVALID)
        )

        shutil.copyfile(out / "records" / "s01.json", out / "records" / "s03.json")
        assert grade(course, *batch_argv(subs, out, url)) == 0  # rerun 2: s03's record is s01's
        said = capsys.readouterr().out
        assert "set aside records/s03.json: it holds the record of 's01', not of 's03'" in said
        assert f"graded 1 of {INVALID + 3}" in said and grades_csv(out) == first

        assert grade(course, *batch_argv(subs, out, url)) == 0  # rerun 3
        assert "graded 0 of" in capsys.readouterr().out and grades_csv(out) == first
        assert grade(course, "export", "--csv", str(export), "--gradebook", url) == 0
    exported = {row["student_id"]: row["score"] for row in csv.DictReader(export.open())}
    assert exported == {student: f"{float(score)}" for student, (score, _) in first.items()}


def test_a_second_batch_on_the_same_out_is_refused_or_waits(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    subs, out = tmp_path / "subs", tmp_path / "out"
    shutil.copytree(SUBMISSIONS / "wrong", subs / "s03")
    add_invalid(subs, 2)
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    command = [sys.executable, "-m", "grader.cli", "--course", str(course.root / "course.yml")]
    first = subprocess.Popen([*command, *batch_argv(subs, out, url)], stdout=subprocess.PIPE, text=True)
    lock = out / LOCK_FILE
    while f'"pid": {first.pid}' not in (lock.read_text() if lock.exists() else ""):
        assert first.poll() is None, "the first batch ended before it took the lock"
        time.sleep(0.05)
    first.send_signal(signal.SIGSTOP)  # it holds the lock for as long as the test needs

    assert grade(course, *batch_argv(subs, out, url)) == 3
    [said] = error_lines(capsys.readouterr().out)
    busy = f"error: {out}: another batch is grading into this folder (pid {first.pid} on "
    assert said.startswith(busy)
    assert "--wait" in said
    (out / "records").mkdir(exist_ok=True)  # the stopped batch may not have made it yet
    for reader in (["report", str(out)], ["similarity", str(out)]):  # no report of a half-graded class
        assert grade(course, *reader) == 3, reader
        [said] = error_lines(capsys.readouterr().out)
        assert said.startswith(busy)

    queued = subprocess.Popen(
        [*command, *batch_argv(subs, out, url), "--wait"], stdout=subprocess.PIPE, text=True
    )
    assert queued.stdout is not None
    waiting = next(line for line in queued.stdout if line.startswith("waiting for"))
    assert f"(pid {first.pid} on " in waiting
    first.send_signal(signal.SIGCONT)
    said_first = first.communicate()[0]
    assert first.returncode == 0, said_first
    rest = queued.stdout.read()
    assert queued.wait() == 0 and "graded 0 of 3, 3 unchanged" in rest, rest
    assert grades_csv(out) == {"s03": ("2", "failed"), "x00": ("0", "invalid"), "x01": ("0", "invalid")}
