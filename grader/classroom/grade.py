"""Grade a class: every stale submission of one exercise, then the gradebook and the reports."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.classroom.batch import (
    BatchPlan,
    BatchPool,
    PendingGrade,
    set_aside_invalid,
)
from grader.classroom.intake.discovery import Submission, discover
from grader.classroom.local_pool import LocalPool
from grader.classroom.outputs.batch_files import write_batch_outputs
from grader.classroom.outputs.class_report import REPORT_DIR, write_report
from grader.classroom.outputs.similarity_report import record_submissions, remove_similarity, write_similarity
from grader.classroom.state.batch_marks import batch_transaction, mark_started
from grader.classroom.state.gradebook import open_gradebook
from grader.classroom.state.gradebook import record as record_grade
from grader.classroom.state.records import Record, RecordStore, SetAside, keyed_files, suite_hash
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
    warning: str | None = None
    """One line to show: the similarity report could not be written (the grades and the other reports
    were)."""
    set_aside: list[SetAside] = field(default_factory=list)
    """Files in records/ that were not the record their name promised: moved aside, their students graded
    again."""


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
) -> BatchOutcome:
    """Grade every stale submission in ``submissions`` on ``pool`` (default: this machine); write records,
    gradebook, CSV, results.json, PNG. An upload that cannot be graded gets an ``invalid`` record without
    reaching the pool. Only this process writes the gradebook and the reports. The submissions are graded
    in name order, or in the order ``random.Random(shuffle)`` gives them when ``shuffle`` is a seed (a
    grade must not depend on what was graded before or beside it; ``benchmarks/bench_determinism.py``)."""
    pool = pool or LocalPool()
    found = discover(submissions)
    store = RecordStore(out / "records")
    set_aside = store.set_aside_strays()
    _mark_started(plan, gradebook_url, out)
    todo = batch_todo(plan, found, store, regrade=regrade, late=late)
    if shuffle is not None:
        random.Random(shuffle).shuffle(todo)
    reference = _graded_reference(plan, out, pool)
    on_start(len(todo))
    pool.grade(plan, set_aside_invalid(plan, todo, store, on_result), store, on_result)
    current = {s.student for s in found}
    records = [r for r in store.all() if r.student in current]
    _write_gradebook(plan, records, reference, gradebook_url)
    write_batch_outputs(records, out, plan.exercise.points)
    record_submissions(out, submissions)
    warning = None
    if records:
        warning = _similarity(out, plan.course, submissions)  # first: the class page links to it
        write_report(out, deadline=plan.exercise.deadline)
    return BatchOutcome(records, [p.submission.student for p in todo], out, warning, set_aside)


def batch_todo(
    plan: BatchPlan, found: list[Submission], store: RecordStore, *, regrade: list[str], late: bool
) -> list[PendingGrade]:
    """The submissions in ``found`` with no current record in ``store``, plus those named in ``regrade``."""
    unknown = sorted(set(regrade) - {s.student for s in found})
    if unknown:
        raise UsageError(f"--regrade: no submission for {', '.join(unknown)}")
    suite, runner_id = suite_hash(plan.course, plan.exercise), _runner_id(plan.backend)
    todo = []
    for submission in found:
        key, files = keyed_files(submission.path, plan.exercise, suite, runner_id)
        if submission.student in regrade or _stale(store.get(submission.student), key):
            submitted = submission.submitted.isoformat() if late and submission.submitted else None
            todo.append(PendingGrade(submission, key, submitted, files))
    return todo


def batch_deadline(course: Course, grades: Path) -> dt.datetime | None:
    """The deadline of the exercise the batch in ``grades`` (grades/NN_slug) graded, as its first record
    names it; None when it has no record or the exercise no deadline."""
    first = next(iter(RecordStore(grades / "records", sweep=False).all()), None)
    return course.find(first.result.exercise).deadline if first else None


def _similarity(out: Path, course: Course, submissions: Path) -> str | None:
    """Write the batch's similarity report; None, or, when anything fails there (copydetect, Pygments, a
    file), remove what is left of an earlier one and return the warning to show instead: the grades and
    the class report do not depend on it."""
    try:
        write_similarity(out, course, submissions=submissions)
    except (EnvironmentFailure, OSError):
        raise  # a full disk is not the report's fault: the batch stops with it (exit status 3)
    except Exception as exc:
        remove_similarity(out / REPORT_DIR)
        error = " ".join(f"{type(exc).__name__}: {exc}".split())
        return f"warning: no similarity report ({error}); retry with `grade similarity {out}`"
    return None


def _stale(record: Record | None, key: str) -> bool:
    return record is None or record.key != key


def _graded_reference(plan: BatchPlan, out: Path, pool: BatchPool) -> ExerciseResult:
    """The reference's result under the current suite (cached in out/); refuse to go on unless it is 100 %."""
    cache = RecordStore(out / "reference")
    key = suite_hash(plan.course, plan.exercise) + _runner_id(plan.backend)
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


def _mark_started(plan: BatchPlan, url: str, out: Path) -> None:
    """Check the gradebook (a corrupt one stops the batch before anything is graded) and mark the
    exercise's batch started: an export refuses the gradebook until ``_write_gradebook`` marks it finished."""
    with open_gradebook(url, course_id=plan.course.title, check=True) as gradebook:
        mark_started(gradebook, plan.exercise.dirname, out)


def _write_gradebook(plan: BatchPlan, records: list[Record], reference: ExerciseResult, url: str) -> None:
    """Upsert every record (idempotent), so a kill between a record and its gradebook row heals on rerun;
    all of them and the finished mark in one transaction (``batch_marks``)."""
    deadline = plan.exercise.deadline
    with (
        open_gradebook(url, course_id=plan.course.title) as opened,
        batch_transaction(opened, plan.exercise.dirname) as gradebook,
    ):
        for record in records:
            submitted = dt.datetime.fromisoformat(record.submitted) if record.submitted else None
            record_grade(
                gradebook,
                exercise=plan.exercise,
                cells=list(reference.tests),
                student=record.student,
                result=record.result,
                submitted=_naive_utc(submitted),
                duedate=_naive_utc(deadline),
            )


def _naive_utc(moment: dt.datetime | None) -> dt.datetime | None:
    """nbgrader stores naive UTC times."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None) if moment else None
