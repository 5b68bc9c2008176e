"""Runners execute one grading job and return its result; they know nothing about report formats.

``job`` holds what every runner shares (``GradeJob``, ``Runner``, ``SuiteError``, and the envelope a
grading in a process of its own hands back); ``local`` grades on this machine, ``docker`` in a container per
job; ``devices`` resolves ``--device``.
"""

from __future__ import annotations

from grader.core.errors import UsageError
from grader.runners.job import (
    GradeJob,
    Runner,
    SuiteError,
    grade_job,
    graded_envelope,
    opened_envelope,
    resolve_part,
)

__all__ = [
    "GradeJob",
    "Runner",
    "SuiteError",
    "grade_job",
    "graded_envelope",
    "make_runner",
    "opened_envelope",
    "resolve_part",
]


def make_runner(
    name: str, *, prewarm: bool = False, one_author: bool = False, diagrams: bool = True
) -> Runner:
    """The runner called ``name``; ``UsageError`` for an unknown one. ``prewarm``: Docker keeps the next
    container started (for a runner that grades one submission after another). ``one_author``: every job
    grades the course's own code (`grade check`, `grade validate`), so the local runner keeps one rank
    factory per exercise between jobs; Docker starts a container per job either way. ``diagrams=False``:
    the local runner's ranks record no call for space-time diagrams (a check that reads only scores)."""
    if name == "local":
        from grader.runners.local import LocalRunner

        return LocalRunner(keep_factory=one_author, timelines=diagrams)
    if name == "docker":
        from grader.runners.docker import DockerRunner

        return DockerRunner(prewarm=prewarm)
    raise UsageError(f"unknown backend {name!r}; available: local, docker")
