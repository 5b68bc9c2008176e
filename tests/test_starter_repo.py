"""`grade classroom`: exercise 02's GitHub Classroom starter repository. Its workflow parses and its points
are whole and add up; it holds no solution; and every step, run as GitHub's command grader runs it (a fresh
clone, only the variables the action passes, the step's timeout, setup then command), passes for the
reference and fails for the stub."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader import cli
from grader.authoring.starter_repo import (
    COMMAND_GRADER,
    REPORTER,
    plan_steps,
    whole_points,
    write_starter,
)
from grader.core.course import Course, load_course

GIT = ["git", "-c", "user.name=distgpu", "-c", "user.email=distgpu@example.com"]


def action_env(home: Path) -> dict[str, str]:
    """What classroom-resources/autograding-command-grader's src/main.js passes to execSync, and nothing
    else (`env -i`). PATH starts with this test's Python, which has the grader's dependencies: the setup
    then uses it instead of installing from PyPI (CI's machines and this one grade offline)."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "FORCE_COLOR": "true",
        "DOTNET_CLI_HOME": "/tmp",
        "DOTNET_NOLOGO": "true",
    }


@pytest.fixture(scope="module")
def starter(course: Course, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starter repository, committed as GitHub Classroom's template repository would be."""
    out = tmp_path_factory.mktemp("classroom") / "ex02-starter"
    write_starter(course, course.find("02"), out)
    subprocess.run(["git", "init", "-q", str(out)], check=True)
    subprocess.run([*GIT, "-C", str(out), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(out), "commit", "-qm", "starter"], check=True)
    return out


def grader_steps(starter: Path) -> list[dict[str, Any]]:
    workflow = yaml.safe_load((starter / ".github" / "workflows" / "classroom.yml").read_text())
    assert workflow["on"] == ["push", "repository_dispatch"]  # quoted: YAML 1.1 would read `on` as True
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    assert steps[-1]["uses"] == REPORTER
    return [s for s in steps if s.get("uses") == COMMAND_GRADER]


def test_the_workflow_has_one_step_per_part_whole_points_that_add_up(course: Course, starter: Path) -> None:
    exercise = course.find("02")
    workflow = yaml.safe_load((starter / ".github" / "workflows" / "classroom.yml").read_text())
    steps = grader_steps(starter)
    assert [s["with"]["test-name"] for s in steps] == [p.id for p in exercise.parts]
    scores = [s["with"]["max-score"] for s in steps]
    assert all(isinstance(n, int) for n in scores) and sum(scores) == round(exercise.points) == 10
    assert all(abs(n - p.points) < 1 for n, p in zip(scores, exercise.parts, strict=True))
    for step, part in zip(steps, exercise.parts, strict=True):
        assert step["with"]["command"] == f"bash .github/classroom/grade.sh {part.name}"
        assert step["with"]["setup-command"] == "bash .github/classroom/setup.sh"
        assert isinstance(step["with"]["timeout"], int) and step["with"]["timeout"] * 60 > exercise.timeout
    reporter = workflow["jobs"]["run-autograding-tests"]["steps"][-1]
    ids = [s["id"] for s in steps]
    assert reporter["with"]["runners"] == ",".join(ids)
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}

    readme = (starter / "README.md").read_text()
    assert (
        "**Classroom's score\ncounts the public checks only: the hidden tests are not in this repository"
        in readme
    )


def test_the_repository_holds_the_exercise_and_no_solution(course: Course, starter: Path) -> None:
    assert not (starter / "solutions").exists() and list(starter.rglob("test_hidden.py")) == []
    trimmed = load_course(starter / "course.yml")
    assert [e.key for e in trimmed.exercises] == ["02"]
    shipped = starter / "exercises" / "02_ring_tree"
    assert (shipped / "allreduce.py").read_text() == (
        course.exercise_dir(course.find("02")) / "allreduce.py"
    ).read_text()
    assert (starter / "scripts" / "grade").is_file() and (starter / ".gitignore").read_text().startswith(
        ".venv/"
    )


