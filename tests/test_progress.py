"""The learner's progress store: attempts from real gradings, what `grade progress` makes of them, and a
broken state file that must never cost a grade."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import cli
from grader.core.course import Course
from grader.core.submission import file_hashes
from grader.learner import grade as grading
from grader.learner.progress import Attempt, ProgressError, ProgressStore, course_progress
from grader.runners.local import LocalRunner

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


def attempt(exercise: str, score: float, *, part: str | None = None, full: bool = False) -> Attempt:
    return Attempt(
        exercise=exercise,
        time="2026-12-02T10:00:00+00:00",
        score=score,
        max_score=5.0,
        full_marks=full,
        part=part,
        suites="public+hidden",
        files={"toy.py": "ab" * 32},
    )


def test_attempts_round_trip_and_stay_per_course(state_dir: Path) -> None:
    store = ProgressStore()
    store.add_attempt("A", attempt("01", 2.5))
    store.add_attempt("B", attempt("01", 5.0, full=True))
    assert store.path == state_dir / "progress.sqlite"
    assert store.attempts("A") == [attempt("01", 2.5)]
    assert [a.score for a in store.attempts("B")] == [5.0]


def test_best_counts_whole_runs_only(toy_course: Course) -> None:
    store = ProgressStore()
    store.add_attempt(toy_course.title, attempt("01", 2.5))
    store.add_attempt(toy_course.title, attempt("01", 1.0, part="01.square", full=True))
    [section] = course_progress(toy_course, store)
    toy, later = section.exercises
    assert (toy.best, toy.attempts, toy.done) == (2.5, 2, False)  # a one-part run is not the exercise done
    assert toy.last is not None and toy.last.part == "01.square"
    assert (later.gradable, later.best) == (False, None)
    assert section.checkpoint == "none"  # the fixture course has no checkpoint


def test_broken_store_is_a_progress_error(state_dir: Path) -> None:
    (state_dir / "progress.sqlite").write_text("this is not a database\n" * 100)
    with pytest.raises(ProgressError, match=r"progress\.sqlite"):
        ProgressStore().attempts("A")


def test_grading_goes_on_when_the_store_is_broken(
    state_dir: Path, edited_course: Callable[[str, str], Course], runner: LocalRunner
) -> None:
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    (state_dir / "progress.sqlite").write_text("this is not a database\n" * 100)
    result = grading.grade_exercise(
        course=course,
        exercise=course.find("toy"),
        runner=runner,
        submission=None,
        solution=False,
        device="cpu",
    )
    assert result.tests, "the grade itself must still be there"
    assert any(n.startswith("your progress was not saved:") for n in result.notes), result.notes


def test_grade_exercise_records_time_score_and_file_hashes(
    edited_course: Callable[[str, str], Course], capsys: pytest.CaptureFixture[str]
) -> None:
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    folder = course.exercise_dir(course.find("toy"))
    shutil.copyfile(SUBMISSIONS / "wrong" / "toy.py", folder / "toy.py")
    path = str(course.root / "course.yml")
    assert cli.main(["--course", path, "exercise", "1", "--device", "cpu"]) == 1
    assert cli.main(["--course", path, "exercise", "1", "-k", "square", "--device", "cpu"]) == 0
    [whole, one_part] = ProgressStore().attempts(course.title)
    assert (whole.score, whole.max_score, whole.part) == (2.0, 5.0, None)
    assert (one_part.score, one_part.max_score, one_part.part) == (1.0, 1.0, "01.square")
    assert whole.files == file_hashes(folder, ("toy.py",)) and len(whole.files["toy.py"]) == 64
    capsys.readouterr()

    assert cli.main(["--course", path, "progress", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    [toy, _] = data["sections"][0]["exercises"]
    assert (toy["key"], toy["attempts"], toy["best"], toy["done"]) == ("01", 2, whole.score, False)
    assert toy["last"]["part"] == "01.square"

    assert cli.main(["--course", path, "progress"]) == 0
    out = capsys.readouterr().out
    assert "2 / 5" in out and "1 / 1 (square only)" in out and "0 of 2 exercises done" in out


def test_the_schema_is_plain_sqlite(state_dir: Path) -> None:
    ProgressStore().add_attempt("A", attempt("01", 1.0))
    with sqlite3.connect(state_dir / "progress.sqlite") as db:
        assert db.execute("SELECT exercise, score, files FROM attempts").fetchall() == [
            ("01", 1.0, json.dumps({"toy.py": "ab" * 32}))
        ]


def test_grade_progress_on_a_broken_store_is_one_line_and_status_3(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`grade progress` has nothing to show without its store: an environment failure, not a traceback."""
    (state_dir / "progress.sqlite").write_text("this is not a database\n" * 100)
    assert cli.main(["--course", str(Path(__file__).parent / "fixtures/course/course.yml"), "progress"]) == 3
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"error: {state_dir / 'progress.sqlite'}: file is not a database; "), out
    assert "\n" not in out and "move it aside" in out
