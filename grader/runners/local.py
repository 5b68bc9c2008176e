"""The local runner: the judge is this process, rank workers are forked on this machine."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.core import rank_uids, sandbox
from grader.core.results import ExerciseResult
from grader.core.scoring import score_by_concept
from grader.core.submission import stage
from grader.harness.factory import RankFactory
from grader.harness.plugin import GradingPlugin
from grader.harness.pool import Pools
from grader.harness.remote import allocation_nodes
from grader.harness.world import WorldConfig
from grader.runners.devices import gpu_count, resolve_device
from grader.runners.job import GradeJob, SuiteError
from grader.runners.judge_session import one_torch_thread, outer_pytest_settings_ignored, pytest_args
from grader.runners.preflight import RanksCannotRead, check_ranks_can_read

RANK_PROCESSES = 4096
"""Processes and threads the ranks of one grading run may have together (they share a leased uid)."""

PG_TIMEOUT_MARGIN_S = 30.0
"""gloo's own timeout stays longer than any test's, so the judge's clock (with stacks) always fires first."""


_warned_unsandboxed = False


class LocalRunner:
    """Grades in this process; ranks run in a bubblewrap sandbox when it works here (``core.sandbox``).

    ``reuse_worlds=False`` exists for the benchmark's baseline (a fresh factory and world per test).
    """

    def __init__(
        self,
        *,
        reuse_worlds: bool = True,
        sandbox_mode: str | None = None,
        limits: sandbox.RankLimits | None = None,
        run_as_uid: int | None = None,
        programs_root: Path | None = None,
        shuffle_seed: int | None = None,
        factory: RankFactory | None = None,
        keep_factory: bool = False,
        timelines: bool = True,
    ) -> None:
        """``sandbox_mode``: ``auto`` (default, from ``DISTGPU_SANDBOX``), ``bwrap`` (required) or ``none``.
        ``limits``: the rank limits inside the sandbox (default ``RankLimits()``).
        ``run_as_uid`` and ``programs_root`` serve the container entry point (the container is the sandbox):
        ranks drop to that uid and read rank programs from ``programs_root/NN_slug``.
        ``shuffle_seed`` runs each suite's tests in a seeded random order (a score must not depend on it).
        ``factory``: a rank factory the caller launched, unsandboxed, for the first run (the container's judge
        launches it before it imports torch); other runs launch their own as they start.
        ``keep_factory``: one factory, in one sandbox and one scratch folder, serves every run of the same
        exercise in a row (torch is imported once, not once per run; ``close`` ends it). Only for code of one
        author: ``grade validate`` grades the course's own references, stubs and corpora this way. Each
        submission of a class gets its own, so that nothing one leaves behind meets the next.
        ``timelines=False``: ranks time nothing for space-time diagrams (the benchmark's baseline)."""
        if factory is not None and sandbox_mode != "none":
            raise ValueError("a rank factory launched by the caller runs unsandboxed: sandbox_mode='none'")
        self.factory = factory
        self.reuse_worlds = reuse_worlds
        self.sandbox_mode = sandbox_mode or sandbox.requested_mode()
        self.limits = limits or sandbox.RankLimits()
        self.run_as_uid = run_as_uid
        self.programs_root = programs_root
        self.shuffle_seed = shuffle_seed
        self.keep_factory = keep_factory
        self.timelines = timelines
        self._kept: _KeptFactory | None = None
        self._uid_lease: rank_uids.RankUidLease | None = None
        self.last_pools: Pools | None = None
        """The pools of the last run, kept for benchmarks (start counts and times)."""

    def run(self, job: GradeJob) -> ExerciseResult:
        started = time.perf_counter()
        scratch = self._kept_scratch(job) if self.keep_factory else Path(tempfile.mkdtemp(prefix="distgpu-"))
        try:
            staged = stage(
                job.source, job.exercise.files, scratch / "impl", job.course.given_files(job.exercise)
            )
            notes = list(job.staging_notes) if job.staging_notes is not None else staged.texts
            plugin = self._grade(job, scratch)
        finally:
            if not self.keep_factory:
                shutil.rmtree(scratch, ignore_errors=True)
                self._release_uid()
        if plugin.errors:
            raise SuiteError("\n".join(plugin.errors))
        notes += [f"saved {what}: {path}" for what, path in plugin.artifacts if path.exists()]
        if plugin.timelines.left_out:
            notes.append(
                f"{plugin.timelines.left_out} failing test(s) got no space-time diagram: the recordings "
                "of the others filled this run's share"
            )
        if self.last_pools is not None and self.last_pools.nodes_used:
            notes.append(
                f"multi-node parts ran their ranks on {', '.join(sorted(self.last_pools.nodes_used))}"
            )
        suites = _suites(job)
        if len(suites) == 1 and suites[0].name == "test_public.py":
            notes.append(
                "public checks only: the hidden tests run when you submit, so this is not your final score"
            )
        ordered = tuple(sorted(plugin.results, key=lambda t: _number_key(t.number)))
        tests, concepts = score_by_concept(ordered, job.exercise)
        return ExerciseResult(
            exercise=job.exercise.key,
            title=job.exercise.title,
            graded=job.label,
            device=plugin.device,
            tests=tests,
            execution_time=round(time.perf_counter() - started, 3),
            notes=tuple(notes),
            concepts=concepts,
            timelines=tuple(sorted(plugin.timelines.kept, key=lambda t: _number_key(t.number))),
        )

    def open_worlds(self, job: GradeJob, scratch: Path) -> tuple[Pools, str, int]:
        """The pools the worlds of ``job`` start from, with the device they use and the GPUs visible here;
        the staged submission is in ``scratch/impl``. The caller closes the pools, then this runner.
        ``UsageError`` for ``--device cuda`` without a GPU, ``SuiteError`` when ranks could not read it."""
        gpus = gpu_count()
        device = resolve_device(job.device, gpus=gpus)
        config = self._world_config(job, scratch, device)
        self._check_ranks_can_read(config)
        factory = self._take_factory(job, config, gpus)
        self.last_pools = pools = Pools(
            config,
            reuse=self.reuse_worlds,
            nodes=allocation_nodes(),
            factory=factory,
            keep_factory=self._kept is not None,
        )
        return pools, device, gpus

    def _grade(self, job: GradeJob, scratch: Path) -> GradingPlugin:
        suites = _suites(job)
        if not suites:
            raise SuiteError(f"exercise {job.exercise.key} has neither test_public.py nor test_hidden.py")
        pools, device, gpus = self.open_worlds(job, scratch)
        plugin = self._plugin(job, pools, device, gpus)
        try:
            with outer_pytest_settings_ignored(), one_torch_thread():
                code = pytest.main(pytest_args(suites, job.course.root), plugins=[plugin])
        finally:
            _forget_suites(suites)
            kept = pools.close()
            if self._kept is not None:
                self._kept.factory = kept
        if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not plugin.errors:
            plugin.errors.append(f"pytest ended with {code!r} after {len(plugin.results)} test(s)")
        return plugin

    def _world_config(self, job: GradeJob, scratch: Path, device: str) -> WorldConfig:
        """The worlds of ``job``: where their ranks find the staged submission (``scratch/impl``) and the
        rank programs, as which uid they run, in which sandbox and under which limits."""
        programs_dir = (self.programs_root or job.course.root / "exercises") / job.exercise.dirname
        box = self._sandbox(scratch / "impl", programs_dir, scratch)
        run_as_uid = self.run_as_uid
        if box is not None and os.geteuid() == 0:
            run_as_uid = self._rank_uid()
        if run_as_uid is not None:
            scratch.chmod(0o755)  # ranks read the staged submission here after dropping privileges
        return WorldConfig(
            backend="nccl" if device == "cuda" else "gloo",
            device=device,
            impl_dir=scratch / "impl",
            programs_dir=programs_dir,
            scratch_dir=scratch,
            pg_timeout_s=max(p.timeout for p in job.exercise.parts) + PG_TIMEOUT_MARGIN_S,
            run_as_uid=run_as_uid,
            sandbox=box,
            limits=self._rank_limits(box, run_as_uid, device),
            preload=job.exercise.preload,
            timelines=self.timelines,
        )

    def _check_ranks_can_read(self, config: WorldConfig) -> None:
        """Stop before the first test if ranks, as the uid they become, cannot read a file they need
        (``runners.preflight``); once per kept factory."""
        if config.run_as_uid is None or (self._kept is not None and self._kept.checked):
            return
        paths = [config.programs_dir, config.impl_dir, *sandbox.package_dirs("grader", "coursekit")]
        try:
            check_ranks_can_read(paths, config.run_as_uid, config.sandbox)
        except RanksCannotRead as exc:
            raise SuiteError(str(exc)) from None
        if self._kept is not None:
            self._kept.checked = True

    def _rank_limits(
        self, box: sandbox.Sandbox | None, run_as_uid: int | None, device: str
    ) -> sandbox.RankLimits | None:
        """The limits of the ranks in ``box``: none unsandboxed; a process cap when they run as another uid
        (shared host-wide) and none set; no cap on a world's memory on CUDA."""
        if box is None:
            return None
        limits = self.limits
        if run_as_uid is not None and limits.processes is None:
            limits = dataclasses.replace(limits, processes=RANK_PROCESSES)
        if device == "cuda":
            limits = dataclasses.replace(limits, world_memory_bytes=None)
        return limits

    def _take_factory(self, job: GradeJob, config: WorldConfig, gpus: int) -> RankFactory | None:
        """This run's rank factory: the caller's (first run only) or the kept one, else one launched now
        when worlds are reused and some part will start one; None leaves it to the pools."""
        factory, self.factory = self.factory, None
        if factory is None and self._kept is not None:
            factory, self._kept.factory = self._kept.factory, None
        if factory is None and self.reuse_worlds and _runs_ranks(job, gpus):
            factory = RankFactory(config.sandbox, config.scratch_dir / "factory.log", config.preload)
            factory.launch()  # it imports torch while pytest starts and collects the suite here
        return factory

    def _plugin(self, job: GradeJob, pools: Pools, device: str, gpus: int) -> GradingPlugin:
        # Inside a container (run_as_uid set) nothing the judge writes survives: keep no artifacts there.
        artifacts = job.course.root / ".grade" / "artifacts" / job.exercise.dirname
        return GradingPlugin(
            course=job.course,
            exercise=job.exercise,
            pools=pools,
            device=device,
            gpus=gpus,
            artifacts_dir=None if self.run_as_uid is not None else artifacts,
            only_parts=job.parts,
            only_concept=job.concept,
            on_progress=job.on_progress,
            shuffle_seed=self.shuffle_seed,
            trace=job.trace,
        )

    def _kept_scratch(self, job: GradeJob) -> Path:
        """The scratch folder of the kept factory, emptied for ``job``; a new one (and, later, a new factory)
        when the exercise or the device changed. The folder itself and ``impl/`` stay: the sandbox mounted
        them, and a folder made anew would not be the one it sees."""
        key = (job.exercise.key, job.device)
        if self._kept is not None and self._kept.key != key:
            self.close()
        if self._kept is None:
            self._kept = _KeptFactory(key, Path(tempfile.mkdtemp(prefix="distgpu-")))
        scratch = self._kept.scratch
        left = [p for p in scratch.iterdir() if p.name not in ("impl", "factory.log")]
        for path in [*left, *(scratch / "impl").glob("*")]:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        return scratch

    def close(self) -> None:
        """End the kept factory (``keep_factory``) and remove its scratch folder; nothing to do otherwise."""
        kept, self._kept = self._kept, None
        if kept is not None:
            if kept.factory is not None:
                kept.factory.close()
            shutil.rmtree(kept.scratch, ignore_errors=True)
        self._release_uid()

    def _rank_uid(self) -> int:
        """The uid this run's ranks become: leased for the run (for the kept factory's life with
        ``keep_factory``), so that no other grading on the host shares its process limit."""
        if self._uid_lease is None:
            try:
                self._uid_lease = rank_uids.lease_rank_uid()
            except rank_uids.NoRankUid as exc:
                raise SuiteError(str(exc)) from None
        return self._uid_lease.uid

    def _release_uid(self) -> None:
        lease, self._uid_lease = self._uid_lease, None
        if lease is not None:
            lease.release()

    def _sandbox(self, impl_dir: Path, programs_dir: Path, scratch: Path) -> sandbox.Sandbox | None:
        """This run's sandbox, or None (mode ``none``, or ``auto`` where bubblewrap cannot run: said once)."""
        global _warned_unsandboxed
        if self.sandbox_mode == "none":
            return None
        why_not = sandbox.probe()
        if why_not is None:
            return sandbox.for_grading_run(impl_dir, programs_dir, scratch)
        if self.sandbox_mode == "bwrap":
            raise SuiteError(f"{sandbox.SANDBOX_ENV_VAR}=bwrap, but {why_not}")
        if not _warned_unsandboxed:
            _warned_unsandboxed = True
            print(f"note: ranks run unsandboxed ({why_not}); see `grade doctor`", file=sys.stderr)
        return None


