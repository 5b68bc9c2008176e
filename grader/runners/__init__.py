"""Runners execute one grading job and return its result; they know nothing about report formats."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from grader.course import Course, Exercise
from grader.results import ExerciseResult


class SuiteError(RuntimeError):
    """The exercise's own tests are broken (they do not import, or name unknown parts): a course bug."""


@dataclass(frozen=True, kw_only=True)
class GradeJob:
    course: Course
    exercise: Exercise
    source: Path
    """A folder or .zip with the exercise's editable files: the student's folder, a submission, solutions/."""
    label: str
    """How the report names what was graded."""
    device: str = "auto"
    """'auto' (CUDA when available), 'cpu' (gloo) or 'cuda' (NCCL, one GPU per rank)."""
    parts: tuple[str, ...] = ()
    """Grade only these parts ('02.ring_allreduce', ...); empty grades them all. The local runner only."""
    on_progress: Callable[[int, int], None] | None = None
    """Called with (tests finished, tests in all) as tests end; the local runner only."""


class Runner(Protocol):
    def run(self, job: GradeJob) -> ExerciseResult:
        """Grade ``job``. Submission faults become verdicts; only course bugs raise (``SuiteError``)."""
        ...

    def close(self) -> None:
        """Let go of what the runner keeps between jobs (a spare container, a kept rank factory)."""
        ...


def make_runner(name: str, *, prewarm: bool = False, one_author: bool = False) -> Runner:
    """The runner called ``name``; ``ValueError`` for an unknown one. ``prewarm``: Docker keeps the next
    container started (for a runner that grades one submission after another). ``one_author``: every job
    grades the course's own code (`grade check`, `grade validate`), so the local runner keeps one rank
    factory per exercise between jobs; Docker starts a container per job either way."""
    if name == "local":
        from grader.runners.local import LocalRunner

        return LocalRunner(keep_factory=one_author)
    if name == "docker":
        from grader.runners.docker import DockerRunner

        return DockerRunner(prewarm=prewarm)
    raise ValueError(f"unknown backend {name!r}; available: local, docker")
