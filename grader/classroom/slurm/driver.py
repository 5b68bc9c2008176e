"""``grade batch --backend slurm``: the gradings run as Slurm jobs; this process (the driver) follows them.

Contract:
- The submit host grades nothing. The reference runs first, as a job of its own; then one job array, one
  task per slice of ``per_task`` submissions (course.yml ``slurm:``). A task runs ``python -m
  grader.gradeone`` once per submission (the code path of a local batch, with the local or the Docker
  runner) and files each grade in ``OUT/records``, a folder every node shares: the same hash-keyed,
  atomically written records as a local batch.
- A task skips a submission whose record is already current, so a requeued task grades nothing twice.
- The driver follows the array with ``squeue``, and with ``scontrol`` once a task has left the queue
  (clusters without accounting storage have no ``sacct``), and reads the records as they land.
- A task that ended for the infrastructure (NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, cancelled while
  running, or gone from ``scontrol``) has its ungraded submissions resubmitted in a new array. A task that
  ran out of memory or time files that verdict for the submission it was grading; a task that failed (a
  grader fault) reports that submission as an error, unrecorded, as a local grading process that died.
- ``scancel`` of the array (its pending tasks cancelled) or Ctrl-C stops the batch; rerunning the same
  command resumes it. Only the driver writes the gradebook and the reports
  (``grader.classroom.grade.batch_grade``).

Files, per submission round: ``OUT/slurm/NNN/{grade.sbatch, manifest.json, logs/, errors/}``.

Here: the driver (``SlurmPool``) and ``--dry-run``. The sbatch script: ``grader.classroom.slurm.script``;
asking Slurm how the tasks fare: ``grader.classroom.slurm.queue``; one array task (``python -m
grader.slurm``) and the files it shares with the driver: ``grader.classroom.slurm.task``.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.classroom.batch import BatchPlan, PendingGrade
from grader.classroom.grading_process import gradeone_command, read_result
from grader.classroom.slurm.queue import TaskEnd, queue_summary, squeue, task_ends
from grader.classroom.slurm.script import render_script, sbatch_line, task_command
from grader.classroom.slurm.task import read_error, write_manifest
from grader.classroom.state.records import Record, RecordStore
from grader.core.atomic import write_atomic
from grader.core.course import SlurmSettings
from grader.core.errors import EnvironmentFailure
from grader.core.results import ExerciseResult, Status

INFRASTRUCTURE = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "CANCELLED", "UNKNOWN"})
"""Task end states that say nothing about the submission: its ungraded submissions are resubmitted."""
VERDICTS = {"OUT_OF_MEMORY": Status.OOM, "TIMEOUT": Status.TIMEOUT}
"""Task end states the submission being graded caused: filed as its verdict."""
MAX_ROUNDS = 5
"""Arrays one batch submits at most before it gives up on what is still ungraded."""


class SlurmStopped(EnvironmentFailure):
    """The batch stopped before every submission was graded (scancel, Ctrl-C, a cluster that keeps failing):
    the cluster's failure, exit status 3; the records filed so far stay, and the same command resumes."""


# ---------------------------------------------------------------------------------------------------------
# the driver


