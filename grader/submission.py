"""Staging what is graded: copy an exercise's editable files, and nothing else, into a scratch folder."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 1 << 20
"""A student module larger than 1 MiB is not a module; refuse to unpack it (zip bombs)."""


def stage(source: Path, files: tuple[str, ...], dest: Path) -> list[str]:
    """Copy ``files`` from ``source`` (a folder or a .zip) into ``dest``; return notes about what was missing.

    Only regular files with exactly these names are taken. From a zip, a file may sit in one top folder
    (``alice/collectives.py``), as LMS downloads often do. Links, traversal and other names are ignored.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        found = _from_folder(source, files, dest)
    elif zipfile.is_zipfile(source):
        found = _from_zip(source, files, dest)
    else:
        return [f"{source} is neither a folder nor a zip archive: nothing was graded"]
    return [f"the submission has no {name}" for name in files if name not in found]


def _from_folder(source: Path, files: tuple[str, ...], dest: Path) -> set[str]:
    found = set()
    for name in files:
        path = source / name
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_FILE_BYTES:
            shutil.copyfile(path, dest / name)
            found.add(name)
    return found


def _from_zip(source: Path, files: tuple[str, ...], dest: Path) -> set[str]:
    found = set()
    with zipfile.ZipFile(source) as archive:
        for info in archive.infolist():
            parts = PurePosixPath(info.filename).parts
            name = parts[-1] if parts else ""
            if name not in files or name in found or len(parts) > 2 or ".." in parts or info.is_dir():
                continue
            if info.file_size > MAX_FILE_BYTES or (info.external_attr >> 28) == 0o12:  # 0o12: symlink
                continue
            (dest / name).write_bytes(archive.read(info)[:MAX_FILE_BYTES])
            found.add(name)
    return found
