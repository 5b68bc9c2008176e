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
"""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.classroom.batch import (
    PROCESS_MARGIN_S,
    BatchPlan,
    PendingGrade,
    grade_in_process,
    gradeone_command,
    read_result,
)
from grader.classroom.records import Record, RecordStore
from grader.core.course import Exercise, SlurmSettings, load_course
from grader.core.results import ExerciseResult, Status

INFRASTRUCTURE = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "CANCELLED", "UNKNOWN"})
"""Task end states that say nothing about the submission: its ungraded submissions are resubmitted."""
VERDICTS = {"OUT_OF_MEMORY": Status.OOM, "TIMEOUT": Status.TIMEOUT}
"""Task end states the submission being graded caused: filed as its verdict."""
MAX_ROUNDS = 5
"""Arrays one batch submits at most before it gives up on what is still ungraded."""


class SlurmStopped(RuntimeError):
    """The batch stopped before every submission was graded (scancel, Ctrl-C, a cluster that keeps failing);
    the records filed so far stay, and the same command resumes."""


# ---------------------------------------------------------------------------------------------------------
# what one task asks for, and the script that asks for it


@dataclass(frozen=True)
class Request:
    nodes: int
    cpus_per_node: int
    """One per rank on the busiest node."""
    gpus_per_node: int
    memory_gb: float
    minutes: int


def request(exercise: Exercise, device: str, gradings: int) -> Request:
    """The allocation one task needs to grade ``gradings`` submissions of ``exercise`` in turn."""
    per_node = max((-(-size // p.nodes) for p in exercise.parts for size in p.world_sizes), default=1)
    return Request(
        nodes=max((p.nodes for p in exercise.parts), default=1),
        cpus_per_node=per_node,
        gpus_per_node=per_node if device == "cuda" else 0,
        memory_gb=exercise.memory_gb,
        minutes=math.ceil(gradings * (exercise.timeout + PROCESS_MARGIN_S) / 60),
    )


def render_script(
    plan: BatchPlan, settings: SlurmSettings, *, name: str, log: Path, gradings: int, command: list[str]
) -> str:
    """The sbatch script: resources from course.yml as ``#SBATCH`` lines, then ``command``."""
    need = request(plan.exercise, plan.device, gradings)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={need.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={need.cpus_per_node}",
        f"#SBATCH --mem={round(need.memory_gb * 1024)}M",
        f"#SBATCH --time={need.minutes}",
        f"#SBATCH --output={log}",
        "#SBATCH --open-mode=append",  # a requeued task appends to its log
        "#SBATCH --requeue",
    ]
    if need.gpus_per_node:
        gpus = "--gres=gpu:{}" if settings.gpus == "gres" else "--gpus-per-node={}"
        lines.append("#SBATCH " + gpus.format(need.gpus_per_node))
    for key in ("partition", "account", "qos"):
        value = getattr(settings, key)
        lines += [f"#SBATCH --{key}={value}"] if value else []
    lines += [f"#SBATCH {option}" for option in settings.sbatch]
    run = " ".join(word if word == ARRAY_INDEX else shlex.quote(word) for word in command)
    lines += ["set -euo pipefail", f"cd {shlex.quote(str(plan.course.root))}", "exec " + run]
    return "\n".join(lines) + "\n"


ARRAY_INDEX = '"$SLURM_ARRAY_TASK_ID"'
"""Left unquoted in the script's command line, so the shell expands it in each task."""


def task_command(manifest: Path) -> list[str]:
    return [sys.executable, "-m", "grader.slurm", str(manifest), ARRAY_INDEX]


