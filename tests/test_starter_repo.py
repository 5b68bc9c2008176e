"""`grade classroom`: an exercise's GitHub Classroom starter repository. Its workflow has one step per
concept with public checks, whole max-scores that are the concepts' points times one factor, stated in the
workflow and the README; it holds no solution; and run as GitHub's command grader runs it (a fresh clone,
only the variables the action passes, each step's timeout, setup then command), Classroom's score divided
by the factor is the public score of `grade exercise`, for the reference, the stub and a submission that
breaks one concept."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader import cli
from grader.authoring.starter_repo import (
    COMMAND_GRADER,
    EXACT_FACTOR_LIMIT,
    REPORTER,
    TOLERANCE,
    plan_steps,
    public_concepts,
    scale_for,
    write_starter,
)
from grader.core.course import Course, load_course
from grader.core.errors import UsageError
from grader.runners.job import resolve_concept

GIT = ["git", "-c", "user.name=distgpu", "-c", "user.email=distgpu@example.com"]
EXERCISE = "14"
"""Cheap (its worlds are small), four public concepts, two of them in one part (routing), factor 8."""
CURSOR_MOVES = re.compile(r"\x1b\[(\d*[ABCDEFGHJKST]|\?25[lh]|\d*;\d*[Hf])")
"""ANSI cursor movement, line erasing and cursor hiding: what a live display redraws with."""


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
    out = tmp_path_factory.mktemp("classroom") / f"ex{EXERCISE}-starter"
    write_starter(course, course.find(EXERCISE), out)
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


def test_one_step_per_public_concept_worth_its_points_times_the_factor(course: Course, starter: Path) -> None:
    exercise = course.find(EXERCISE)
    steps = grader_steps(starter)
    names = ["14.routing capacity_formula", "14.routing first_choices_first", "14.dispatch dispatch_layout"]
    assert [s["with"]["test-name"] for s in steps] == [*names, "14.moe_layer moe_matches_dense"]
    # routing's public concepts share its 2.5 points by weight (0.5 : 1.5), as `grade exercise` splits them
    assert [s["with"]["max-score"] for s in steps] == [5, 15, 28, 32]  # 0.625, 1.875, 3.5, 4 points, times 8
    for step in steps:
        part, concept = step["with"]["test-name"].split()
        assert step["with"]["command"] == f"bash .github/classroom/grade.sh {part[3:]} {concept}"
        assert step["with"]["setup-command"] == "bash .github/classroom/setup.sh"
        assert isinstance(step["with"]["timeout"], int) and step["with"]["timeout"] * 60 > exercise.timeout
    workflow = (starter / ".github" / "workflows" / "classroom.yml").read_text()
    assert "the exercise's points times 8, exactly:\n# Classroom's score / 8 is the public score" in workflow
    reporter = yaml.safe_load(workflow)["jobs"]["run-autograding-tests"]["steps"][-1]
    ids = [s["id"] for s in steps]
    assert len(set(ids)) == len(ids) and reporter["with"]["runners"] == ",".join(ids)
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}

    readme = (starter / "README.md").read_text()
    assert "counts the public checks only: the hidden tests are not in this repository" in readme
    assert (
        "multiplied by 8 (times 8, exactly)" in readme
        and "| 14.routing | capacity_formula | 0.625 | 5 |" in readme
    )


def test_every_exercise_is_exact_and_each_step_is_its_concepts_public_points(course: Course) -> None:
    """Exercise 02's parts (2.5, 1.25, 0.5, 4.5, 1.25 points) do not round to whole points: each concept is
    its points times a factor, here and in every exercise of the course."""
    for exercise in (e for e in course.exercises if e.parts):
        steps, scale, _ = plan_steps(course, exercise)
        assert scale.exact and scale.factor <= EXACT_FACTOR_LIMIT, exercise.key
        for step in steps:
            among = public_concepts(course, exercise)[step.part.id]
            assert step.max_score == step.points * scale.factor, (exercise.key, step.name)
            assert float(step.points) == pytest.approx(step.part.concept_points(step.concept, among))
    steps, scale, _ = plan_steps(course, course.find("02"))
    by_part: dict[str, Fraction] = {}
    for step in steps:
        by_part[step.part.name] = by_part.get(step.part.name, Fraction(0)) + Fraction(
            step.max_score, scale.factor
        )
    assert scale.factor == 20 and [float(v) for v in by_part.values()] == [2.5, 1.25, 0.5, 4.5, 1.25]


def test_a_factor_that_cannot_be_exact_keeps_the_total_within_the_tolerance() -> None:
    points = [Fraction(1, 997), Fraction(2, 991), Fraction(5, 3)]  # no factor up to 1000 makes all whole
    scale = scale_for(points)
    assert not scale.exact
    total = sum(points)
    rounding = [abs(Fraction(round(p * scale.factor)) - p * scale.factor) for p in points]
    assert scale.error == sum(rounding) / scale.factor <= TOLERANCE * total
    smaller = [abs(Fraction(round(p * (scale.factor - 1))) - p * (scale.factor - 1)) for p in points]
    assert sum(smaller) / (scale.factor - 1) > TOLERANCE * total  # the smallest factor that keeps it
    assert "within 0.5% (at most" in scale.said()
    assert scale_for([Fraction(3, 4), Fraction(9, 4)]).factor == 4 == scale_for([Fraction(1, 4)]).factor


def test_a_concept_resolves_to_its_part(course: Course) -> None:
    exercise = course.find(EXERCISE)
    assert resolve_concept(exercise, "first_choices_first", None) == "14.routing"
    assert resolve_concept(exercise, "first_choices_first", "14.routing") == "14.routing"
    with pytest.raises(UsageError, match=r"part 14\.dispatch has no concept 'first_choices_first'; its"):
        resolve_concept(exercise, "first_choices_first", "14.dispatch")


def test_the_repository_holds_the_exercise_and_no_solution(course: Course, starter: Path) -> None:
    assert not (starter / "solutions").exists() and list(starter.rglob("test_hidden.py")) == []
    trimmed = load_course(starter / "course.yml")
    assert [e.key for e in trimmed.exercises] == [EXERCISE]
    exercise = course.find(EXERCISE)
    shipped = starter / "exercises" / exercise.dirname
    assert (shipped / "moe.py").read_text() == (course.exercise_dir(exercise) / "moe.py").read_text()
    assert (starter / "scripts" / "grade").is_file() and (starter / ".gitignore").read_text().startswith(
        ".venv/"
    )


def test_parts_that_cannot_pass_on_github_are_left_out_and_named(
    course: Course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps, _, left_out = plan_steps(course, course.find("03"))
    assert [(p.name, why) for p, why in left_out] == [
        ("device_copies", "it needs GPUs, and GitHub's runners have none")
    ]
    cpu_points = sum(p.points for p in course.find("03").parts if p.device == "cpu")
    assert float(sum(s.points for s in steps)) == pytest.approx(cpu_points)
    _, _, left_out = plan_steps(course, course.find("11"))
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


# ---------------------------------------------------------------------------------------------------------
# the action, emulated


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


def classroom_score(steps: list[dict[str, Any]], clone: Path, home: Path) -> tuple[int, list[str]]:
    """What Classroom totals (a step's max-score when its command exits 0, else 0) and each step's
    output; a step must pass or fail, never error (exit status 2 or more)."""
    score, outputs = 0, []
    for step in steps:
        done = run_step(step, clone, home)
        assert done.returncode in (0, 1), f"{step['name']}:\n{(done.stdout + done.stderr)[-1500:]}"
        score += step["with"]["max-score"] if done.returncode == 0 else 0
        outputs.append(done.stdout)
    return score, outputs


def public_score(clone: Path, tmp_path: Path) -> float:
    """`grade exercise NN` in the clone: the public checks, all of them."""
    report = tmp_path / "public.json"
    argv = ["--course", str(clone / "course.yml"), "exercise", EXERCISE, "--device", "cpu"]
    cli.main([*argv, "--json", str(report)])
    return float(json.loads(report.read_text())["score"])


BROKEN = (
    "math.ceil(k * num_tokens * capacity_factor / num_experts)",
    "int(k * num_tokens * capacity_factor / num_experts)",
)
"""Breaks routing's capacity_formula alone: (10, 4, 1, 1.0) gets 2 slots instead of 3."""


@pytest.mark.slow  # fifteen grading runs: four steps and `grade exercise`, for three submissions
def test_classroom_score_over_the_factor_is_the_public_score(
    course: Course, starter: Path, tmp_path: Path
) -> None:
    exercise = course.find(EXERCISE)
    steps = grader_steps(starter)
    reference = (course.solution_dir(exercise) / "moe.py").read_text()
    assert reference.count(BROKEN[0]) == 1
    pushed = {"reference": reference, "stub": None, "broken": reference.replace(*BROKEN)}
    expected = {"reference": 80, "stub": 0, "broken": 75}  # broken: all but capacity_formula's 5
    for work, text in pushed.items():
        clone = tmp_path / work
        subprocess.run(["git", "clone", "-q", str(starter), str(clone)], check=True)
        if text is not None:  # the student pushed it
            (clone / "exercises" / exercise.dirname / "moe.py").write_text(text)
        (tmp_path / f"home-{work}").mkdir()
        score, outputs = classroom_score(steps, clone, tmp_path / f"home-{work}")
        assert score == expected[work], work
        assert Fraction(score, 8) == Fraction(public_score(clone, tmp_path)).limit_denominator(1000), work
        for said in outputs:  # grade exercise, FORCE_COLOR=true, into a pipe: colour, but no redraws
            assert "\r" not in said and not CURSOR_MOVES.search(said), said[-800:]
        assert not (clone / ".venv").exists()  # the setup found this Python ready: it installed nothing
