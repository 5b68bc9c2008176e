"""The ``grade`` command: exit codes, outputs and the frozen set of flags."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import cli
from grader.cli.parser import build_parser
from grader.core.course import Course
from grader.core.errors import ExitCode

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
    parser = build_parser()
    found = {}
    for action in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        name, sub = action
        found[name] = sorted(o for a in sub._actions for o in a.option_strings)
    assert found == {
        "list": ["--help", "-h"],
        "exercise": [
            "--backend",
            "--concept",
            "--device",
            "--help",
            "--json",
            "--junit",
            "--no-diagram",
            "--solution",
            "--submission",
            "--trace",
            "--watch",
            "-h",
            "-k",
        ],
        "progress": ["--help", "--json", "-h"],
        "checkpoint": ["--backend", "--device", "--help", "-h"],
        "hint": ["--help", "-h"],
        "check": ["--backend", "--device", "--help", "-h"],
        "validate": [
            "--backend",
            "--contracts",
            "--corpus",
            "--device",
            "--help",
            "--json",
            "--results",
            "--runs",
            "--share",
            "-h",
        ],
        "stubs": ["--help", "-h"],
        "batch": [
            "--account",
            "--allow-unsandboxed",
            "--backend",
            "--device",
            "--dry-run",
            "--due",
            "--exercise",
            "--from",
            "--gradebook",
            "--help",
            "--late",
            "--no-diagram",
            "--out",
            "--partition",
            "--qos",
            "--regrade",
            "--sbatch-arg",
            "--shuffle",
            "--wait",
            "--workers",
            "-h",
        ],
        "export": [
            "--canvas",
            "--column",
            "--csv",
            "--exercise",
            "--gradebook",
            "--help",
            "--match",
            "--missing",
            "--moodle",
            "--moodle-gradebook",
            "--roster",
            "-h",
        ],
        "report": ["--anonymize", "--help", "--html", "--no-diagram", "--wait", "-h"],
        "similarity": [
            "--against",
            "--anonymize",
            "--common-min",
            "--help",
            "--html",
            "--submissions",
            "--threshold",
            "--wait",
            "-h",
        ],
        "release": ["--help", "-h"],
        "gradescope": ["--help", "-h"],
        "prairielearn": ["--help", "-h"],
        "classroom": ["--help", "-h"],
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
    assert "2 / 5" in capsys.readouterr().out


def test_doctor_reports_each_part_and_what_it_enables(capsys: pytest.CaptureFixture[str]) -> None:
    from grader.core import sandbox
    from grader.runners import doctor

    findings = {f.name: f for f in doctor.examine()}
    assert list(findings) == ["torch", "sandbox", "docker", "GPUs", "NCCL", "Slurm"]
    assert findings["torch"].ok and "gloo available" in findings["torch"].detail
    assert findings["sandbox"].ok == (sandbox.probe() is None)
    assert all(f.meaning for f in findings.values())
    assert grade("doctor") == 0
    out = capsys.readouterr().out
    assert all(name in out for name in findings), out


# ---------------------------------------------------------------------------------------------------------
# usage errors: exit 2 and one line, before anything is graded


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["batch", "{tmp}/nowhere"], "nowhere: no such folder or archive of submissions"),
        (["batch", "{tmp}/subs", "--workers", "0"], "--workers must be at least 1, got 0"),
        (["batch", "{tmp}/subs", "--workers", "-3"], "--workers must be at least 1, got -3"),
        (["batch", "{tmp}/subs", "--regrade", "zoe"], "--regrade: no submission for zoe in"),
        (["exercise", "toy", "--submission", "{tmp}/nowhere.zip"], "nowhere.zip does not exist"),
        (
            ["exercise", "toy", "--submission", "{tmp}/notes.txt"],
            "cannot be graded: not a folder, a zip or tar archive",
        ),
        (
            ["exercise", "toy", "--submission", "{tmp}/subs/b.zip"],
            "the archive is corrupt (not a zip file)",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line_before_any_grading(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    (tmp_path / "subs" / "alice" / "toy.py").write_text("")
    (tmp_path / "subs" / "b.zip").write_bytes(b"not a zip")
    (tmp_path / "notes.txt").write_text("hello\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] == "batch":
        argv += ["--exercise", "toy", "--out", str(tmp_path / "out")]
    assert grade(*argv) == 2
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and out.startswith("error: ") and said in out, out
    assert not (tmp_path / "out").exists()


def test_image_build_without_a_registry_names_the_offline_route(capsys: pytest.CaptureFixture[str]) -> None:
    from docker_support import require_docker_engine

    require_docker_engine()
    assert grade("image", "build", "--base", "distgpu-test/no-such-base:1") == ExitCode.ENVIRONMENT_FAILURE
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("building the cpu image") and len(lines) == 2, lines
    assert "distgpu-test/no-such-base:1 is not here and cannot be pulled" in lines[1]
    assert "containers/make-local-base.sh" in lines[1] and "--base" in lines[1]


@pytest.mark.slow
def test_image_build_removes_its_build_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build with no wheels to install (fast), under a tag of its own, leaves no untagged image behind."""
    from docker_support import require_docker_engine

    require_docker_engine()
    import docker

    from grader.runners import images

    client = docker.from_env()
    try:
        client.images.get(images.LOCAL_BASE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{images.LOCAL_BASE} is not here (containers/make-local-base.sh builds it)")
    tag = f"distgpu-test-build:{os.getpid()}"

    def no_wheels(folder: Path, *, with_torch: bool) -> None:
        folder.mkdir()
        (folder / "requirements.txt").write_text("")
        (folder / "requirements-nontorch.txt").write_text("")

    monkeypatch.setattr(images, "_stage_wheels", no_wheels)
    monkeypatch.setattr(images, "image_tag", lambda kind: tag)

    def dangling() -> set[str]:
        return set(client.api.images(filters={"dangling": True}, quiet=True))  # ids: no inspect to race

    before = dangling()
    try:
        built = images.build_image(kind="cpu", base=images.LOCAL_BASE)
        assert built.tag == tag
        assert dangling() - before == set()
    finally:
        client.images.remove(tag, force=True)


def test_setup_keeps_one_stamp_that_serves_every_extras_combination(tmp_path: Path) -> None:
    """A richer install serves a plainer request (scripts/grade after EXTRAS=dev); a new extra installs."""
    (tmp_path / "scripts").mkdir()
    shutil.copy2(Path(__file__).parent.parent / "scripts" / "setup", tmp_path / "scripts" / "setup")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".venv").mkdir()
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text('#!/bin/sh\necho installing >> "$(dirname "$0")/../installs"\nexit 1\n')
    (fake / "python3").chmod(0o755)

    def setup(extras: str) -> bool:
        """True when it would install."""
        env = {**os.environ, "EXTRAS": extras, "PATH": f"{fake}:{os.environ['PATH']}"}
        before = (tmp_path / "installs").read_text() if (tmp_path / "installs").exists() else ""
        subprocess.run([tmp_path / "scripts" / "setup"], env=env, capture_output=True, check=False)
        after = (tmp_path / "installs").read_text() if (tmp_path / "installs").exists() else ""
        return after != before

    stamp = tmp_path / ".venv" / ".installed"
    stamp.write_text("dev\n")
    os.utime(tmp_path / "pyproject.toml", (1, 1))
    assert not setup("") and not setup("instructor") and not setup("dev")
    stamp.write_text("instructor\n")
    assert not setup("") and not setup("instructor") and setup("dev")
    stamp.write_text("")
    assert not setup("") and setup("instructor")
    stamp.unlink()
    assert setup("")


def test_version_names_the_grader_and_the_course(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["--course", FIXTURE, "--version"])
    assert ended.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"grade (distgpu) {importlib.metadata.version('distgpu')}"
    assert lines[1] == f"course: Fixture course, version not given ({FIXTURE})"
    with pytest.raises(SystemExit):
        cli.main(["--version"])  # the course found upwards: the repository's, which gives its version
    assert "course: Distributed GPU Systems, version 1.0 (" in capsys.readouterr().out
