"""What a submissions folder holds: one row per student, named by the student's id.

Every entry of the folder is a row. A folder, a zip or a tar archive (any case: ``UPPER.ZIP``,
``bob.tar.gz``) or a single file is a student's upload, named by the entry without its archive suffix
(``alice``, ``UPPER``, ``bob``; ``memory`` for ``memory.py``): staging then decides whether it can be
graded, and a file that is none of these (``notes.txt``) gets its ``invalid`` row from staging's reason.
Hidden entries (``.DS_Store``) are no one's upload: ``hidden_entries`` names them for the batch's summary.

One student, one upload: two entries of one student (``alice/`` and ``alice.zip``) make one row that names
both, ``invalid`` (``Reason.DUPLICATE``), and neither is graded until one is removed. This is decided here,
before any grading starts.

A folder that ``intake`` wrote from a platform's archive carries a manifest (``MANIFEST``): for each
student, the name, the platform, its late flag, the archive members the upload came from, and what the
intake has to tell the student. ``discover`` reads it into the rows.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from grader.core.atomic import write_atomic
from grader.core.reasons import Note, Reason
from grader.core.upload import TAR_SUFFIXES

MANIFEST = ".distgpu-intake.json"
"""Written by ``intake`` into the folder it made from a platform's archive; never a student's upload."""


@dataclass(frozen=True)
class Submission:
    student: str
    """The gradebook's id: the entry's name, or the platform's id (Canvas user id, Moodle participant id,
    Gradescope sid or email, GitHub login)."""
    path: Path
    submitted: dt.datetime | None
    name: str | None = None
    """The student's name as the platform gives it (None in a plain folder)."""
    platform: str = "folders"
    """Where the id comes from: folders, canvas, moodle, gradescope or classroom."""
    late: bool | None = None
    """The platform's own late flag (Canvas's LATE; Gradescope's submission time against ``--due``)."""
    problem: Note | None = None
    """Why this row cannot be graded, known before staging (two uploads of one student)."""
    notes: tuple[str, ...] = ()
    """What the intake tells the student (a late flag, a file of theirs it could not read)."""
    entries: tuple[str, ...] = ()
    """What the row was made from: the folder's entries, or the platform archive's members."""


def discover(folder: Path) -> list[Submission]:
    """Every entry of ``folder`` but hidden ones, as rows, one per student, in the students' name order."""
    platform, manifest = _manifest(folder)
    by_student: dict[str, list[Path]] = {}
    for entry in sorted(folder.iterdir()):
        if not entry.name.startswith("."):
            by_student.setdefault(student_of(entry), []).append(entry)
    rows = []
    for student, entries in sorted(by_student.items()):
        row = _row(student, entries[0], platform, manifest.get(student))
        if len(entries) > 1:
            names = ", ".join(e.name for e in entries)
            text = f"two uploads for {student} ({names}): neither is graded until one is removed"
            row = replace(row, problem=Note(Reason.DUPLICATE, text), entries=tuple(e.name for e in entries))
        rows.append(row)
    return rows


def hidden_entries(folder: Path) -> list[str]:
    """The folder's hidden entries ('.DS_Store'): no one's upload, named so that nothing goes unsaid."""
    return sorted(e.name for e in folder.iterdir() if e.name.startswith(".") and e.name != MANIFEST)


def student_of(entry: Path) -> str:
    """'alice' for alice/, alice.zip, ALICE.ZIP is 'ALICE', bob.tar.gz 'bob', memory.py 'memory'."""
    if entry.is_dir():
        return entry.name
    lower = entry.name.lower()
    for suffix in (*TAR_SUFFIXES, ".zip"):
        if lower.endswith(suffix) and len(lower) > len(suffix):
            return entry.name[: -len(suffix)]
    return entry.stem or entry.name


@dataclass(frozen=True)
class Identity:
    """What a platform's archive says of one student's upload: a row of the manifest."""

    name: str | None = None
    late: bool | None = None
    submitted: str | None = None
    """ISO 8601, where the platform gives the time (Gradescope's ``:created_at:``)."""
    notes: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    problem: tuple[str, str] | None = None
    """(``Reason`` code, text) when the archive holds two submissions for the id."""


def write_manifest(folder: Path, platform: str, rows: dict[str, Identity]) -> None:
    """The manifest of a folder made from ``platform``'s archive, written whole or not at all."""
    data = {"platform": platform, "students": {student: asdict(row) for student, row in rows.items()}}
    write_atomic(folder / MANIFEST, json.dumps(data, indent=1, ensure_ascii=False))


def _manifest(folder: Path) -> tuple[str, dict[str, Identity]]:
    """(platform, rows by student) of ``folder``'s manifest; ('folders', {}) without one."""
    path = folder / MANIFEST
    if not path.is_file():
        return "folders", {}
    data = json.loads(path.read_text())
    return data["platform"], {student: _identity(row) for student, row in data["students"].items()}


def _identity(row: dict[str, Any]) -> Identity:
    problem = row.get("problem")
    return Identity(
        name=row.get("name"),
        late=row.get("late"),
        submitted=row.get("submitted"),
        notes=tuple(row.get("notes", ())),
        entries=tuple(row.get("entries", ())),
        problem=(problem[0], problem[1]) if problem else None,
    )


def _row(student: str, entry: Path, platform: str, known: Identity | None) -> Submission:
    if known is None:
        return Submission(student, entry, _submitted_at(entry), platform=platform, entries=(entry.name,))
    return Submission(
        student=student,
        path=entry,
        submitted=dt.datetime.fromisoformat(known.submitted) if known.submitted else None,
        name=known.name,
        platform=platform,
        late=known.late,
        problem=Note(Reason(known.problem[0]), known.problem[1]) if known.problem else None,
        notes=known.notes,
        entries=known.entries,
    )


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
