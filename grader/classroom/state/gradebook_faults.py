"""A gradebook database that fails, said in one line: which database, what went wrong, what to do.

The decision comes from SQLite's result code (``sqlite3.Error.sqlite_errorcode``, primary code in the low
byte: https://www.sqlite.org/rescode.html), never from the message. Another database (any SQLAlchemy URL)
has no such code: there, SQLAlchemy's ``OperationalError`` (the connection, the server, the disk) is the
machine's failure. Anything else (a constraint, an SQL error) is a grader bug and is not converted.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from grader.core.errors import EnvironmentFailure

REBUILD = (
    "move it aside and rerun `grade batch` for each exercise: the records in each batch's records/ "
    "folder rebuild it without grading again"
)
SQLITE_FAULTS = {
    3: ("permission denied", "make it and its folder writable for this user, then rerun"),  # SQLITE_PERM
    5: ("the database is busy", "another process is writing it: rerun when it is done"),  # SQLITE_BUSY
    6: ("the database is locked", "another process is writing it: rerun when it is done"),  # SQLITE_LOCKED
    8: ("the database is read-only", "make it and its folder writable for this user, then rerun"),
    10: ("a disk I/O error", "check the disk, then rerun"),  # SQLITE_IOERR
    11: ("the database is corrupt", REBUILD),  # SQLITE_CORRUPT
    13: ("the disk is full", "free space there and rerun: the records graded so far are kept"),  # SQLITE_FULL
    14: ("the database cannot be opened", "check that its folder exists and is writable, then rerun"),
    26: ("the file is not a database (corrupt)", REBUILD),  # SQLITE_NOTADB
}
"""SQLite's primary result codes that are the machine's failure, with what to say and what to do."""


@contextmanager
def database_errors(where: str) -> Iterator[None]:
    """Within the block, a database failure of the machine's is an ``EnvironmentFailure`` on ``where`` (the
    database's file, or its URL without password); other exceptions pass unchanged."""
    from nbgrader.api import InvalidEntry
    from sqlalchemy.exc import DBAPIError

    try:
        yield
    except (DBAPIError, InvalidEntry) as exc:  # nbgrader re-raises a failed commit as InvalidEntry
        failure = gradebook_failure(where, exc)
        if failure is None:
            raise
        raise failure from exc


def gradebook_failure(where: str, exc: BaseException) -> EnvironmentFailure | None:
    """``exc`` (or what it was raised from) as the machine's failure of the database at ``where``; None when
    it is not one."""
    from sqlalchemy.exc import OperationalError

    causes = list(_chain(exc))
    code = next((c.sqlite_errorcode for c in causes if isinstance(c, sqlite3.Error)), None)
    if code is not None:
        fault = SQLITE_FAULTS.get(code & 0xFF)
        return _failure(where, *fault) if fault else None
    operational = next((c for c in causes if isinstance(c, OperationalError)), None)
    if operational is None:
        return None
    said = " ".join(str(operational.orig).split())
    return _failure(where, f"the database failed ({said})", "check it (server, disk), then rerun")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, the DBAPI error a SQLAlchemy error wraps, and what each was raised from or during."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [e for e in (getattr(current, "orig", None), current.__cause__, current.__context__) if e]


def corrupt(where: str, found: str) -> EnvironmentFailure:
    """The database at ``where`` failed SQLite's integrity check with ``found``."""
    return _failure(where, f"the database is corrupt ({' '.join(found.split())[:200]})", REBUILD)


def _failure(where: str, problem: str, remedy: str) -> EnvironmentFailure:
    return EnvironmentFailure(f"{where}: {problem}; {remedy}")


@contextmanager
def nbgrader_log_muted() -> Iterator[None]:
    """nbgrader logs a traceback of every failed commit before it re-raises it (``app_log.exception`` in
    ``nbgrader.api``); the failure is said once, in one line, by ``database_errors``."""
    log = logging.getLogger("tornado.application")
    was = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = was
