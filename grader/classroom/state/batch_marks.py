"""Whether each exercise's last batch finished, kept in the gradebook's own database.

``grade export`` sees only the gradebook, so the mark lives there: a table of ours, ``distgpu_batches``,
one row per exercise (nbgrader's assignment), beside nbgrader's tables. nbgrader creates only its own tables
(``Base.metadata.create_all``) and its alembic migrations alter only those, so the table survives nbgrader's
use of the same file.

A batch marks its exercise started (committed at once, before grading), then writes every grade and the
finished mark in one transaction (``batch_transaction``). A batch that stops anywhere in between (a full
disk, a kill, Ctrl-C) leaves the exercise marked started and its grades as the last finished batch left
them; ``unfinished`` names such exercises, and the export refuses to run until a batch finishes.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, Text, inspect, select
from sqlalchemy.orm import Session, scoped_session, sessionmaker

BATCHES = Table(
    "distgpu_batches",
    MetaData(),
    Column("assignment", String(128), primary_key=True),
    Column("started", String(32), nullable=False),
    Column("finished", String(32)),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("out", Text, nullable=False),
)
"""One row per exercise: its last batch's start, its end (NULL until it finished), who ran it, where."""


@dataclass(frozen=True)
class BatchMark:
    assignment: str
    started: str
    finished: str | None
    host: str
    pid: int
    out: str

    def __str__(self) -> str:
        return (
            f"{self.assignment} (started {self.started} by pid {self.pid} on {self.host}, --out {self.out})"
        )


def mark_started(gradebook: Any, assignment: str, out: Path) -> None:
    """Commit ``assignment``'s mark as started and not finished, with who runs it and where."""
    BATCHES.create(bind=gradebook.db.connection(), checkfirst=True)
    row = {
        "started": _now(),
        "finished": None,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "out": str(out.resolve()),
    }
    exists = gradebook.db.execute(select(BATCHES.c.assignment).where(BATCHES.c.assignment == assignment))
    if exists.first() is None:
        gradebook.db.execute(BATCHES.insert().values(assignment=assignment, **row))
    else:
        gradebook.db.execute(BATCHES.update().where(BATCHES.c.assignment == assignment).values(**row))
    gradebook.db.commit()


class _OneTransaction(Session):
    """nbgrader's gradebook commits after every change; here its commits only flush (send the changes
    inside the open transaction), and ``commit_batch`` commits them all at once."""

    def commit(self) -> None:
        self.flush()

    def commit_batch(self) -> None:
        super().commit()


@contextmanager
def batch_transaction(gradebook: Any, assignment: str) -> Iterator[Any]:
    """``gradebook`` with every change in the block in one transaction, committed with ``assignment``'s
    finished mark when the block ends; rolled back when it raises (or the process dies: SQLite's journal)."""
    nbgrader_session = gradebook.db
    gradebook.db = scoped_session(sessionmaker(class_=_OneTransaction, autoflush=True, bind=gradebook.engine))
    try:
        yield gradebook
        finished = BATCHES.update().where(BATCHES.c.assignment == assignment).values(finished=_now())
        gradebook.db.execute(finished)
        gradebook.db().commit_batch()
    finally:
        gradebook.db.remove()  # rolls back what was not committed
        gradebook.db = nbgrader_session


def unfinished(gradebook: Any) -> list[BatchMark]:
    """The exercises whose last batch started and did not finish (none in a gradebook without marks)."""
    if not inspect(gradebook.db.connection()).has_table(BATCHES.name):
        return []
    rows = gradebook.db.execute(
        select(BATCHES).where(BATCHES.c.finished.is_(None)).order_by(BATCHES.c.assignment)
    )
    return [BatchMark(**row._mapping) for row in rows]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