@dataclass
class SlurmPool:
    """Runs a batch's gradings on Slurm (see the module's contract); a ``BatchPool`` for ``batch_grade``."""

    settings: SlurmSettings
    out: Path
    flags: list[str] = field(default_factory=list)
    """sbatch options from the command line: they override the script's ``#SBATCH`` lines."""
    throttle: int | None = None
    """At most this many tasks at once (``--array=...%N``)."""
    on_queue: Callable[[str], None] = lambda text: None
    """Told what the queue looks like, each poll."""
    poll_s: float = 1.0

    def reference(self, plan: BatchPlan) -> ExerciseResult:
        label = "the reference solution"
        for _round in range(MAX_ROUNDS):
            folder = self._new_round()
            result = folder / "reference.json"
            script = folder / "grade.sbatch"
            command = gradeone_command(plan, None, label, None, result)
            name = f"grade-{plan.exercise.dirname}-reference"
            log = folder / "logs" / "reference.out"
            write_atomic(
                script, render_script(plan, self.settings, name=name, log=log, gradings=1, command=command)
            )
            job = self._submit(script, None)
            ends = self._follow(job, "reference")
            if result.exists() or ends[0].state not in INFRASTRUCTURE:
                return read_result(result, plan, label, f"Slurm job {job} ended {ends[0].state}; see {log}")
            if ends[0].stopped_by_user:
                raise SlurmStopped(f"the reference job {job} was cancelled; rerun the same command to resume")
        raise SlurmStopped(f"the reference job failed {MAX_ROUNDS} times for the infrastructure; see {log}")

    def grade(
        self,
        plan: BatchPlan,
        todo: list[PendingGrade],
        store: RecordStore,
        on_result: Callable[[str, ExerciseResult], None],
    ) -> None:
        for grade in todo:  # --regrade: an old record must not pass for the new grade
            (store.folder / f"{grade.submission.student}.json").unlink(missing_ok=True)
        remaining = list(todo)
        for _round in range(MAX_ROUNDS):
            if not remaining:
                return
            remaining = self._round(plan, remaining, store, on_result)
        if remaining:
            names = ", ".join(g.submission.student for g in remaining)
            raise SlurmStopped(
                f"still ungraded after {MAX_ROUNDS} arrays (see {self.out / 'slurm'}): {names}"
            )

    def _round(
        self,
        plan: BatchPlan,
        todo: list[PendingGrade],
        store: RecordStore,
        on_result: Callable[[str, ExerciseResult], None],
    ) -> list[PendingGrade]:
        """Submit one array over ``todo``, follow it to the end; return what must go into the next one."""
        folder = self._new_round()
        slices = [todo[i : i + self.settings.per_task] for i in range(0, len(todo), self.settings.per_task)]
        job = self._submit_array(plan, folder, store, slices)
        reported: set[str] = set()

        def harvest() -> None:
            for grade in todo:
                student = grade.submission.student
                if student in reported:
                    continue
                result = _landed(grade, store, folder)
                if result is not None:
                    reported.add(student)
                    on_result(student, result)

        ends = self._follow(job, f"array {job}", harvest)
        harvest()
        again: list[PendingGrade] = []
        stopped = False
        for index, part in enumerate(slices):
            missing = [g for g in part if g.submission.student not in reported]
            if not missing:
                continue
            end = ends.get(index, TaskEnd("UNKNOWN", False))
            if end.state in INFRASTRUCTURE:
                stopped |= end.stopped_by_user
                again += missing
                continue
            culprit = missing[0]  # a task grades its slice in order: the first ungraded one was running
            _blame_task_end(plan, folder, end, culprit, store, on_result)
            again += missing[1:]
        if stopped:
            raise SlurmStopped(
                f"array {job} was cancelled with {len(again)} submissions ungraded; "
                "rerun the same command to resume"
            )
        return again

    def _submit_array(
        self, plan: BatchPlan, folder: Path, store: RecordStore, slices: list[list[PendingGrade]]
    ) -> str:
        """Write the round's manifest and sbatch script into ``folder``; submit one task per slice."""
        manifest = write_manifest(folder, plan, store.folder, slices)
        script = folder / "grade.sbatch"
        log = folder / "logs" / "%a.out"
        name = f"grade-{plan.exercise.dirname}"
        command = task_command(manifest)
        gradings = self.settings.per_task
        write_atomic(
            script, render_script(plan, self.settings, name=name, log=log, gradings=gradings, command=command)
        )
        array = f"0-{len(slices) - 1}" + (f"%{self.throttle}" if self.throttle else "")
        return self._submit(script, array)

    def _new_round(self) -> Path:
        rounds = self.out.resolve() / "slurm"  # absolute: the script changes directory, the nodes share it
        rounds.mkdir(parents=True, exist_ok=True)
        number = 1 + max((int(p.name) for p in rounds.iterdir() if p.name.isdigit()), default=0)
        folder = rounds / f"{number:03d}"
        (folder / "logs").mkdir(parents=True)
        (folder / "errors").mkdir()
        return folder

    def _submit(self, script: Path, array: str | None) -> str:
        command = sbatch_line(script, array, self.flags)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise SlurmStopped(f"{shlex.join(command)} failed: {done.stderr.strip()}")
        job = done.stdout.strip().split(";")[0]
        write_atomic(script.parent / "job", job + "\n")  # which Slurm job this round is, for squeue/scancel
        return job

    def _follow(self, job: str, what: str, on_poll: Callable[[], None] = lambda: None) -> dict[int, TaskEnd]:
        """Poll until no task of ``job`` is queued; Ctrl-C cancels the job and stops the batch."""
        seen: dict[int, str] = {}
        try:
            while True:
                live = squeue(job)
                seen.update({i: state for i, (state, _reason) in live.items()})
                on_poll()
                self.on_queue(f"{what}: " + queue_summary(live) if live else "")
                if not live:
                    return task_ends(job, seen)
                time.sleep(self.poll_s)
        except KeyboardInterrupt:
            subprocess.run(["scancel", job], check=False)
            raise SlurmStopped(
                f"interrupted: cancelled Slurm job {job}; rerun the same command to resume"
            ) from None


