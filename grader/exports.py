"""Packaging an exercise's grader for other platforms: a Gradescope autograder zip, a PrairieLearn folder.

Both run `grade` inside the platform's container on CPU ranks (gloo): neither platform offers GPUs to
autograders, so parts with ``device: gpu`` come out ``blocked`` there.
"""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path

from grader.course import Course, Exercise
from grader.release import IGNORED

PACKAGE = ("pyproject.toml", "course.yml", "README.md", "grader", "coursekit")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image.
set -euo pipefail
apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-venv python3-pip
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install -q /autograder/source
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this per submission, as root; the student's files are in /autograder/submission.
# Ranks run as nobody: the hidden suite and the reference stay in a folder only root may enter, and the
# ranks read the public exercise files (rank programs) from a copy.
set -u
mkdir -p /autograder/results /autograder/public
cp -r /autograder/source/exercises /autograder/public/ && chmod -R a+rX /autograder/public
chmod 0700 /autograder/source
OMP_NUM_THREADS=1 /autograder/venv/bin/python -m grader.container --exercise {key} \\
    --course /autograder/source/course.yml --programs-root /autograder/public/exercises \\
    --submission /autograder/submission --format gradescope --out /autograder/results/results.json
"""

PL_RUN_SH = """#!/usr/bin/env bash
# PrairieLearn external grader entrypoint (root): student files in /grade/student, results in /grade/results.
# As on Gradescope, ranks run as nobody and cannot enter the copy of the course that holds the hidden suite.
set -u
mkdir -p /grade/results /grade/judge /grade/public
cp -r /grade/serverFilesCourse/distgpu /grade/judge/ && chmod 0700 /grade/judge
cp -r /grade/serverFilesCourse/distgpu/exercises /grade/public/ && chmod -R a+rX /grade/public
chmod -R go-rwx /grade/serverFilesCourse
cd /tmp && PYTHONPATH=/grade/public:/grade/judge/distgpu OMP_NUM_THREADS=1 python3 -m grader.container \\
    --exercise {key} --course /grade/judge/distgpu/course.yml --programs-root /grade/public/exercises \\
    --submission /grade/student --format prairielearn --out /grade/results/results.json
"""


def _copy_course_subset(course: Course, exercise: Exercise, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in PACKAGE:
        source = course.root / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=IGNORED)
        else:
            shutil.copy2(source, dest / name)
    for folder in (course.exercise_dir(exercise), course.solution_dir(exercise)):
        shutil.copytree(folder, dest / folder.relative_to(course.root), ignore=IGNORED)


def _write_script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def gradescope_zip(course: Course, exercise: Exercise, out: Path) -> None:
    """An autograder zip: setup.sh and run_autograder at its root, the course subset beside them."""
    with tempfile.TemporaryDirectory(prefix="distgpu-gradescope-") as folder:
        root = Path(folder)
        _copy_course_subset(course, exercise, root)
        _write_script(root / "setup.sh", SETUP_SH)
        _write_script(root / "run_autograder", RUN_AUTOGRADER.format(key=exercise.key))
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, path.relative_to(root))
                    archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)


def prairielearn_folder(course: Course, exercise: Exercise, out: Path) -> None:
    """serverFilesCourse/distgpu (the course subset and run.sh) and an info.json snippet for the question."""
    target = out / "serverFilesCourse" / "distgpu"
    _copy_course_subset(course, exercise, target)
    _write_script(target / "run.sh", PL_RUN_SH.format(key=exercise.key))
    options = {
        "externalGradingOptions": {
            "enabled": True,
            "image": "distgpu-cpu:<version, pushed to a registry PrairieLearn can pull>",
            "serverFilesCourse": ["distgpu/"],
            "entrypoint": "/grade/serverFilesCourse/distgpu/run.sh",
            "timeout": min(600, int(exercise.timeout) + 60),
        }
    }
    (out / "info-snippet.json").write_text(json.dumps(options, indent=2) + "\n")


def to_prairielearn(gradescope: dict) -> dict:  # type: ignore[type-arg]
    """PrairieLearn's results.json from our Gradescope results.json (score as a fraction)."""
    total = gradescope["max_score"] or 1.0
    return {
        "gradable": True,
        "score": gradescope["score"] / total,
        "message": gradescope.get("output", ""),
        "tests": [
            {
                "name": t["name"],
                "points": t["score"],
                "max_points": t["max_score"],
                "output": t["output"],
                "message": t["verdict"],
            }
            for t in gradescope["tests"]
        ],
    }
