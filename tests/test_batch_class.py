"""A batch reads its class once (each upload staged once), keys each record by what decides its grade
alone, and leaves a student whose submission is gone out of every output, their record set aside.

These batches run the real ``grade batch`` (discovery, staging, records, gradebook, CSV, results, class
and similarity reports) on a pool that grades nothing (``EchoPool``): what is checked here is the batch's
own bookkeeping, not grading.
"""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from grader import cli
from grader.classroom.batch import BatchPlan, PendingGrade
from grader.classroom.outputs.lms import read_grades
from grader.classroom.state.gradebook import open_gradebook
from grader.classroom.state.records import Record, RecordStore
from grader.core import submission
from grader.core.course import Course
from grader.core.results import ExerciseResult, Status


class EchoPool:
    """Grades nothing: the reference passes, and so does every submission it is given (noted in
    ``EchoPool.given``)."""

    given: ClassVar[list[str]] = []

    def reference(self, plan: BatchPlan) -> ExerciseResult:
        return ExerciseResult.for_every_part(
            exercise=plan.exercise, status=Status.PASSED, reason="ok", graded="reference", device="cpu"
        )

    def grade(
        self,
        plan: BatchPlan,
        todo: list[PendingGrade],
        store: RecordStore,
        on_result: Callable[[str, ExerciseResult], None],
    ) -> None:
        for pending in todo:
            student = pending.submission.student
            EchoPool.given.append(student)
            result = ExerciseResult.for_every_part(
                exercise=plan.exercise, status=Status.PASSED, reason="ok", graded=student, device="cpu"
            )
            store.put(Record(student, pending.key, result, pending.submitted, pending.files))
            on_result(student, result)


@pytest.fixture
def batch(
    toy_course: Course, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[Path], str]:
    """``grade batch SUBS`` on the fixture course's exercise ``toy`` with ``EchoPool``; what it printed."""
    monkeypatch.setattr("grader.classroom.grade.LocalPool", EchoPool)
    EchoPool.given = []
    argv = ["--course", str(toy_course.root / "course.yml"), "batch", "--exercise", "toy", "--device", "cpu"]
    argv += ["--out", str(tmp_path / "out"), "--gradebook", f"sqlite:///{tmp_path / 'gradebook.db'}"]

    def run(subs: Path) -> str:
        assert cli.main([*argv, str(subs), "--allow-unsandboxed"]) == 0
        return capsys.readouterr().out

    return run


SHARED = """

def cube(x: float) -> float:
    \"\"\"What s01 and s02 both wrote, and no one else: a pair the similarity report lists.\"\"\"
    result = 1.0
    for _ in range(3):
        result = result * x
    return result
"""


def make_class(folder: Path, course: Course, size: int) -> Path:
    """``size`` uploads: copies of the reference (s01 and s02 add the same function), every third one
    zipped, and two invalid ones."""
    reference = (course.solution_dir(course.find("toy")) / "toy.py").read_text()
    for i in range(size - 2):
        student, text = f"s{i:02d}", reference + (SHARED if i in (1, 2) else "")
        if i % 3 == 0:
            folder.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(folder / f"{student}.zip", "w") as archive:
                archive.writestr(f"{student}/toy.py", text)
        else:
            (folder / student).mkdir(parents=True)
            (folder / student / "toy.py").write_text(text)
    (folder / "empty").mkdir()
    (folder / "readme.zip").write_bytes(zipped({"readme/README.md": "in the cloud\n"}))
    return folder


def zipped(members: dict[str, str]) -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return data.getvalue()


