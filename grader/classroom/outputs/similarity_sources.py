"""What a class is compared with besides itself: the course's reference, and the known sources an instructor
names with ``--against`` (prior years' submissions, a solution found online).

A source is compared with every student, never with another source, and never counts as common code. Its
label holds a ``/`` (``solutions/02_ring_tree``, ``2024/alice``), which no student id does: a submission
is a folder or a zip in the submissions folder, named by the id.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from grader.classroom.intake.discovery import discover
from grader.core.course import Course, Exercise
from grader.core.submission import stage


class SourceKind(Enum):
    REFERENCE = "reference"
    """The course's own solution: a match with it is reported as such."""
    AGAINST = "against"
    """Named with ``--against``."""


@dataclass(frozen=True)
class Source:
    label: str
    kind: SourceKind
    files: dict[str, str]
    """The exercise's files it holds, by name: their text."""


def known_sources(course: Course, exercise: Exercise, against: Sequence[Path]) -> list[Source]:
    """The reference, then every submission in each ``against`` path (``ValueError`` when one holds none of
    the exercise's files, or two sources would have the same label)."""
    solutions = course.solution_dir(exercise)
    reference = read_files(solutions, exercise.files) if solutions.is_dir() else {}
    sources = [Source(str(solutions.relative_to(course.root)), SourceKind.REFERENCE, reference)]
    for path in against:
        found = _sources_in(path, exercise.files)
        if not any(source.files for source in found):
            names = ", ".join(exercise.files)
            raise ValueError(f"--against {path}: holds none of the exercise's files ({names})")
        sources += found
    labels = [s.label for s in sources]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValueError(f"--against: two sources named {repeated[0]}; give each folder its own name")
    return [s for s in sources if s.files]


def read_files(source: Path, files: tuple[str, ...]) -> dict[str, str]:
    """The exercise's files in ``source`` (a folder or a zip), by name, read as grading reads them: only
    those files, no link followed; those missing or refused are left out."""
    with tempfile.TemporaryDirectory(prefix="distgpu-similarity-") as folder:
        stage(source, files, Path(folder))
        return {
            name: (Path(folder) / name).read_text(errors="replace")
            for name in files
            if (Path(folder) / name).is_file()
        }


def _sources_in(path: Path, files: tuple[str, ...]) -> list[Source]:
    """``path`` read as ``grade batch`` reads submissions: one submission (a zip, or a folder holding the
    exercise's files), a folder of submissions, or else a single file."""
    if not path.exists():
        raise ValueError(f"--against {path}: no such file or folder")
    where = path.resolve()
    if path.is_dir() and not any((path / name).is_file() for name in files):
        return [
            Source(f"{where.name}/{s.student}", SourceKind.AGAINST, read_files(s.path, files))
            for s in discover(path)
        ]
    if path.is_dir() or path.suffix == ".zip":
        return [Source(f"{where.parent.name}/{where.name}", SourceKind.AGAINST, read_files(path, files))]
    return [Source(f"{where.parent.name}/{where.name}", SourceKind.AGAINST, _single_file(path, files))]


def _single_file(path: Path, files: tuple[str, ...]) -> dict[str, str]:
    """A lone file: the exercise's file of the same name, or its only file."""
    if path.name in files:
        name = path.name
    elif len(files) == 1:
        name = files[0]
    else:
        raise ValueError(
            f"--against {path}: name the file as one of the exercise's files ({', '.join(files)})"
        )
    return {name: path.read_text(errors="replace")}
