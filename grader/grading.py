"""The operations behind the CLI: grade one exercise, check the course, list exercises, write stubs."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from grader import report
from grader.batch import (
    BatchPlan,
    BatchPool,
    LocalPool,
    PendingGrade,
    Submission,
    discover,
    set_aside_invalid,
)
from grader.class_report import write_report
from grader.course import Course, Exercise
from grader.gradebook import open_gradebook
from grader.gradebook import record as record_grade
from grader.progress import Attempt, ProgressError, ProgressStore, file_hashes, now
from grader.records import Record, RecordStore, keyed_files, suite_hash
from grader.results import ExerciseResult, Status
from grader.runners import GradeJob, Runner, SuiteError
from grader.stubs import fresh_stubs, stale_stubs

RESULTS_DIR = ".grade/results"
"""Where the student's own last results live, for ``grade list``."""


def grade_exercise(
    *,
    course: Course,
    exercise: Exercise,
    runner: Runner,
    submission: Path | None,
    solution: bool,
    device: str,
    part: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ExerciseResult:
    """Grade the student's folder, a submission (folder or zip) or, with ``solution``, the reference.

    ``part`` ('ring_allreduce' or '02.ring_allreduce') grades that part alone. Grading the student's own
    folder remembers the result for ``grade list`` and adds an attempt to their progress store; a store
    that fails adds a note to the result instead of failing the grade.
    """
    if not exercise.parts:
        raise ValueError(f"exercise {exercise.key} ({exercise.slug}) has no graded parts yet")
    part_id = resolve_part(exercise, part) if part is not None else None
    if solution:
        source, label = course.solution_dir(exercise), "the reference solution"
    elif submission is not None:
        source, label = submission, f"submission {submission}"
    else:
        source = course.exercise_dir(exercise)
        label = f"your work in exercises/{exercise.dirname}"
    job = GradeJob(
        course=course,
        exercise=exercise,
        source=source,
        label=label,
        device=device,
        parts=(part_id,) if part_id else (),
        on_progress=on_progress,
    )
    result = runner.run(job)
    if not solution and submission is None:
        if part_id is None:
            _remember(course, result)
        result = _record_attempt(course, exercise, result, part_id, source)
    return result


def resolve_part(exercise: Exercise, ref: str) -> str:
    """'ring_allreduce' or '02.ring_allreduce' -> the part's id; ``KeyError`` naming the parts otherwise."""
    for part in exercise.parts:
        if ref in (part.id, part.id.split(".", 1)[1]):
            return part.id
    names = ", ".join(p.id.split(".", 1)[1] for p in exercise.parts)
    raise KeyError(f"exercise {exercise.key} has no part {ref!r}; its parts are {names}")


def _record_attempt(
    course: Course, exercise: Exercise, result: ExerciseResult, part: str | None, source: Path
) -> ExerciseResult:
    attempt = Attempt(
        exercise=exercise.key,
        time=now(),
        score=result.score,
        max_score=result.max_score,
        full_marks=result.all_graded_passed,
        part=part,
        suites="public+hidden" if any(t.suite == "hidden" for t in result.tests) else "public",
        files=file_hashes(source, exercise.files),
    )
    try:
        ProgressStore().add_attempt(course.title, attempt)
    except ProgressError as exc:
        return replace(result, notes=(*result.notes, f"your progress was not saved: {exc}"))
    return result


def _remember(course: Course, result: ExerciseResult) -> None:
    folder = course.root / RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result.exercise}.json").write_text(json.dumps(result.to_dict(), indent=1))


def last_result(course: Course, exercise: Exercise) -> ExerciseResult | None:
    """The student's last graded result for ``exercise``, if any."""
    path = course.root / RESULTS_DIR / f"{exercise.key}.json"
    try:
        return ExerciseResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------
# grade check


@dataclass(frozen=True)
class ExerciseCheck:
    """``grade check``'s findings for one exercise; ``ok`` when there are no problems."""

    exercise: Exercise
    problems: tuple[str, ...]
    reference: ExerciseResult | None
    stubs: ExerciseResult | None

    @property
    def ok(self) -> bool:
        return not self.problems


