"""``grade batch ARCHIVE_OR_FOLDER``: which platform's download it is, and the folder of uploads to grade.

A folder of uploads named by student id is graded as it is (``discovery``). A platform's download (Canvas,
Moodle, Gradescope: a zip, or the folder it unzips to; GitHub Classroom: the folder ``gh classroom clone``
makes) is read by that platform's reader into ``OUT/.intake/``, one upload per student named by the
platform's id, with a manifest of names and late flags (``claims.write_uploads``); every member of the
download that no upload took is named in ``OUT/intake.txt``. The detection picks the platform whose names
most of the members follow; ``--from`` says it instead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from grader.classroom.intake import canvas, github_classroom, gradescope, moodle
from grader.classroom.intake.claims import Reading, class_members, write_uploads
from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError
from grader.core.upload import Member, Unreadable, is_clutter

PLATFORMS = {
    "canvas": 'Canvas\'s "Download Submissions"',
    "moodle": 'Moodle\'s "Download all submissions"',
    "gradescope": 'Gradescope\'s "Export Submissions"',
    "classroom": "GitHub Classroom's student repositories (gh classroom clone student-repos)",
    "folders": "a folder of uploads named by student id",
}
"""``--from``'s choices, and how the batch's first line names each."""
LEFTOVERS = "intake.txt"
"""In ``--out``: the download's members that no upload took, each with why."""


@dataclass(frozen=True)
class Intake:
    folder: Path
    """The folders layout to grade: the source itself, or ``OUT/.intake``."""
    platform: str
    detected: str
    """One line: what was read, and how it was told."""
    leftovers: tuple[tuple[str, str], ...] = ()
    """(member, why) for each member of the download that no upload took."""


def read_submissions(
    source: Path,
    *,
    course: Course,
    exercise: Exercise,
    out: Path,
    platform: str | None = None,
    due: dt.datetime | None = None,
    roster: Collection[str] = (),
) -> Intake:
    """The uploads in ``source`` as ``platform`` (detected when None) hands them over; ``UsageError`` for a
    source that is no platform's download nor a folder, or an archive that cannot be read."""
    if not source.exists():
        raise UsageError(f"{source}: no such folder or archive of submissions")
    told = "as --from says" if platform else "detected"
    platform = platform or detect(source)
    if platform == "folders":
        if not source.is_dir():
            raise UsageError(f"{source}: --from folders takes a folder of uploads, not an archive")
        return Intake(source, platform, f"{told}: {PLATFORMS[platform]} ({source})")
    try:
        listed = _members(source)
        members = [m for m in listed if not is_clutter(m)]
        reading = _read(platform, source, members, course, exercise, due, roster)
        reading.leftovers += [(m.path, "macOS, editor or git clutter") for m in listed if is_clutter(m)]
        folder, leftovers = write_uploads(source, reading, out)
    except Unreadable as exc:
        raise UsageError(f"{source}: {exc.note.text}") from None
    students = len({c.student for c in reading.claims})
    line = f"{told}: {PLATFORMS[platform]} ({source}): {students} students, {len(members)} files"
    _write_leftovers(out / LEFTOVERS, line, leftovers)
    return Intake(folder, platform, line, tuple(leftovers))


def detect(source: Path) -> str:
    """The platform whose download ``source`` is; 'folders' for a plain folder of uploads."""
    if github_classroom.looks_like(source) > 0.5:
        return "classroom"
    members = [m for m in _members(source) if not is_clutter(m)]
    shares = {
        "gradescope": gradescope.looks_like(members),
        "moodle": moodle.looks_like(members),
        "canvas": canvas.looks_like(members),
    }
    best = max(shares, key=lambda name: shares[name])
    if shares[best] > 0.5:
        return best
    if source.is_dir():
        return "folders"
    raise UsageError(
        f"{source}: an archive in no platform's layout (Canvas, Moodle, Gradescope); unzip it into a folder "
        "of uploads named by student id, or say which with --from"
    )


def _members(source: Path) -> list[Member]:
    try:
        return class_members(source)
    except Unreadable as exc:
        raise UsageError(f"{source}: {exc.note.text}") from None


def _read(
    platform: str,
    source: Path,
    members: list[Member],
    course: Course,
    exercise: Exercise,
    due: dt.datetime | None,
    roster: Collection[str],
) -> Reading:
    if platform == "canvas":
        return canvas.read(members, roster)
    if platform == "moodle":
        return moodle.read(members)
    if platform == "gradescope":
        try:
            return gradescope.read(source, members, due)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if github_classroom.root_of(source) is None:
        raise UsageError(
            f"{source}: no <assignment>-submissions folder of `gh classroom clone student-repos`"
        )
    given = frozenset(p.name for p in course.exercise_dir(exercise).iterdir()) - set(exercise.files)
    return github_classroom.read(source, members, exercise.dirname, given)


def _write_leftovers(path: Path, detected: str, leftovers: list[tuple[str, str]]) -> None:
    """``OUT/intake.txt``: what was read, then each member no upload took and why; written whole."""
    lines = [
        detected,
        f"{len(leftovers)} member(s) in no upload:",
        *(f"  {m}: {why}" for m, why in leftovers),
    ]
    write_atomic(path, "\n".join(lines) + "\n")
