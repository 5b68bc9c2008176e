"""Invalid uploads are a verdict of their own, and a batch says how student code runs before it runs any."""

from __future__ import annotations

import csv
import io
import os
import re
import zipfile
from pathlib import Path

import pytest

from grader import cli
from grader.classroom import batch as batch_module
from grader.classroom import grading_process
from grader.classroom.outputs import batch_files as outputs
from grader.classroom.state.gradebook import default_url, open_gradebook
from grader.core.course import Course
from grader.core.submission import Reason, why_invalid


def batch(course: Course, *argv: str) -> int:
    return cli.main(
        ["--course", str(course.root / "course.yml"), "batch", *argv, "--exercise", "toy", "--device", "cpu"]
    )


@pytest.mark.slow  # a whole batch: grading processes, gradebook, reports
def test_a_batch_names_invalid_uploads_grades_none_of_them_and_records_each_as_zero(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Acceptance: {reference, empty folder, random-bytes zip, zip with only README.md} -> 1 passed, 3 invalid
    by name, 4 gradebook entries; the invalid ones reach no grading process and stay out of the histogram."""
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "toy.py").write_text((course.solution_dir(course.find("toy")) / "toy.py").read_text())
    (subs / "bob").mkdir()
    (subs / "carol.zip").write_bytes(os.urandom(4096))
    with zipfile.ZipFile(subs / "dave.zip", "w") as archive:
        archive.writestr("dave/README.md", "my solution is in the cloud\n")
    graded, histogram = [], []
    grade = grading_process.GradingProcess.grade
    monkeypatch.setattr(
        grading_process.GradingProcess,
        "grade",
        lambda self, source, label, notes=None: graded.append(label) or grade(self, source, label, notes),
    )
    monkeypatch.setattr(outputs, "histogram_png", lambda scores, top, path: histogram.extend(scores) or True)

    assert batch(course, str(subs), "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert said.splitlines()[0] == batch_module.how_code_runs("local", allow_unsandboxed=False)
    assert re.search(r"passed\W+1\W", said) and re.search(r"invalid\W+3\W+-", said)
    assert "3 invalid, not graded" in said
    assert "  bob: the submission is empty" in said
    assert "  carol: the archive is corrupt (not a zip file)" in said
    assert "  dave: none of the exercise's files (toy.py) is in it; it holds dave/README.md" in said
    assert "graded 1 of 4, 3 invalid (not graded); reports in" in said
    assert graded == ["the reference solution", "alice"] and histogram == [5.0]

    rows = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    assert {s: (r["verdict"], r["score"], r["tests"]) for s, r in rows.items()} == {
        "alice": ("passed", "5", "6"),
        "bob": ("invalid", "0", "0"),
        "carol": ("invalid", "0", "0"),
        "dave": ("invalid", "0", "0"),
    }
    assert rows["bob"]["reason"] == "the submission is empty" and rows["alice"]["reason"] == ""

    with open_gradebook(default_url(course), course.title) as gradebook:
        scores = {s: gradebook.find_submission("01_toy", s).score for s in rows}
        comments = {s: gradebook.find_comment("submission", "toy", "01_toy", s).comment for s in rows}
    assert scores == {"alice": 5.0, "bob": 0.0, "carol": 0.0, "dave": 0.0}
    assert comments["alice"] is None and comments["bob"] == "not graded: the submission is empty"

    # a new, valid upload clears the comment
    (subs / "bob" / "toy.py").write_text((subs / "alice" / "toy.py").read_text())
    assert batch(course, str(subs), "--out", str(out)) == 0
    assert "graded 1 of 4, 3 unchanged since their last run" in capsys.readouterr().out
    with open_gradebook(default_url(course), course.title) as gradebook:
        assert gradebook.find_comment("submission", "toy", "01_toy", "bob").comment is None
        assert gradebook.find_submission("01_toy", "bob").score == 5.0


@pytest.mark.parametrize(
    ("make", "code", "reason"),
    [
        (lambda p: p.mkdir(), Reason.EMPTY, "the submission is empty"),
        (lambda p: p.write_bytes(b""), Reason.EMPTY, "the submission is an empty file"),
        (
            lambda p: p.with_suffix(".zip").write_bytes(b"PK\x03\x04 cut"),
            Reason.CORRUPT,
            "the archive is corrupt (not a zip file)",
        ),
        (lambda p: zipfile.ZipFile(p.with_suffix(".zip"), "w").close(), Reason.EMPTY, "the archive is empty"),
        (
            lambda p: _zip(p, {"../toy.py": "x", "toy.py": "y"}),
            Reason.TRAVERSAL,
            "the archive's member '../toy.py' escapes the submission (path traversal)",
        ),
        (
            lambda p: _zip(p, {"a/notes.txt": "", "a/b.md": "", "c.txt": "", "d.txt": ""}),
            Reason.NO_EXERCISE_FILE,
            "none of the exercise's files (toy.py) is in it; it holds a/b.md, a/notes.txt, c.txt and 1 more",
        ),
        (
            lambda p: _zip(p, {f"f{i}": "" for i in range(10_001)}),
            Reason.TOO_MANY_MEMBERS,
            "the archive has more than 10000 members",
        ),
    ],
)
def test_why_invalid_gives_a_code_and_one_line(tmp_path: Path, make, code: Reason, reason: str) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "sub"
    make(target)
    path = target if target.exists() else target.with_suffix(".zip")
    refusal = why_invalid(path, ("toy.py",))
    assert refusal is not None and (refusal.reason, refusal.text) == (code, reason)


def test_a_submission_with_some_of_the_files_is_valid(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text("")
    assert why_invalid(tmp_path / "sub", ("a.py", "b.py")) is None


def _zip(path: Path, members: dict[str, str]) -> None:
    with zipfile.ZipFile(path.with_suffix(".zip"), "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)


def test_unsandboxed_as_root_refuses_before_grading_and_names_the_ways_out(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    (tmp_path / "subs").mkdir()
    monkeypatch.setenv("DISTGPU_SANDBOX", "none")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert batch(course, str(tmp_path / "subs"), "--out", str(tmp_path / "out")) == 2
    said = capsys.readouterr().out.strip()
    assert len(said.splitlines()) == 1 and not (tmp_path / "out").exists()
    assert "student code would run unsandboxed as root" in said
    assert all(way in said for way in ("bubblewrap", "--backend docker", "unprivileged user"))
    assert "--allow-unsandboxed" in said
    allowed = batch_module.how_code_runs("local", allow_unsandboxed=True)
    assert allowed.startswith("student code runs UNSANDBOXED as root")


def test_the_sandbox_line_names_the_user_when_unsandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGPU_SANDBOX", "none")
    monkeypatch.setattr(os, "geteuid", lambda: 65534)
    assert batch_module.how_code_runs("local", allow_unsandboxed=False).startswith(
        "student code runs UNSANDBOXED as nobody"
    )
    assert "in Docker" in batch_module.how_code_runs("docker", allow_unsandboxed=False)
