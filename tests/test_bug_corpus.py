"""The bugs students really write, applied to the reference: each must lose exactly the points it should.

Each ``tests/corpus/NN_slug.yml`` lists mutations (see docs/authoring.md). A mutation whose ``replace`` no
longer matches the reference exactly once fails loudly, so the corpus cannot rot silently.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.course import Course, load_course
from grader.results import Status
from grader.runners import GradeJob
from grader.runners.local import LocalRunner

REPO = Path(__file__).parent.parent
CORPUS = Path(__file__).parent / "corpus"
KEYS = {"name", "why", "file", "replace", "with", "loses", "keeps", "verdict", "message"}
TAUGHT = {"01", "02", "22"}
"""Exercises whose every test, public and hidden, carries a ``concept`` that a failure must show."""


def _mutations() -> list[Any]:
    params = []
    for path in sorted(CORPUS.glob("*.yml")):
        for bug in yaml.safe_load(path.read_text()):
            params.append(pytest.param(path.stem, bug, id=f"{path.stem[:2]}-{bug['name']}"))
    return params


@pytest.mark.parametrize(("dirname", "bug"), _mutations())
def test_bug_loses_its_points(
    runner: LocalRunner, course: Course, tmp_path: Path, dirname: str, bug: dict[str, Any]
) -> None:
    assert set(bug) <= KEYS and {"name", "why", "file", "replace", "with", "loses"} <= set(bug), bug
    exercise = course.find(dirname.split("_", 1)[1])
    shutil.copytree(course.solution_dir(exercise), tmp_path, dirs_exist_ok=True)
    target = tmp_path / bug["file"]
    source = target.read_text()
    assert source.count(bug["replace"]) == 1, f"{bug['name']}: 'replace' must match the reference once"
    target.write_text(source.replace(bug["replace"], bug["with"]))

    result = runner.run(
        GradeJob(course=course, exercise=exercise, source=tmp_path, label=bug["name"], device="cpu")
    )

    by_part = {p.id: [t for t in result.tests if t.part == p.id] for p in exercise.parts}
    for part in bug["loses"]:
        lost = [t for t in by_part[part] if t.status is not Status.PASSED]
        assert lost, f"{bug['name']} should lose points in {part} but scored full marks there"
        if "verdict" in bug:
            assert {str(t.status) for t in lost} == {bug["verdict"]}, [t.output for t in lost]
    for part in bug.get("keeps", []):
        kept = by_part[part]
        assert all(t.status is Status.PASSED for t in kept), [
            t.output for t in kept if t.status is not Status.PASSED
        ]
    if "message" in bug:
        assert any(bug["message"] in t.output for t in result.tests), [t.output for t in result.tests]
    if dirname[:2] in TAUGHT:
        untaught = [
            t.output for t in result.tests if t.status is Status.FAILED and "\n  concept: " not in t.output
        ]
        assert not untaught, f"{bug['name']}: failures without a concept: {untaught}"


def test_corpus_covers_every_graded_exercise() -> None:
    course = load_course(REPO / "course.yml")
    graded = {e.dirname for e in course.exercises if e.parts}
    assert graded == {p.stem for p in CORPUS.glob("*.yml")}
