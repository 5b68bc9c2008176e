"""The same submission gets the same grade, whatever the load, the order and its neighbours (issue 29).

The slow test is ``benchmarks/bench_determinism.py`` made small: a class of 34 from the corpora of
exercises 04 and 02 (``tests/determinism.py``), with a hang and six adversarial items, graded by
``grade batch`` twice: ``--workers 1`` in name order, then ``--workers`` one per core, ``--shuffle``d, with a
CPU burner spinning on every core. No grade and no test's status may differ. The resource bombs stay in the
benchmark and ``tests/test_isolation.py``: here they would only add their time limits to CI's.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from determinism import REPO, TESTS, Member, build_class, describe, differences, grade_class

from grader.authoring.validate import bug_corpus
from grader.classroom.batch import BatchPlan, PendingGrade, make_plan
from grader.classroom.grade import batch_grade
from grader.classroom.state.records import RecordStore
from grader.core.course import Course, load_course
from grader.core.results import ExerciseResult, Status, TestResult

sys.path.insert(0, str(REPO / "benchmarks"))
from burner import cpu_burner

SMALL_CLASS = {"04": 11, "02": 4}
"""Per exercise: how many of its bug corpus's bugs, besides its reference, stubs and alternative-correct
cases."""
ALTS_02 = ("alt-reverse-ring", "alt-nccl-btree")
ADVERSARIAL = ("dist_deadlock", "dist_crash", "forge_passed_lines", "cmp_eq_override", "env_steer")
ADVERSARIAL += ("zip_truncated",)
"""A hang (one test on 3 ranks), a crash, forged output, a forged comparison, a steered environment and a
corrupt upload: items whose grade does not depend on which limit a bomb reaches first."""


@pytest.fixture
def class_root() -> Iterator[Path]:
    # Outside pytest's root-only temporary folder: ranks (as their leased uid) read the submissions.
    folder = Path(tempfile.mkdtemp(prefix="distgpu-determinism-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _small_class(root: Path, course: Course) -> dict[str, list[Member]]:
    classes = {}
    for key, bugs in SMALL_CLASS.items():
        exercise = course.find(key)
        only = {"reference", "stubs", *(f"stub-{Path(n).stem}" for n in exercise.files)}
        only |= {f"bug-{bug['name']}" for bug in bug_corpus(TESTS, exercise)[:bugs]}
        only |= (
            set(ALTS_02)
            if key == "02"
            else {p.name for p in (TESTS / "validity" / exercise.dirname).iterdir()}
        )
        adversarial = ADVERSARIAL if key == "02" else ()
        classes[key], left_out = build_class(root / key, course, exercise, adversarial=adversarial, only=only)
        if left_out and os.environ.get("CI"):
            pytest.fail(f"CI needs the local sandbox: {left_out}")
    return classes


@pytest.mark.slow  # four batches: 34 submissions graded twice
def test_a_loaded_shuffled_parallel_batch_grades_as_the_idle_serial_one(class_root: Path) -> None:
    course = load_course(REPO / "course.yml")
    classes = _small_class(class_root / "class", course)
    members = [m for built in classes.values() for m in built]
    runs: list[dict[str, ExerciseResult]] = [{}, {}]
    for key in classes:
        found = grade_class(class_root / "class" / key, key, class_root / "serial" / key, workers=1)
        runs[0] |= {f"{key}/{s}": r for s, r in found.items()}
    cores = os.cpu_count() or 1
    with cpu_burner():
        for key in classes:
            out = class_root / "loaded" / key
            found = grade_class(class_root / "class" / key, key, out, workers=cores, shuffle=29)
            runs[1] |= {f"{key}/{s}": r for s, r in found.items()}
    assert set(runs[0]) == set(runs[1]) == {m.key for m in members}, "a submission has no grade"
    assert runs[0]["02/reference"].full_marks and runs[0]["04/reference"].full_marks
    assert runs[0]["02/adv-dist_deadlock"].verdict is Status.TIMEOUT  # the class holds a hang
    found = differences(*runs, members)
    assert not found, "\n".join(describe(members, found))


# ---------------------------------------------------------------------------------------------------------
# grade batch --shuffle


class _Noted(Exception):
    """Raised by ``_OrderPool`` once it has the order: nothing is graded, so there is nothing to report."""

    def __init__(self, order: list[str]) -> None:
        self.order = order


class _OrderPool:
    """A pool that grades nothing: it raises the order in which it was given the submissions."""

    def reference(self, plan: BatchPlan) -> ExerciseResult:
        return ExerciseResult.for_every_part(
            exercise=plan.exercise, status=Status.PASSED, reason="", graded="reference", device="cpu"
        )

    def grade(self, plan: BatchPlan, todo: list[PendingGrade], store: RecordStore, on_result: object) -> None:
        raise _Noted([p.submission.student for p in todo])


def _order(toy_course: Course, subs: Path, out: Path, shuffle: int | None) -> list[str]:
    plan = make_plan(
        course=toy_course, exercise=toy_course.find("toy"), backend="local", device="cpu", workers=1, gpus=0
    )
    with pytest.raises(_Noted) as noted:
        batch_grade(
            plan=plan,
            submissions=subs,
            out=out,
            regrade=[],
            gradebook_url=f"sqlite:///{out / 'gradebook.db'}",
            late=False,
            on_start=lambda _n: None,
            on_result=lambda _s, _r: None,
            pool=_OrderPool(),
            shuffle=shuffle,
        )
    return noted.value.order


def test_shuffle_grades_the_batch_in_the_order_its_seed_gives(toy_course: Course, tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    students = [f"student{i:02d}" for i in range(12)]
    for student in students:
        (subs / student).mkdir(parents=True)
        (subs / student / "toy.py").write_text("pass\n")
    in_name_order = _order(toy_course, subs, tmp_path / "plain", None)
    shuffled = _order(toy_course, subs, tmp_path / "seven", 7)
    assert in_name_order == students
    assert sorted(shuffled) == students and shuffled != students
    assert _order(toy_course, subs, tmp_path / "seven-again", 7) == shuffled
    assert _order(toy_course, subs, tmp_path / "eight", 8) != shuffled


def _result(*statuses: Status) -> ExerciseResult:
    tests = tuple(
        TestResult(
            name=f"test_{i}",
            number=f"1.{i}",
            part="02.ring_allreduce",
            score=1.0 * (s is Status.PASSED),
            max_score=1.0,
            status=s,
        )
        for i, s in enumerate(statuses)
    )
    return ExerciseResult(exercise="02", title="t", graded="x", device="cpu", tests=tests)


def test_differences_name_each_student_and_test_and_never_compare_nothing_as_equal() -> None:
    members = [Member("02", s, "bug") for s in ("same", "slower", "gone", "never")]
    first = {"02/same": _result(Status.PASSED), "02/slower": _result(Status.PASSED, Status.PASSED)}
    second = {"02/same": _result(Status.PASSED), "02/slower": _result(Status.PASSED, Status.TIMEOUT)}
    first["02/gone"] = _result(Status.FAILED)
    found = differences(first, second, members)
    assert [(d.student, d.test, d.first, d.second) for d in found] == [
        ("02/never", "", "no grade", "no grade"),
        ("02/gone", "", "0/1 failed", "no grade"),
        ("02/slower", "", "2/2 passed", "1/2 timeout"),
        ("02/slower", "test_1", "passed 1", "timeout 0"),
    ]
    assert describe(members, found)[-1] == (
        "3 of 4 submissions differ (3 well-behaved, 0 adversarial); 1 test differences"
    )