@pytest.fixture
def stagings(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Stagings in this process, by upload. Every ``stage()`` call, whichever module imported it and
    however, first asks ``_whole_upload_problem`` about its source: counting there misses none."""
    counts: Counter[str] = Counter()
    original = submission._whole_upload_problem

    def counted(source: Path, *rest: Any) -> Any:
        counts[source.name] += 1
        return original(source, *rest)

    monkeypatch.setattr(submission, "_whole_upload_problem", counted)
    return counts


def keys(out: Path) -> dict[str, str]:
    return {p.stem: json.loads(p.read_text())["key"] for p in sorted((out / "records").glob("*.json"))}


def test_a_batch_of_20_stages_each_upload_once_and_says_so(
    batch: Callable[[Path], str], toy_course: Course, tmp_path: Path, stagings: Counter[str]
) -> None:
    subs = make_class(tmp_path / "subs", toy_course, 20)
    said = batch(subs)
    assert "graded 18 of 20, 2 invalid (not graded)" in said and "staged 20 submissions once" in said
    assert sorted(stagings) == sorted(p.name for p in subs.iterdir()) and set(stagings.values()) == {1}
    assert len(EchoPool.given) == 18 and not (tmp_path / "out" / ".staged").exists()

    stagings.clear()  # a rerun: nothing to grade, and still each upload staged once (to key it)
    said = batch(subs)
    assert (
        "graded 0 of 20, 20 unchanged since their last run" in said and "staged 20 submissions once" in said
    )
    assert len(stagings) == 20 and set(stagings.values()) == {1} and len(EchoPool.given) == 18


def test_keys_hold_under_reworded_messages_and_a_new_package_version(
    batch: Callable[[Path], str], toy_course: Course, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record key hashes what decides a grade: reword every message staging writes, release a new
    version of the package, and no key changes, no one is graded again."""
    subs = make_class(tmp_path / "subs", toy_course, 6)
    (subs / "s01" / "extra").mkdir()
    (subs / "s01" / "toy.py").unlink()
    (subs / "s01" / "toy.py").symlink_to(subs / "s02" / "toy.py")  # a refusal (a link): an invalid upload
    batch(subs)
    before = keys(tmp_path / "out")
    reasons = {
        s: json.loads((tmp_path / "out" / "records" / f"{s}.json").read_text())["result"]["notes"]
        for s in ("empty", "readme", "s01")
    }
    assert reasons == {
        "empty": ["the submission is empty"],
        "readme": ["none of the exercise's files (toy.py) is in it; it holds readme/README.md"],
        "s01": ["toy.py is a symbolic link: symbolic links are not allowed, so it was not taken"],
    }

    original = submission.Note
    monkeypatch.setattr(submission, "Note", lambda reason, text: original(reason, f"reworded: {text[::-1]}"))
    real = importlib.metadata.distribution

    class Released:
        version = "999.0"

        def __init__(self, found: importlib.metadata.Distribution) -> None:
            self.found = found

        def __getattr__(self, name: str) -> Any:
            return getattr(self.found, name)

    monkeypatch.setattr(
        importlib.metadata,
        "distribution",
        lambda name: Released(real(name)) if name == "distgpu" else real(name),
    )
    assert importlib.metadata.version("distgpu") == "999.0"  # the patch reaches every version() call
    said = batch(subs)
    assert "graded 0 of 6, 6 unchanged since their last run" in said
    assert keys(tmp_path / "out") == before and len(EchoPool.given) == 3


def test_a_removed_student_leaves_every_output_and_their_record_is_set_aside(
    batch: Callable[[Path], str], toy_course: Course, tmp_path: Path
) -> None:
    subs = make_class(tmp_path / "subs", toy_course, 5)  # s00.zip, s01, s02, empty, readme.zip
    out = tmp_path / "out"
    gradebook = f"sqlite:///{tmp_path / 'gradebook.db'}"
    batch(subs)
    with open_gradebook(gradebook, toy_course.title) as book:
        book.update_or_create_assignment("02_later")
        book.update_or_create_submission("02_later", "s01")  # s01's other exercise: it stays
        book.update_or_create_student("zoe")
        book.update_or_create_submission("01_toy", "zoe")  # graded by another batch (another --out): stays
    outputs = [out / "grades.csv", out / "report" / "index.html", out / "report" / "similarity.html"]
    assert all("s01" in path.read_text() for path in outputs)
    assert (out / "results" / "s01.json").is_file() and (out / "report" / "students" / "s01.html").is_file()
    record = (out / "records" / "s01.json").read_text()

    for path in (subs / "s01").iterdir():
        path.unlink()
    (subs / "s01").rmdir()
    said = batch(subs)
    assert f"set aside (no submission now; their records kept in {out / 'set-aside'}): s01" in said
    assert "graded 0 of 4, 4 unchanged" in said
    assert not any("s01" in path.read_text() for path in [*outputs, out / "report" / "similarity.csv"])
    left = ["empty", "readme", "s00", "s02"]
    assert [row["student"] for row in csv.DictReader((out / "grades.csv").open())] == left
    assert sorted(p.stem for p in (out / "results").iterdir()) == left
    students = out / "report" / "students"
    assert sorted(p.stem for p in students.glob("*.html")) == left and not (students / "s01").exists()
    assert (
        not (out / "records" / "s01.json").exists() and (out / "set-aside" / "s01.json").read_text() == record
    )
    with open_gradebook(gradebook, toy_course.title) as book:
        assert sorted(s.student.id for s in book.assignment_submissions("01_toy")) == [*left, "zoe"]
        assert [s.assignment.name for s in book.student_submissions("s01")] == ["02_later"]
        grades = read_grades(book, toy_course)  # what `grade export --canvas/--moodle` exports
    toy = toy_course.find("toy").key
    assert sorted(student for exercise, student in grades.scores if exercise == toy) == ["s00", "s02", "zoe"]
    assert sorted(student for exercise, student in grades.invalid if exercise == toy) == ["empty", "readme"]
