"""Whose fault an error is, and the exit status that says so (pytest's ``ExitCode`` is the model).

Code raises ``UsageError`` on purpose where the user's input is wrong (an argument, a path, course.yml) and
``EnvironmentFailure`` where the machine cannot do what was asked (a corrupt database, no Docker engine);
an ``OSError`` that reaches the command line is the environment's too. Anything else that escapes is a bug
in the grader. ``grader.cli`` maps each to its ``ExitCode`` in one place.
"""

from __future__ import annotations

import errno
from enum import IntEnum


class ExitCode(IntEnum):
    """The exit status of every ``grade`` command; ``meaning`` says it in words (``grade --help``)."""

    OK = 0
    NOT_FULL_MARKS = 1
    USAGE_ERROR = 2
    ENVIRONMENT_FAILURE = 3
    INTERNAL_ERROR = 4

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: "full marks, or the check passed",
    ExitCode.NOT_FULL_MARKS: "not full marks (a check, a release scan, an export: it found problems)",
    ExitCode.USAGE_ERROR: "usage or configuration error (an argument, course.yml): one `error:` line",
    ExitCode.ENVIRONMENT_FAILURE: "environment failure (full disk, unwritable folder, corrupt database): "
    "one `error:` line naming the path",
    ExitCode.INTERNAL_ERROR: "internal error, a bug in the grader: its traceback and where to report it",
}


class UsageError(ValueError):
    """The user's input is wrong; the message, one line, names the input and what would be right.

    A ``ValueError``, so that code checking values the usual way keeps working; only this class (never a
    bare ``ValueError``, which may be a bug) is reported as the user's mistake."""


class EnvironmentFailure(Exception):
    """The machine cannot do what was asked; the message, one line, names the path or the service and
    what to do about it."""


_WHAT_TO_DO = {
    errno.ENOSPC: "free some space, or write somewhere else",
    errno.EDQUOT: "free some space under your quota, or write somewhere else",
    errno.EACCES: "choose a folder you may write to, or fix its permissions",
    errno.EPERM: "choose a folder you may write to, or fix its permissions",
    errno.EROFS: "the file system is read-only: write somewhere else",
    errno.ENOENT: "check that the path exists",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.EISDIR: "the path is a folder: give a file",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) or grade with fewer workers",
    errno.ENOMEM: "the machine is out of memory: grade with fewer workers",
}


def environment_message(exc: OSError) -> str:
    """One line for an ``OSError`` the environment raised: the path (where the error carries one), what
    failed, and what to do."""
    what = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    where = f"{' -> '.join(paths)}: " if paths else ""
    advice = _WHAT_TO_DO.get(
        exc.errno or 0, "check the machine (disk, permissions, devices), then run it again"
    )
    return f"{where}{what}; {advice}"
