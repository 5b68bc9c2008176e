"""Packaging an exercise's grader for other platforms: a Gradescope autograder zip, a PrairieLearn folder.

Both carry the course trimmed to the one exercise: a course.yml with that exercise alone (checked to load
and to define the same exercise before anything is written), its exercises/ and solutions/ folders, and
the ``grader`` and ``coursekit`` packages. No other exercise's reference or hidden suite leaves the
instructor's machine. Both run ``grader.container`` inside the platform's container on CPU ranks (gloo):
neither platform offers GPUs to autograders, so parts with ``device: gpu`` are ``blocked`` there, worth 0.
The judge runs as root and reads the course from a folder only root may enter; ranks run as nobody and
import the grader and the rank programs from a public copy that holds no solution.
"""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

from grader import SOURCE_ROOT
from grader.authoring.release import IGNORED
from grader.core.atomic import atomic_path, write_atomic
from grader.core.course import Course, Exercise, load_course
from grader.core.errors import UsageError

PACKAGES = ("grader", "coursekit")
PUBLIC = ("grader", "coursekit", "exercises")
"""What ranks (nobody) may read: no solutions/ and no course.yml among them."""
REQUIREMENTS = '"torch==2.13.0" "pytest>=8.0" "pyyaml>=6.0" "rich>=13.0" numpy platformdirs'

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image. It writes the path of a
# Python >= 3.11 that has the grader's dependencies to /autograder/distgpu-python. Gradescope's Ubuntu
# 22.04 base has python3 3.10: then python3.11 comes from Ubuntu's own packages (jammy, universe).
set -euo pipefail
ready='import sys, torch, pytest, yaml, rich, numpy; sys.exit(sys.version_info < (3, 11))'
recent='import sys; sys.exit(sys.version_info < (3, 11))'
if command -v python3 >/dev/null && python3 -c "$ready" 2>/dev/null; then
  # an image that has them already (the distgpu-cpu grading image, a custom base): nothing to install
  command -v python3 > /autograder/distgpu-python
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
if command -v python3 >/dev/null && python3 -c "$recent" 2>/dev/null; then
  python=python3
else
  python=python3.11
fi
apt-get install -y -q "$python" "$python-venv"
"$python" -m venv /autograder/venv
/autograder/venv/bin/pip install -q --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
/autograder/venv/bin/pip install -q {requirements}
/autograder/venv/bin/python -c "$ready"
echo /autograder/venv/bin/python > /autograder/distgpu-python
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this per submission, as root; the student's files are in /autograder/submission.
# The judge reads the course (hidden suite included) from /autograder/source, which only root may enter;
# ranks run as nobody and import the grader and the rank programs from /autograder/public.
set -u
mkdir -p /autograder/results /autograder/public
for folder in {public}; do cp -r "/autograder/source/$folder" /autograder/public/; done
chmod -R a+rX /autograder/public
chmod 0700 /autograder/source
cd /tmp && PYTHONPATH=/autograder/public OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo \\
  "$(cat /autograder/distgpu-python)" -m grader.container --exercise {key} \\
    --course /autograder/source/course.yml --programs-root /autograder/public/exercises \\
    --submission /autograder/submission --format gradescope --out /autograder/results/results.json
"""

PL_RUN_SH = """#!/usr/bin/env bash
# PrairieLearn external grader entrypoint (root): student files in /grade/student, results in /grade/results.
# As on Gradescope, the judge reads the course from a folder only root may enter (/grade/judge); ranks run
# as nobody and import the grader and the rank programs from /grade/public.
set -u
mkdir -p /grade/results /grade/judge /grade/public
cp -r /grade/serverFilesCourse/distgpu /grade/judge/ && chmod 0700 /grade/judge
for folder in {public}; do cp -r "/grade/serverFilesCourse/distgpu/$folder" /grade/public/; done
chmod -R a+rX /grade/public
chmod -R go-rwx /grade/serverFilesCourse
cd /tmp && PYTHONPATH=/grade/public OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo python3 -m grader.container \\
    --exercise {key} --course /grade/judge/distgpu/course.yml --programs-root /grade/public/exercises \\
    --submission /grade/student --format prairielearn --out /grade/results/results.json
"""


def trimmed_course(course: Course, exercise: Exercise, dest: Path, *, solutions: bool = True) -> None:
    """Write the course with ``exercise`` alone into ``dest`` (its solutions/ folder too unless
    ``solutions`` is False); ``UsageError`` unless it loads and defines the same exercise (a course.yml key
    this trimming does not know must not ship a grader that fails)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES:  # the grader that runs here, whichever course it grades
        shutil.copytree(SOURCE_ROOT / name, dest / name, ignore=IGNORED)
    folders = [course.exercise_dir(exercise)] + ([course.solution_dir(exercise)] if solutions else [])
    for folder in folders:
        if folder.is_dir():
            shutil.copytree(folder, dest / folder.relative_to(course.root), ignore=IGNORED)
    catalog = yaml.safe_load((course.root / "course.yml").read_text())
    catalog["sections"] = [_only(section, exercise) for section in catalog["sections"]]
    catalog["sections"] = [s for s in catalog["sections"] if s["exercises"]]
    header = f"# {course.title}, trimmed to exercise {exercise.key} by distgpu's `grade`.\n"
    (dest / "course.yml").write_text(header + yaml.safe_dump(catalog, sort_keys=False, width=110))
    try:
        found = load_course(dest / "course.yml").find(exercise.key)
    except UsageError as exc:
        raise UsageError(f"the course trimmed to exercise {exercise.key} does not load: {exc}") from None
    if found != exercise:
        raise UsageError(f"the course trimmed to exercise {exercise.key} defines it differently")


def _only(section: dict[str, Any], exercise: Exercise) -> dict[str, Any]:
    kept = [e for e in section.get("exercises") or [] if e.get("number") == exercise.number]
    return section | {"exercises": kept}


def _write_script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def gradescope_zip(course: Course, exercise: Exercise, out: Path) -> None:
    """An autograder zip: setup.sh and run_autograder at its root, the trimmed course beside them."""
    with tempfile.TemporaryDirectory(prefix="distgpu-gradescope-") as folder:
        root = Path(folder)
        trimmed_course(course, exercise, root)
        _write_script(root / "setup.sh", SETUP_SH.format(requirements=REQUIREMENTS))
        _write_script(
            root / "run_autograder", RUN_AUTOGRADER.format(key=exercise.key, public=" ".join(PUBLIC))
        )
        with atomic_path(out) as partial, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, path.relative_to(root))
                    archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)


def prairielearn_folder(course: Course, exercise: Exercise, out: Path) -> None:
    """serverFilesCourse/distgpu (the trimmed course and run.sh) and an info.json snippet for the question."""
    target = out / "serverFilesCourse" / "distgpu"
    trimmed_course(course, exercise, target)
    _write_script(target / "run.sh", PL_RUN_SH.format(key=exercise.key, public=" ".join(PUBLIC)))
    options = {
        "externalGradingOptions": {
            "enabled": True,
            "image": "distgpu-cpu:<version, pushed to a registry PrairieLearn can pull>",
            "serverFilesCourse": ["distgpu/"],
            "entrypoint": "/grade/serverFilesCourse/distgpu/run.sh",
            "timeout": min(600, int(exercise.timeout) + 60),
        }
    }
    write_atomic(out / "info-snippet.json", json.dumps(options, indent=2) + "\n")
