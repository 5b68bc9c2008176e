"""A GitHub Classroom starter repository for one exercise: ``grade classroom NN OUT/``.

The repository holds what a student of that exercise gets (its folder under exercises/: stubs, public
tests, rank programs, README, hints), the course trimmed to that exercise without solutions/, the
``grader`` and ``coursekit`` packages, ``scripts/grade`` and ``scripts/setup`` to work locally, and
``.github/``: the workflow and the two scripts its steps run. The release scan (``find_leaks``) must find
no reference body and no hidden test line in it.

The workflow has one ``classroom-resources/autograding-command-grader@v1`` step per concept with public
checks, then the ``autograding-grading-reporter@v1`` step. How the command grader runs a step (its
``src/main.js``): ``execSync(setup-command)``, then ``execSync(command)``, each under the step's ``timeout``
(minutes), in the checkout, with an environment of PATH, HOME, FORCE_COLOR, DOTNET_CLI_HOME and
DOTNET_NOLOGO only; a zero exit status wins ``max-score``, which it reads with ``parseInt``, and any other
wins 0. So:

- a step is one concept, the unit our scoring is all-or-nothing in too (``grader.core.scoring``): its
  command is ``grade exercise NN --concept C`` over the concept's public checks, exit status 0 only when
  all of them pass. A step per part would give 0 for a part that earns some of its concepts;
- the setup needs no variable beyond PATH and HOME: it uses the first ``python3`` on PATH when it already
  has the grader's dependencies, and otherwise builds ``.venv`` from PyPI (the CPU build of torch), once
  for all steps;
- ``max-score`` is a whole number, so each exercise's points are multiplied by one whole factor
  (``Scale``), stated in the workflow's header comment and the README: the smallest factor up to
  ``EXACT_FACTOR_LIMIT`` that makes every concept's points whole (Classroom's total / factor is then the
  public score exactly), else the smallest whose rounding stays within ``TOLERANCE`` of the points. A
  concept's points are what ``grade exercise`` gives it over the public checks: its part's points split by
  weight over the part's concepts that have public checks (``Part.concept_points``);
- a part that cannot pass there is left out, and said: a GPU part (GitHub's runners have no GPU) or a
  part with no public check.

Hidden tests never reach a student's repository: Classroom's score is the public checks. The grade comes
from ``grade batch`` over the cloned repositories (README, "GitHub Classroom").
"""

from __future__ import annotations

import ast
import math
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from fractions import Fraction
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
# builds .venv (CPU torch) and the others find it ready. The check finds the modules without importing
# them: every step runs it, and importing torch takes seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
ready='import sys, importlib.util as u; sys.exit(sys.version_info < (3, 11) or not all(map(u.find_spec, [
  "torch", "pytest", "yaml", "rich", "numpy", "platformdirs"])))'
if python3 -c "$ready" 2>/dev/null; then exit 0; fi
if [ -x .venv/bin/python ] && .venv/bin/python -c "$ready" 2>/dev/null; then exit 0; fi
python3 -m venv .venv
.venv/bin/pip install --quiet --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
.venv/bin/pip install --quiet {requirements}
.venv/bin/python -c "$ready"
"""

GRADE_SH = """#!/usr/bin/env bash
# A Classroom step's command: the public checks of one concept (exit status 0 when they all pass), with the
# Python setup.sh chose. `python -m` runs this repository's grader, whatever else is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=python3
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
exec "$python" -m grader.cli exercise {key} --device cpu -k "$1" --concept "$2"
"""

GITIGNORE = ".venv/\n__pycache__/\n*.pyc\n.grade/\n"
EXACT_FACTOR_LIMIT = 1000
TOLERANCE = Fraction(5, 1000)
"""Where no factor up to ``EXACT_FACTOR_LIMIT`` is exact: the most that Classroom's total / factor may
differ from the public score, as a share of the exercise's points in Classroom (the sum of every step's
rounding, so it holds whichever concepts a student earns)."""


@dataclass(frozen=True)
class Step:
    part: Part
    concept: str
    points: Fraction
    """What the concept is worth in ``grade exercise``'s public score."""
    max_score: int
    """``max-score``: ``points`` times the exercise's factor, rounded half up."""

    @property
    def id(self) -> str:
        """The step id, and (upper-cased) the reporter's ``ID_RESULTS`` variable."""
        return re.sub(r"[^a-z0-9]+", "-", f"{self.part.name}-{self.concept}".lower()).strip("-")

    @property
    def name(self) -> str:
        return f"{self.part.id} {self.concept}"


