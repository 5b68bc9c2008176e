"""The batch's durable state: one JSON record per student, written atomically, keyed by what was graded.

A record's key hashes what decides a grade, and nothing else: the submission's staged files and the staging
verdict (valid, or invalid for which ``Reason``), the suite (references, hidden and public tests, rank
programs, the exercise's course.yml entry), the runner (the image id for Docker) and ``SCORING_VERSION``.
A record with the current key is never graded again; any change to one of those makes it stale. The wording
of a note and the package's version are not in it: rewording a message or releasing the grader regrades
no one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult
from grader.core.submission import Staged

SCORING_VERSION = 1
"""Bump by hand, and say so in the changelog, when a change to the grader alters a grade that the same files,
suite and runner would get (scoring, the harness's verdicts, staging's rules): every record then becomes stale
and its submission is graded again. Changes that alter no grade leave it alone: a release alone regrades no
one."""


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
    digest = hashlib.sha256(f"{exercise!r}\n".encode())
    folders = [course.solution_dir(exercise), course.exercise_dir(exercise)]
    for folder in folders:
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
            if folder == course.exercise_dir(exercise) and path.name in exercise.files:
                continue  # the stubs: what is graded comes from the submission
            digest.update(str(path.relative_to(course.root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def record_key(staged: Staged, files: dict[str, str], suite: str, runner_id: str) -> str:
    """The key a submission's record is filed under: ``SCORING_VERSION``, the suite, the runner, the staging
    verdict (its ``Reason`` code, never its text) and the sha256 of each file staged (``files``, by name)."""
    verdict = staged.invalid.reason if staged.invalid else "valid"
    digest = hashlib.sha256(f"{SCORING_VERSION}\n{suite}\n{runner_id}\n{verdict}\n".encode())
    for name, sha in sorted(files.items()):
        digest.update(f"{name}\0{sha}\n".encode())
    return digest.hexdigest()


def reference_key(suite: str, runner_id: str) -> str:
    """The key the reference's graded result is cached under (``OUT/reference``)."""
    return hashlib.sha256(f"{SCORING_VERSION}\n{suite}\n{runner_id}\n".encode()).hexdigest()


class RecordStore:
    """``folder/<student>.json``; a write is a rename of a fully written file, so a kill loses nothing."""

    def __init__(self, folder: Path, *, sweep: bool = True) -> None:
        """``sweep``: delete partial writes left by a kill. Off where other writers may be mid-write (the
        tasks of a Slurm array share one folder)."""
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for partial in folder.glob(".*.tmp") if sweep else ():  # a write cut short by a kill: never recorded
            partial.unlink(missing_ok=True)

    def get(self, student: str) -> Record | None:
        try:
            data = json.loads((self.folder / f"{student}.json").read_text())
            return Record(
                data["student"],
                data["key"],
                ExerciseResult.from_dict(data["result"]),
                data["submitted"],
                data.get("files", {}),
            )
        except (OSError, ValueError, KeyError):
            return None

    def put(self, record: Record) -> None:
        data: dict[str, Any] = {
            "student": record.student,
            "key": record.key,
            "submitted": record.submitted,
            "files": record.files,
            "result": record.result.to_dict(),
        }
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{record.student}.", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.folder / f"{record.student}.json")

    def all(self) -> list[Record]:
        records = (self.get(p.stem) for p in sorted(self.folder.glob("*.json")))
        return [r for r in records if r is not None]
