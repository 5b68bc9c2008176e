"""Reading an upload without unpacking it: its members (path, kind, size), then the bytes of the few that
staging takes.

An upload is a folder, a zip, a tar archive (plain, gzip, bzip2 or xz) or a single file. Every kind is read
under the same limits: at most ``MAX_ENTRIES`` members, an archive of at most ``MAX_ARCHIVE_BYTES`` (a tar
that unpacks to at most ``MAX_UNPACKED_BYTES``), and no more than ``MAX_FILE_BYTES`` read of any member,
whatever its header claims. Nothing is written: a member's bytes come back to the caller, and no link is
followed. What cannot be read at all raises ``Unreadable`` with the note that says why.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Protocol

from grader.core.reasons import Note, Reason

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MAX_FILE_BYTES = 1 << 20
"""A student module larger than 1 MiB is not a module; refuse to unpack it (zip bombs)."""
MAX_ARCHIVE_BYTES = 50 << 20
"""An archive larger than this is refused unread."""
MAX_UNPACKED_BYTES = 200 << 20
"""A tar archive is read as a stream: one that unpacks to more than this is refused (a compression bomb)."""
MAX_ENTRIES = 10_000
"""An upload with more members than this is refused (a bomb of empty files, or a central directory bomb)."""

TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
"""Names of tar archives, in any case ('alice.TAR.GZ')."""
CLUTTER_FOLDERS = frozenset({"__MACOSX", ".git", "__pycache__", ".ipynb_checkpoints", ".pytest_cache"})
"""Folders an operating system, an editor or git adds: never a student's work, never listed."""
CLUTTER_FILES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})
ROOT_METADATA = "timestamp.txt"
"""nbgrader's submission time, at the top of a submission folder: read by discovery, not a student file."""


class Kind(Enum):
    FILE = "file"
    LINK = "link"
    OTHER = "other"
    """A device, a fifo, a socket: not a regular file."""
    ESCAPING = "escaping"
    """An archive member whose path escapes the submission (absolute, '..', a drive letter)."""


@dataclass(frozen=True)
class Member:
    """One file of an upload, named by its path inside it ('alice/memory.py', '/'-separated)."""

    path: str
    kind: Kind
    size: int

    @property
    def parts(self) -> tuple[str, ...]:
        return PurePosixPath(self.path).parts

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def folder(self) -> str:
        """'alice' for 'alice/memory.py'; '' at the top."""
        return "/".join(self.parts[:-1])


class Unreadable(Exception):
    """The upload cannot be read as a whole (missing, empty, corrupt, too large, too many members)."""

    def __init__(self, note: Note) -> None:
        super().__init__(note.text)
        self.note = note


def is_tar_name(path: Path) -> bool:
    return path.name.lower().endswith(TAR_SUFFIXES)


def is_clutter(member: Member) -> bool:
    """macOS resource forks and folders, editor and git folders, nbgrader's timestamp at the top."""
    parts = member.parts
    return (
        any(part in CLUTTER_FOLDERS for part in parts[:-1])
        or member.name in CLUTTER_FILES
        or member.name.startswith("._")
        or parts == (ROOT_METADATA,)
    )


def members(
    source: Path, *, max_entries: int | None = None, max_bytes: int | None = None, clutter: bool = False
) -> list[Member]:
    """Every member of ``source`` but clutter (with it when ``clutter``); ``Unreadable`` when it cannot be
    listed. ``max_entries`` and ``max_bytes`` (the archive's size) replace ``MAX_ENTRIES`` and
    ``MAX_ARCHIVE_BYTES``: a class's archive from an LMS holds many students' uploads."""
    entries = MAX_ENTRIES if max_entries is None else max_entries
    if not source.exists() and not source.is_symlink():
        raise Unreadable(Note(Reason.MISSING, f"{source} does not exist"))
    if source.is_dir():
        found = _folder_members(source, entries)
    elif zipfile.is_zipfile(source) or source.suffix.lower() == ".zip":
        found = _zip_members(source, entries, MAX_ARCHIVE_BYTES if max_bytes is None else max_bytes)
    elif is_tar_name(source):
        found = _tar_members(source)
    else:
        info = source.lstat()
        found = [Member(source.name, _kind(info.st_mode), info.st_size)]
    return [m for m in found if clutter or not is_clutter(m)]