def _sbatch_line(script: Path, array: str | None, flags: list[str]) -> list[str]:
    return ["sbatch", "--parsable", *([f"--array={array}"] if array else []), *flags, str(script)]


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
            script.write_text(
                render_script(plan, self.settings, name=name, log=log, gradings=1, command=command)
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
        manifest = write_manifest(folder, plan, store.folder, slices)
        script = folder / "grade.sbatch"
        log = folder / "logs" / "%a.out"
        name = f"grade-{plan.exercise.dirname}"
        command = task_command(manifest)
        gradings = self.settings.per_task
        script.write_text(
            render_script(plan, self.settings, name=name, log=log, gradings=gradings, command=command)
        )
        array = f"0-{len(slices) - 1}" + (f"%{self.throttle}" if self.throttle else "")
        job = self._submit(script, array)
        reported: set[str] = set()

        def harvest() -> None:
            for grade in todo:
                student = grade.submission.student
                if student in reported:
                    continue
                record = store.get(student)
                if record is not None and record.key == grade.key:
                    result: ExerciseResult | None = record.result
                else:
                    result = _read_error(folder / "errors" / f"{student}.json")
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
            verdict = VERDICTS.get(end.state, Status.ERROR)
            reason = (
                f"the Slurm task ended {end.state} while grading this submission (log: {folder / 'logs'})"
            )
            result = ExerciseResult.for_every_part(
                exercise=plan.exercise,
                status=verdict,
                graded=culprit.submission.student,
                device=plan.device,
                reason=reason,
            )
            if verdict is not Status.ERROR:
                store.put(
                    Record(culprit.submission.student, culprit.key, result, culprit.submitted, culprit.files)
                )
            on_result(culprit.submission.student, result)
            again += missing[1:]
        if stopped:
            raise SlurmStopped(
                f"array {job} was cancelled with {len(again)} submissions ungraded; "
                "rerun the same command to resume"
            )
        return again

    def _new_round(self) -> Path:
        rounds = self.out.resolve() / "slurm"  # absolute: the script changes directory, the nodes share it
        rounds.mkdir(parents=True, exist_ok=True)
        number = 1 + max((int(p.name) for p in rounds.iterdir() if p.name.isdigit()), default=0)
        folder = rounds / f"{number:03d}"
        (folder / "logs").mkdir(parents=True)
        (folder / "errors").mkdir()
        return folder

    def _submit(self, script: Path, array: str | None) -> str:
        command = _sbatch_line(script, array, self.flags)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise SlurmStopped(f"{shlex.join(command)} failed: {done.stderr.strip()}")
        job = done.stdout.strip().split(";")[0]
        (script.parent / "job").write_text(job + "\n")  # which Slurm job this round is, for squeue/scancel
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


def write_manifest(folder: Path, plan: BatchPlan, records: Path, slices: list[list[PendingGrade]]) -> Path:
    """What every task of the array needs, in one JSON file on the shared folder."""
    tasks = [
        [
            {
                "student": g.submission.student,
                "path": str(g.submission.path.resolve()),
                "key": g.key,
                "submitted": g.submitted,
                "files": g.files,
            }
            for g in part
        ]
        for part in slices
    ]
    spec = {
        "course": str(plan.course.root / "course.yml"),
        "exercise": plan.exercise.key,
        "runner": plan.backend,
        "device": plan.device,
        "records": str(records.resolve()),
        "errors": str((folder / "errors").resolve()),
        "tasks": tasks,
    }
    path = folder / "manifest.json"
    path.write_text(json.dumps(spec, indent=1))
    return path


def _read_error(path: Path) -> ExerciseResult | None:
    try:
        return ExerciseResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------
# asking Slurm


@dataclass(frozen=True)
class TaskEnd:
    state: str
    """scontrol's JobState (COMPLETED, FAILED, NODE_FAIL, ...), or UNKNOWN once Slurm has forgotten it."""
    stopped_by_user: bool
    """Cancelled while still pending: a person cancelled the batch, no failure did."""


def squeue(job: str) -> dict[int, tuple[str, str]]:
    """The tasks of ``job`` still queued: array index (0 for a plain job) -> (state, reason)."""
    done = subprocess.run(
        ["squeue", "-h", "-r", "-j", job, "-o", "%K %T %r"], capture_output=True, text=True, check=False
    )
    live = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        index, state, reason = [*line.split(maxsplit=2), "", ""][:3]
        live[int(index) if index.isdigit() else 0] = (state, reason)
    return live


def task_ends(job: str, seen: dict[int, str]) -> dict[int, TaskEnd]:
    """How each task of ``job`` ended, from ``scontrol show job`` (kept MinJobAge seconds after the end)."""
    done = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, check=False)
    ends = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        state = fields.get("JobState", "UNKNOWN")
        for index in _indices(fields.get("ArrayTaskId", "0")):
            never_ran = seen.get(index, "PENDING") == "PENDING"  # as last seen in squeue
            ends[index] = TaskEnd(state, state == "CANCELLED" and never_ran)
    return ends


