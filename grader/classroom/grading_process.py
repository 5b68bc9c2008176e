"""How ``grade batch`` grades one submission: in a ``python -m grader.gradeone`` process of its own.

A batch slot keeps one such process (``GradingProcess``) and sends it job after job; one that dies or
overruns is replaced, so a grading that wedges or dies costs only what that process held. A Slurm task
grades its submissions the same way, one after another; the reference's Slurm job runs the one-shot
command line (``gradeone_command``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.classroom.batch import BatchPlan
from grader.core.results import ExerciseResult, Status
from grader.runners import opened_envelope

PROCESS_MARGIN_S = 120.0
"""Beyond the exercise's budget, for a grading process: interpreter, torch, container start."""


def grade_in_process(
    plan: BatchPlan, source: Path | None, label: str, gpus: str | None, notes: tuple[str, ...] | None = None
) -> ExerciseResult:
    """Grade one submission in a grading process of its own (the reference when ``source`` is None);
    ``notes``: as ``GradingProcess.grade``."""
    process = GradingProcess(plan, gpus)
    try:
        return process.grade(source, label, notes)
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
        payload = None
    result = opened_envelope(payload)  # SuiteError (a ValueError too) must not become an ERROR result
    if result is None:
        return ExerciseResult.for_every_part(
            exercise=plan.exercise,
            status=Status.ERROR,
            graded=label,
            device=plan.device,
            reason="the grading process ended without a result: "
            + (stderr.strip().splitlines() or ["?"])[-1],
        )
    return result


def _die_with_parent() -> None:
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a killed batch leaves no grader behind


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

    def grade(self, source: Path | None, label: str, notes: tuple[str, ...] | None = None) -> ExerciseResult:
        """Grade ``source`` (None: the reference); a process that died without a result gets one retry.
        ``notes``: what staging said of the upload when ``source`` is the batch's staged copy of it
        (``GradeJob.staging_notes``)."""
        out = Path(self._folder.name) / "result.json"
        out.unlink(missing_ok=True)
        deadline = self.plan.exercise.timeout + PROCESS_MARGIN_S
        job: dict[str, object] = {
            "submission": str(source) if source else None,
            "label": label,
            "out": str(out),
        }
        if notes is not None:
            job["notes"] = list(notes)
        for _attempt in range(2):
            if self._process is None or self._jobs >= self.JOBS_PER_PROCESS:
                self._restart()
            assert self._process is not None and self._process.stdin is not None
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
    from grader.runners.docker import sweep_leftovers
    from grader.runners.images import docker_engine

    sweep_leftovers(docker_engine())


def _read_tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except FileNotFoundError:
        return ""
