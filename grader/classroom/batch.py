"""``grade batch``: grade a folder of submissions, each in its own process (and container), resumably.

Order of work: grade the reference first (a suite that does not give the reference full marks would grade
every student wrong, so the batch stops); then every submission whose record is missing or stale, N at a
time; each finished grade is written as a record (atomically) and into the gradebook by this process alone.
A rerun after a crash or a kill grades only what has no current record.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader.classroom.records import Record, RecordStore
from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult, Status
from grader.core.submission import why_invalid
from grader.runners import SuiteError

PROCESS_MARGIN_S = 120.0
"""Beyond the exercise's budget, for a grading process: interpreter, torch, container start."""


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path
    submitted: dt.datetime | None


@dataclass
class BatchPlan:
    course: Course
    exercise: Exercise
    backend: str
    device: str
    workers: int
    gpu_slots: list[str | None] = field(default_factory=list)
    """One entry per worker: the GPU ids it owns ("0,1"), or None on CPU. No two workers share a GPU."""


def discover(folder: Path) -> list[Submission]:
    """Every folder or .zip in ``folder`` is one student's submission, named by the student's id."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir() or entry.suffix == ".zip":
            student = entry.name if entry.is_dir() else entry.stem
            found.append(Submission(student, entry, _submitted_at(entry)))
    return found


def check_request(folder: Path, *, workers: int | None, regrade: list[str]) -> list[Submission]:
    """The submissions in ``folder``, once the request makes sense; ``ValueError`` (one line) otherwise:
    a usage error must stop the batch before anything is graded."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder of submissions")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    found = discover(folder)
    unknown = sorted(set(regrade) - {s.student for s in found})
    if unknown:
        raise ValueError(f"--regrade: no submission for {', '.join(unknown)} in {folder}")
    return found


