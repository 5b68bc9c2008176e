"""Stubs are generated from the references by nbgrader's ClearSolutions, and committed in sync."""

from __future__ import annotations

import ast

import pytest

from grader.authoring.stubs import StubError, render_stub, stale_stubs
from grader.core.course import Course


def test_committed_stubs_match_generation(course: Course) -> None:
    stale = [str(p) for e in course.exercises for p in stale_stubs(course, e)]
    assert stale == [], "run `grade stubs` and commit the result"


def test_every_solution_region_became_a_todo_naming_its_part(course: Course) -> None:
    part_ids = {p.id for e in course.exercises for p in e.parts}
    for exercise in course.exercises:
        for name in exercise.files:
            reference = (course.solution_dir(exercise) / name).read_text()
            regions = [
                ln.split("BEGIN SOLUTION")[1].strip()
                for ln in reference.splitlines()
                if "BEGIN SOLUTION" in ln
            ]
            tree = ast.parse((course.exercise_dir(exercise) / name).read_text())
            todos = [
                node.exc.args[0].value
                for node in ast.walk(tree)
                if isinstance(node, ast.Raise)
                and isinstance(node.exc, ast.Call)
                and getattr(node.exc.func, "id", None) == "NotImplementedError"
            ]
            assert sorted(t.removeprefix("TODO(").split(")")[0] for t in todos) == sorted(regions), (
                f"{exercise.dirname}/{name}"
            )
            assert set(regions) <= part_ids, f"{exercise.dirname}/{name} names a part course.yml lacks"


def test_region_is_replaced_at_its_indentation() -> None:
    source = "def f():\n    x = 1\n    ### BEGIN SOLUTION 01.f\n    return x\n    ### END SOLUTION\n"
    assert render_stub(source, "f.py") == (
        'def f():\n    x = 1\n    raise NotImplementedError("TODO(01.f): not implemented yet")\n'
    )


def test_a_region_without_its_part_is_refused() -> None:
    with pytest.raises(StubError, match="must name its part"):
        render_stub("def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION\n", "f.py")


def test_an_unclosed_region_is_refused() -> None:
    with pytest.raises(StubError, match="no end solution"):
        render_stub("def f():\n    ### BEGIN SOLUTION 01.f\n    pass\n", "f.py")