def _indices(spec: str) -> list[int]:
    """'3' -> [3]; '5-9%2' -> [5..9]; '1,4-5' -> [1, 4, 5]: an array's pending tasks share one record."""
    found = []
    for piece in spec.split("%")[0].split(","):
        low, _, high = piece.partition("-")
        if low.isdigit():
            found += range(int(low), int(high or low) + 1)
    return found


def queue_summary(live: dict[int, tuple[str, str]]) -> str:
    """'2 running, 6 pending (Resources)': what the queue holds, for the progress line."""
    counts: dict[str, int] = {}
    reasons: set[str] = set()
    for state, reason in live.values():
        counts[state.lower()] = counts.get(state.lower(), 0) + 1
        if state == "PENDING" and reason not in ("", "None"):
            reasons.add(reason)
    text = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    return text + (f" ({', '.join(sorted(reasons))})" if reasons else "")


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
        shlex.join(_sbatch_line(folder / "grade.sbatch", None, pool.flags)),
        render_script(
            plan,
            pool.settings,
            name=f"{name}-reference",
            log=folder / "logs/reference.out",
            gradings=1,
            command=reference,
        ),
        f"# 2. one array of {len(slices)} tasks over {len(todo)} submissions ({size} per task):",
        shlex.join(_sbatch_line(folder / "grade.sbatch", array, pool.flags)),
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


# ---------------------------------------------------------------------------------------------------------
# one array task


def run_task(manifest: Path, index: int) -> int:
    """Grade slice ``index`` of ``manifest``, one process per submission, filing each grade as it ends."""
    spec = json.loads(manifest.read_text())
    course = load_course(Path(spec["course"]))
    plan = BatchPlan(
        course=course,
        exercise=course.find(spec["exercise"]),
        backend=spec["runner"],
        device=spec["device"],
        workers=1,
        gpu_slots=[None],
    )
    store = RecordStore(Path(spec["records"]), sweep=False)  # other tasks may be mid-write
    for item in spec["tasks"][index]:
        record = store.get(item["student"])
        if record is not None and record.key == item["key"]:
            print(f"{item['student']}: graded before this task was requeued", flush=True)
            continue
        result = grade_in_process(plan, Path(item["path"]), item["student"], None)
        print(f"{item['student']}: {result.verdict} {result.score:g}/{result.max_score:g}", flush=True)
        if result.verdict is Status.ERROR:  # no grade: the driver reports it, the next run retries it
            error = Path(spec["errors"]) / f"{item['student']}.json"
            error.with_suffix(".tmp").write_text(json.dumps(result.to_dict()))
            error.with_suffix(".tmp").replace(error)
        else:
            store.put(Record(item["student"], item["key"], result, item["submitted"], item.get("files", {})))
    return 0


def merged_settings(
    settings: SlurmSettings, *, partition: str | None, account: str | None, qos: str | None
) -> SlurmSettings:
    """course.yml's ``slurm:`` with the command line's choices on top."""
    chosen = {k: v for k, v in (("partition", partition), ("account", account), ("qos", qos)) if v}
    return replace(settings, **chosen)
