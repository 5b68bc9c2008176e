"""``grade batch --backend slurm``: the plan and the pool of a batch whose gradings run as Slurm jobs
(``grader.classroom.slurm.driver``), and its dry run: the sbatch scripts it would submit."""

from __future__ import annotations

import tempfile
from pathlib import Path

from grader.classroom.batch import BatchPlan
from grader.classroom.grade import batch_todo, class_to_grade
from grader.classroom.slurm import driver as slurm
from grader.classroom.state.records import RecordStore
from grader.core.course import Course, Exercise
from grader.runners.devices import resolve_device


def slurm_plan(
    *,
    course: Course,
    exercise: Exercise,
    out: Path,
    device: str,
    partition: str | None,
    account: str | None,
    qos: str | None,
    sbatch_args: list[str],
    throttle: int | None,
) -> tuple[BatchPlan, slurm.SlurmPool]:
    """The plan and the pool of a batch of ``exercise`` on the cluster, its records and reports in ``out``.

    The pool runs course.yml's ``slurm:`` settings with ``partition``, ``account`` and ``qos`` on top (each
    None keeps course.yml's); ``sbatch_args`` override the scripts' ``#SBATCH`` lines; at most ``throttle``
    tasks run at once (None: no limit). ``device`` ``auto`` means ``cuda`` when a part of the exercise is a
    GPU part: the submit host's GPUs say nothing of the nodes'."""
    settings = slurm.merged_settings(course.slurm, partition=partition, account=account, qos=qos)
    device = resolve_device(device, gpus=None, exercise=exercise)
    plan = BatchPlan(course=course, exercise=exercise, backend=settings.runner, device=device, workers=1)
    return plan, slurm.SlurmPool(settings, out, flags=sbatch_args, throttle=throttle)


def slurm_dry_run(
    *, plan: BatchPlan, pool: slurm.SlurmPool, submissions: Path, regrade: list[str], late: bool
) -> str:
    """The sbatch scripts and commands ``pool`` would submit for what in ``submissions`` needs grading (as
    ``batch_grade`` would choose it); nothing is submitted and no record is touched (the uploads are staged
    in a temporary folder, to key them)."""
    store = RecordStore(pool.out / "records", sweep=False)
    with tempfile.TemporaryDirectory(prefix="distgpu-dry-run-") as staged:
        klass, _reference = class_to_grade(plan, submissions, store, Path(staged))
        return slurm.dry_run(plan, pool, batch_todo(klass, regrade=regrade, late=late))