def how_code_runs(backend: str, *, allow_unsandboxed: bool) -> str:
    """One line saying where student code will run; ``ValueError`` when that would be unsandboxed as root
    and ``allow_unsandboxed`` is not given (the message names the three ways out)."""
    from grader.core import sandbox

    if backend == "docker":
        from grader.runners.images import image_tag

        image = image_tag("cpu")
        return f"student code runs in Docker ({image}): no network, memory and pid caps, ranks as nobody"
    mode = sandbox.requested_mode()
    why_not = "DISTGPU_SANDBOX=none" if mode == "none" else sandbox.probe()
    if why_not is None:
        who = " as nobody" if os.geteuid() == 0 else ""
        return f"student code runs sandboxed with bubblewrap{who}: no network, no solutions or hidden tests"
    if mode == "bwrap":
        raise ValueError(f"{sandbox.SANDBOX_ENV_VAR}=bwrap, but {why_not}")
    user = _user_name()
    if os.geteuid() == 0 and not allow_unsandboxed:
        raise ValueError(
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


def _submitted_at(entry: Path) -> dt.datetime | None:
    """nbgrader's convention: a timestamp.txt in the submission folder; else the file's modification time."""
    stamp = entry / "timestamp.txt"
    if stamp.is_file():
        try:
            moment = dt.datetime.fromisoformat(stamp.read_text().strip())
            return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
        except ValueError:
            return None
    return dt.datetime.fromtimestamp(entry.stat().st_mtime, tz=dt.UTC)


def make_plan(
    *, course: Course, exercise: Exercise, backend: str, device: str, workers: int | None, gpus: int
) -> BatchPlan:
    """How many gradings run at once: on CPU one per `ranks` cores; on GPUs, each with GPUs of its own."""
    ranks = max((max(p.world_sizes) for p in exercise.parts), default=1)
    if device == "cuda":
        per_slot = min(ranks, gpus)
        if not per_slot:
            raise ValueError("--device cuda: no GPU is visible here")
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
# grading one submission in its own process


def grade_in_process(plan: BatchPlan, source: Path | None, label: str, gpus: str | None) -> ExerciseResult:
    """Grade one submission in a grading process of its own (the reference when ``source`` is None)."""
    process = GradingProcess(plan, gpus)
    try:
        return process.grade(source, label)
    finally:
        process.close()


def gradeone_command(
    plan: BatchPlan, source: Path | None, label: str, gpus: str | None, out: Path
) -> list[str]:
    """The command line that grades ``source`` (the reference when None) and writes its JSON to ``out``."""
    command = [*_gradeone(plan, gpus), "--out", str(out), "--label", label]
    return command + (["--submission", str(source)] if source else [])


def _gradeone(plan: BatchPlan, gpus: str | None) -> list[str]:
    command = [sys.executable, "-m", "grader.gradeone", "--course", str(plan.course.root / "course.yml")]
    command += ["--exercise", plan.exercise.key, "--backend", plan.backend, "--device", plan.device]
    command += ["--prewarm"] if plan.backend == "docker" and prewarm_pays(plan.workers) else []
    return command + (["--gpus", gpus] if gpus else [])


def prewarm_pays(workers: int) -> bool:
    """Whether warming the next container while one grades saves time: only with a core free for it. Where
    the gradings already fill the cores, the warm-up only slows the grading it should hide behind."""
    return (os.cpu_count() or 1) >= 2 * workers


def read_result(out: Path, plan: BatchPlan, label: str, stderr: str) -> ExerciseResult:
    try:
        payload = json.loads(out.read_text())
    except (OSError, ValueError):
        return ExerciseResult.for_every_part(
            exercise=plan.exercise,
            status=Status.ERROR,
            graded=label,
            device=plan.device,
            reason="the grading process ended without a result: "
            + (stderr.strip().splitlines() or ["?"])[-1],
        )
    if "suite_error" in payload:
        raise SuiteError(payload["suite_error"])
    return ExerciseResult.from_dict(payload["result"])


def _die_with_parent() -> None:
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a killed batch leaves no grader behind


# ---------------------------------------------------------------------------------------------------------
# the pool


def grade_all(
    plan: BatchPlan,
    todo: list[Submission],
    on_done: Callable[[Submission, ExerciseResult], None],
) -> None:
    """Grade ``todo`` on ``plan.workers`` slots; ``on_done`` runs in this thread, one result at a time."""
    slots = [GradingProcess(plan, gpus) for gpus in plan.gpu_slots or [None] * plan.workers]
    free = list(range(len(slots)))
    pending: dict[Future[ExerciseResult], tuple[Submission, int]] = {}
    queue = list(todo)
    try:
        with ThreadPoolExecutor(max_workers=len(slots)) as pool:
            while queue or pending:
                while queue and free:
                    submission, slot = queue.pop(0), free.pop()
                    future = pool.submit(slots[slot].grade, submission.path, submission.student)
                    pending[future] = (submission, slot)
                done = next(as_completed(pending))
                submission, slot = pending.pop(done)
                free.append(slot)
                on_done(submission, done.result())
    finally:
        for process in slots:
            process.close()


GRACEFUL_STOP_S = 15.0
"""How long a grading process may take to wind down at the end of a batch before it is killed."""


class GradingProcess:
    """One batch slot's ``python -m grader.gradeone --serve``: started on first use, replaced when it dies
    or overruns, and recycled every ``JOBS_PER_PROCESS`` gradings (a long-lived judge must not grow)."""

    JOBS_PER_PROCESS = 50

    def __init__(self, plan: BatchPlan, gpus: str | None) -> None:
        self.plan, self.gpus = plan, gpus
        self._process: subprocess.Popen[bytes] | None = None
        self._replies = -1
        self._jobs = 0
        self._folder = tempfile.TemporaryDirectory(prefix="distgpu-batch-")
        self._stderr = Path(self._folder.name) / "stderr.log"

    def grade(self, source: Path | None, label: str) -> ExerciseResult:
        """Grade ``source`` (None: the reference); a process that died without a result gets one retry."""
        out = Path(self._folder.name) / "result.json"
        out.unlink(missing_ok=True)
        deadline = self.plan.exercise.timeout + PROCESS_MARGIN_S
        for _attempt in range(2):
            if self._process is None or self._jobs >= self.JOBS_PER_PROCESS:
                self._restart()
            assert self._process is not None and self._process.stdin is not None
            job = {"submission": str(source) if source else None, "label": label, "out": str(out)}
            try:
                self._process.stdin.write((json.dumps(job) + "\n").encode())
                self._process.stdin.flush()
            except BrokenPipeError:
                self._stop()
                continue
            self._jobs += 1
            answered = self._await_reply(deadline)
            if answered is None:
                self._stop()
                return ExerciseResult.for_every_part(
                    exercise=self.plan.exercise,
                    status=Status.TIMEOUT,
                    graded=label,
                    device=self.plan.device,
                    reason=f"grading did not finish within {deadline:g} s",
                )
            if answered:
                break
            self._stop()  # it died mid-job: infrastructure, so the job runs once more in a new process
        return read_result(out, self.plan, label, _read_tail(self._stderr))

    def close(self) -> None:
        self._stop(graceful=True)
        self._folder.cleanup()

    def _await_reply(self, timeout_s: float) -> bool | None:
        """True when the job's reply came, False when the process ended first, None on the deadline."""
        ready, _, _ = select.select([self._replies], [], [], timeout_s)
        if not ready:
            return None
        line = b""
        while not line.endswith(b"\n"):
            chunk = os.read(self._replies, 4096)
            if not chunk:
                return False
            line += chunk
        return True

    def _restart(self) -> None:
        self._stop()
        replies_r, replies_w = os.pipe()
        command = [*_gradeone(self.plan, self.gpus), "--serve", str(replies_w)]
        with open(self._stderr, "ab") as stderr:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                pass_fds=(replies_w,),
                preexec_fn=_die_with_parent,
            )
        os.close(replies_w)
        self._replies, self._jobs = replies_r, 0

    def _stop(self, *, graceful: bool = False) -> None:
        """End the grading process: killed, or (``graceful``, at the end of a batch) told to finish by the
        end of its input, so that it removes what it keeps (a warm Docker container); killed if it lingers."""
        if self._process is None:
            return
        if graceful and self._process.stdin is not None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=GRACEFUL_STOP_S)
            except subprocess.TimeoutExpired:
                pass
        self._process.kill()
        self._process.wait()
        if self._process.stdin is not None:
            self._process.stdin.close()
        os.close(self._replies)
        self._process, self._replies = None, -1
        if self.plan.backend == "docker":
            _sweep_containers()


