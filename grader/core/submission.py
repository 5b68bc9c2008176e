"""Staging what is graded: copy an exercise's editable files, and nothing else, into a scratch folder.

A submission is untrusted bytes. Staging never follows a link, never writes outside ``dest``, reads at most
``MAX_FILE_BYTES`` of any file, and turns every problem (a corrupt zip, a link, a path that escapes, a bomb)
into a note for the student instead of an exception: a note explains, the missing file fails every test.
A note is a ``Reason`` (what code decides from: whether the upload is ``invalid``) and a line of text (what
people read); no decision is ever taken from the text, so rewording a message changes no verdict and no key.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 1 << 20
"""A student module larger than 1 MiB is not a module; refuse to unpack it (zip bombs)."""
MAX_ARCHIVE_BYTES = 50 << 20
"""A zip larger than this is refused unread."""
MAX_ENTRIES = 10_000
"""A zip with more members than this is refused (a bomb of empty files, or a central directory bomb)."""
MAX_NOTES = 5
"""Refused members named in the notes; the rest are counted."""


class Reason(StrEnum):
    """Why a file, a member or a whole upload was not taken: what code decides from (the text is for people).

    The codes from ``MISSING`` to ``NO_EXERCISE_FILE`` condemn the whole upload; the others concern one file
    or member, and condemn it only when no file is left to grade.
    """

    MISSING = "missing"
    """The upload does not exist."""
    EMPTY = "empty"
    """An empty folder, file or archive."""
    NOT_AN_UPLOAD = "not-an-upload"
    """Neither a folder nor a zip archive."""
    CORRUPT = "corrupt"
    """A zip that cannot be read."""
    ARCHIVE_TOO_LARGE = "archive-too-large"
    TOO_MANY_MEMBERS = "too-many-members"
    TRAVERSAL = "traversal"
    """A member whose path escapes the submission: the whole archive is suspect."""
    NO_EXERCISE_FILE = "no-exercise-file"
    """None of the exercise's files is in it."""
    ABSENT = "absent"
    """One of the exercise's files is not in it (a valid upload may lack some)."""
    LINK = "link"
    NOT_REGULAR = "not-regular"
    FILE_TOO_LARGE = "file-too-large"
    MEMBER_REFUSED = "member-refused"
    """A zip member with one of the exercise's names, or a path that escapes, was refused."""


@dataclass(frozen=True)
class Note:
    """One thing staging tells the student: a code to decide from, and a line to show."""

    reason: Reason
    text: str


@dataclass(frozen=True)
class Staged:
    """What staging took and what it has to say about the rest."""

    taken: tuple[str, ...]
    """The exercise's files now in ``dest``, in the exercise's order."""
    notes: tuple[Note, ...]
    """What was refused or missing, in the order a student reads it."""
    invalid: Note | None
    """Why the upload cannot be graded at all (a whole-upload reason, or the refusal that left no file);
    None when grading it makes sense: what is missing then fails its tests, as it should."""

    @property
    def texts(self) -> list[str]:
        """The notes as a student reads them."""
        return [note.text for note in self.notes]


def stage(source: Path, files: tuple[str, ...], dest: Path) -> Staged:
    """Copy ``files`` from ``source`` (a folder or a .zip) into ``dest``; say what was refused and whether the
    upload can be graded at all.

    Only regular files with exactly these names are taken. From a zip, a file may sit in one top folder
    (``alice/collectives.py``), as LMS downloads often do. Other names are ignored silently; links, paths
    that escape, oversized or corrupt members are refused with a note that says why.

    Invalid: a path that is neither a folder nor a zip, an empty folder or archive, a corrupt or refused
    archive, a member whose path escapes the submission, or none of ``files`` to take. A submission with
    some of the files is valid.
    """
    dest.mkdir(parents=True, exist_ok=True)
    whole = _whole_upload_problem(source)
    found: set[str] = set()
    if not source.is_dir() and not zipfile.is_zipfile(source):
        text = f"{source} is neither a folder nor a zip archive: nothing was graded"
        return Staged((), (Note(Reason.NOT_AN_UPLOAD, text),), whole or Note(Reason.NOT_AN_UPLOAD, text))
    if source.is_dir():
        found, notes = _from_folder(source, files, dest)
    else:
        try:
            found, notes = _from_zip(source, files, dest)
        except _Unreadable as exc:
            for name in files:  # what a corrupt archive gave before it failed is not graded either
                (dest / name).unlink(missing_ok=True)
            notes = [Note(exc.note.reason, f"{exc.note.text}: nothing was graded")]
            whole = whole or exc.note
    notes += [
        Note(Reason.ABSENT, f"the submission has no {name}" + _near_miss(name, source))
        for name in files
        if name not in found
    ]
    taken = tuple(name for name in files if name in found)
    return Staged(taken, tuple(notes), whole or _nothing_taken(source, files, taken, notes))


