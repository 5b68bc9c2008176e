"""A GitHub Classroom starter repository for one exercise: ``grade classroom NN OUT/``.

The repository holds what a student of that exercise gets (its folder under exercises/: stubs, public
tests, rank programs, README, hints), the course trimmed to that exercise without solutions/, the
``grader`` and ``coursekit`` packages, ``scripts/grade`` and ``scripts/setup`` to work locally, and
``.github/``: the workflow and the two scripts its steps run. The release scan (``find_leaks``) must find
no reference body and no hidden test line in it.

The workflow has one ``classroom-resources/autograding-command-grader@v1`` step per part, then the
``autograding-grading-reporter@v1`` step. How the command grader runs a step (its ``src/main.js``):
``execSync(setup-command)``, then ``execSync(command)``, each under the step's ``timeout`` (minutes), in
the checkout, with an environment of PATH, HOME, FORCE_COLOR, DOTNET_CLI_HOME and DOTNET_NOLOGO only; a
zero exit status wins ``max-score``, which it reads with ``parseInt``. So:

- the command is ``grade exercise NN -k PART`` over the public checks of the part, exit status 0 only
  when all of them pass;
- the setup needs no variable beyond PATH and HOME: it uses the first ``python3`` on PATH when it already
  has the grader's dependencies, and otherwise builds ``.venv`` from PyPI (the CPU build of torch), once
  for all steps;
- ``max-score`` is a whole number: the parts' points are rounded by largest remainder, so that they still
  add up to the points of the parts kept (rounded), and the README says so;
- a part that cannot pass there is left out, and said: a GPU part (GitHub's runners have no GPU) or a
  part with no public check.

Hidden tests never reach a student's repository: Classroom's score is the public checks. The grade comes
from ``grade batch`` over the cloned repositories (README, "GitHub Classroom").
"""

from __future__ import annotations

import math
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grader import SOURCE_ROOT
from grader.authoring.exports import REQUIREMENTS, trimmed_course
from grader.authoring.release import find_leaks
from grader.core.course import Course, Exercise, Part
from grader.core.errors import UsageError

WORKFLOW = ".github/workflows/classroom.yml"
SETUP = ".github/classroom/setup.sh"
RUN = ".github/classroom/grade.sh"
COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
SETUP_MINUTES = 10
"""Every step's timeout starts here: the first step's setup installs torch (a few minutes)."""
SCRIPTS = ("grade", "setup")
"""From scripts/: what a student runs locally (``scripts/grade exercise NN``)."""

SETUP_SH = """#!/usr/bin/env bash
# Each Classroom step runs this first, with only PATH and HOME set (the action passes no other variable).
# A python3 on PATH that already has the grader's dependencies is used as it is; otherwise the first step
# builds .venv (CPU torch) and the others find it ready.
set -euo pipefail
cd "$(dirname "$0")/../.."
ready='import sys, torch, pytest, yaml, rich, numpy, platformdirs; sys.exit(sys.version_info < (3, 11))'
if python3 -c "$ready" 2>/dev/null; then exit 0; fi
if [ -x .venv/bin/python ] && .venv/bin/python -c "$ready" 2>/dev/null; then exit 0; fi
python3 -m venv .venv
.venv/bin/pip install --quiet --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
.venv/bin/pip install --quiet {requirements}
.venv/bin/python -c "$ready"
"""

GRADE_SH = """#!/usr/bin/env bash
# A Classroom step's command: the public checks of one part (exit status 0 when they all pass), with the
# Python setup.sh chose. `python -m` runs this repository's grader, whatever else is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=python3
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
exec "$python" -m grader.cli exercise {key} --device cpu -k "$1"
"""

GITIGNORE = ".venv/\n__pycache__/\n*.pyc\n.grade/\n"


@dataclass(frozen=True)
class Step:
    part: Part
    points: int
    """``max-score``: the part's points as a whole number (largest remainder over the exercise)."""

    @property
    def id(self) -> str:
        """The step id, and (upper-cased) the reporter's ``ID_RESULTS`` variable."""
        return re.sub(r"[^a-z0-9]+", "-", self.part.name.lower()).strip("-")


@dataclass(frozen=True)
class Starter:
    """What ``write_starter`` wrote: the graded steps, and the parts left out with the reason."""

    steps: tuple[Step, ...]
    left_out: tuple[tuple[Part, str], ...]
    timeout: int
    """Each step's timeout, in minutes."""


