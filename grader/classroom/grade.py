"""Grade a class: every stale submission of one exercise, then the gradebook and the reports."""

from __future__ import annotations

import datetime as dt
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.classroom.batch import (
    BatchPlan,
    BatchPool,
    PendingGrade,
    set_aside_invalid,
)
from grader.classroom.intake.discovery import Submission
from grader.classroom.local_pool import LocalPool
from grader.classroom.outputs.batch_files import write_batch_outputs
from grader.classroom.outputs.class_report import REPORT_DIR, write_class_report
from grader.classroom.outputs.similarity_report import (
    record_submissions,
    remove_similarity,
    write_class_similarity,
)
from grader.classroom.state.batch_marks import batch_transaction, mark_started
from grader.classroom.state.class_state import (
    SET_ASIDE_DIR,
    STAGED_DIR,
    ClassState,
    read_class,
    set_aside_absent,
)
from grader.classroom.state.gradebook import StudentInfo, open_gradebook, remove_submissions
from grader.classroom.state.gradebook import record as record_grade
from grader.classroom.state.records import Record, RecordStore, SetAside, reference_key, suite_hash
from grader.core.course import Course
from grader.core.errors import EnvironmentFailure, UsageError
from grader.core.results import ExerciseResult
from grader.runners import SuiteError


@dataclass(frozen=True)
class BatchOutcome:
    records: list[Record]
    graded: list[str]
    """Students graded in this run (the others had a current record)."""
    out: Path
    staged: int
    """Uploads staged in this run: each once (``ClassState.stagings``)."""
    set_aside: list[str] = field(default_factory=list)
    """Students with a record and no submission now: their records moved to ``OUT/set-aside``."""
    warning: str | None = None
    """One line to show: the similarity report could not be written (the grades and the other reports
    were)."""
    strays: list[SetAside] = field(default_factory=list)
    """Files in records/ that were not the record their name promised: moved to ``OUT/set-aside`` too, and
    their students graded again."""


def batch_grade(
    *,
    plan: BatchPlan,
    submissions: Path,
    out: Path,
    regrade: list[str],
    gradebook_url: str,
    late: bool,
    on_start: Callable[[int], None],
    on_result: Callable[[str, ExerciseResult], None],
    pool: BatchPool | None = None,
    shuffle: int | None = None,
    diagrams: bool = True,
) -> BatchOutcome:
    """Grade every stale submission in ``submissions`` on ``pool`` (default: this machine); write records,
    gradebook, CSV, results.json, PNG. The class is read once (``read_class``: each upload staged once,
    each record read once) and every step below takes it. An upload that cannot be graded gets an
    ``invalid`` record without reaching the pool. The record of a student whose submission is gone is set
    aside, and they are in none of the outputs. Only this process writes the gradebook and the reports. The
    submissions are graded in name order, or in the order ``random.Random(shuffle)`` gives them when
    ``shuffle`` is a seed (a grade must not depend on what was graded before or beside it;
    ``benchmarks/bench_determinism.py``). ``diagrams``: each student's space-time diagrams beside their
    report page."""
    pool = pool or LocalPool()
    store = RecordStore(out / "records")
    strays = store.set_aside_strays(out / SET_ASIDE_DIR)
    _check_gradebook(plan, gradebook_url)
    klass, reference_at = class_to_grade(plan, submissions, store, out / STAGED_DIR)
    try:
        todo = batch_todo(klass, regrade=regrade, late=late)
        if shuffle is not None:
            random.Random(shuffle).shuffle(todo)
        set_aside = set_aside_absent(klass, store)
        reference = _graded_reference(plan, out, pool, reference_at)
        _mark_started(plan, gradebook_url, out)
        on_start(len(todo))
        pool.grade(plan, set_aside_invalid(plan, todo, store, on_result), store, on_result)
        klass = klass.reread(store, (p.submission.student for p in todo))
        warning = _write_outputs(plan, klass, out, reference, gradebook_url, diagrams=diagrams)
    finally:
        shutil.rmtree(out / STAGED_DIR, ignore_errors=True)
    graded = [p.submission.student for p in todo]
    return BatchOutcome(klass.records, graded, out, klass.stagings, set_aside, warning, strays)


def _write_outputs(
    plan: BatchPlan,
    klass: ClassState,
    out: Path,
    reference: ExerciseResult,
    gradebook_url: str,
    *,
    diagrams: bool,
) -> str | None:
    """The gradebook, the batch files, the similarity report and the class report, all of ``klass``;
    the similarity report's warning, if any."""
    _write_gradebook(plan, klass, reference, gradebook_url)
    write_batch_outputs(klass, out)
    record_submissions(out, klass.submissions)
    if not klass.records:
        return None
    warning = _similarity(out, plan.course, klass)  # first: the class page links to it
    write_class_report(klass, out, deadline=plan.exercise.deadline, diagrams=diagrams)
    return warning


def batch_todo(klass: ClassState, *, regrade: list[str], late: bool) -> list[PendingGrade]:
    """The members of ``klass`` with no current record, plus those named in ``regrade``."""
    unknown = sorted(set(regrade) - set(klass.students))
    if unknown:
        raise UsageError(f"--regrade: no submission for {', '.join(unknown)}")
    return [
        PendingGrade(member, _submitted(member.submission, late))
        for member in klass.members
        if member.student in regrade or not member.current
    ]


