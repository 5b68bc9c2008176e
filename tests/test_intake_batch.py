"""Acceptance: each platform's download, in its exact shape, grades in one `grade batch` command; the
gradebook carries the platform's ids, names and late flags; a renamed copy is graded with a note; every
member of the download ends in an upload or is named; nothing is written outside --out (and the
gradebook). Few students per platform, on the fixture course's cheap exercise: the readers themselves are
unit-tested in tests/test_intake.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from intake_archives import canvas_members, classroom_tree, gradescope_members, moodle_members, write_zip

from grader import cli
from grader.classroom.state.gradebook import open_gradebook
from grader.core.course import Course

pytestmark = pytest.mark.slow  # four batches: grading processes, gradebook, reports


def download(platform: str, where: Path, good: bytes) -> Path:
    """A small download of ``platform``: the cases a grading must see end to end (the rest: unit tests)."""
    if platform == "canvas":
        keep = (
            "doejohn_LATE_23456_678902_toy.py",
            "müllerjürgen_34567_678903_toy-1.py",
            "leejin_56789_text.html",
        )
        return write_zip(where / "canvas.zip", {k: v for k, v in canvas_members(good).items() if k in keep})
    if platform == "moodle":
        keep = ("Participant_103_assignsubmission_file/toy.py",)
        return write_zip(where / "moodle.zip", {k: v for k, v in moodle_members(good).items() if k in keep})
    if platform == "gradescope":
        members = gradescope_members(good)
        del members["assignment_9100_export/submission_111/toy.py"]  # Jane's upload: no file, invalid
        del members["assignment_9100_export/submission_113/toy-1.py"]
        return write_zip(where / "export.zip", members)
    classroom_tree(where / "clones", "01_toy", good)
    return where / "clones"


EXPECTED = {
    # id: (name as the gradebook keeps it, comment of the submission cell, score)
    "canvas": {
        "23456": ("doejohn", "late (canvas)", 5.0),
        "34567": ("müllerjürgen", None, 5.0),
        "56789": (
            "leejin",
            "not graded: none of the exercise's files (toy.py) is in it; it holds text.html",
            0.0,
        ),
    },
    "moodle": {"103": (None, None, 5.0)},
    "gradescope": {
        "12345": ("Jane Smith", "not graded: the submission is empty", 0.0),
        "200": ("Zoë Ångström", None, 5.0),
        "pat@example.edu": ("Pat Noid", None, 5.0),
        "300": ("Late Comer", "late (gradescope); not graded: the submission is empty", 0.0),
    },
    "classroom": {"octocat": (None, None, 5.0), "team-rocket": (None, None, 5.0)},
}


def test_each_platforms_download_grades_in_one_command(
    toy_course: Course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One command per platform, one after another on one --out and one gradebook (the reference is graded
    once): each batch's class is that platform's students, under the platform's ids."""
    good = (toy_course.solution_dir(toy_course.find("toy")) / "toy.py").read_bytes()
    out, gradebook_url = tmp_path / "out", f"sqlite:///{tmp_path / 'gradebook.db'}"
    for platform in ("canvas", "moodle", "gradescope", "classroom"):
        (tmp_path / platform).mkdir()
        source = download(platform, tmp_path / platform, good)
        before = set((tmp_path / platform).rglob("*"))
        argv = ["--course", str(toy_course.root / "course.yml"), "batch", str(source), "--exercise", "toy"]
        argv += ["--device", "cpu", "--out", str(out), "--gradebook", gradebook_url, "--workers", "2"]
        argv += ["--due", "2026-03-02T00:00-08:00"] if platform == "gradescope" else []
        assert cli.main(argv) == 0
        said = capsys.readouterr().out
        assert f"detected: {DETECTED[platform]}" in said, said
        assert _gradebook(gradebook_url, toy_course, platform) == EXPECTED[platform], platform
        assert set((tmp_path / platform).rglob("*")) == before  # nothing written beside the download
        if platform == "canvas":
            renamed = json.loads((out / "results" / "34567.json").read_text())["output"]
            assert "took toy-1.py as toy.py (a renamed copy: the upload has no toy.py)" in renamed
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "canvas",
        "classroom",
        "gradebook.db",
        "gradescope",
        "moodle",
        "out",
    ]
    assert "in no upload:" in said and "intake.txt" in said  # the Classroom starter's own files


DETECTED = {
    "canvas": "Canvas's",
    "moodle": "Moodle's",
    "gradescope": "Gradescope's",
    "classroom": "GitHub Classroom's",
}


def _gradebook(url: str, course: Course, platform: str) -> dict[str, tuple[str | None, str | None, float]]:
    """{id: (last_name, the submission cell's comment, score)} of the students with a submission of toy;
    a Canvas id is also the student's lms_user_id."""
    with open_gradebook(url, course.title) as gradebook:
        found = {}
        for submission in gradebook.assignment_submissions("01_toy"):
            student = submission.student
            assert student.lms_user_id == (student.id if platform == "canvas" else None)
            found[student.id] = (student.last_name, _comment(gradebook, student.id), submission.score)
    return found


def _comment(gradebook: object, student: str) -> str | None:
    return gradebook.find_comment("submission", "toy", "01_toy", student).comment  # type: ignore[attr-defined]