def read(source: Path, wanted: list[Member]) -> dict[str, bytes | None]:
    """The bytes of each of ``wanted`` (members of ``source``), by path; None for one larger than
    ``MAX_FILE_BYTES``, however little its header claims. ``Unreadable`` when the archive is corrupt."""
    paths = {m.path for m in wanted}
    if source.is_dir():
        chunks = {path: _read_file(source / path) for path in paths}
    elif zipfile.is_zipfile(source):
        chunks = _read_zip(source, paths)
    elif is_tar_name(source):
        chunks = _read_tar(source, paths)
    else:
        chunks = {source.name: _read_file(source)} if source.name in paths else {}
    return {path: None if len(data) > MAX_FILE_BYTES else data for path, data in chunks.items()}


def escapes(name: str) -> bool:
    """An absolute path, a '..' or a drive letter: extracting it naively would write outside the folder."""
    raw = name.replace("\\", "/")
    parts = PurePosixPath(raw).parts
    return raw.startswith("/") or ".." in parts or bool(parts and ":" in parts[0])


# ---------------------------------------------------------------------------------------------------------
# folders


def _folder_members(root: Path, entries: int) -> list[Member]:
    found: list[Member] = []
    for path, info in _walk(root):
        if len(found) >= entries:
            raise Unreadable(Note(Reason.TOO_MANY_MEMBERS, f"the folder has more than {entries} files"))
        found.append(Member(path.relative_to(root).as_posix(), _kind(info.st_mode), info.st_size))
    return found


def _kind(mode: int) -> Kind:
    return Kind.LINK if stat.S_ISLNK(mode) else Kind.FILE if stat.S_ISREG(mode) else Kind.OTHER


def _walk(folder: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry under ``folder`` but folders, never following a link, never entering clutter folders."""
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if entry.name not in CLUTTER_FOLDERS:
                    yield from _walk(Path(entry.path))
            else:
                yield Path(entry.path), info


def _read_file(path: Path) -> bytes:
    """At most ``MAX_FILE_BYTES + 1`` bytes of a regular file; never through a link."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read(MAX_FILE_BYTES + 1)


# ---------------------------------------------------------------------------------------------------------
# zip archives

_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError)


def _zip_members(source: Path, entries: int, max_bytes: int) -> list[Member]:
    _check_size(source, max_bytes)
    try:
        with zipfile.ZipFile(source) as archive:
            infos = archive.infolist()
    except _ZIP_ERRORS as exc:
        raise Unreadable(Note(Reason.CORRUPT, f"the archive is corrupt ({exc})")) from None
    if not infos:
        raise Unreadable(Note(Reason.EMPTY, "the archive is empty"))
    if len(infos) > entries:
        raise Unreadable(Note(Reason.TOO_MANY_MEMBERS, f"the archive has more than {entries} members"))
    return [_zip_member(info) for info in infos if not info.is_dir()]


def _zip_member(info: zipfile.ZipInfo) -> Member:
    if escapes(info.filename):
        return Member(info.filename, Kind.ESCAPING, info.file_size)
    unix_type = info.external_attr >> 28  # the S_IFMT bits of a Unix member's mode
    kind = Kind.LINK if unix_type == 0o12 else Kind.OTHER if unix_type not in (0, 0o10) else Kind.FILE
    return Member(info.filename.replace("\\", "/"), kind, info.file_size)