def check_exercise(*, course: Course, exercise: Exercise, runner: Runner, device: str) -> ExerciseCheck:
    """Stubs in sync; the reference scores 100 %; fresh stubs score 0 %, each test a NotImplementedError."""
    problems = [
        f"stale stub: {p.relative_to(course.root)} (run `grade stubs`)" for p in stale_stubs(course, exercise)
    ]
    reference = grade_exercise(
        course=course, exercise=exercise, runner=runner, submission=None, solution=True, device=device
    )
    problems += _reference_problems(reference, exercise)
    with fresh_stubs(course, exercise) as folder:
        stubs = grade_exercise(
            course=course, exercise=exercise, runner=runner, submission=folder, solution=False, device=device
        )
    problems += stub_problems(stubs)
    return ExerciseCheck(exercise, tuple(problems), reference, stubs)


def _reference_problems(result: ExerciseResult, exercise: Exercise) -> list[str]:
    problems = [
        f"reference: {t.number} {t.name} {t.status}: {t.output.splitlines()[0] if t.output else ''}"
        for t in result.tests
        if t.status not in (Status.PASSED, Status.BLOCKED)
    ]
    tested = {t.part for t in result.tests}
    problems += [f"part {p.id} has no tests" for p in exercise.parts if p.id not in tested]
    return problems


def stub_problems(result: ExerciseResult) -> list[str]:
    """Each test of an untouched stub that does not fail with NotImplementedError (blocked ones aside)."""
    return [
        f"stub: {t.number} {t.name} should fail with NotImplementedError, got {t.status}"
        + (f": {t.output.splitlines()[0]}" if t.output else "")
        for t in result.tests
        if t.status is not Status.BLOCKED
        and (t.status is not Status.FAILED or "NotImplementedError" not in t.output)
    ]


# ---------------------------------------------------------------------------------------------------------
# grade batch


@dataclass(frozen=True)
class BatchOutcome:
    records: list[Record]
    graded: list[str]
    """Students graded in this run (the others had a current record)."""
    out: Path


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
) -> BatchOutcome:
    """Grade every stale submission in ``submissions`` on ``pool`` (default: this machine); write records,
    gradebook, CSV, results.json, PNG. An upload that cannot be graded gets an ``invalid`` record without
    reaching the pool. Only this process writes the gradebook and the reports."""
    pool = pool or LocalPool()
    found = discover(submissions)
    store = RecordStore(out / "records")
    todo = batch_todo(plan, found, store, regrade=regrade, late=late)
    reference = _graded_reference(plan, out, pool)
    on_start(len(todo))
    pool.grade(plan, set_aside_invalid(plan, todo, store, on_result), store, on_result)
    current = {s.student for s in found}
    records = [r for r in store.all() if r.student in current]
    _write_gradebook(plan, records, reference, gradebook_url)
    report.write_batch_outputs(records, out, plan.exercise.points)
    if records:
        write_report(out, deadline=plan.exercise.deadline)
    return BatchOutcome(records, [p.submission.student for p in todo], out)


def batch_todo(
    plan: BatchPlan, found: list[Submission], store: RecordStore, *, regrade: list[str], late: bool
) -> list[PendingGrade]:
    """The submissions in ``found`` with no current record in ``store``, plus those named in ``regrade``."""
    unknown = sorted(set(regrade) - {s.student for s in found})
    if unknown:
        raise ValueError(f"--regrade: no submission for {', '.join(unknown)}")
    suite, runner_id = suite_hash(plan.course, plan.exercise), _runner_id(plan.backend)
    todo = []
    for submission in found:
        key, files = keyed_files(submission.path, plan.exercise, suite, runner_id)
        if submission.student in regrade or _stale(store.get(submission.student), key):
            submitted = submission.submitted.isoformat() if late and submission.submitted else None
            todo.append(PendingGrade(submission, key, submitted, files))
    return todo


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
    import docker

    from grader.images import image_tag

    return docker.from_env().images.get(image_tag("cpu")).id


def _write_gradebook(plan: BatchPlan, records: list[Record], reference: ExerciseResult, url: str) -> None:
    """Upsert every record (idempotent), so a kill between a record and its gradebook row heals on rerun."""
    deadline = plan.exercise.deadline
    with open_gradebook(url, course_id=plan.course.title) as gradebook:
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
