"""The learner's own progress: every attempt, hint and checkpoint, in one small SQLite file per user.

The file is ``progress.sqlite`` in ``$DISTGPU_STATE_DIR`` when that is set (tests, several learners on one
account), else in the platform's user-state folder (``platformdirs.user_state_dir("distgpu")``, e.g.
``~/.local/state/distgpu`` on Linux). Rows are keyed by the course's title, so two clones of one course share
a learner's progress. Every failure of the store is a ``ProgressError``: callers on the grading path catch
it, say so, and go on, because a broken state file must never cost a grade; ``grade progress`` and ``grade
hint``, which exist to read it, stop with one line and exit status 3 (an environment failure).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grader.core.course import Course, Exercise, Section
from grader.core.errors import EnvironmentFailure

STATE_DIR_ENV = "DISTGPU_STATE_DIR"
SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    course TEXT NOT NULL,
    exercise TEXT NOT NULL,
    time TEXT NOT NULL,
    score REAL NOT NULL,
    max_score REAL NOT NULL,
    full_marks INTEGER NOT NULL,
    part TEXT,
    suites TEXT NOT NULL,
    files TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS hints (
    course TEXT NOT NULL,
    exercise TEXT NOT NULL,
    revealed INTEGER NOT NULL,
    PRIMARY KEY (course, exercise)
);
CREATE TABLE IF NOT EXISTS checkpoints (
    id INTEGER PRIMARY KEY,
    course TEXT NOT NULL,
    section INTEGER NOT NULL,
    time TEXT NOT NULL,
    passed INTEGER NOT NULL,
    score REAL NOT NULL,
    max_score REAL NOT NULL,
    record TEXT NOT NULL
);
"""


class ProgressError(EnvironmentFailure):
    """The progress store cannot be read or written; the message names the file and what to do."""


def state_dir() -> Path:
    """``$DISTGPU_STATE_DIR``, else the platform's user-state folder for distgpu."""
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    import platformdirs

    return Path(platformdirs.user_state_dir("distgpu", appauthor=False))


def now() -> str:
    """The current UTC time, to the second, in ISO 8601."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


@dataclass(frozen=True, kw_only=True)
class Attempt:
    exercise: str
    """Two-digit key, e.g. '02'."""
    time: str
    score: float
    max_score: float
    full_marks: bool
    part: str | None
    """The one part graded (``grade exercise NN -k PART``); None for a whole-exercise run."""
    suites: str
    """'public' (no hidden suite here) or 'public+hidden'."""
    files: dict[str, str]
    """sha256 of each graded file."""


@dataclass(frozen=True, kw_only=True)
class CheckpointRow:
    section: int
    time: str
    passed: bool
    score: float
    max_score: float
    record: str
    """Where the shareable JSON record was written."""


# ---------------------------------------------------------------------------------------------------------
# the store


class ProgressStore:
    """One learner's SQLite file; each method opens, commits and closes (a grade is seconds apart)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_dir() / "progress.sqlite"

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=5)
        except (OSError, sqlite3.Error) as exc:
            raise ProgressError(
                f"cannot open {self.path}: {exc}; check that you may write to {self.path.parent}, or set "
                f"{STATE_DIR_ENV} to a folder you may"
            ) from None
        try:
            with db:
                db.executescript(SCHEMA)
                yield db
        except sqlite3.Error as exc:
            raise ProgressError(
                f"{self.path}: {exc}; if the file is damaged, move it aside and a new one starts (it holds "
                "your attempts and hints, not your work)"
            ) from None
        finally:
            db.close()

    def add_attempt(self, course: str, attempt: Attempt) -> None:
        row = asdict(attempt) | {"files": json.dumps(attempt.files, sort_keys=True), "course": course}
        with self._db() as db:
            db.execute(
                "INSERT INTO attempts (course, exercise, time, score, max_score, full_marks, part, suites,"
                " files) VALUES (:course, :exercise, :time, :score, :max_score, :full_marks, :part, :suites,"
                " :files)",
                row,
            )

    def attempts(self, course: str) -> list[Attempt]:
        """Every attempt at ``course``, oldest first."""
        with self._db() as db:
            rows = db.execute(
                "SELECT exercise, time, score, max_score, full_marks, part, suites, files FROM attempts"
                " WHERE course = ? ORDER BY id",
                (course,),
            ).fetchall()
        return [
            Attempt(exercise=e, time=t, score=s, max_score=m, full_marks=bool(f), part=p, suites=u, files=h)
            for e, t, s, m, f, p, u, h in ((*row[:7], json.loads(row[7])) for row in rows)
        ]

    def hints_revealed(self, course: str, exercise: str) -> int:
        with self._db() as db:
            row = db.execute(
                "SELECT revealed FROM hints WHERE course = ? AND exercise = ?", (course, exercise)
            ).fetchone()
        return row[0] if row else 0

    def all_hints_revealed(self, course: str) -> dict[str, int]:
        with self._db() as db:
            rows = db.execute("SELECT exercise, revealed FROM hints WHERE course = ?", (course,)).fetchall()
        return dict(rows)

    def set_hints_revealed(self, course: str, exercise: str, revealed: int) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO hints (course, exercise, revealed) VALUES (?, ?, ?)"
                " ON CONFLICT (course, exercise) DO UPDATE SET revealed = excluded.revealed",
                (course, exercise, revealed),
            )

    def add_checkpoint(self, course: str, row: CheckpointRow) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO checkpoints (course, section, time, passed, score, max_score, record)"
                " VALUES (:course, :section, :time, :passed, :score, :max_score, :record)",
                asdict(row) | {"course": course},
            )

    def checkpoints(self, course: str) -> list[CheckpointRow]:
        """Every checkpoint attempt at ``course``, oldest first."""
        with self._db() as db:
            rows = db.execute(
                "SELECT section, time, passed, score, max_score, record FROM checkpoints"
                " WHERE course = ? ORDER BY id",
                (course,),
            ).fetchall()
        return [
            CheckpointRow(section=s, time=t, passed=bool(p), score=sc, max_score=m, record=r)
            for s, t, p, sc, m, r in rows
        ]


