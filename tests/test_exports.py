"""Gradescope and PrairieLearn packages: layout, scripts, and the results format each platform reads."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from grader.course import Course
from grader.exports import gradescope_zip, prairielearn_folder, to_prairielearn


def test_gradescope_zip_has_the_scripts_and_only_this_exercise(course: Course, tmp_path: Path) -> None:
    out = tmp_path / "ex02.zip"
    gradescope_zip(course, course.find("02"), out)
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    assert {"setup.sh", "run_autograder", "course.yml", "solutions/02_ring_tree/test_hidden.py"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert not any(n.startswith(("solutions/01_", "exercises/01_")) for n in names)


def test_run_autograder_grades_with_ranks_as_nobody_into_the_results_file(
    course: Course, tmp_path: Path
) -> None:
    gradescope_zip(course, course.find("02"), tmp_path / "ex02.zip")
    script = zipfile.ZipFile(tmp_path / "ex02.zip").read("run_autograder").decode()
    assert "chmod 0700 /autograder/source" in script
    assert "python -m grader.container --exercise 02" in script
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