def why_invalid(source: Path, files: tuple[str, ...]) -> Note | None:
    """Why ``source`` cannot be graded at all (``Staged.invalid``); None when grading it makes sense."""
    with tempfile.TemporaryDirectory(prefix="distgpu-check-") as folder:
        return stage(source, files, Path(folder)).invalid


def _whole_upload_problem(source: Path) -> Note | None:
    """What condemns the upload before anything is taken from it: missing, empty, not an archive, corrupt."""
    if not source.exists():
        return Note(Reason.MISSING, f"{source} does not exist")
    if source.is_dir():
        if not any(p.name != "timestamp.txt" for p in source.iterdir()):
            return Note(Reason.EMPTY, "the submission is empty")
        return None
    if zipfile.is_zipfile(source):
        return _zip_problem(source)
    if not source.stat().st_size:
        return Note(Reason.EMPTY, "the submission is an empty file")
    if source.suffix == ".zip":
        return Note(Reason.CORRUPT, "the archive is corrupt (not a zip file)")
    return Note(Reason.NOT_AN_UPLOAD, "not a folder or a zip")


def _nothing_taken(
    source: Path, files: tuple[str, ...], taken: tuple[str, ...], notes: list[Note]
) -> Note | None:
    """None when a file was taken; else the first refusal (a link, a bomb, a corrupt archive), or a note
    that none of the files is there and what the upload holds instead."""
    if taken:
        return None
    refusals = [note for note in notes if note.reason is not Reason.ABSENT]
    if refusals:
        return refusals[0]
    held = _contents(source)
    return Note(
        Reason.NO_EXERCISE_FILE,
        f"none of the exercise's files ({', '.join(files)}) is in it; it holds {held}",
    )


class _Unreadable(Exception):
    """The archive cannot be read as a whole (too large, too many members, corrupt): nothing is taken."""

    def __init__(self, note: Note) -> None:
        super().__init__(note.text)
        self.note = note


def _zip_problem(source: Path) -> Note | None:
    """An empty archive, or a member whose path escapes it (path traversal): the whole upload is suspect."""
    try:
        with zipfile.ZipFile(source) as archive:
            names = [info.filename for info in archive.infolist()]
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        return Note(Reason.CORRUPT, f"the archive is corrupt ({exc})")
    if not names:
        return Note(Reason.EMPTY, "the archive is empty")
    escaping = [name for name in names if _escapes(name)]
    if escaping:
        return Note(
            Reason.TRAVERSAL, f"the archive's member {escaping[0]!r} escapes the submission (path traversal)"
        )
    return None


def _escapes(member: str) -> bool:
    """An absolute path, a '..' or a drive letter: extracting it naively would write outside the folder."""
    raw = member.replace("\\", "/")
    parts = PurePosixPath(raw).parts
    return raw.startswith("/") or ".." in parts or bool(parts and ":" in parts[0])


def _contents(source: Path, shown: int = 3) -> str:
    """'README.md, notes.txt' (and 'N more'): what the submission holds instead."""
    if source.is_dir():
        names = sorted(p.name for p in source.iterdir() if p.name != "timestamp.txt")
    else:
        with zipfile.ZipFile(source) as archive:
            names = sorted(info.filename for info in archive.infolist() if not info.is_dir())
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (", ".join(names[:shown]) + more) or "only folders"


