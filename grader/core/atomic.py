"""Writing a file so that a crash, a kill or a full disk leaves the old file or the new one, never half
(SQLite's rule): the bytes go to a temporary file in the same folder, are flushed to disk, then renamed
over the target with ``os.replace`` (rename(2) is atomic within one filesystem, and the same folder is the
same filesystem).

A temporary file is named ``.<name>~<host>~<pid>~<random>.tmp``: it says who made it, so a sweep
(``sweep_temporaries``) removes only what a dead process of this host left, never a live run's file.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.core.errors import EnvironmentFailure, environment_message

TEMP_SUFFIX = ".tmp"


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one step; an ``EnvironmentFailure``
    naming ``path`` when the machine refuses the write, which leaves the old file as it was."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for any writer (matplotlib, nbgrader's exporter) to fill; it
    replaces ``path`` when the block ends, and is removed when the block raises. ``EnvironmentFailure``
    (naming ``path``) for an ``OSError``: a full disk, a read-only or unwritable folder."""
    owner = f"{socket.gethostname()}~{os.getpid()}~{secrets.token_hex(4)}"
    tmp = path.with_name(f".{path.name}~{owner}{TEMP_SUFFIX}")
    with _named(path):
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask applies, as to open()
    try:
        with _named(path):
            yield tmp
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())  # the bytes are on disk before the name points at them
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone already once renamed


@contextmanager
def _named(path: Path) -> Iterator[None]:
    """An ``OSError`` in the block as an ``EnvironmentFailure`` that names ``path``, the file the user
    asked for, rather than the temporary file beside it."""
    try:
        yield
    except OSError as exc:
        named = OSError(exc.errno, exc.strerror or str(exc), str(path))
        raise EnvironmentFailure(environment_message(named)) from exc


def sweep_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files in ``folder`` that a process of this host left when it died mid-write;
    leave those of live processes and of other hosts (a Slurm node may be writing). The removed paths."""
    host = socket.gethostname()
    removed = []
    for path in folder.glob(f".*{TEMP_SUFFIX}"):
        parts = path.name.removesuffix(TEMP_SUFFIX).rsplit("~", 3)
        if len(parts) == 4 and parts[1] == host and parts[2].isdigit() and not _alive(int(parts[2])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