def write_starter(course: Course, exercise: Exercise, out: Path) -> Starter:
    """Write the starter repository into ``out`` (a new folder); ``UsageError`` when ``out`` exists, when no
    part can be graded there, or when the release scan finds solution text in it (then nothing is left)."""
    if out.exists():
        raise UsageError(f"{out} exists; give a new folder")
    steps, left_out = plan_steps(course, exercise)
    if not steps:
        raise UsageError(f"no part of exercise {exercise.key} can be graded on GitHub's runners")
    timeout = step_timeout(exercise)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".distgpu-classroom-", dir=out.parent) as folder:
        root = Path(folder) / "repo"
        trimmed_course(course, exercise, root, solutions=False)
        (root / "scripts").mkdir()
        for script in SCRIPTS:  # like the packages: the grader's own, whichever course it grades
            shutil.copy2(SOURCE_ROOT / "scripts" / script, root / "scripts" / script)
        shutil.copy2(SOURCE_ROOT / "pyproject.toml", root / "pyproject.toml")
        _executable(root / SETUP, SETUP_SH.format(requirements=REQUIREMENTS))
        _executable(root / RUN, GRADE_SH.format(key=exercise.key))
        (root / WORKFLOW).parent.mkdir(parents=True)
        (root / WORKFLOW).write_text(workflow_text(exercise, steps, timeout))
        (root / ".gitignore").write_text(GITIGNORE)
        (root / "README.md").write_text(readme(exercise, steps, left_out))
        leaks = find_leaks(course, root)
        if leaks:
            raise UsageError(f"the starter repository would leak solution text: {leaks[0]}")
        root.rename(out)
    return Starter(tuple(steps), tuple(left_out), timeout)


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def plan_steps(course: Course, exercise: Exercise) -> tuple[list[Step], list[tuple[Part, str]]]:
    """The parts Classroom can grade, each with its whole points, and the others with the reason."""
    public = _publicly_checked(course, exercise)
    kept: list[Part] = []
    left_out: list[tuple[Part, str]] = []
    for part in exercise.parts:
        if part.device == "gpu":
            left_out.append((part, "it needs GPUs, and GitHub's runners have none"))
        elif part.id not in public:
            left_out.append((part, "it has no public check"))
        else:
            kept.append(part)
    points = whole_points([p.points for p in kept])
    return [Step(part, n) for part, n in zip(kept, points, strict=True)], left_out


def _publicly_checked(course: Course, exercise: Exercise) -> set[str]:
    public = course.exercise_dir(exercise) / "test_public.py"
    text = public.read_text() if public.is_file() else ""
    return set(re.findall(r"""mark\.part\(\s*["']([^"']+)["']""", text))


def whole_points(points: list[float]) -> list[int]:
    """``points`` as whole numbers that add up to their sum rounded (half up): each rounded down, then the
    missing ones to the largest remainders (ties to the earlier part). The command grader reads
    ``max-score`` with ``parseInt``: 1.5 would count as 1."""
    floors = [math.floor(p) for p in points]
    missing = math.floor(sum(points) + 0.5) - sum(floors)
    order = sorted(range(len(points)), key=lambda i: (-(points[i] - floors[i]), i))
    for i in order[:missing]:
        floors[i] += 1
    return floors


def step_timeout(exercise: Exercise) -> int:
    """Minutes per step (setup and command each get it): the exercise's budget, plus room for the setup."""
    return SETUP_MINUTES + math.ceil(exercise.timeout / 60)


# ---------------------------------------------------------------------------------------------------------
# the workflow and the README


def workflow(exercise: Exercise, steps: list[Step], timeout: int) -> dict[str, Any]:
    """GitHub Classroom's autograding workflow (the layout Classroom itself writes), one step per part."""
    graders = [
        {
            "name": step.part.id,
            "id": step.id,
            "uses": COMMAND_GRADER,
            "with": {
                "test-name": step.part.id,
                "setup-command": f"bash {SETUP}",
                "command": f"bash {RUN} {step.part.name}",
                "timeout": timeout,
                "max-score": step.points,
            },
        }
        for step in steps
    ]
    reporter = {
        "name": "Autograding Reporter",
        "uses": REPORTER,
        "env": {f"{s.id.upper()}_RESULTS": f"${{{{steps.{s.id}.outputs.result}}}}" for s in steps},
        "with": {"runners": ",".join(s.id for s in steps)},
    }
    return {
        "name": f"Autograding: exercise {exercise.key} ({exercise.slug}), public checks",
        "on": ["push", "repository_dispatch"],
        "permissions": {"checks": "write", "actions": "read", "contents": "read"},
        "jobs": {
            "run-autograding-tests": {
                "runs-on": "ubuntu-latest",
                "if": "github.actor != 'github-classroom[bot]'",
                "steps": [
                    {"name": "Checkout code", "uses": "actions/checkout@v4"},
                    {"uses": "actions/setup-python@v5", "with": {"python-version": "3.11"}},
                    *graders,
                    reporter,
                ],
            }
        },
    }


def workflow_text(exercise: Exercise, steps: list[Step], timeout: int) -> str:
    header = (
        f"# Written by distgpu's `grade classroom {exercise.key}`. Each step grades the public checks of\n"
        "# one part; its max-score is a whole number (the action reads it with parseInt), rounded so that\n"
        "# they add up to the points of the parts here. The hidden tests are not here: the instructor runs\n"
        "# them.\n"
    )
    return header + yaml.safe_dump(workflow(exercise, steps, timeout), sort_keys=False, width=110)


def readme(exercise: Exercise, steps: list[Step], left_out: list[tuple[Part, str]]) -> str:
    """The starter repository's README: where the exercise is, how to grade it, what Classroom's score is."""
    total = sum(s.points for s in steps)
    rows = "\n".join(f"| {s.part.id} | {s.part.points:g} | {s.points} |" for s in steps)
    missing = "".join(f"- {part.id} is not in it: {why}.\n" for part, why in left_out)
    return f"""# Exercise {exercise.key}: {exercise.title}

The exercise is in `exercises/{exercise.dirname}/`: start with its README.md. Edit only
{", ".join(f"`{f}`" for f in exercise.files)}.

Grade your work here: `scripts/grade exercise {exercise.key}` (one part: `-k PART`).

## What GitHub Classroom's score is

Every push runs the public checks of each part (`.github/workflows/classroom.yml`). **Classroom's score
counts the public checks only: the hidden tests are not in this repository, and your instructor runs them
on what you pushed.** A part's points count when all of its public checks pass. Classroom wants whole
points, so they are rounded (largest remainder) to add up to {total}:

| part | points | in Classroom |
|---|---|---|
{rows}

{missing}"""