def _from_folder(source: Path, files: tuple[str, ...], dest: Path) -> tuple[set[str], list[Note]]:
    found, notes = set(), []
    for name in files:
        path = source / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            notes.append(
                Note(Reason.LINK, f"{name} is a symbolic link: links are not allowed, so it was not taken")
            )
        elif not stat.S_ISREG(info.st_mode):
            notes.append(Note(Reason.NOT_REGULAR, f"{name} is not a regular file, so it was not taken"))
        elif info.st_size > MAX_FILE_BYTES:
            notes.append(
                Note(
                    Reason.FILE_TOO_LARGE,
                    f"{name} is larger than {MAX_FILE_BYTES >> 20} MiB, so it was not taken",
                )
            )
        else:
            shutil.copyfile(path, dest / name, follow_symlinks=False)
            found.add(name)
    return found, notes


def _from_zip(source: Path, files: tuple[str, ...], dest: Path) -> tuple[set[str], list[Note]]:
    """The members with the exercise's names, extracted; ``_Unreadable`` when the archive cannot be read."""
    if source.stat().st_size > MAX_ARCHIVE_BYTES:
        raise _Unreadable(
            Note(Reason.ARCHIVE_TOO_LARGE, f"the archive is larger than {MAX_ARCHIVE_BYTES >> 20} MiB")
        )
    found: set[str] = set()
    refused: list[str] = []
    try:
        with zipfile.ZipFile(source) as archive:
            members = archive.infolist()
            if len(members) > MAX_ENTRIES:
                raise _Unreadable(
                    Note(Reason.TOO_MANY_MEMBERS, f"the archive has more than {MAX_ENTRIES} members")
                )
            for info in members:
                name, problem = _member(info, files)
                if problem:
                    refused.append(f"{info.filename!r}: {problem}")
                elif name and name not in found:
                    problem = _extract(archive, info, dest / name)
                    if problem:
                        refused.append(f"{info.filename!r}: {problem}")
                    else:
                        found.add(name)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        raise _Unreadable(Note(Reason.CORRUPT, f"the archive is corrupt ({exc})")) from exc
    notes = [Note(Reason.MEMBER_REFUSED, f"refused {what}") for what in refused[:MAX_NOTES]]
    if len(refused) > MAX_NOTES:
        notes.append(Note(Reason.MEMBER_REFUSED, f"refused {len(refused) - MAX_NOTES} more members"))
    return found, notes


def _member(info: zipfile.ZipInfo, files: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(the exercise file this member is, or None; why it is refused, or None)."""
    raw = info.filename.replace("\\", "/")
    parts = PurePosixPath(raw).parts
    name = parts[-1] if parts else ""
    if _escapes(info.filename):
        return None, "the path escapes the submission"
    if (info.external_attr >> 28) == 0o12:  # S_IFLNK in the high bits of a Unix member's mode
        return None, "symbolic links are not allowed"
    if name not in files or len(parts) > 2 or info.is_dir():
        return None, None
    if info.file_size > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES >> 20} MiB"
    return name, None


def _extract(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> str | None:
    """Write the member to ``target``, reading no more than the cap whatever its header claims."""
    with archive.open(info) as member:
        data = member.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES >> 20} MiB"
    target.write_bytes(data)
    return None


def _near_miss(name: str, source: Path) -> str:
    """' (found Allreduce.py: names are case-sensitive)' when a folder holds the name in another case."""
    if not source.is_dir():
        return ""
    try:
        others = [p.name for p in source.iterdir() if p.name != name and p.name.lower() == name.lower()]
    except OSError:
        return ""
    return f" (found {others[0]}: names are case-sensitive)" if others else ""


def file_hashes(folder: Path, names: tuple[str, ...]) -> dict[str, str]:
    """``{name: sha256 hex}`` of each file in ``folder``; '<missing>' for one that is not there."""
    hashes = {}
    for name in names:
        path = folder / name
        hashes[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "<missing>"
    return hashes
