"""What a platform reader makes of a class's archive, and the folder of uploads written from it.

A reader (``canvas``, ``moodle``, ``gradescope``, ``github_classroom``) turns the archive's members into
``Claim``s: one student's submission, which members it holds and under which path in the student's upload.
Every member ends in a claim or in the reading's ``leftovers`` with why; ``write_uploads`` then copies each
claim into ``OUT/.intake/<student>/`` (the folders layout that ``discovery`` reads) with a manifest of who
is who, and nothing anywhere else.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from grader.classroom.intake.discovery import Identity, write_manifest
from grader.core import upload
from grader.core.atomic import atomic_path, write_atomic
from grader.core.reasons import Note, Reason
from grader.core.upload import Kind, Member

INTAKE_DIR = ".intake"
"""Under ``--out``: the uploads written from a platform's archive, one folder per student."""
CLASS_ARCHIVE_BYTES = 4 << 30
"""A class's archive larger than this is refused unread."""
CLASS_ENTRIES = 200_000
CLASS_UNPACKED_BYTES = 8 << 30
"""What the members copied out of a class's archive may add up to."""
SAFE_ID = re.compile(r"[\w.@+-]+")
"""A student id that is also a safe file name (records, folders): no '/', no leading '.'."""


@dataclass(frozen=True)
class Claim:
    """One submission as the platform hands it over."""

    student: str
    """The platform's id for the student: the gradebook's id."""
    unit: str
    """What makes it one submission in the archive (Canvas's user id, Moodle's folder, ``submission_<id>``):
    two units for one student are two submissions."""
    members: tuple[tuple[str, str], ...]
    """(the member's path in the archive, its path in the student's upload)."""
    name: str | None = None
    late: bool | None = None
    submitted: dt.datetime | None = None
    notes: tuple[str, ...] = ()


@dataclass
class Reading:
    """A class's archive as one platform reads it."""

    platform: str
    claims: list[Claim] = field(default_factory=list)
    leftovers: list[tuple[str, str]] = field(default_factory=list)
    """(member, why no submission took it)."""


def class_members(source: Path) -> list[Member]:
    """Every member of a class's archive (a zip) or folder, clutter included: each must end somewhere."""
    return upload.members(source, max_entries=CLASS_ENTRIES, max_bytes=CLASS_ARCHIVE_BYTES, clutter=True)


def member_bytes(source: Path, member_path: str, limit: int) -> bytes:
    """The whole of one member of a class's archive or folder; ``ValueError`` when it is over ``limit``."""
    with _opened(source, member_path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{source}: {member_path} is larger than {limit >> 20} MiB")
    return data


@contextmanager
def _opened(source: Path, member_path: str) -> Iterator[IO[bytes]]:
    """A member of a class's archive or folder, opened for reading; never through a link."""
    if source.is_dir():
        with os.fdopen(os.open(source / member_path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
            yield handle
        return
    with zipfile.ZipFile(source) as archive, archive.open(member_path) as handle:
        yield handle


def write_uploads(source: Path, reading: Reading, out: Path) -> tuple[Path, list[tuple[str, str]]]:
    """Copy each claim into ``out/.intake/<student>/`` (emptied first) with the manifest; return the folder
    and every member no upload took, with why (the reading's leftovers, and members that could not be
    copied: a link, a path that escapes)."""
    folder = out / INTAKE_DIR
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    leftovers = list(reading.leftovers)
    by_student: dict[str, list[Claim]] = {}
    for claim in reading.claims:
        by_student.setdefault(safe_id(claim.student), []).append(claim)
    kinds = {m.path: m for m in class_members(source)}
    budget = _Budget(CLASS_UNPACKED_BYTES)
    rows = {}
    for student, claims in sorted(by_student.items()):
        units = sorted({c.unit for c in claims})
        kept = [c for c in claims if c.unit == units[0]]
        target = folder / student
        target.mkdir()
        copied: dict[str, str] = {}
        clashes: list[str] = []
        for claim in kept:
            leftovers += _copy_members(source, claim, kinds, (target, copied, clashes), budget)
        rows[student] = _identity(kept[0], units, [c for c in claims if c.unit != units[0]], clashes)
        if kept[0].submitted is not None:
            write_atomic(target / "timestamp.txt", kept[0].submitted.isoformat())
    write_manifest(folder, reading.platform, rows)
    return folder, leftovers


def safe_id(student: str) -> str:
    """``student`` where it is a safe file name; else its unsafe characters as '_' (never '..' or '/')."""
    if SAFE_ID.fullmatch(student) and not student.startswith("."):
        return student
    return "_" + re.sub(r"[^\w.@+-]", "_", student).lstrip(".")


def _identity(claim: Claim, units: list[str], others: list[Claim], clashes: list[str]) -> Identity:
    problem = None
    if clashes:
        text = f"two files of the archive are one file of the upload: {'; '.join(clashes)}: keep one"
        problem = (Reason.AMBIGUOUS.value, text)
    if len(units) > 1:
        text = (
            f"two submissions for {claim.student} in the archive ({', '.join(units)}): neither is graded "
            "until one is removed"
        )
        problem = (Reason.DUPLICATE.value, text)
    entries = tuple(m for c in (claim, *others) for m, _ in c.members)
    submitted = claim.submitted.isoformat() if claim.submitted else None
    return Identity(claim.name, claim.late, submitted, claim.notes, entries, problem)


@dataclass
class _Budget:
    """What the members still to copy out of a class's archive may add up to."""

    left: int

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            text = f"the archive unpacks to more than {CLASS_UNPACKED_BYTES >> 30} GiB"
            raise upload.Unreadable(Note(Reason.ARCHIVE_TOO_LARGE, text))


def _copy_members(
    source: Path,
    claim: Claim,
    kinds: dict[str, Member],
    into: tuple[Path, dict[str, str], list[str]],
    budget: _Budget,
) -> list[tuple[str, str]]:
    """Copy ``claim``'s members into the student's folder; the ones refused, with why. ``into``: the folder,
    what was copied there (path in the upload -> member), and where to say that two members would be one
    file (a Moodle student's folder and flat file of one name): the upload is then ambiguous."""
    target, copied, clashes = into
    refused = []
    for member_path, relative in claim.members:
        member = kinds.get(member_path)
        inner = PurePosixPath(relative)
        if member is None or member.kind is not Kind.FILE or upload.escapes(relative) or not inner.parts:
            why = "a symbolic link" if member and member.kind is Kind.LINK else "not a regular file"
            refused.append((member_path, f"{why}: not copied for {claim.student}"))
            continue
        if relative in copied:
            clashes.append(f"{copied[relative]} and {member_path} as {relative}")
            continue
        copied[relative] = member_path
        budget.spend(member.size)
        destination = target.joinpath(*inner.parts)
        destination.parent.mkdir(parents=True, exist_ok=True)
        _copy_member(source, member_path, destination)
    return refused


def _copy_member(source: Path, member_path: str, destination: Path) -> None:
    with _opened(source, member_path) as data, atomic_path(destination) as partial:
        with open(partial, "wb") as copy:
            shutil.copyfileobj(data, copy)
