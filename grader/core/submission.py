"""Staging what is graded: copy an exercise's editable files, and nothing else, into a scratch folder.

A submission is untrusted bytes. Staging never follows a link, never writes outside ``dest``, reads at most
``MAX_FILE_BYTES`` of any file, and turns every problem (a corrupt zip, a link, a path that escapes, a bomb)
into a note for the student instead of an exception: a note explains, the missing file fails every test.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 1 << 20
"""A student module larger than 1 MiB is not a module; refuse to unpack it (zip bombs)."""
MAX_ARCHIVE_BYTES = 50 << 20
"""A zip larger than this is refused unread."""
MAX_ENTRIES = 10_000
"""A zip with more members than this is refused (a bomb of empty files, or a central directory bomb)."""
MAX_NOTES = 5
"""Refused members named in the notes; the rest are counted."""


def stage(source: Path, files: tuple[str, ...], dest: Path) -> list[str]:
    """Copy ``files`` from ``source`` (a folder or a .zip) into ``dest``; return notes about what was refused.

    Only regular files with exactly these names are taken. From a zip, a file may sit in one top folder
    (``alice/collectives.py``), as LMS downloads often do. Other names are ignored silently; links, paths
    that escape, oversized or corrupt members are refused with a note that says why.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        found, notes = _from_folder(source, files, dest)
    elif zipfile.is_zipfile(source):
        found, notes = _from_zip(source, files, dest)
    else:
        return [f"{source} is neither a folder nor a zip archive: nothing was graded"]
    return notes + [
        f"the submission has no {name}" + _near_miss(name, source) for name in files if name not in found
    ]


def why_invalid(source: Path, files: tuple[str, ...]) -> str | None:
    """Why ``source`` cannot be graded at all, in one line; None when grading it makes sense.

    Invalid: a path that is neither a folder nor a zip, an empty folder or archive, a corrupt or refused
    archive, a member whose path escapes the submission, or none of ``files`` to take. A submission with
    some of the files is valid: what is missing fails its tests, as it should.
    """
    if not source.exists():
        return f"{source} does not exist"
    if source.is_dir():
        if not any(p.name != "timestamp.txt" for p in source.iterdir()):
            return "the submission is empty"
    elif not zipfile.is_zipfile(source):
        if not source.stat().st_size:
            return "the submission is an empty file"
        return (
            "the archive is corrupt (not a zip file)" if source.suffix == ".zip" else "not a folder or a zip"
        )
    else:
        problem = _zip_problem(source)
        if problem:
            return problem
    with tempfile.TemporaryDirectory(prefix="distgpu-check-") as folder:
        notes = stage(source, files, Path(folder))
        taken = sorted(p.name for p in Path(folder).iterdir())
    if taken:
        return None
    fatal = [n for n in notes if "nothing was graded" in n or n.startswith("refused") or "not taken" in n]
    if fatal:
        return fatal[0].replace(f"{source} ", "").removesuffix(": nothing was graded")
    return f"none of the exercise's files ({', '.join(files)}) is in it; it holds {_contents(source)}"


def _zip_problem(source: Path) -> str | None:
    """An empty archive, or a member whose path escapes it (path traversal): the whole upload is suspect."""
    try:
        with zipfile.ZipFile(source) as archive:
            names = [info.filename for info in archive.infolist()]
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        return f"the archive is corrupt ({exc})"
    if not names:
        return "the archive is empty"
    escaping = [name for name in names if _escapes(name)]
    if escaping:
        return f"the archive's member {escaping[0]!r} escapes the submission (path traversal)"
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


def _from_folder(source: Path, files: tuple[str, ...], dest: Path) -> tuple[set[str], list[str]]:
    found, notes = set(), []
    for name in files:
        path = source / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            notes.append(f"{name} is a symbolic link: links are not allowed, so it was not taken")
        elif not stat.S_ISREG(info.st_mode):
            notes.append(f"{name} is not a regular file, so it was not taken")
        elif info.st_size > MAX_FILE_BYTES:
            notes.append(f"{name} is larger than {MAX_FILE_BYTES >> 20} MiB, so it was not taken")
        else:
            shutil.copyfile(path, dest / name, follow_symlinks=False)
            found.add(name)
    return found, notes


def _from_zip(source: Path, files: tuple[str, ...], dest: Path) -> tuple[set[str], list[str]]:
    if source.stat().st_size > MAX_ARCHIVE_BYTES:
        return set(), [f"the archive is larger than {MAX_ARCHIVE_BYTES >> 20} MiB: nothing was graded"]
    found: set[str] = set()
    refused: list[str] = []
    try:
        with zipfile.ZipFile(source) as archive:
            members = archive.infolist()
            if len(members) > MAX_ENTRIES:
                return set(), [f"the archive has more than {MAX_ENTRIES} members: nothing was graded"]
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
        return set(), [f"the archive is corrupt ({exc}): nothing was graded"]
    notes = [f"refused {what}" for what in refused[:MAX_NOTES]]
    if len(refused) > MAX_NOTES:
        notes.append(f"refused {len(refused) - MAX_NOTES} more members")
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