# ---------------------------------------------------------------------------------------------------------
# where the learner stands


@dataclass(frozen=True, kw_only=True)
class ExerciseProgress:
    key: str
    slug: str
    title: str
    gradable: bool
    attempts: int
    best: float | None
    """Best score over whole-exercise attempts; None before the first one."""
    max_score: float
    last: Attempt | None
    done: bool
    """Some whole-exercise attempt scored full marks."""
    hints_used: int


@dataclass(frozen=True, kw_only=True)
class SectionProgress:
    number: int
    title: str
    threshold: float | None
    checkpoint: str
    """'passed', 'not passed', 'not attempted', or 'none' (the section has no checkpoint)."""
    checkpoint_time: str | None
    exercises: list[ExerciseProgress]


def course_progress(course: Course, store: ProgressStore) -> list[SectionProgress]:
    """Where the learner stands in every section and exercise, from the store."""
    attempts, hints = store.attempts(course.title), store.all_hints_revealed(course.title)
    checkpoints = store.checkpoints(course.title)
    return [_section_progress(s, attempts, hints, checkpoints) for s in course.sections]


def _section_progress(
    section: Section, attempts: list[Attempt], hints: dict[str, int], checkpoints: list[CheckpointRow]
) -> SectionProgress:
    mine = [c for c in checkpoints if c.section == section.number]
    passed = [c for c in mine if c.passed]
    if section.checkpoint is None:
        status, when = "none", None
    elif passed:
        status, when = "passed", passed[0].time
    else:
        status, when = ("not passed", mine[-1].time) if mine else ("not attempted", None)
    return SectionProgress(
        number=section.number,
        title=section.title,
        threshold=section.checkpoint.threshold if section.checkpoint else None,
        checkpoint=status,
        checkpoint_time=when,
        exercises=[_exercise_progress(e, attempts, hints) for e in section.exercises],
    )


def _exercise_progress(
    exercise: Exercise, attempts: list[Attempt], hints: dict[str, int]
) -> ExerciseProgress:
    mine = [a for a in attempts if a.exercise == exercise.key]
    whole = [a for a in mine if a.part is None]
    return ExerciseProgress(
        key=exercise.key,
        slug=exercise.slug,
        title=exercise.title,
        gradable=bool(exercise.parts),
        attempts=len(mine),
        best=max((a.score for a in whole), default=None),
        max_score=exercise.points,
        last=mine[-1] if mine else None,
        done=any(a.full_marks for a in whole),
        hints_used=_hints_used(exercise.key, hints),
    )


def _hints_used(key: str, hints: dict[str, int]) -> int:
    """Hints seen in an exercise: counted per part ('02.ring_allreduce'), or per exercise ('02') by older
    versions of `grade hint`."""
    return sum(n for counted, n in hints.items() if counted == key or counted.startswith(f"{key}."))


def progress_json(sections: list[SectionProgress]) -> dict[str, Any]:
    """The same data as ``grade progress`` shows, as JSON values."""
    return {"sections": [asdict(s) for s in sections]}
