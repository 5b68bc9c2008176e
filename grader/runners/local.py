"""The local runner: the judge is this process, rank workers are forked on this machine."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from grader.harness.plugin import GradingPlugin
from grader.harness.pool import Pools, WorldConfig
from grader.results import ExerciseResult
from grader.runners import GradeJob, SuiteError
from grader.submission import stage

PG_TIMEOUT_MARGIN_S = 30.0
"""gloo's own timeout stays longer than any test's, so the judge's clock (with stacks) always fires first."""


class LocalRunner:
    """Grades in this process. ``start_method`` and ``reuse_worlds`` exist for the benchmark's baseline."""

    def __init__(
        self,
        *,
        start_method: str = "forkserver",
        reuse_worlds: bool = True,
        run_as_uid: int | None = None,
        programs_root: Path | None = None,
    ) -> None:
        """``run_as_uid`` and ``programs_root`` serve the container entry point: ranks drop to that uid and
        read rank programs from ``programs_root/NN_slug`` (a copy of exercises/ they may read)."""
        self.start_method = start_method
        self.reuse_worlds = reuse_worlds
        self.run_as_uid = run_as_uid
        self.programs_root = programs_root
        self.last_pools: Pools | None = None
        """The pools of the last run, kept for benchmarks (start counts and times)."""

    def run(self, job: GradeJob) -> ExerciseResult:
        started = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix="distgpu-"))
        if self.run_as_uid is not None:
            scratch.chmod(0o755)  # ranks read the staged submission here after dropping privileges
        try:
            notes = stage(job.source, job.exercise.files, scratch / "impl")
            plugin = self._grade(job, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if plugin.errors:
            raise SuiteError("\n".join(plugin.errors))
        notes += [f"saved {what}: {path}" for what, path in plugin.artifacts if path.exists()]
        suites = _suites(job)
        if len(suites) == 1 and suites[0].name == "test_public.py":
            notes.append(
                "public checks only: the hidden tests run when you submit, so this is not your final score"
            )
        return ExerciseResult(
            exercise=job.exercise.key,
            title=job.exercise.title,
            graded=job.label,
            device=plugin.device,
            tests=tuple(sorted(plugin.results, key=lambda t: tuple(int(n) for n in t.number.split(".")))),
            execution_time=round(time.perf_counter() - started, 3),
            notes=tuple(notes),
        )

    def _grade(self, job: GradeJob, scratch: Path) -> GradingPlugin:
        suites = _suites(job)
        if not suites:
            raise SuiteError(f"exercise {job.exercise.key} has neither test_public.py nor test_hidden.py")
        device, gpus = _resolve_device(job.device)
        config = WorldConfig(
            backend="nccl" if device == "cuda" else "gloo",
            device=device,
            impl_dir=scratch / "impl",
            programs_dir=(self.programs_root or job.course.root / "exercises") / job.exercise.dirname,
            scratch_dir=scratch,
            pg_timeout_s=max(p.timeout for p in job.exercise.parts) + PG_TIMEOUT_MARGIN_S,
            start_method=self.start_method,
            run_as_uid=self.run_as_uid,
        )
        self.last_pools = pools = Pools(config, reuse=self.reuse_worlds)
        # Inside a container (run_as_uid set) nothing the judge writes survives: keep no artifacts there.
        artifacts = job.course.root / ".grade" / "artifacts" / job.exercise.dirname
        plugin = GradingPlugin(
            course=job.course,
            exercise=job.exercise,
            pools=pools,
            device=device,
            gpus=gpus,
            artifacts_dir=None if self.run_as_uid is not None else artifacts,
            only_part=job.part,
            on_progress=job.on_progress,
        )
        args = [
            *map(str, suites),
            "-p",
            "no:cacheprovider",
            "-p",
            "no:terminal",
            "-p",
            "no:stepwise",
            "--import-mode=importlib",
            "--rootdir",
            str(job.course.root),
            "-o",
            "addopts=",
            "-W",
            "ignore",
        ]
        try:
            pytest.main(args, plugins=[plugin])
        finally:
            pools.close()
        return plugin


def _suites(job: GradeJob) -> list[Path]:
    candidates = [
        job.course.exercise_dir(job.exercise) / "test_public.py",
        job.course.solution_dir(job.exercise) / "test_hidden.py",
    ]
    return [path for path in candidates if path.is_file()]


def _resolve_device(requested: str) -> tuple[str, int]:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "auto":
        return ("cuda" if gpus else "cpu"), gpus
    if requested == "cuda" and not gpus:
        raise ValueError("--device cuda: no CUDA device is visible here")
    return requested, gpus