@dataclasses.dataclass
class _KeptFactory:
    """What ``keep_factory`` keeps between runs: for which (exercise, device), where, and the factory."""

    key: tuple[str, str]
    scratch: Path
    factory: RankFactory | None = None
    checked: bool = False
    """Whether the ranks' files were found readable (``preflight``): once per kept factory."""


def _number_key(number: str) -> tuple[int, ...]:
    """'2.10' after '2.9': a test's number as Gradescope's 'number' orders it."""
    return tuple(int(n) for n in number.split("."))


def _suites(job: GradeJob) -> list[Path]:
    candidates = [
        job.course.exercise_dir(job.exercise) / "test_public.py",
        job.course.solution_dir(job.exercise) / "test_hidden.py",
    ]
    return [path for path in candidates if path.is_file()]


def _forget_suites(suites: list[Path]) -> None:
    """Drop the suites' modules from ``sys.modules``: pytest names them by their path under the course root,
    so another course graded in this process (``test_hidden.py`` at the same place) would get these."""
    paths = {str(p) for p in suites} | {str(p.resolve()) for p in suites}
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) in paths:
            del sys.modules[name]


def _runs_ranks(job: GradeJob, gpus: int) -> bool:
    """Whether some part to grade can start a world here (a GPU part without GPUs is blocked, not run)."""
    parts = [p for p in job.exercise.parts if not job.parts or p.id in job.parts]
    return any(p.device == "cpu" or gpus for p in parts)