def _sweep_containers() -> None:
    """Remove the containers of grading processes that are gone: one killed mid-grading (overrun, batch end)
    leaves its container running, and so may one killed with an earlier batch while Docker was still
    creating it."""
    import docker

    from grader.runners.docker import sweep_leftovers

    sweep_leftovers(docker.from_env())


def _read_tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except FileNotFoundError:
        return ""


@dataclass(frozen=True)
class PendingGrade:
    """A submission to grade, with what its record is filed under."""

    submission: Submission
    key: str
    """The record key: the hash of its files, the suite and the runner (grader.records.submission_key)."""
    submitted: str | None
    """ISO 8601 submission time to record (``--late``), else None."""
    files: dict[str, str] = field(default_factory=dict)
    """sha256 of each file grading takes, by name."""


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


class LocalPool:
    """``plan.workers`` grading processes at a time on this machine."""

    def reference(self, plan: BatchPlan) -> ExerciseResult:
        return grade_in_process(
            plan, None, "the reference solution", plan.gpu_slots[0] if plan.gpu_slots else None
        )

    def grade(
        self,
        plan: BatchPlan,
        todo: list[PendingGrade],
        store: RecordStore,
        on_result: Callable[[str, ExerciseResult], None],
    ) -> None:
        pending = {p.submission.student: p for p in todo}

        def finished(submission: Submission, result: ExerciseResult) -> None:
            grade = pending[submission.student]
            if result.verdict is not Status.ERROR:  # a grader or course failure: the next run retries it
                store.put(Record(submission.student, grade.key, result, grade.submitted, grade.files))
            on_result(submission.student, result)

        grade_all(plan, [p.submission for p in todo], finished)


def tally(results: list[ExerciseResult]) -> Counter[str]:
    """How many submissions ended passed, failed, timeout, crashed...: each counted by its gravest verdict."""
    return Counter(str(r.verdict) for r in results)


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
    """File an ``invalid`` record for each upload in ``todo`` that cannot be graded; return the others."""
    gradable = []
    for pending in todo:
        reason = why_invalid(pending.submission.path, plan.exercise.files)
        if reason is None:
            gradable.append(pending)
            continue
        student = pending.submission.student
        result = invalid_result(plan.exercise, reason, student, plan.device)
        store.put(Record(student, pending.key, result, pending.submitted, pending.files))
        on_result(student, result)
    return gradable