def test_whole_points_keep_the_sum() -> None:
    assert whole_points([3, 1.5, 0.75, 3.5, 1.25]) == [3, 2, 1, 3, 1]
    assert whole_points([1.5, 1.5]) == [2, 1]  # a tie: the earlier part
    assert whole_points([0.5, 0.5, 0.5]) == [1, 1, 0]  # 1.5 rounds half up
    assert whole_points([2.0, 3.0]) == [2, 3]


def test_parts_that_cannot_pass_on_github_are_left_out_and_named(
    course: Course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps, left_out = plan_steps(course, course.find("03"))
    assert [(p.name, why) for p, why in left_out] == [
        ("device_copies", "it needs GPUs, and GitHub's runners have none")
    ]
    assert sum(s.points for s in steps) == round(
        sum(p.points for p in course.find("03").parts if p.device == "cpu")
    )
    _, left_out = plan_steps(course, course.find("11"))
    assert [(p.name, why) for p, why in left_out] == [("grad_sync", "it has no public check")]

    argv = ["--course", str(course.root / "course.yml"), "classroom", "09", str(tmp_path / "ex09")]
    assert cli.main(argv) == 0
    said = capsys.readouterr().out
    assert "09.streams is not graded there: it needs GPUs" in said and "grade batch" in said
    assert "09.streams is not in it: it needs GPUs" in (tmp_path / "ex09" / "README.md").read_text()
    assert cli.main(argv) == 2 and "exists; give a new folder" in capsys.readouterr().out


def test_a_starter_that_would_leak_solution_text_is_refused_and_not_written(
    edited_course: Callable[[str, str], Course], tmp_path: Path
) -> None:
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    exercise = course.find("toy")
    reference = (course.solution_dir(exercise) / "toy.py").read_text()
    answer = next(line for line in reference.splitlines() if "total" in line and "=" in line)
    stub = course.exercise_dir(exercise) / "toy.py"
    stub.write_text(stub.read_text() + f"\n# a hint that says too much:\n{answer.strip()}\n")
    with pytest.raises(
        ValueError, match=r"the starter repository would leak solution text: exercises/01_toy/toy\.py"
    ):
        write_starter(course, exercise, tmp_path / "out" / "starter")
    assert list((tmp_path / "out").iterdir()) == []  # nothing half-written


def run_step(step: dict[str, Any], clone: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """The step as the action runs it: `execSync(setup)` then `execSync(command)` (a shell), in the
    checkout, each under the step's timeout; the command's result, or the setup's when that fails."""
    limit = step["with"]["timeout"] * 60
    for command in (step["with"]["setup-command"], step["with"]["command"]):
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=clone,
            env=action_env(home),
            capture_output=True,
            text=True,
            timeout=limit,
        )
        if done.returncode:
            return done
    return done


@pytest.mark.slow  # ten grading runs, one per step for the reference and for the stub
def test_every_step_passes_for_the_reference_and_fails_for_the_stub(
    course: Course, starter: Path, tmp_path: Path
) -> None:
    steps = grader_steps(starter)
    for work in ("reference", "stub"):
        clone = tmp_path / work
        subprocess.run(["git", "clone", "-q", str(starter), str(clone)], check=True)
        if work == "reference":  # the student pushed the reference
            reference = course.solution_dir(course.find("02")) / "allreduce.py"
            shutil.copyfile(reference, clone / "exercises" / "02_ring_tree" / "allreduce.py")
        (tmp_path / f"home-{work}").mkdir()
        for step in steps:
            done = run_step(step, clone, tmp_path / f"home-{work}")
            tail = (done.stdout + done.stderr)[-1500:]
            if work == "reference":
                assert done.returncode == 0, f"{step['name']} fails for the reference:\n{tail}"
                assert f"{step['name']}" in done.stdout
            else:
                assert done.returncode == 1, f"{step['name']} does not fail cleanly for the stub:\n{tail}"
                assert "not started" in done.stdout or "NotImplementedError" in done.stdout, tail
        assert not (clone / ".venv").exists()  # the setup found this Python ready: it installed nothing