@dataclass(frozen=True)
class Scale:
    factor: int
    exact: bool
    error: Fraction
    """The most Classroom's total / ``factor`` can differ from the public score, in points."""

    def said(self) -> str:
        if self.exact:
            return f"times {self.factor}, exactly"
        return f"times {self.factor}, within {float(TOLERANCE):.1%} (at most {float(self.error):.3g} points)"


@dataclass(frozen=True)
class Starter:
    """What ``write_starter`` wrote: the graded steps, their scale, and the parts left out with why."""

    steps: tuple[Step, ...]
    scale: Scale
    left_out: tuple[tuple[Part, str], ...]
    timeout: int
    """Each step's timeout, in minutes."""


def write_starter(course: Course, exercise: Exercise, out: Path) -> Starter:
    """Write the starter repository into ``out`` (a new folder); ``UsageError`` when ``out`` exists, when no
    part can be graded there, or when the release scan finds solution text in it (then nothing is left)."""
    if out.exists():
        raise UsageError(f"{out} exists; give a new folder")
    steps, scale, left_out = plan_steps(course, exercise)
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
        (root / WORKFLOW).write_text(workflow_text(exercise, steps, scale, timeout))
        (root / ".gitignore").write_text(GITIGNORE)
        (root / "README.md").write_text(readme(exercise, steps, scale, left_out))
        leaks = find_leaks(course, root)
        if leaks:
            raise UsageError(f"the starter repository would leak solution text: {leaks[0]}")
        root.rename(out)
    return Starter(tuple(steps), scale, tuple(left_out), timeout)


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def plan_steps(course: Course, exercise: Exercise) -> tuple[list[Step], Scale, list[tuple[Part, str]]]:
    """A step per concept Classroom can grade, with its points and ``max-score``; the exercise's scale;
    the parts left out, with the reason."""
    public = public_concepts(course, exercise)
    kept: list[tuple[Part, str, Fraction]] = []
    left_out: list[tuple[Part, str]] = []
    for part in exercise.parts:
        if part.device == "gpu":
            left_out.append((part, "it needs GPUs, and GitHub's runners have none"))
        elif part.id not in public:
            left_out.append((part, "it has no public check"))
        else:
            kept += [(part, c, _concept_points(part, c, public[part.id])) for c in public[part.id]]
    scale = scale_for([points for _, _, points in kept])
    steps = [Step(part, c, points, _half_up(points * scale.factor)) for part, c, points in kept]
    return steps, scale, left_out


def public_concepts(course: Course, exercise: Exercise) -> dict[str, list[str]]:
    """Part id -> the concepts its public checks grade, in the suite's order (a part that declares no
    concepts is one, named as the part: ``GradingPlugin._concept_of``)."""
    path = course.exercise_dir(exercise) / "test_public.py"
    tree = ast.parse(path.read_text()) if path.is_file() else ast.Module(body=[], type_ignores=[])
    parts = {p.id: p for p in exercise.parts}
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            marks = dict(m for m in map(_mark, node.decorator_list) if m is not None)
            part = parts.get(marks.get("part", ""))
            if part is not None:
                concept = marks.get("concept", part.name) if part.concepts else part.name
                found.setdefault(part.id, [])
                if concept not in found[part.id]:
                    found[part.id].append(concept)
    return {p.id: found[p.id] for p in exercise.parts if p.id in found}  # course order


def _mark(decorator: ast.expr) -> tuple[str, str] | None:
    """``("part", "02.x")`` for ``@pytest.mark.part("02.x")``, likewise ``concept``; None otherwise."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
        return None
    name, args = decorator.func.attr, decorator.args
    if name in ("part", "concept") and args and isinstance(args[0], ast.Constant):
        return name, str(args[0].value)
    return None


def _concept_points(part: Part, concept: str, public: list[str]) -> Fraction:
    """``Part.concept_points(concept, among=public)``, as an exact fraction of the YAML's decimals."""
    if not part.concepts:
        return _fraction(part.points)
    weights = {c.name: _fraction(c.weight) for c in part.concepts if c.name in public}
    return _fraction(part.points) * weights[concept] / sum(weights.values())