def class_to_grade(
    plan: BatchPlan, submissions: Path, store: RecordStore, staged: Path
) -> tuple[ClassState, str]:
    """The class in ``submissions``, its uploads staged into ``staged`` and keyed for ``plan`` (the suite
    and the runner it grades with), and the key the reference's result is filed under. ``batch_grade``
    reads it so; ``--dry-run`` too, into a folder of its own (nothing graded, nothing set aside)."""
    suite, runner_id = suite_hash(plan.course, plan.exercise), _runner_id(plan.backend)
    klass = read_class(
        exercise=plan.exercise,
        submissions=submissions,
        store=store,
        staged=staged,
        suite=suite,
        runner_id=runner_id,
    )
    return klass, reference_key(suite, runner_id)


def _submitted(submission: Submission, late: bool) -> str | None:
    """The submission time to record: with ``--late``, or whenever the platform gave it (Gradescope)."""
    given = late or submission.platform != "folders"
    return submission.submitted.isoformat() if given and submission.submitted else None


def batch_deadline(course: Course, grades: Path) -> dt.datetime | None:
    """The deadline of the exercise the batch in ``grades`` (grades/NN_slug) graded, as its first record
    names it; None when it has no record or the exercise no deadline."""
    first = next(iter(RecordStore(grades / "records", sweep=False).all()), None)
    return course.find(first.result.exercise).deadline if first else None


def _similarity(out: Path, course: Course, klass: ClassState) -> str | None:
    """Write the batch's similarity report; None, or, when anything fails there (a file, the
    lexer), remove what is left of an earlier one and return the warning to show instead: the grades and
    the class report do not depend on it."""
    try:
        write_class_similarity(klass, out, course)
    except (EnvironmentFailure, OSError):
        raise  # a full disk is not the report's fault: the batch stops with it (exit status 3)
    except Exception as exc:
        remove_similarity(out / REPORT_DIR)
        error = " ".join(f"{type(exc).__name__}: {exc}".split())
        return f"warning: no similarity report ({error}); retry with `grade similarity {out}`"
    return None


def _graded_reference(plan: BatchPlan, out: Path, pool: BatchPool, key: str) -> ExerciseResult:
    """The reference's result under the current suite (cached in out/ under ``key``); refuse to go on unless
    it is 100 %."""
    cache = RecordStore(out / "reference")
    cached = cache.get("reference")
    if cached is not None and cached.key == key:
        return cached.result
    result = pool.reference(plan)
    if not result.all_graded_passed:
        raise SuiteError(
            f"the reference scores {result.score:g} / {result.max_score:g} under this suite, so students "
            "would be graded wrong; fix the suite (`grade check`) before grading a batch"
        )
    cache.put(Record("reference", key, result, None))
    return result


def _runner_id(backend: str) -> str:
    if backend != "docker":
        return backend
    from grader.runners.images import docker_engine, image_tag

    return str(docker_engine().images.get(image_tag("cpu")).id)


def _check_gradebook(plan: BatchPlan, url: str) -> None:
    """Open and check the gradebook: a corrupt one stops the batch before anything is staged or graded."""
    with open_gradebook(url, course_id=plan.course.title, check=True):
        pass


def _mark_started(plan: BatchPlan, url: str, out: Path) -> None:
    """Mark the exercise's batch started, as its gradings begin: an export refuses the gradebook until
    ``_write_gradebook`` marks it finished. (A batch that stops before, on a usage error or a suite that
    fails its reference, changed nothing and leaves the last finished batch's mark.)"""
    with open_gradebook(url, course_id=plan.course.title) as gradebook:
        mark_started(gradebook, plan.exercise.dirname, out)


def _write_gradebook(plan: BatchPlan, klass: ClassState, reference: ExerciseResult, url: str) -> None:
    """Upsert every record of the class (idempotent), so a kill between a record and its gradebook row heals
    on rerun; remove this exercise's submission of each student whose submission is gone (``klass.gone``),
    so that ``grade export``, which reads the gradebook across exercises, exports this class. All of it and
    the batch's finished mark in one transaction (``batch_marks``)."""
    deadline = plan.exercise.deadline
    with (
        open_gradebook(url, course_id=plan.course.title) as opened,
        batch_transaction(opened, plan.exercise.dirname) as gradebook,
    ):
        remove_submissions(gradebook, plan.exercise, klass.gone)
        for member in klass.members:
            if member.record is None:
                continue
            submitted = (
                dt.datetime.fromisoformat(member.record.submitted) if member.record.submitted else None
            )
            record_grade(
                gradebook,
                exercise=plan.exercise,
                cells=list(reference.tests),
                student=member.student,
                result=member.record.result,
                submitted=_naive_utc(submitted),
                duedate=_naive_utc(deadline),
                who=StudentInfo(member.submission.name, member.submission.platform, member.submission.late),
            )


def _naive_utc(moment: dt.datetime | None) -> dt.datetime | None:
    """nbgrader stores naive UTC times."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None) if moment else None
