"""The batch's durable state: one JSON record per student, written atomically, keyed by what was graded.

A record's key hashes the submission's staged files, the suite (references, hidden and public tests, rank
programs, the exercise's course.yml entry, the grader's version) and the runner (the image id for Docker).
A record with the current key is never graded again; any change to one of those makes it stale. A record
names its student inside, and the reader compares that name with the file's: a record copied or renamed
over another student's is not trusted, and a batch sets it aside and grades that student again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from grader.core.atomic import sweep_temporaries, write_atomic
from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult
from grader.core.submission import file_hashes, stage


@dataclass(frozen=True)
class Record:
    student: str
    key: str
    result: ExerciseResult
    submitted: str | None
    """ISO 8601 time the student submitted, when known."""
    files: dict[str, str] = field(default_factory=dict)
    """sha256 of each file graded, by name (what the class report shows); empty for older records."""


def suite_hash(course: Course, exercise: Exercise) -> str:
    """Everything on the course's side that decides a grade."""
    digest = hashlib.sha256(f"{version('distgpu')}\n{exercise!r}\n".encode())
    folders = [course.solution_dir(exercise), course.exercise_dir(exercise)]
    for folder in folders:
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
            if folder == course.exercise_dir(exercise) and path.name in exercise.files:
                continue  # the stubs: what is graded comes from the submission
            digest.update(str(path.relative_to(course.root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def submission_key(source: Path, exercise: Exercise, suite: str, runner_id: str) -> str:
    """Hash of the files grading would take from ``source``, plus the suite and the runner."""
    return keyed_files(source, exercise, suite, runner_id)[0]


def keyed_files(source: Path, exercise: Exercise, suite: str, runner_id: str) -> tuple[str, dict[str, str]]:
    """(``submission_key``, sha256 of each file grading takes from ``source`` by name, or '<missing>')."""
    digest = hashlib.sha256(f"{suite}\n{runner_id}\n".encode())
    with tempfile.TemporaryDirectory(prefix="distgpu-key-") as folder:
        notes = stage(source, exercise.files, Path(folder)).texts
        files = file_hashes(Path(folder), exercise.files)
    digest.update("\n".join(notes).encode())
    for name, sha in files.items():
        digest.update(f"{name}\0{sha}\n".encode())
    return digest.hexdigest(), files


@dataclass(frozen=True)
class SetAside:
    """A file in the records folder that is not the record its name promises, moved out of the way."""

    name: str
    """The file's name in the records folder (``s03.json``)."""
    reason: str
    moved_to: Path


class RecordStore:
    """``folder/<student>.json``; a write is a rename of a fully written file, so a kill loses nothing. A
    record names its student inside: one found under another student's name is not theirs."""

    SET_ASIDE = "set-aside"
    """The subfolder where ``set_aside_strays`` moves the files that are not what their name says."""

    def __init__(self, folder: Path, *, sweep: bool = True) -> None:
        """``sweep``: remove the partial writes that dead processes of this host left (a live writer's,
        such as a Slurm task's, are never touched); off for a reader."""
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        if sweep:
            sweep_temporaries(folder)

    def get(self, student: str) -> Record | None:
        """``student``'s record; None when there is none, or when the file is not one (it does not parse,
        or it names another student)."""
        return _checked(self.folder / f"{student}.json")[0]

    def put(self, record: Record) -> None:
        data: dict[str, Any] = {
            "student": record.student,
            "key": record.key,
            "submitted": record.submitted,
            "files": record.files,
            "result": record.result.to_dict(),
        }
        write_atomic(self.folder / f"{record.student}.json", json.dumps(data))

    def all(self) -> list[Record]:
        records = (self.get(p.stem) for p in sorted(self.folder.glob("*.json")))
        return [r for r in records if r is not None]

    def set_aside_strays(self) -> list[SetAside]:
        """Move each file that is not the record its name promises into ``SET_ASIDE`` (never deleted: it
        may be the only copy of something), so that its student is graded again; what was moved, and why."""
        moved = []
        for path in sorted(self.folder.glob("*.json")):
            reason = _checked(path)[1]
            if reason is None:
                continue
            target = _free_name(self.folder / self.SET_ASIDE / path.name)
            target.parent.mkdir(exist_ok=True)
            os.replace(path, target)
            moved.append(SetAside(path.name, reason, target))
        return moved


def _checked(path: Path) -> tuple[Record | None, str | None]:
    """The record in ``path``, or None and why it is not one (None, None when there is no file)."""
    try:
        data = json.loads(path.read_text())
        record = Record(
            data["student"],
            data["key"],
            ExerciseResult.from_dict(data["result"]),
            data["submitted"],
            data.get("files", {}),
        )
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"not a readable record ({type(exc).__name__}: {exc})"
    if record.student != path.stem:
        return None, f"it holds the record of {record.student!r}, not of {path.stem!r}"
    return record, None


def _free_name(path: Path) -> Path:
    """``path``, or ``path`` with ``.1``, ``.2``... added when that name is taken."""
    candidates = (path.with_name(f"{path.name}.{n}") if n else path for n in range(1_000_000))
    return next(p for p in candidates if not p.exists())
