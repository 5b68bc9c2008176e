"""Staging what is graded: copy an exercise's editable files, and nothing else, into a scratch folder.

A submission is untrusted bytes: a folder, a zip, a tar archive or a single file, read by ``upload`` under
the same limits whatever its kind. Staging never follows a link, never writes outside ``dest``, and turns
every problem (a corrupt archive, a link, a path that escapes, a bomb) into a note for the student instead
of an exception: a note explains, the missing file fails every test. A note is a ``Reason`` (what code
decides from: whether the upload is ``invalid``) and a line of text (what people read).

One staging rule, for every kind of upload alike:

- The exercise's files are looked for at the top of the upload or in one top folder ('alice/memory.py'),
  never deeper. A copy there is a candidate under its exact name or renamed as browsers and LMSs rename a
  second download or upload (``memory (1).py``, ``memory-1.py``).
- The candidates must share one folder: copies in two folders (a zip holding the stub in one top folder and
  a solution in another) make the upload ``invalid``, and the reason names them.
- In that folder the exact name wins, and renamed copies beside it are left over. Without it, exactly one
  renamed copy is taken, with a note; two or more make the upload ``invalid``, naming them. So does the
  same name twice in one archive.
- Every other file of the upload is left over, and one note lists the leftovers: nothing is dropped
  without a word (but clutter, ``upload.is_clutter``, and the course's own files beside the exercise's:
  a student grading their checkout has the README and the public tests in the folder).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.core import upload
from grader.core.reasons import REFUSALS, Note, Reason
from grader.core.upload import MAX_FILE_BYTES, Kind, Member, Unreadable

__all__ = [
    "MAX_FILE_BYTES",
    "Note",
    "Reason",
    "Staged",
    "file_hashes",
    "renamed_copy_of",
    "stage",
    "why_invalid",
]

MAX_NOTES = 5
"""Refused or left-over members named in a note; the rest are counted."""
RENAMED = r"(?: \(\d+\)|-\d+)"
"""What a browser (' (1)') or an LMS ('-1', Canvas's ``Attachment.make_unique_filename``) inserts before
the extension of a second copy of a name."""


@dataclass(frozen=True)
class Staged:
    """What staging took and what it has to say about the rest."""

    taken: tuple[str, ...]
    """The exercise's files now in ``dest``, in the exercise's order."""
    notes: tuple[Note, ...]
    """What was refused, renamed, missing or left over, in the order a student reads it."""
    invalid: Note | None
    """Why the upload cannot be graded at all (a whole-upload reason, or the refusal that left no file);
    None when grading it makes sense: what is missing then fails its tests, as it should."""
    leftovers: tuple[str, ...] = ()
    """The upload's files that were not taken, by their path in it (clutter aside)."""

    @property
    def texts(self) -> list[str]:
        """The notes as a student reads them."""
        return [note.text for note in self.notes]


def stage(source: Path, files: tuple[str, ...], dest: Path, given: frozenset[str] = frozenset()) -> Staged:
    """Copy ``files`` from ``source`` into ``dest`` by the staging rule; say what was refused, renamed,
    missing or left over, and whether the upload can be graded at all. ``given``: the names of the files
    the course ships beside ``files`` (``Course.given_files``), never listed as left over."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        whole = _whole_upload_problem(source, files)
        if whole is not None:
            raise Unreadable(whole)
        choice = _choose(upload.members(source), files, given)
        if choice.invalid is not None and choice.invalid.reason is Reason.AMBIGUOUS:
            return Staged((), (choice.invalid,), choice.invalid, choice.leftovers)
        taken, refused = _copy(source, choice.taken, dest)
    except Unreadable as exc:
        for name in files:  # what a corrupt archive gave before it failed is not graded either
            (dest / name).unlink(missing_ok=True)
        unread = Note(exc.note.reason, f"{exc.note.text}: nothing was graded")
        return Staged((), (unread, *_absent(files, (), [])), exc.note)
    members = [m for m in choice.members if m.kind is not Kind.ESCAPING]
    notes = [
        *choice.notes,
        *refused,
        *_absent(files, taken, members),
        *_leftover_note(choice.leftovers, files),
    ]
    invalid = choice.invalid or _nothing_taken(files, taken, notes, members)
    return Staged(tuple(n for n in files if n in taken), tuple(notes), invalid, choice.leftovers)


def why_invalid(source: Path, files: tuple[str, ...]) -> Note | None:
    """Why ``source`` cannot be graded at all (``Staged.invalid``); None when grading it makes sense."""
    with tempfile.TemporaryDirectory(prefix="distgpu-check-") as folder:
        return stage(source, files, Path(folder)).invalid


def renamed_copy_of(name: str, files: tuple[str, ...]) -> str | None:
    """The exercise file ``name`` is a renamed copy of ('memory.py' for 'memory (1).py' or 'memory-1.py')."""
    for original in files:
        path = PurePosixPath(original)
        if re.fullmatch(re.escape(path.stem) + RENAMED + re.escape(path.suffix), name):
            return original
    return None


def _whole_upload_problem(source: Path, files: tuple[str, ...]) -> Note | None:
    """What condemns the upload before anything is listed: missing, empty, not an upload at all."""
    if not source.exists():
        return Note(Reason.MISSING, f"{source} does not exist")
    if source.is_dir():
        return None
    if not source.stat().st_size:
        return Note(Reason.EMPTY, "the submission is an empty file")
    if zipfile.is_zipfile(source) or upload.is_tar_name(source):
        return None
    if source.suffix.lower() == ".zip":
        return Note(Reason.CORRUPT, "the archive is corrupt (not a zip file)")
    if source.name in files or renamed_copy_of(source.name, files):
        return None
    named = ", ".join(files)
    return Note(
        Reason.NOT_AN_UPLOAD,
        f"not a folder, a zip or tar archive, or a file named like one of the exercise's files ({named})",
    )


# ---------------------------------------------------------------------------------------------------------
# the staging rule


@dataclass
class _Choice:
    members: list[Member]
    taken: dict[str, Member] = field(default_factory=dict)
    """Exercise file name -> the member taken for it."""
    notes: list[Note] = field(default_factory=list)
    leftovers: tuple[str, ...] = ()
    invalid: Note | None = None


def _choose(members: list[Member], files: tuple[str, ...], given: frozenset[str]) -> _Choice:
    """Which member is which of ``files``, by the staging rule (the module's docstring)."""
    if not members:
        raise Unreadable(Note(Reason.EMPTY, "the submission is empty"))
    choice = _Choice(members)
    escaping = [m.path for m in members if m.kind is Kind.ESCAPING]
    choice.notes += _refused_paths(escaping)
    if escaping:
        text = f"the archive's member {escaping[0]!r} escapes the submission (path traversal)"
        choice.invalid = Note(Reason.TRAVERSAL, text)
    candidates = {name: _candidates(members, name, files) for name in files}
    folders = sorted({m.folder for found in candidates.values() for m in found})
    if len(folders) > 1:
        paths = ", ".join(m.path for found in candidates.values() for m in found)
        text = f"the exercise's files are in more than one folder ({paths}): keep one copy, in one folder"
        choice.invalid = Note(Reason.AMBIGUOUS, text)
    for name, found in candidates.items():
        if choice.invalid is None or choice.invalid.reason is not Reason.AMBIGUOUS:
            _pick(choice, name, found)
    taken = {m.path for m in choice.taken.values()}
    choice.leftovers = tuple(
        m.path
        for m in members
        if m.kind is not Kind.ESCAPING and m.path not in taken and not _is_given(m, given)
    )
    return choice


def _is_given(member: Member, given: frozenset[str]) -> bool:
    """A course file at the top of the upload or in its one top folder, where the exercise's files are."""
    return member.name in given and len(member.parts) <= 2


def _candidates(members: list[Member], name: str, files: tuple[str, ...]) -> list[Member]:
    """The members at the top or in a top folder named ``name``, or renamed copies of it."""
    return [
        m
        for m in members
        if m.kind is not Kind.ESCAPING
        and len(m.parts) <= 2
        and (m.name == name or renamed_copy_of(m.name, files) == name)
    ]


def _pick(choice: _Choice, name: str, found: list[Member]) -> None:
    """Take the exact name, else the one renamed copy; two of either make the upload ``invalid``."""
    exact = [m for m in found if m.name == name]
    renamed = [m for m in found if m.name != name]
    if len(exact) > 1:
        paths = ", ".join(m.path for m in exact)
        choice.invalid = Note(
            Reason.AMBIGUOUS, f"{name} is in the upload {len(exact)} times ({paths}): keep one"
        )
    elif exact:
        choice.taken[name] = exact[0]
    elif len(renamed) == 1:
        choice.taken[name] = renamed[0]
        text = f"took {renamed[0].path} as {name} (a renamed copy: the upload has no {name})"
        choice.notes.append(Note(Reason.RENAMED, text))
    elif renamed:
        paths = ", ".join(m.path for m in renamed)
        text = f"{paths} are renamed copies of {name}, and the upload has no {name}: keep one, named {name}"
        choice.invalid = Note(Reason.AMBIGUOUS, text)


def _copy(source: Path, taken: dict[str, Member], dest: Path) -> tuple[set[str], list[Note]]:
    """Write each taken member to ``dest`` under its exercise name; refuse links, odd files and bombs."""
    refused = []
    for member in taken.values():
        if member.kind is Kind.LINK:
            text = f"{member.path} is a symbolic link: symbolic links are not allowed, so it was not taken"
            refused.append(Note(Reason.LINK, text))
        elif member.kind is Kind.OTHER:
            refused.append(
                Note(Reason.NOT_REGULAR, f"{member.path} is not a regular file, so it was not taken")
            )
    readable = [m for m in taken.values() if m.kind is Kind.FILE and m.size <= MAX_FILE_BYTES]
    chunks = upload.read(source, readable)
    copied = set()
    for name, member in taken.items():
        data = chunks.get(member.path) if member.kind is Kind.FILE else None
        if member.kind is Kind.FILE and data is None:
            text = f"{member.path} is larger than {MAX_FILE_BYTES >> 20} MiB, so it was not taken"
            refused.append(Note(Reason.FILE_TOO_LARGE, text))
        elif data is not None:
            (dest / name).write_bytes(data)
            copied.add(name)
    return copied, refused


def _refused_paths(paths: list[str]) -> list[Note]:
    notes = [Note(Reason.MEMBER_REFUSED, f"refused {p!r}: the path escapes the submission") for p in paths]
    more = len(notes) - MAX_NOTES
    return notes[:MAX_NOTES] + (
        [Note(Reason.MEMBER_REFUSED, f"refused {more} more members")] if more > 0 else []
    )


def _absent(files: tuple[str, ...], taken: set[str] | tuple[str, ...], members: list[Member]) -> list[Note]:
    return [
        Note(Reason.ABSENT, f"the submission has no {name}" + _near_miss(name, members))
        for name in files
        if name not in taken
    ]


def _near_miss(name: str, members: list[Member]) -> str:
    """' (found Allreduce.py: names are case-sensitive)' when the upload holds the name in another case."""
    others = [
        m.path for m in members if len(m.parts) <= 2 and m.name != name and m.name.lower() == name.lower()
    ]
    return f" (found {others[0]}: names are case-sensitive)" if others else ""


def _leftover_note(leftovers: tuple[str, ...], files: tuple[str, ...]) -> list[Note]:
    if not leftovers:
        return []
    more = f" and {len(leftovers) - MAX_NOTES} more" if len(leftovers) > MAX_NOTES else ""
    named = ", ".join(leftovers[:MAX_NOTES]) + more
    return [Note(Reason.LEFTOVER, f"not taken (the exercise takes {', '.join(files)} only): {named}")]


def _nothing_taken(
    files: tuple[str, ...], taken: set[str], notes: list[Note], members: list[Member]
) -> Note | None:
    """None when a file was taken; else the first refusal (a link, a bomb, a path that escapes), or a note
    that none of the files is there and what the upload holds instead."""
    if taken:
        return None
    refusals = [note for note in notes if note.reason in REFUSALS]
    if refusals:
        return refusals[0]
    names = sorted(m.path for m in members)
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    held = ", ".join(names[:3]) + more
    return Note(
        Reason.NO_EXERCISE_FILE,
        f"none of the exercise's files ({', '.join(files)}) is in it; it holds {held}",
    )


def file_hashes(folder: Path, names: tuple[str, ...]) -> dict[str, str]:
    """``{name: sha256 hex}`` of each file in ``folder``; '<missing>' for one that is not there."""
    hashes = {}
    for name in names:
        path = folder / name
        hashes[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "<missing>"
    return hashes
