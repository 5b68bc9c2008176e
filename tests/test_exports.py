"""Gradescope and PrairieLearn packages: layout, a course that loads, and real gradings in each platform's
container layout (the slow tests: one container per platform, several submissions graded in it in turn)."""

from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from grader.authoring.exports import gradescope_zip, prairielearn_folder, trimmed_course
from grader.core.course import Course, load_course
from grader.core.formats import to_prairielearn
from grader.learner import grade as grading
from grader.runners.local import LocalRunner

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


def test_gradescope_zip_has_the_scripts_and_only_this_exercise(course: Course, tmp_path: Path) -> None:
    out = tmp_path / "ex02.zip"
    gradescope_zip(course, course.find("02"), out)
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        catalog = archive.read("course.yml").decode()
    assert {"setup.sh", "run_autograder", "course.yml", "solutions/02_ring_tree/test_hidden.py"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert not any(n.startswith(("solutions/01_", "exercises/01_")) for n in names)
    assert "ring_tree" in catalog and "comm_primitives" not in catalog


def test_every_exercise_exports_a_course_that_loads_with_that_exercise_alone(
    course: Course, tmp_path: Path
) -> None:
    """The bug this guards: the full course.yml shipped with one exercise's folders did not load."""
    for exercise in (e for e in course.exercises if e.parts):
        dest = tmp_path / exercise.key
        trimmed_course(course, exercise, dest)
        trimmed = load_course(dest / "course.yml")
        assert [e.key for e in trimmed.exercises] == [exercise.key]
        assert trimmed.find(exercise.key) == exercise
        assert not (dest / "solutions").exists() or [p.name for p in (dest / "solutions").iterdir()] == [
            exercise.dirname
        ]


def test_setup_sh_picks_python_3_11_where_python3_is_older(course: Course, tmp_path: Path) -> None:
    """Only the text: Ubuntu 22.04's packages are not reachable here (see the report in the PR)."""
    gradescope_zip(course, course.find("02"), tmp_path / "ex02.zip")
    setup = zipfile.ZipFile(tmp_path / "ex02.zip").read("setup.sh").decode()
    assert "sys.version_info < (3, 11)" in setup and "python=python3.11" in setup
    assert 'apt-get install -y -q "$python" "$python-venv"' in setup


def test_run_autograder_grades_with_ranks_as_nobody_into_the_results_file(
    course: Course, tmp_path: Path
) -> None:
    gradescope_zip(course, course.find("02"), tmp_path / "ex02.zip")
    script = zipfile.ZipFile(tmp_path / "ex02.zip").read("run_autograder").decode()
    assert "chmod 0700 /autograder/source" in script
    assert '"$(cat /autograder/distgpu-python)" -m grader.container --exercise 02' in script
    assert "--format gradescope --out /autograder/results/results.json" in script


def test_prairielearn_folder_and_results(course: Course, tmp_path: Path) -> None:
    prairielearn_folder(course, course.find("02"), tmp_path / "pl")
    run = tmp_path / "pl" / "serverFilesCourse" / "distgpu" / "run.sh"
    assert os.access(run, os.X_OK) and "--format prairielearn" in run.read_text()
    options = json.loads((tmp_path / "pl" / "info-snippet.json").read_text())["externalGradingOptions"]
    assert options["entrypoint"] == "/grade/serverFilesCourse/distgpu/run.sh" and options["timeout"] <= 600
    gradescope = {
        "score": 3.0,
        "max_score": 4.0,
        "output": "",
        "tests": [
            {"name": "t", "score": 3.0, "max_score": 4.0, "output": "[02.x] wrong", "verdict": "failed"}
        ],
    }
    assert to_prairielearn(gradescope) == {
        "gradable": True,
        "score": 0.75,
        "message": "",
        "tests": [
            {"name": "t", "points": 3.0, "max_points": 4.0, "output": "[02.x] wrong", "message": "failed"}
        ],
    }


# ---------------------------------------------------------------------------------------------------------
# in the platforms' container layouts


@pytest.fixture(scope="module")
def subs(tmp_path_factory: pytest.TempPathFactory, toy_course: Course) -> Path:
    """reference, wrong (a bug), hang (a deadlock), empty (an invalid upload): one folder each."""
    folder = tmp_path_factory.mktemp("subs")
    shutil.copytree(toy_course.solution_dir(toy_course.find("toy")), folder / "reference")
    for kind in ("wrong", "hang"):
        shutil.copytree(SUBMISSIONS / kind, folder / kind)
    (folder / "empty").mkdir()
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


@pytest.fixture(scope="module")
def expected_wrong(toy_course: Course) -> float:
    """What `grade exercise toy --submission wrong` gives on this machine."""
    return grading.grade_exercise(
        course=toy_course,
        exercise=toy_course.find("toy"),
        runner=LocalRunner(),
        submission=SUBMISSIONS / "wrong",
        solution=False,
        device="cpu",
    ).score


@contextmanager
def _platform_container(host_root: Path, target: str, subs: Path) -> Iterator[Any]:
    """A root container from the grading image, ``host_root`` at ``target`` and the submissions at /subs."""
    from docker_support import require_docker_image

    image = require_docker_image()
    import docker
    from docker.types import Mount

    container = docker.from_env().containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        init=True,
        network_mode="none",
        hostname="localhost",
        mounts=[
            Mount(target=target, source=str(host_root), type="bind"),
            Mount(target="/subs", source=str(subs), type="bind", read_only=True),
        ],
    )
    try:
        yield container
    finally:
        container.remove(force=True)


