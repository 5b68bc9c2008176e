"""A class's state checks itself: a record is trusted only under its own student's name; the gradebook
takes a batch in one transaction with a finished mark, and an export refuses a gradebook that is corrupt
or whose last batch did not finish, in one line, with status 3, writing nothing. Faults injected for real:
copied, truncated and garbage files, a full tmpfs, kill -9 in the middle of the gradebook's write."""

from __future__ import annotations

import csv
import io
import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from faults import fill, tmpfs

from grader import cli
from grader.classroom.state.batch_marks import batch_transaction, mark_started, unfinished
from grader.classroom.state.gradebook import export_csv, open_gradebook, record
from grader.classroom.state.records import Record, RecordStore
from grader.core.course import Course, Exercise
from grader.core.errors import EnvironmentFailure
from grader.core.results import ExerciseResult, Status, TestResult


def result_for(exercise: Exercise, student: str, share: float) -> ExerciseResult:
    """One test per part, each worth its part's points, scoring ``share`` of them."""
    tests = tuple(
        TestResult(
            name=f"test_{p.name}",
            number=f"1.{i}",
            part=p.id,
            score=p.points * share,
            max_score=p.points,
            status=Status.PASSED if share == 1 else Status.FAILED,
        )
        for i, p in enumerate(exercise.parts, start=1)
    )
    return ExerciseResult(
        exercise=exercise.key, title=exercise.title, graded=student, device="cpu", tests=tests
    )


def write_grades(gradebook: object, exercise: Exercise, shares: dict[str, float]) -> None:
    for student, share in shares.items():
        result = result_for(exercise, student, share)
        record(
            gradebook,
            exercise=exercise,
            cells=list(result.tests),
            student=student,
            result=result,
            submitted=None,
            duedate=None,
        )


def graded_batch(url: str, course: Course, shares: dict[str, float], out: Path) -> None:
    """A batch's gradebook work as ``grade batch`` does it: mark started, then all grades and the mark."""
    exercise = course.find("toy")
    with open_gradebook(url, course.title, check=True) as gradebook:
        mark_started(gradebook, exercise.dirname, out)
    with (
        open_gradebook(url, course.title) as opened,
        batch_transaction(opened, exercise.dirname) as gradebook,
    ):
        write_grades(gradebook, exercise, shares)


def exported(url: str, course: Course) -> dict[str, float]:
    """Each student's score, as `nbgrader export` gives it."""
    with open_gradebook(url, course.title) as gradebook:
        text = export_csv(gradebook)
    return {row["student_id"]: float(row["score"]) for row in csv.DictReader(io.StringIO(text))}


