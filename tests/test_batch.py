"""`grade batch`: records, reruns that grade nothing twice, regrades, the gradebook and the reports."""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from grader import cli
from grader.core.course import Course

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


def make_submissions(folder: Path, course: Course) -> Path:
    """alice (reference, as a zip), bob (wrong), carol (a corrupt zip), dave (wrong file name)."""
    folder.mkdir()
    with zipfile.ZipFile(folder / "alice.zip", "w") as archive:
        archive.write(course.solution_dir(course.find("toy")) / "toy.py", "alice/toy.py")
    shutil.copytree(SUBMISSIONS / "wrong", folder / "bob")
    (folder / "carol.zip").write_bytes(b"PK\x03\x04 truncated")
    (folder / "dave").mkdir()
    (folder / "dave" / "Toy.py").write_text("")
    return folder


def batch(course: Course, *argv: str) -> int:
    return cli.main(
        ["--course", str(course.root / "course.yml"), "batch", *argv, "--exercise", "toy", "--device", "cpu"]
    )


def grades(out: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}


@pytest.mark.slow  # a whole batch: grading processes, gradebook, reports
def test_batch_grades_resumes_regrades_and_exports(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    subs, out = make_submissions(tmp_path / "subs", course), tmp_path / "out"

    assert batch(course, str(subs), "--out", str(out), "--workers", "2") == 0
    assert "graded 2 of 4, 2 invalid (not graded); reports in" in capsys.readouterr().out
    rows = grades(out)
    assert {s: (r["score"], r["verdict"]) for s, r in rows.items()} == {
        "alice": ("5", "passed"),
        "bob": ("2", "failed"),
        "carol": ("0", "invalid"),
        "dave": ("0", "invalid"),
    }
    bob = json.loads((out / "results" / "bob.json").read_text())
    assert bob["score"] == 2 and bob["tests"][0]["output"].startswith("[01.allreduce rank 0/2] wrong tensor")
    carol = json.loads((out / "records" / "carol.json").read_text())["result"]["notes"]
    assert carol == ["the archive is corrupt (not a zip file)"]
    assert (out / "histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert batch(course, str(subs), "--out", str(out)) == 0
    assert "graded 0 of 4, 4 unchanged since their last run" in capsys.readouterr().out
    assert batch(course, str(subs), "--out", str(out), "--regrade", "bob") == 0
    assert "graded 1 of 4, 3 unchanged" in capsys.readouterr().out

    shutil.copyfile(course.solution_dir(course.find("toy")) / "toy.py", subs / "bob" / "toy.py")
    assert batch(course, str(subs), "--out", str(out)) == 0
    assert "graded 1 of 4, 3 unchanged" in capsys.readouterr().out and grades(out)["bob"]["score"] == "5"

    hidden = course.solution_dir(course.find("toy")) / "test_hidden.py"
    hidden.write_text(hidden.read_text() + "\n# a changed suite makes every record stale\n")
    assert batch(course, str(subs), "--out", str(out)) == 0
    assert "graded 2 of 4, 2 invalid (not graded); reports" in capsys.readouterr().out

    export = tmp_path / "nbgrader.csv"
    assert cli.main(["--course", str(course.root / "course.yml"), "export", "--csv", str(export)]) == 0
    exported = {row["student_id"]: row for row in csv.DictReader(export.open())}
    assert {s: float(r["score"]) for s, r in exported.items()} == {
        "alice": 5,
        "bob": 5,
        "carol": 0,
        "dave": 0,
    }
    assert {r["assignment"] for r in exported.values()} == {"01_toy"} and exported["bob"][
        "max_score"
    ] == "5.0"


def test_a_suite_that_fails_its_reference_stops_the_batch(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("world_sizes: [1], timeout: 4", "world_sizes: [1], timeout: 4")
    reference = course.solution_dir(course.find("toy")) / "toy.py"
    reference.write_text(reference.read_text().replace("tensor.copy_(total)", "tensor.copy_(total + 1)"))
    subs = make_submissions(tmp_path / "subs", course)
    assert batch(course, str(subs), "--out", str(tmp_path / "out")) == 2
    assert "the reference scores 2 / 5 under this suite" in capsys.readouterr().out