def _read_zip(source: Path, paths: set[str]) -> dict[str, bytes]:
    chunks = {}
    try:
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                path = info.filename.replace("\\", "/")
                if path in paths and not info.is_dir():
                    with archive.open(info) as member:
                        chunks[path] = member.read(MAX_FILE_BYTES + 1)
    except _ZIP_ERRORS as exc:
        raise Unreadable(Note(Reason.CORRUPT, f"the archive is corrupt ({exc})")) from None
    return chunks


def _check_size(source: Path, max_bytes: int) -> None:
    if source.stat().st_size > max_bytes:
        raise Unreadable(Note(Reason.ARCHIVE_TOO_LARGE, f"the archive is larger than {max_bytes >> 20} MiB"))


# ---------------------------------------------------------------------------------------------------------
# tar archives: read as a stream twice, once for the names, once for the files taken

_TAR_ERRORS = (tarfile.TarError, zlib.error, lzma.LZMAError, EOFError, OSError, ValueError)


def _tar_members(source: Path) -> list[Member]:
    _check_size(source, MAX_ARCHIVE_BYTES)
    found = [_tar_member(info) for info in _tar_pass(source, set())[0] if not info.isdir()]
    if not found:
        raise Unreadable(Note(Reason.EMPTY, "the archive is empty"))
    return found


def _tar_member(info: tarfile.TarInfo) -> Member:
    if escapes(info.name):
        return Member(info.name, Kind.ESCAPING, info.size)
    kind = Kind.LINK if info.issym() or info.islnk() else Kind.FILE if info.isreg() else Kind.OTHER
    return Member(info.name.removeprefix("./"), kind, info.size)


def _read_tar(source: Path, paths: set[str]) -> dict[str, bytes]:
    return _tar_pass(source, paths)[1]


def _tar_pass(source: Path, wanted: set[str]) -> tuple[list[tarfile.TarInfo], dict[str, bytes]]:
    """One pass over the tar in ``source`` as a stream: every member's header, and the bytes of the regular
    files in ``wanted``. ``Unreadable`` for a corrupt archive, one with more than ``MAX_ENTRIES`` members or
    one that unpacks to more than ``MAX_UNPACKED_BYTES``."""
    infos: list[tarfile.TarInfo] = []
    chunks: dict[str, bytes] = {}
    try:
        with open(source, "rb") as raw:
            stream = io.BufferedReader(_Capped(_decompressed(raw)))
            with tarfile.open(fileobj=stream, mode="r|") as archive:
                for info in archive:
                    infos.append(info)
                    if len(infos) > MAX_ENTRIES:
                        text = f"the archive has more than {MAX_ENTRIES} members"
                        raise Unreadable(Note(Reason.TOO_MANY_MEMBERS, text))
                    path = info.name.removeprefix("./")
                    if path in wanted and info.isreg():
                        member = archive.extractfile(info)
                        chunks[path] = member.read(MAX_FILE_BYTES + 1) if member else b""
    except _Unpacked:
        text = f"the archive unpacks to more than {MAX_UNPACKED_BYTES >> 20} MiB"
        raise Unreadable(Note(Reason.ARCHIVE_TOO_LARGE, text)) from None
    except _TAR_ERRORS as exc:
        raise Unreadable(Note(Reason.CORRUPT, f"the archive is corrupt ({exc})")) from None
    return infos, chunks


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def _decompressed(raw: IO[bytes]) -> _Readable:
    """``raw`` as it reads decompressed, by its magic bytes (gzip, bzip2, xz; else a plain tar)."""
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw)
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


class _Unpacked(Exception):
    """More than ``MAX_UNPACKED_BYTES`` came out of a tar stream."""


class _Capped(io.RawIOBase):
    """A stream that raises ``_Unpacked`` once more than ``MAX_UNPACKED_BYTES`` were read from it."""

    def __init__(self, stream: _Readable) -> None:
        super().__init__()
        self._stream = stream
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self._stream.read(view.nbytes)
        self._read += len(data)
        if self._read > MAX_UNPACKED_BYTES:
            raise _Unpacked
        view[: len(data)] = data
        return len(data)
