"""Student stubs are generated from the reference with nbgrader's own ClearSolutions preprocessor.

Each ``### BEGIN SOLUTION <part id>`` ... ``### END SOLUTION`` region becomes one
``raise NotImplementedError("TODO(<part id>): not implemented yet")``, indented like the region.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError

BEGIN = "### BEGIN SOLUTION"
_PLACEHOLDER = "@PART@"
_BEGIN_LINE = re.compile(r"^\s*### BEGIN SOLUTION\s*(?P<part>\S*)\s*$")


class StubError(UsageError):
    """A reference file whose solution markers cannot be turned into a stub."""


def render_stub(source: str, where: str) -> str:
    """The student's view of ``source``: every solution region replaced by a ``NotImplementedError``."""
    from nbformat.v4 import new_code_cell, new_notebook
    from nbgrader.preprocessors import ClearSolutions

    parts = [m["part"] for line in source.splitlines() if (m := _BEGIN_LINE.match(line))]
    if any(not p for p in parts):
        raise StubError(f"{where}: every '{BEGIN}' line must name its part, e.g. '{BEGIN} 02.ring_allreduce'")
    stub = f'raise NotImplementedError("TODO({_PLACEHOLDER}): not implemented yet")'
    notebook = new_notebook(
        cells=[new_code_cell(source)],
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
    )
    clearer = ClearSolutions(code_stub={"python": stub}, enforce_metadata=False)
    try:
        cleared = clearer.preprocess(notebook, {})[0].cells[0].source
    except RuntimeError as exc:  # nbgrader: unmatched or nested markers
        raise StubError(f"{where}: {exc}") from None
    for part in parts:
        cleared = cleared.replace(_PLACEHOLDER, part, 1)
    return cleared if cleared.endswith("\n") else cleared + "\n"


def expected_stubs(course: Course, exercise: Exercise) -> dict[Path, str]:
    """Stub path -> the content ``grade stubs`` would write there."""
    return {
        course.exercise_dir(exercise) / name: render_stub(
            (course.solution_dir(exercise) / name).read_text(), f"solutions/{exercise.dirname}/{name}"
        )
        for name in exercise.files
    }


def stale_stubs(course: Course, exercise: Exercise) -> list[Path]:
    """Stubs that differ from what generation would produce (or are missing)."""
    return [
        path
        for path, text in expected_stubs(course, exercise).items()
        if not path.is_file() or path.read_text() != text
    ]


def write_stubs(course: Course, exercise: Exercise) -> list[Path]:
    """Regenerate the exercise's stubs; return the paths whose content changed."""
    changed = []
    for path, text in expected_stubs(course, exercise).items():
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text)
            changed.append(path)
    return changed


@contextmanager
def fresh_stubs(course: Course, exercise: Exercise) -> Iterator[Path]:
    """A temporary folder holding the stubs rendered from the reference: an untouched submission."""
    with tempfile.TemporaryDirectory(prefix="distgpu-stubs-") as folder:
        for name in exercise.files:
            source = (course.solution_dir(exercise) / name).read_text()
            (Path(folder) / name).write_text(render_stub(source, name))
        yield Path(folder)