def _landed(grade: PendingGrade, store: RecordStore, folder: Path) -> ExerciseResult | None:
    """``grade``'s result once its task is done with it: its current record, or the error the task wrote."""
    record = store.get(grade.submission.student)
    if record is not None and record.key == grade.key:
        return record.result
    return read_error(folder / "errors" / f"{grade.submission.student}.json")


def _blame_task_end(
    plan: BatchPlan,
    folder: Path,
    end: TaskEnd,
    culprit: PendingGrade,
    store: RecordStore,
    on_result: Callable[[str, ExerciseResult], None],
) -> None:
    """A task that ended for a cause of its own (out of memory or time, a grader fault) ended on ``culprit``,
    the submission it was grading: file that verdict as its grade (an ERROR is reported, not filed)."""
    verdict = VERDICTS.get(end.state, Status.ERROR)
    reason = f"the Slurm task ended {end.state} while grading this submission (log: {folder / 'logs'})"
    result = ExerciseResult.for_every_part(
        exercise=plan.exercise,
        status=verdict,
        graded=culprit.submission.student,
        device=plan.device,
        reason=reason,
    )
    if verdict is not Status.ERROR:
        store.put(Record(culprit.submission.student, culprit.key, result, culprit.submitted, culprit.files))
    on_result(culprit.submission.student, result)


# ---------------------------------------------------------------------------------------------------------
# --dry-run


def dry_run(plan: BatchPlan, pool: SlurmPool, todo: list[PendingGrade]) -> str:
    """The sbatch scripts and command lines a batch would submit and run; nothing is written or submitted."""
    folder = pool.out.resolve() / "slurm" / "NNN"
    reference = gradeone_command(plan, None, "the reference solution", None, folder / "reference.json")
    size = pool.settings.per_task
    slices = [todo[i : i + size] for i in range(0, len(todo), size)]
    array = f"0-{max(len(slices) - 1, 0)}" + (f"%{pool.throttle}" if pool.throttle else "")
    name = f"grade-{plan.exercise.dirname}"
    text = [
        "# 1. the reference, as a job of its own (the batch stops unless it scores 100 %):",
        shlex.join(sbatch_line(folder / "grade.sbatch", None, pool.flags)),
        render_script(
            plan,
            pool.settings,
            name=f"{name}-reference",
            log=folder / "logs/reference.out",
            gradings=1,
            command=reference,
        ),
        f"# 2. one array of {len(slices)} tasks over {len(todo)} submissions ({size} per task):",
        shlex.join(sbatch_line(folder / "grade.sbatch", array, pool.flags)),
        render_script(
            plan,
            pool.settings,
            name=name,
            log=folder / "logs/%a.out",
            gradings=size,
            command=task_command(folder / "manifest.json"),
        ),
        "# 3. what each task runs, in turn (records go to " + str(pool.out.resolve() / "records") + "):",
    ]
    for index, part in enumerate(slices):
        for grade in part:
            out = Path(tempfile.gettempdir()) / "distgpu-batch-XXXXXXXX" / "result.json"  # made per grading
            text.append(
                f"task {index}: "
                + shlex.join(
                    gradeone_command(
                        plan, grade.submission.path.resolve(), grade.submission.student, None, out
                    )
                )
            )
    return "\n".join(text)


def merged_settings(
    settings: SlurmSettings, *, partition: str | None, account: str | None, qos: str | None
) -> SlurmSettings:
    """course.yml's ``slurm:`` with the command line's choices on top."""
    return replace(
        settings,
        partition=partition or settings.partition,
        account=account or settings.account,
        qos=qos or settings.qos,
    )
