"""The ``grade`` command: exit codes, outputs and the frozen set of flags."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import cli
from grader.course import Course

FIXTURE = str(Path(__file__).parent / "fixtures" / "course" / "course.yml")
SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


def grade(*argv: str) -> int:
    return cli.main(["--course", FIXTURE, *argv])


def test_full_marks_exit_0_and_writes_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = grade(
        "exercise",
        "01",
        "--solution",
        "--device",
        "cpu",
        "--json",
        str(tmp_path / "r.json"),
        "--junit",
        str(tmp_path / "r.xml"),
    )
    assert code == 0
    assert json.loads((tmp_path / "r.json").read_text())["score"] == 5
    assert "<testsuite" in (tmp_path / "r.xml").read_text()
    assert "Score: 5 / 5" in capsys.readouterr().out


def test_not_full_marks_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert grade("exercise", "toy", "--submission", str(SUBMISSIONS / "wrong"), "--device", "cpu") == 1
    assert "[01.allreduce rank 0/2] wrong tensor at index 0: got 5, expected 4" in capsys.readouterr().out


def test_unknown_exercise_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert grade("exercise", "tyo") == 2
    assert "no exercise 'tyo'; did you mean 'toy'?" in capsys.readouterr().out


def test_exercise_without_parts_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert grade("exercise", "02") == 2
    assert "has no graded parts yet" in capsys.readouterr().out


def test_malformed_course_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "course.yml").write_text("course: x\nsections: 3\n")
    assert cli.main(["--course", str(tmp_path / "course.yml"), "list"]) == 2
    assert "course.yml:2: sections: expected a list" in capsys.readouterr().out


def test_list_shows_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert grade("list") == 0
    out = capsys.readouterr().out
    assert "Toy all-reduce" in out and "coming soon" in out


def test_check_passes_on_the_fixture_course(capsys: pytest.CaptureFixture[str]) -> None:
    assert grade("check", "--device", "cpu") == 0
    assert "ok 01 toy: reference 5/5, stubs 0/5" in capsys.readouterr().out


def test_flags_are_frozen() -> None:
    """Flags are public API: adding one is a decision, so this list changes on purpose only."""
    parser = cli._parser()
    found = {}
    for action in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        name, sub = action
        found[name] = sorted(o for a in sub._actions for o in a.option_strings)
    assert found == {
        "list": ["--help", "-h"],
        "exercise": [
            "--backend",
            "--device",
            "--help",
            "--json",
            "--junit",
            "--solution",
            "--submission",
            "--watch",
            "-h",
            "-k",
        ],
        "progress": ["--help", "--json", "-h"],
        "checkpoint": ["--backend", "--device", "--help", "-h"],
        "hint": ["--help", "-h"],
        "check": ["--backend", "--device", "--help", "-h"],
        "stubs": ["--help", "-h"],
        "batch": [
            "--account",
            "--backend",
            "--device",
            "--dry-run",
            "--exercise",
            "--gradebook",
            "--help",
            "--late",
            "--out",
            "--partition",
            "--qos",
            "--regrade",
            "--sbatch-arg",
            "--workers",
            "-h",
        ],
        "export": ["--csv", "--gradebook", "--help", "-h"],
        "release": ["--help", "-h"],
        "gradescope": ["--help", "-h"],
        "prairielearn": ["--help", "-h"],
        "doctor": ["--help", "-h"],
        "image": ["--help", "-h"],
    }


def test_list_shows_the_students_last_score(
    edited_course: Callable[..., Course], capsys: pytest.CaptureFixture[str]
) -> None:
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    shutil.copyfile(SUBMISSIONS / "wrong" / "toy.py", course.exercise_dir(course.find("toy")) / "toy.py")
    path = str(course.root / "course.yml")
    assert cli.main(["--course", path, "exercise", "1", "--device", "cpu"]) == 1
    assert "your work in exercises/01_toy" in capsys.readouterr().out
    assert cli.main(["--course", path, "list"]) == 0
    assert "2.6 / 5" in capsys.readouterr().out


def test_doctor_reports_each_part_and_what_it_enables(capsys: pytest.CaptureFixture[str]) -> None:
    from grader import doctor, sandbox

    findings = {f.name: f for f in doctor.examine()}
    assert list(findings) == ["torch", "sandbox", "docker", "GPUs", "NCCL", "Slurm"]
    assert findings["torch"].ok and "gloo available" in findings["torch"].detail
    assert findings["sandbox"].ok == (sandbox.probe() is None)
    assert all(f.meaning for f in findings.values())
    assert grade("doctor") == 0
    out = capsys.readouterr().out
    assert all(name in out for name in findings), out
