"""``grade batch``: grade a folder of submissions, each in its own process (and container), resumably.

Order of work: grade the reference first (a suite that does not give the reference full marks would grade
every student wrong, so the batch stops); then every submission whose record is missing or stale, N at a
time; each finished grade is written as a record (atomically) and into the gradebook by this process alone.
A rerun after a crash or a kill grades only what has no current record.

This module: what a batch grades (the submissions, the plan, the uploads set aside as invalid) and what a
pool that grades them is given. How one submission is graded: ``grader.classroom.grading_process``; the
pools: ``grader.classroom.local_pool`` (this machine) and ``grader.classroom.slurm.driver`` (a
cluster); the order of work: ``grader.classroom.grade.batch_grade``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader.classroom.intake.discovery import Submission, discover
from grader.classroom.state.class_state import Member
from grader.classroom.state.records import Record, RecordStore
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError
from grader.core.results import ExerciseResult, Status


@dataclass
class BatchPlan:
    course: Course
    exercise: Exercise
    backend: str
    device: str
    workers: int
    gpu_slots: list[str | None] = field(default_factory=list)
    """One entry per worker: the GPU ids it owns ("0,1"), or None on CPU. No two workers share a GPU."""


def check_request(folder: Path | None, *, workers: int | None, regrade: list[str]) -> list[Submission]:
    """The submissions in ``folder``, once the request makes sense; ``UsageError`` (one line) otherwise:
    a usage error must stop the batch before anything is graded. ``folder`` None: the uploads are not
    written yet (a platform's download, read under the batch's lock), so only the options are checked."""
    if folder is not None and not folder.is_dir():
        raise UsageError(f"{folder}: no such folder of submissions")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    if folder is None:
        return []
    found = discover(folder)
    unknown = sorted(set(regrade) - {s.student for s in found})
    if unknown:
        raise UsageError(f"--regrade: no submission for {', '.join(unknown)} in {folder}")
    return found


def how_code_runs(backend: str, *, allow_unsandboxed: bool) -> str:
    """One line saying where student code will run; ``UsageError`` when that would be unsandboxed as root
    and ``allow_unsandboxed`` is not given (the message names the three ways out)."""
    from grader.core import sandbox

    if backend == "docker":
        from grader.runners.images import image_tag

        image = image_tag("cpu")
        return f"student code runs in Docker ({image}): no network, memory and pid caps, ranks as nobody"
    mode = sandbox.requested_mode()
    why_not = "DISTGPU_SANDBOX=none" if mode == "none" else sandbox.probe()
    if why_not is None:
        who = ", each grading as a uid of its own," if os.geteuid() == 0 else ""
        return f"student code runs sandboxed with bubblewrap{who}: no network, no solutions or hidden tests"
    if mode == "bwrap":
        raise UsageError(f"{sandbox.SANDBOX_ENV_VAR}=bwrap, but {why_not}")
    user = _user_name()
    if os.geteuid() == 0 and not allow_unsandboxed:
        raise UsageError(
            f"student code would run unsandboxed as root ({why_not}); ways out: make bubblewrap work here "
            "(`grade doctor`), use --backend docker, or run the batch as an unprivileged user; "
            "--allow-unsandboxed runs it as root anyway"
        )
    return f"student code runs UNSANDBOXED as {user} ({why_not}): it can read and write what {user} can"


def _user_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def make_plan(
    *, course: Course, exercise: Exercise, backend: str, device: str, workers: int | None, gpus: int
) -> BatchPlan:
    """How many gradings run at once: on CPU one per `ranks` cores; on GPUs, each with GPUs of its own."""
    ranks = max((max(p.world_sizes) for p in exercise.parts), default=1)
    if device == "cuda":
        per_slot = min(ranks, gpus)
        assert per_slot, "resolve_device refuses cuda where there is no GPU"
        slots: list[str | None] = [
            ",".join(map(str, range(first, first + per_slot)))
            for first in range(0, gpus - per_slot + 1, per_slot)
        ]
        slots = slots[: workers or len(slots)]
    else:
        slots = [None] * (workers or max(1, (os.cpu_count() or 1) // ranks))
    return BatchPlan(
        course=course, exercise=exercise, backend=backend, device=device, workers=len(slots), gpu_slots=slots
    )


# ---------------------------------------------------------------------------------------------------------
# what a pool is given to grade, and what it must do with it


@dataclass(frozen=True)
class PendingGrade:
    """A member of the class to grade: its staged upload, and what its record is filed under."""

    member: Member
    submitted: str | None
    """ISO 8601 submission time to record (``--late``), else None."""

    @property
    def submission(self) -> Submission:
        return self.member.submission

    @property
    def key(self) -> str:
        """The record key (``records.record_key``)."""
        return self.member.key

    @property
    def files(self) -> dict[str, str]:
        """sha256 of each file grading takes, by name."""
        return self.member.files

    @property
    def source(self) -> Path:
        """What grading reads: the staged copy of the upload (staged once, by ``read_class``)."""
        return self.member.folder

    @property
    def notes(self) -> tuple[str, ...]:
        """What the intake (a platform's late flag) and staging said of the upload, for the student
        (``GradeJob.staging_notes``)."""
        return (*self.member.submission.notes, *self.member.staged.texts)


class BatchPool(Protocol):
    """Where a batch's gradings run: this machine (``LocalPool``) or a cluster (``grader.slurm``)."""

    def reference(self, plan: BatchPlan) -> ExerciseResult:
        """Grade the reference solution and return its result (no record)."""
        ...

    def grade(
        self,
        plan: BatchPlan,
        todo: list[PendingGrade],
        store: RecordStore,
        on_result: Callable[[str, ExerciseResult], None],
    ) -> None:
        """Grade ``todo``: file each grade in ``store`` (an ERROR verdict is no grade and is not filed) and
        report every result, filed or not, to ``on_result`` in this thread."""
        ...


# ---------------------------------------------------------------------------------------------------------
# invalid uploads: a verdict of their own, decided before any grading


def invalid_result(exercise: Exercise, reason: str, label: str, device: str) -> ExerciseResult:
    """0 for every part, no test run; ``reason`` (one line) is the result's first note."""
    result = ExerciseResult.for_every_part(
        exercise=exercise, status=Status.INVALID, reason=f"not graded: {reason}", graded=label, device=device
    )
    return dataclasses.replace(result, notes=(reason,))


def set_aside_invalid(
    plan: BatchPlan,
    todo: list[PendingGrade],
    store: RecordStore,
    on_result: Callable[[str, ExerciseResult], None],
) -> list[PendingGrade]:
    """File an ``invalid`` record for each upload in ``todo`` that cannot be graded (as its staging decided);
    return the others."""
    gradable = []
    for pending in todo:
        refusal = pending.member.staged.invalid
        if refusal is None:
            gradable.append(pending)
            continue
        student = pending.submission.student
        result = invalid_result(plan.exercise, refusal.text, student, plan.device)
        store.put(Record(student, pending.key, result, pending.submitted, pending.files))
        on_result(student, result)
    return gradable
