"""``pytest exercises/NN_slug``: the public tests in the student's own pytest, IDE test explorer or debugger.

Installed as a ``pytest11`` entry point (pyproject.toml), so any pytest run in an environment with distgpu
loads it. It does nothing until a collected test takes the ``world`` fixture from a course's
``exercises/NN_slug/`` folder: then that exercise's files are staged and its worlds started as
``grade exercise NN`` starts them (``LocalRunner.open_worlds``), and a failing check is an ordinary pytest
failure, with ``-x``, ``-k`` and ``--pdb`` as usual (``--pdb`` stops in the test, in this process; rank code
runs in rank workers, where a breakpoint cannot reach a terminal). No score is kept: ``grade exercise NN``
grades. The judge never loads this module: it sets ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` and hands pytest its
own ``GradingPlugin`` (``grader.runners.local``).

This module imports nothing heavy at load time: pytest loads it in every run of every project here.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from grader.harness.markers import MARKERS

if TYPE_CHECKING:
    from grader.core.course import Course, Exercise, Part
    from grader.harness.pool import Pools
    from grader.harness.testing import Hangs, World
    from grader.runners.local import LocalRunner

DEVICE_OPTION = "--distgpu-device"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        DEVICE_OPTION,
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="distgpu exercises: cpu (gloo), cuda (NCCL, one GPU per rank) or auto (cuda when available)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers the exercises' tests carry, and the worlds of this run."""
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    worlds = config.stash[WORLDS] = ExerciseWorlds(config.getoption(DEVICE_OPTION))
    config.pluginmanager.register(worlds, "distgpu-worlds")
    chosen = any(arg.startswith("--import-mode") for arg in config.invocation_params.args)
    if not chosen and config.args and all(map(_in_a_course, config.args)):
        # Every exercise has a test_public.py: imported by their paths, as the judge imports them, they do
        # not collide as one module "test_public" (pytest's default mode would, without __init__.py files).
        config.option.importmode = "importlib"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run a test that takes ``world`` on each world size of its part, as grading does: ``test_x[4ranks]``."""
    if "world" in metafunc.fixturenames:
        from grader.harness.plugin import parametrize_world

        found = _part_of(metafunc.definition)
        parametrize_world(metafunc, found[1] if found else None)


def pytest_make_parametrize_id(val: object, argname: str) -> str | None:
    if argname != "world":
        return None  # another project's parameter: nothing of the grader is imported for it
    from grader.harness.plugin import world_id

    return world_id(val, argname)


@pytest.fixture
def world(request: pytest.FixtureRequest) -> World:
    """``request.param`` ranks running this exercise's files, as ``grade exercise NN`` runs them."""
    found = _part_of(request.node)
    if found is None:
        pytest.fail(
            "the `world` fixture serves the tests of a course's exercises/NN_slug/ folders, marked with "
            "@pytest.mark.part('NN.name') of that exercise in course.yml",
            pytrace=False,
        )
    (course, exercise), part = found
    return request.config.stash[WORLDS].world(course, exercise, part, request.param, request.node.name)


@pytest.fixture
def artifact() -> Callable[[str, str], Path | None]:
    """The tests' ``artifact(name, what)``: None, so a test skips only the writing of its plot or table
    (``grade exercise NN`` keeps them in .grade/artifacts/)."""
    return lambda name, what: None


@dataclass
class _Open:
    """One exercise's worlds: the runner that opened them, its scratch folder, the pools."""

    exercise: str
    runner: LocalRunner
    scratch: Path
    pools: Pools
    device: str
    gpus: int

    def close(self) -> None:
        self.pools.close()
        self.runner.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class ExerciseWorlds:
    """The worlds of the exercise whose tests run now: started by its first test that needs one, stopped
    when another exercise's test needs one (tests run file by file: ``pytest exercises/`` keeps one rank
    factory, not 25) and as the run ends."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._open: _Open | None = None
        self._hangs: Hangs = {}

    def world(self, course: Course, exercise: Exercise, part: Part, size: int, test: str) -> World:
        """A world of ``size`` ranks for ``test`` of ``part``; a part this machine cannot run is skipped."""
        from grader.harness.testing import World

        opened = self._opened(course, exercise)
        needed = part.gpus_needed(size)
        if part.device == "gpu" and opened.device != "cuda":
            pytest.skip(f"needs {needed} GPU{'s' * (needed > 1)}; this run uses the CPU")
        if opened.device == "cuda" and needed > opened.gpus:
            pytest.skip(f"needs {needed} GPUs, found {opened.gpus}")
        shared = needed if opened.device == "cuda" and needed < size else None
        pool = opened.pools.get(size, part.nodes, shared_gpus=shared)
        return World(pool, part.timeout, hangs=self._hangs, test=test)

    def _opened(self, course: Course, exercise: Exercise) -> _Open:
        if self._open is not None and self._open.exercise == exercise.key:
            return self._open
        self.pytest_sessionfinish()
        from grader.core.submission import stage
        from grader.runners import grade_job
        from grader.runners.local import LocalRunner

        job = grade_job(course=course, exercise=exercise, submission=None, solution=False, device=self.device)
        scratch = Path(tempfile.mkdtemp(prefix="distgpu-pytest-"))
        stage(job.source, exercise.files, scratch / "impl")
        runner = LocalRunner()
        try:
            pools, device, gpus = runner.open_worlds(job, scratch)
        except Exception:
            runner.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self._open = _Open(exercise.key, runner, scratch, pools, device, gpus)
        return self._open

    def pytest_sessionfinish(self) -> None:
        """Stop the worlds and remove the staged copy."""
        if self._open is not None:
            self._open.close()
            self._open = None


WORLDS = pytest.StashKey[ExerciseWorlds]()
"""This run's ``ExerciseWorlds``, on its config."""


def _part_of(node: Any) -> tuple[tuple[Course, Exercise], Part] | None:
    """((course, exercise), part) of a test in a course's ``exercises/NN_slug/`` marked with one of that
    exercise's parts; None for any other test."""
    marker = node.get_closest_marker("part")
    found = _exercise_of(Path(str(node.path)).parent) if marker and marker.args else None
    if found is None:
        return None
    part = next((p for p in found[1].parts if p.id == marker.args[0]), None)
    return (found, part) if part is not None else None


def _in_a_course(arg: str) -> bool:
    """Whether a pytest argument ('exercises/01_x', 'exercises/01_x/test_public.py::test_y', a course's
    root) names a course repository's root or something in its exercises/ folder."""
    path = Path(arg.split("::")[0]).resolve()
    return (path / "course.yml").is_file() or any(
        folder.name == "exercises" and (folder.parent / "course.yml").is_file()
        for folder in (path, *path.parents)
    )


_courses: dict[Path, Course] = {}


def _exercise_of(folder: Path) -> tuple[Course, Exercise] | None:
    """The course and exercise whose folder ``folder`` is (``<root>/exercises/NN_slug``), or None."""
    root = folder.resolve().parent.parent
    if folder.resolve().parent.name != "exercises" or not (root / "course.yml").is_file():
        return None
    if root not in _courses:
        from grader.core.course import load_course

        _courses[root] = load_course(root / "course.yml")
    course = _courses[root]
    exercise = next((e for e in course.exercises if e.dirname == folder.name), None)
    return (course, exercise) if exercise is not None else None