def _fraction(number: float) -> Fraction:
    return Fraction(str(number))  # 1.5 -> 3/2, 0.1 -> 1/10 (the YAML's decimal, not the nearest float)


def scale_for(points: list[Fraction]) -> Scale:
    """The smallest factor that makes every one of ``points`` whole, if it is at most
    ``EXACT_FACTOR_LIMIT``; else the smallest whose rounding, summed over ``points``, is within
    ``TOLERANCE`` of their total."""
    exact = math.lcm(*(p.denominator for p in points)) if points else 1
    if exact <= EXACT_FACTOR_LIMIT:
        return Scale(exact, True, Fraction(0))
    total = sum(points, Fraction(0))
    factor = 1
    while True:
        error = sum((abs(_half_up(p * factor) - p * factor) for p in points), Fraction(0)) / factor
        if error <= TOLERANCE * total:
            return Scale(factor, False, error)
        factor += 1


def _half_up(value: Fraction) -> int:
    return math.floor(value + Fraction(1, 2))


def step_timeout(exercise: Exercise) -> int:
    """Minutes per step (setup and command each get it): the exercise's budget, plus room for the setup."""
    return SETUP_MINUTES + math.ceil(exercise.timeout / 60)


# ---------------------------------------------------------------------------------------------------------
# the workflow and the README


def workflow(exercise: Exercise, steps: list[Step], timeout: int) -> dict[str, Any]:
    """GitHub Classroom's autograding workflow (the layout Classroom itself writes), one step per concept."""
    graders = [
        {
            "name": step.name,
            "id": step.id,
            "uses": COMMAND_GRADER,
            "with": {
                "test-name": step.name,
                "setup-command": f"bash {SETUP}",
                "command": f"bash {RUN} {step.part.name} {step.concept}",
                "timeout": timeout,
                "max-score": step.max_score,
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


def workflow_text(exercise: Exercise, steps: list[Step], scale: Scale, timeout: int) -> str:
    total = sum(s.max_score for s in steps)
    header = (
        f"# Written by distgpu's `grade classroom {exercise.key}`. One step per concept with public checks:\n"
        "# a concept scores all or nothing, here as in `grade exercise`. Classroom's points are whole\n"
        f"# (the action reads max-score with parseInt), so they are the exercise's points {scale.said()}:\n"
        f"# Classroom's score / {scale.factor} is the public score (out of {total / scale.factor:g}).\n"
        "# The hidden tests are not here: the instructor runs them.\n"
    )
    return header + yaml.safe_dump(workflow(exercise, steps, timeout), sort_keys=False, width=110)


def readme(exercise: Exercise, steps: list[Step], scale: Scale, left_out: list[tuple[Part, str]]) -> str:
    """The starter repository's README: where the exercise is, how to grade it, what Classroom's score is."""
    total = sum(s.max_score for s in steps)
    rows = "\n".join(f"| {s.part.id} | {s.concept} | {float(s.points):g} | {s.max_score} |" for s in steps)
    missing = "".join(f"- {part.id} is not in it: {why}.\n" for part, why in left_out)
    return f"""# Exercise {exercise.key}: {exercise.title}

The exercise is in `exercises/{exercise.dirname}/`: start with its README.md. Edit only
{", ".join(f"`{f}`" for f in exercise.files)}.

Grade your work here: `scripts/grade exercise {exercise.key}` (one part: `-k PART`).

## What GitHub Classroom's score is

Every push runs the public checks of each concept (`.github/workflows/classroom.yml`). **Classroom's score
counts the public checks only: the hidden tests are not in this repository, and your instructor runs them
on what you pushed.** A concept's points count when all of its public checks pass, as in
`scripts/grade exercise {exercise.key}`. Classroom wants whole points, so every concept's points are
multiplied by {scale.factor} ({scale.said()}): Classroom's score divided by {scale.factor} is the score
`scripts/grade exercise {exercise.key}` shows, out of {total / scale.factor:g}.

| part | concept | points | in Classroom |
|---|---|---|---|
{rows}

{missing}"""
