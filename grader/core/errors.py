"""Failures of the machine, not of the user or the grader: a full disk, a folder that cannot be written, a
database that does not open. ``grade`` prints one as a single ``error:`` line and exits 3.

Which ``OSError`` is the machine's is decided by its ``errno`` (``ENVIRONMENT_ERRNOS``), never by its text.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "free space there (or choose another folder) and rerun",
    errno.EDQUOT: "free space within your quota (or choose another folder) and rerun",
    errno.EROFS: "the filesystem is read-only: choose another folder and rerun",
    errno.EACCES: "make it writable for this user (or choose another folder) and rerun",
    errno.EPERM: "make it writable for this user (or choose another folder) and rerun",
}
"""The errnos that say the machine refused a write, with what to do about it."""


class EnvironmentFailure(Exception):
    """The machine stopped the command. The message is one line: the path, what went wrong, what to do;
    what was written before the failure is kept (every write is atomic)."""

    def __init__(self, path: Path | str, problem: str, remedy: str) -> None:
        super().__init__(f"{path}: {problem}; {remedy}")
        self.path = Path(path)


def environment_failure(exc: OSError, path: Path | str | None = None) -> EnvironmentFailure | None:
    """``exc`` as an ``EnvironmentFailure`` on ``path`` (default: the file ``exc`` names) when its errno is
    the machine's (``ENVIRONMENT_ERRNOS``); None for any other ``OSError`` (a grader bug, not the disk)."""
    remedy = ENVIRONMENT_ERRNOS.get(exc.errno or 0)
    if remedy is None:
        return None
    where = path if path is not None else exc.filename
    return EnvironmentFailure(where if where is not None else "?", exc.strerror or str(exc), remedy)


@contextmanager
def machine_errors(path: Path | str) -> Iterator[None]:
    """Within the block, an ``OSError`` with one of the machine's errnos is raised as an
    ``EnvironmentFailure`` on ``path``; any other exception passes unchanged."""
    try:
        yield
    except OSError as exc:
        failure = environment_failure(exc, path)
        if failure is None:
            raise
        raise failure from exc
