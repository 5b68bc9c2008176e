"""What a submissions folder holds: one ``Submission`` per student, named by the student's id."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path
    submitted: dt.datetime | None


def discover(folder: Path) -> list[Submission]:
    """Every folder or .zip in ``folder`` is one student's submission, named by the student's id."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir() or entry.suffix == ".zip":
            student = entry.name if entry.is_dir() else entry.stem
            found.append(Submission(student, entry, _submitted_at(entry)))
    return found


def _submitted_at(entry: Path) -> dt.datetime | None:
    """nbgrader's convention: a timestamp.txt in the submission folder; else the file's modification time."""
    stamp = entry / "timestamp.txt"
    if stamp.is_file():
        try:
            moment = dt.datetime.fromisoformat(stamp.read_text().strip())
            return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
        except ValueError:
            return None
    return dt.datetime.fromtimestamp(entry.stat().st_mtime, tz=dt.UTC)
