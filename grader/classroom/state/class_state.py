"""The class of one batch, read once: its students, each upload staged once, the key each record is filed
under, and the records.

``grade batch`` builds a ``ClassState`` first (``read_class``); the choice of what to grade, the gradings,
the gradebook, the batch files, the class report and the similarity report all read it. None of them lists
the submissions folder, stages an upload or reads the records folder on its own: three readings of one
folder would one day disagree (a student removed from the folder yet still in a report).

In the batch's folder ``OUT``:
- ``OUT/.staged/<student>/``: what staging took from each upload, and nothing else; the gradings read this
  copy (``Member.folder``). It lives while the batch runs (on the shared folder, for Slurm's nodes).
- ``OUT/records/<student>.json``: the class's records (``grader.classroom.state.records``).
- ``OUT/set-aside/<student>.json``: the record of a student whose submission is gone, moved aside by
  ``set_aside_absent`` and never deleted. Such a student is in none of the batch's outputs. A student who
  comes back is graded again (their set-aside record stays until they are set aside once more).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.classroom.intake.discovery import Submission, discover
from grader.classroom.state.records import Record, RecordStore, record_key
from grader.core import submission as staging
from grader.core.course import Exercise
from grader.core.submission import Staged, file_hashes

STAGED_DIR = ".staged"
SET_ASIDE_DIR = "set-aside"


@dataclass(frozen=True)
class Member:
    """One student of the class: their upload as staged, and their record."""

    submission: Submission
    staged: Staged
    folder: Path
    """The staged copy of the upload: the exercise's files staging took, nothing else."""
    files: dict[str, str]
    """sha256 of each of the exercise's files in ``folder``, by name ('<missing>' for one not taken)."""
    key: str
    """What the record of this upload is filed under (``records.record_key``)."""
    record: Record | None
    """The student's record: the one filed before the batch (current or stale), then, once the batch has
    graded the student, the new one. None for a student never graded."""

    @property
    def student(self) -> str:
        return self.submission.student

    @property
    def current(self) -> bool:
        """Whether the record was made from these very files, suite and runner: nothing to grade."""
        return self.record is not None and self.record.key == self.key

    def texts(self) -> dict[str, str]:
        """The text of each staged file, by name (what the similarity report compares)."""
        return {name: (self.folder / name).read_text(errors="replace") for name in self.staged.taken}


@dataclass(frozen=True)
class ClassState:
    """Every student in the submissions folder, in name order, and who has a record but no submission."""

    exercise: Exercise
    submissions: Path
    members: tuple[Member, ...]
    absent: tuple[str, ...]
    """Students with a record in ``OUT/records`` and no submission in the folder any more."""
    gone: tuple[str, ...]
    """Every student this batch's folder has graded whose submission is gone: ``absent``, and those whose
    records an earlier run set aside. The gradebook drops their submission of this exercise (and no one
    else's: another batch of the same exercise, with another ``OUT``, keeps its students)."""
    stagings: int
    """Uploads staged to build this class: one per member, but for a row known invalid before staging
    (two uploads of one student), which is not staged at all (``grade batch`` says how many)."""

    @property
    def students(self) -> list[str]:
        return [m.student for m in self.members]

    @property
    def records(self) -> list[Record]:
        """The members' records, in name order (a member never graded has none)."""
        return [m.record for m in self.members if m.record is not None]

    def member(self, student: str) -> Member:
        return next(m for m in self.members if m.student == student)

    def reread(self, store: RecordStore, students: Iterable[str]) -> ClassState:
        """The class once ``students`` were graded: their records read again from ``store``, once each."""
        again = set(students)
        members = tuple(
            dataclasses.replace(m, record=store.get(m.student)) if m.student in again else m
            for m in self.members
        )
        return dataclasses.replace(self, members=members)


def read_class(
    *,
    exercise: Exercise,
    submissions: Path,
    store: RecordStore,
    staged: Path,
    suite: str,
    runner_id: str,
    given: frozenset[str] = frozenset(),
) -> ClassState:
    """List ``submissions`` (``discover``), stage each upload once into ``staged/<student>`` (emptied
    first; ``given`` as ``submission.stage`` takes it), key it, and read the records in ``store`` once,
    and those set aside beside it (a stray file set aside there is not a record of the student its name
    says, so it names no one). Writes nothing but ``staged``."""
    found = discover(submissions)
    filed = {record.student: record for record in store.all()}
    shutil.rmtree(staged, ignore_errors=True)
    members = tuple(
        _member(
            upload, exercise, staged / upload.student, filed.get(upload.student), (suite, runner_id), given
        )
        for upload in found
    )
    present = {m.student for m in members}
    absent = tuple(sorted(student for student in filed if student not in present))
    aside = store.folder.parent / SET_ASIDE_DIR
    earlier = {r.student for r in RecordStore(aside, sweep=False).all()} if aside.is_dir() else set()
    gone = tuple(sorted((earlier - present) | set(absent)))
    stagings = sum(upload.problem is None for upload in found)  # a row known invalid is never staged
    return ClassState(exercise, submissions, members, absent, gone, stagings=stagings)


def _member(
    upload: Submission,
    exercise: Exercise,
    folder: Path,
    record: Record | None,
    grading: tuple[str, str],
    given: frozenset[str],
) -> Member:
    """``grading``: the suite and the runner a record's key names."""
    if upload.problem is not None:  # known before staging (two uploads of one student): nothing is taken
        folder.mkdir(parents=True, exist_ok=True)
        staged = Staged((), (upload.problem,), upload.problem)
    else:
        staged = staging.stage(upload.path, exercise.files, folder, given)
    files = file_hashes(folder, exercise.files)
    return Member(upload, staged, folder, files, record_key(staged, files, *grading), record)


def set_aside_absent(klass: ClassState, store: RecordStore) -> list[str]:
    """Move the record of each student of ``klass.absent`` from ``store`` to ``set-aside/`` beside it (a
    rename: kept whole, never deleted); return whom. A record set aside earlier for the same student is
    replaced."""
    if not klass.absent:
        return []
    aside = store.folder.parent / SET_ASIDE_DIR
    aside.mkdir(exist_ok=True)
    for student in klass.absent:
        os.replace(store.folder / f"{student}.json", aside / f"{student}.json")
    return list(klass.absent)
