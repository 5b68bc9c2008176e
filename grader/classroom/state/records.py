"""The batch's durable state: one JSON record per student, written atomically, keyed by what was graded.

A record's key hashes what decides a grade, and nothing else: the submission's staged files and the staging
verdict (valid, or invalid for which ``Reason``), the suite (references, hidden and public tests, rank
programs, the exercise's course.yml entry), the runner (the image id for Docker) and ``SCORING_VERSION``.
A record with the current key is never graded again; any change to one of those makes it stale. The wording
of a note and the package's version are not in it: rewording a message or releasing the grader regrades
no one. A record names its student inside, and the reader compares that name with the file's: a record
copied or renamed over another student's is not trusted, and a batch sets it aside and grades that student
again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.core.atomic import sweep_temporaries, write_atomic
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

    def set_aside_strays(self, aside: Path) -> list[SetAside]:
        """Move each file that is not the record its name promises into ``aside``, as ``stray-<name>``
        (never deleted: it may be the only copy of something), so that its student is graded again; what
        was moved, and why."""
        moved = []
        for path in sorted(self.folder.glob("*.json")):
            reason = _checked(path)[1]
            if reason is None:
                continue
            target = _free_name(aside / f"stray-{path.name}")
            aside.mkdir(parents=True, exist_ok=True)
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