@pytest.fixture(scope="module")
def blank_gradebook(toy_course: Course, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new nbgrader database, made once: nbgrader runs alembic to make one, which takes seconds."""
    path = tmp_path_factory.mktemp("blank") / "gradebook.db"
    with open_gradebook(f"sqlite:///{path}", toy_course.title):
        pass
    return path


@pytest.fixture(scope="module")
def class_gradebook(blank_gradebook: Path, toy_course: Course) -> Path:
    """A gradebook with a finished batch of 60 students: pages enough to damage one in the middle."""
    path = blank_gradebook.with_name("class.db")
    shutil.copyfile(blank_gradebook, path)
    graded_batch(f"sqlite:///{path}", toy_course, {f"s{n:03d}": n / 60 for n in range(60)}, path.parent)
    return path


@pytest.fixture
def gradebook_at(blank_gradebook: Path) -> Callable[[Path], str]:
    """A copy of the blank gradebook at the given path, as a URL."""

    def copy(path: Path) -> str:
        shutil.copyfile(blank_gradebook, path)
        return f"sqlite:///{path}"

    return copy


def export_cli(toy_course: Course, url: str, target: Path) -> int:
    return cli.main(
        ["--course", str(toy_course.root / "course.yml"), "export", "--csv", str(target), "--gradebook", url]
    )


# ---------------------------------------------------------------------------------------------------------
# records


def test_a_record_copied_over_another_students_is_set_aside_and_not_trusted(
    toy_course: Course, tmp_path: Path
) -> None:
    exercise = toy_course.find("toy")
    store = RecordStore(tmp_path / "records")
    for student, share in (("s01", 1.0), ("s02", 0.0), ("s03", 0.5)):
        store.put(Record(student, f"key-{student}", result_for(exercise, student, share), None))
    shutil.copyfile(tmp_path / "records" / "s01.json", tmp_path / "records" / "s03.json")

    assert store.get("s03") is None  # s01's grade is not s03's
    assert [r.student for r in store.all()] == ["s01", "s02"]  # s01 once, never twice
    [stray] = store.set_aside_strays(tmp_path / "set-aside")
    assert (stray.name, stray.reason) == ("s03.json", "it holds the record of 's01', not of 's03'")
    assert stray.moved_to == tmp_path / "set-aside" / "stray-s03.json"
    assert json.loads(stray.moved_to.read_text())["student"] == "s01"  # kept, never deleted
    assert store.set_aside_strays(tmp_path / "set-aside") == []


def test_truncated_and_garbage_records_are_set_aside_with_their_reason(
    toy_course: Course, tmp_path: Path
) -> None:
    exercise = toy_course.find("toy")
    store = RecordStore(tmp_path / "records")
    store.put(Record("s01", "k", result_for(exercise, "s01", 1.0), None))
    whole = (tmp_path / "records" / "s01.json").read_bytes()
    (tmp_path / "records" / "s02.json").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "records" / "s03.json").write_bytes(b"\x00\xff garbage")
    (tmp_path / "records" / "s04.json").write_text('{"student": "s04"}')

    moved = {s.name: s.reason for s in store.set_aside_strays(tmp_path / "set-aside")}
    assert sorted(moved) == ["s02.json", "s03.json", "s04.json"]
    assert moved["s04.json"] == "not a readable record (KeyError: 'key')"
    assert all(r.startswith("not a readable record (") for r in moved.values())
    assert [r.student for r in store.all()] == ["s01"]


# ---------------------------------------------------------------------------------------------------------
# the gradebook: one transaction and a finished mark per batch


def test_a_batch_that_stops_midway_leaves_the_last_grades_and_its_mark_unfinished(
    toy_course: Course, tmp_path: Path, gradebook_at: Callable[[Path], str]
) -> None:
    url = gradebook_at(tmp_path / "gradebook.db")
    graded_batch(url, toy_course, {"s01": 1.0, "s02": 0.5}, tmp_path / "out")
    with open_gradebook(url, toy_course.title) as gradebook:
        assert unfinished(gradebook) == []

    exercise = toy_course.find("toy")
    with open_gradebook(url, toy_course.title) as gradebook:
        mark_started(gradebook, exercise.dirname, tmp_path / "out")
    with pytest.raises(RuntimeError), open_gradebook(url, toy_course.title) as opened:
        with batch_transaction(opened, exercise.dirname) as gradebook:
            write_grades(gradebook, exercise, {"s01": 0.0, "s02": 0.0, "s03": 1.0})
            raise RuntimeError("stopped after three students")

    assert exported(url, toy_course) == {"s01": 5.0, "s02": 2.5}  # nothing of the stopped batch
    with open_gradebook(url, toy_course.title) as gradebook:
        [mark] = unfinished(gradebook)
    assert mark.assignment == exercise.dirname and str(tmp_path / "out") in str(mark)


def test_kill_9_during_the_gradebook_write_and_export_refuses(
    toy_course: Course, tmp_path: Path, gradebook_at: Callable[[Path], str]
) -> None:
    """The writer is killed while its transaction is open, after nbgrader has sent it students' grades."""
    url = gradebook_at(tmp_path / "gradebook.db")
    graded_batch(url, toy_course, {"s01": 1.0}, tmp_path / "out")
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILLED_WRITER,
            str(toy_course.root / "course.yml"),
            url,
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline() == "in the transaction\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()

    target = tmp_path / "grades.csv"
    assert export_cli(toy_course, url, target) == 3
    assert not target.exists()
    assert exported(url, toy_course) == {"s01": 5.0}  # SQLite's journal rolled the batch back
    graded_batch(url, toy_course, {"s01": 1.0, "s02": 0.0}, tmp_path / "out")  # the rerun
    assert export_cli(toy_course, url, target) == 0 and "s02" in target.read_text()


KILLED_WRITER = """
import sys, time
from pathlib import Path
from grader.core.course import load_course
from grader.classroom.state.batch_marks import batch_transaction, mark_started
from grader.classroom.state.gradebook import open_gradebook, record
from grader.core.results import ExerciseResult, Status

course = load_course(Path(sys.argv[1]))
exercise = course.find("toy")
url = sys.argv[2]
with open_gradebook(url, course.title) as gradebook:
    mark_started(gradebook, exercise.dirname, Path(sys.argv[3]))
with open_gradebook(url, course.title) as opened, batch_transaction(opened, exercise.dirname) as gradebook:
    for n in range(10):
        student = f"k{n:02d}"
        result = ExerciseResult.for_every_part(
            exercise=exercise, status=Status.FAILED, reason="x", graded=student, device="cpu"
        )
        record(gradebook, exercise=exercise, cells=[], student=student, result=result, submitted=None,
               duedate=None)
    print("in the transaction", flush=True)
    time.sleep(600)
"""


def test_a_full_disk_under_the_gradebook_is_one_failure_and_export_refuses(
    toy_course: Course, tmp_path: Path, gradebook_at: Callable[[Path], str]
) -> None:
    with tmpfs(tmp_path / "disk", size="2m") as disk:
        url = gradebook_at(disk / "gradebook.db")
        graded_batch(url, toy_course, {"s01": 1.0}, tmp_path / "out")
        filler = fill(disk, leave=16384)  # room for the started mark, not for forty students
        with pytest.raises(EnvironmentFailure) as failure:
            graded_batch(url, toy_course, {f"s{n:02d}": n / 40 for n in range(40)}, tmp_path / "out")
        assert str(failure.value).startswith(f"{disk / 'gradebook.db'}: the disk is full; free space there")

        target = tmp_path / "grades.csv"
        assert export_cli(toy_course, url, target) == 3 and not target.exists()
        filler.unlink()
        assert exported(url, toy_course) == {"s01": 5.0}


# ---------------------------------------------------------------------------------------------------------
# a gradebook that does not open


def corrupt_garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database\n" * 200)


def corrupt_truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def corrupt_middle(path: Path) -> None:
    """Overwrite a page in the middle of the file: the header and the first pages still read well."""
    data = bytearray(path.read_bytes())
    page = len(data) // 4096 // 2
    data[page * 4096 : (page + 2) * 4096] = b"\xa5" * 8192
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [corrupt_garbage, corrupt_truncated, corrupt_middle])
def test_a_corrupt_gradebook_is_one_line_status_3_and_no_file(
    damage, toy_course: Course, tmp_path: Path, class_gradebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    database = tmp_path / "gradebook.db"
    shutil.copyfile(class_gradebook, database)
    damage(database)

    target = tmp_path / "grades.csv"
    assert export_cli(toy_course, f"sqlite:///{database}", target) == 3
    said = capsys.readouterr()
    assert said.out.startswith(f"error: {database}: ") and "corrupt" in said.out
    assert said.out.count("\n") == 1 and "Traceback" not in said.out + said.err
    assert not target.exists()


def test_an_export_without_a_gradebook_says_so(toy_course: Course, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert export_cli(toy_course, url, tmp_path / "grades.csv") == 2
    assert "no gradebook there" in capsys.readouterr().out
    assert not (tmp_path / "none.db").exists()


def test_a_batch_stops_on_a_corrupt_gradebook_before_it_grades(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    (tmp_path / "subs" / "s01").mkdir(parents=True)
    (tmp_path / "subs" / "s01" / "toy.py").write_text("")
    database = tmp_path / "gradebook.db"
    corrupt_garbage(database)
    argv = [
        "batch",
        str(tmp_path / "subs"),
        "--exercise",
        "toy",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "out"),
    ]
    assert (
        cli.main(["--course", str(course.root / "course.yml"), *argv, "--gradebook", f"sqlite:///{database}"])
        == 3
    )
    said = capsys.readouterr().out
    assert f"error: {database}: the file is not a database (corrupt); move it aside" in said
    assert "Traceback" not in said
    assert not list((tmp_path / "out" / "records").iterdir())  # nothing graded, not even the reference
    assert not (tmp_path / "out" / "reference").exists()