def _sh(container: Any, command: str) -> tuple[float, str]:
    started = time.monotonic()
    code, output = container.exec_run(["bash", "-c", command])
    text = output.decode(errors="replace")
    assert code == 0, text[-3000:]
    return time.monotonic() - started, text


@pytest.mark.slow
def test_gradescope_autograder_grades_in_gradescopes_layout(
    toy_course: Course, subs: Path, expected_wrong: float, tmp_path: Path
) -> None:
    exercise = toy_course.find("toy")
    gradescope_zip(toy_course, exercise, tmp_path / "autograder.zip")
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        for info in archive.infolist():  # as `unzip` does: the scripts keep their mode bits
            path = Path(archive.extract(info, root / "source"))
            path.chmod((info.external_attr >> 16) & 0o777 or 0o644)
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    with _platform_container(root, "/autograder", subs) as container:
        _sh(container, "cd /autograder/source && ./setup.sh && cp run_autograder /autograder/")
        results = {}
        for kind in ("reference", "wrong", "hang", "empty"):
            seconds, _ = _sh(
                container,
                "rm -rf /autograder/submission /autograder/results && mkdir /autograder/submission && "
                f"cp -r /subs/{kind}/. /autograder/submission/ && /autograder/run_autograder",
            )
            results[kind] = (seconds, json.loads((root / "results" / "results.json").read_text()))
    reference, wrong, hang, empty = (results[k][1] for k in ("reference", "wrong", "hang", "empty"))
    assert reference["score"] == reference["max_score"] == exercise.points
    assert all(t["status"] == "passed" for t in reference["tests"])
    assert wrong["score"] == expected_wrong < exercise.points
    assert "timeout" in {t["verdict"] for t in hang["tests"]}
    assert results["hang"][0] < exercise.timeout + 60
    assert empty["score"] == 0 and empty["tests"] == [] and "the submission is empty" in empty["output"]


@pytest.mark.slow
def test_prairielearn_grader_grades_in_prairielearns_layout(
    toy_course: Course, subs: Path, expected_wrong: float, tmp_path: Path
) -> None:
    exercise = toy_course.find("toy")
    prairielearn_folder(toy_course, exercise, tmp_path / "pl")
    root = tmp_path / "grade"
    shutil.copytree(tmp_path / "pl" / "serverFilesCourse", root / "serverFilesCourse")
    limit = json.loads((tmp_path / "pl" / "info-snippet.json").read_text())["externalGradingOptions"]
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    with _platform_container(root, "/grade", subs) as container:
        results = {}
        for kind in ("reference", "wrong", "hang", "empty"):
            seconds, _ = _sh(
                container,  # PrairieLearn starts a fresh container per job: leave nothing of the last one
                "rm -rf /grade/student /grade/results /grade/judge /grade/public && mkdir /grade/student && "
                f"cp -r /subs/{kind}/. /grade/student/ && /grade/serverFilesCourse/distgpu/run.sh",
            )
            results[kind] = (seconds, json.loads((root / "results" / "results.json").read_text()))
    reference, wrong, hang, empty = (results[k][1] for k in ("reference", "wrong", "hang", "empty"))
    assert reference["gradable"] and reference["score"] == 1.0
    assert wrong["score"] == pytest.approx(expected_wrong / exercise.points)
    assert "timeout" in {t["message"] for t in hang["tests"]}
    assert results["hang"][0] < limit["timeout"]
    assert empty["gradable"] is False and "the submission is empty" in empty["message"]


# ---------------------------------------------------------------------------------------------------------
# the gradebook's CSV and the batch histogram


def test_exported_csv_rounds_sums_of_fractions(toy_course: Course, tmp_path: Path) -> None:
    from grader.classroom.state.gradebook import export_csv, open_gradebook, record
    from grader.core.results import ExerciseResult, Status, TestResult

    exercise = toy_course.find("toy")
    cells = [
        TestResult(
            name=f"t{i}",
            number=f"1.{i}",
            part="01.allreduce",
            score=2 / 3,
            max_score=2 / 3,
            status=Status.PASSED,
        )
        for i in range(15)
    ]
    result = ExerciseResult(exercise="01", title="Toy", graded="alice", device="cpu", tests=tuple(cells))
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    with open_gradebook(url, "fixture") as gradebook:
        record(
            gradebook,
            exercise=exercise,
            cells=cells,
            student="alice",
            result=result,
            submitted=None,
            duedate=None,
        )
        header, row = export_csv(gradebook).splitlines()
    values = dict(zip(header.split(","), row.split(","), strict=True))
    assert (values["raw_score"], values["score"], values["max_score"]) == ("10.0", "10.0", "10.0")


def test_histogram_counts_whole_students() -> None:
    import matplotlib.pyplot as plt

    from grader.classroom.outputs.batch_files import histogram_figure

    figure = histogram_figure([5.0, 2.6, 2.6], 5.0)
    ticks = figure.axes[0].get_yticks()
    plt.close(figure)
    assert len(ticks) > 1 and all(float(t).is_integer() for t in ticks), ticks
