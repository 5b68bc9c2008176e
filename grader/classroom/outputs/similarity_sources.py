"""What a class is compared with besides itself: the course's reference, and the known sources an instructor
names with ``--against`` (prior years' submissions, a solution found online).

A source is compared with every student, never with another source, and never counts as common code. Its
label holds a ``/`` (``solutions/02_ring_tree``, ``2024/alice``), which no student id does: a submission
is a folder or a zip in the submissions folder, named by the id.
"""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from grader.classroom.intake.discovery import discover
from grader.classroom.intake.platforms import read_submissions as read_uploads
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError
from grader.core.submission import stage
from grader.core.upload import is_tar_name


class SourceKind(Enum):
    REFERENCE = "reference"
    """The course's own solution: a match with it is reported as such."""
    AGAINST = "against"
    """Named with ``--against``: a single file or submission (``forum/leak.py``)."""
    AGAINST_STUDENT = "against-student"
    """A submission in a folder or download named with ``--against``: its label ends with a student's id
    (``2024/alice``), which ``--anonymize`` replaces."""


@dataclass(frozen=True)
class Source:
    label: str
    kind: SourceKind
    files: dict[str, str]
    """The exercise's files it holds, by name: their text."""


def known_sources(course: Course, exercise: Exercise, against: Sequence[Path]) -> list[Source]:
    """The reference, then every submission in each ``against`` path (``UsageError`` when one holds none of
    the exercise's files, or two sources would have the same label)."""
    solutions = course.solution_dir(exercise)
    reference = {n: (solutions / n).read_text() for n in exercise.files if (solutions / n).is_file()}  # ours
    sources = [Source(str(solutions.relative_to(course.root)), SourceKind.REFERENCE, reference)]
    for path in against:
        found = _sources_in(path, course, exercise)
        if not any(source.files for source in found):
            names = ", ".join(exercise.files)
            raise UsageError(f"--against {path}: holds none of the exercise's files ({names})")
        sources += found
    labels = [s.label for s in sources]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise UsageError(f"--against: two sources named {repeated[0]}; give each folder its own name")
    return [s for s in sources if s.files]


def read_submissions(exercise: Exercise, submissions: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Each student's files as grading reads them, by student and name (``read_files``)."""
    return {student: read_files(source, exercise.files) for student, source in submissions.items()}


def read_files(source: Path, files: tuple[str, ...]) -> dict[str, str]:
    """The exercise's files in ``source`` (a folder, an archive or a file), by name, staged as grading
    stages them: only those files, no link followed; those missing or refused are left out."""
    with tempfile.TemporaryDirectory(prefix="distgpu-similarity-") as folder:
        staged = stage(source, files, Path(folder))
        return {name: (Path(folder) / name).read_text(errors="replace") for name in staged.taken}


def _sources_in(path: Path, course: Course, exercise: Exercise) -> list[Source]:
    """``path`` as known sources: what ``grade batch`` reads (a folder of submissions, a platform's
    download: Canvas, Moodle, Gradescope, GitHub Classroom), or one submission (a folder holding the
    exercise's files, an archive of them, a single file)."""
    if not path.exists():
        raise UsageError(f"--against {path}: no such file or folder")
    where, files = path.resolve(), exercise.files
    single = f"{where.parent.name}/{where.name}"
    if path.is_dir() and not any((path / name).is_file() for name in files):
        return _class_of(path, course, exercise)
    if zipfile.is_zipfile(path) or is_tar_name(path):
        try:
            return _class_of(path, course, exercise)
        except UsageError:  # in no platform's layout: one student's archive
            return [Source(single, SourceKind.AGAINST, read_files(path, files))]
    taken = read_files(path, files)
    return [
        Source(single, SourceKind.AGAINST, taken if taken or path.is_dir() else _single_file(path, files))
    ]


def _class_of(path: Path, course: Course, exercise: Exercise) -> list[Source]:
    """Every submission ``grade batch`` would find in ``path``, labelled ``FOLDER/student``."""
    with tempfile.TemporaryDirectory(prefix="distgpu-against-") as out:
        intake = read_uploads(path, course=course, exercise=exercise, out=Path(out))
        return [
            Source(
                f"{path.resolve().name}/{s.student}",
                SourceKind.AGAINST_STUDENT,
                read_files(s.path, exercise.files),
            )
            for s in discover(intake.folder)
        ]


def _single_file(path: Path, files: tuple[str, ...]) -> dict[str, str]:
    """A lone file: the exercise's file of the same name, or its only file."""
    if path.name in files:
        name = path.name
    elif len(files) == 1:
        name = files[0]
    else:
        raise UsageError(
            f"--against {path}: name the file as one of the exercise's files ({', '.join(files)})"
        )
    return {name: path.read_text(errors="replace")}
