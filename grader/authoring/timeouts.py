"""Are the course's timeouts generous? Each part's slowest reference test against the part's timeout.

A part's ``timeout`` (course.yml) bounds each call a test makes into its world; the exercise's ``timeout`` is
the whole grading run's budget, after which the remaining tests are not run. A correct reference must never
meet either, even on a machine loaded by a class's other gradings, so `grade validate` measures them on the
reference's own runs and flags any with less than ``HEADROOM`` times the time the reference took. A test's
seconds cover all its calls, so they overstate its slowest call: the flag errs on the safe side.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.core.course import Exercise
from grader.core.results import ExerciseResult, Status

HEADROOM = 3.0
"""The least timeout / reference time allowed: load from other gradings stretched 03.measure's tests 2.5x."""
WHOLE_RUN = "(whole run)"
"""The ``part`` of the row that sets the exercise's budget against the slowest whole grading run."""


@dataclass(frozen=True)
class PartTime:
    part: str
    """A part's id, or ``WHOLE_RUN``."""
    test: str
    """The slowest test of the part over the reference runs ('' for the whole run)."""
    seconds: float
    timeout: float

    @property
    def headroom(self) -> float:
        return self.timeout / self.seconds if self.seconds > 0 else float("inf")

    @property
    def short(self) -> bool:
        return self.headroom < HEADROOM

    def to_dict(self) -> dict[str, object]:
        return {
            "part": self.part,
            "test": self.test,
            "seconds": round(self.seconds, 3),
            "timeout": self.timeout,
            "headroom": round(self.headroom, 2),
        }


def part_times(exercise: Exercise, references: list[ExerciseResult]) -> list[PartTime]:
    """Per part that ran here, its slowest test over ``references`` against its timeout, in course order;
    then the slowest whole run against the exercise's budget. Parts whose tests were all blocked (a GPU part
    on a CPU run) have no row: their time is measured where they run."""
    rows = []
    for part in exercise.parts:
        ran = [t for r in references for t in r.tests if t.part == part.id and t.status is not Status.BLOCKED]
        if ran:
            slowest = max(ran, key=lambda t: t.seconds)
            rows.append(PartTime(part.id, slowest.name, slowest.seconds, part.timeout))
    if references:
        whole = max(r.execution_time for r in references)
        rows.append(PartTime(WHOLE_RUN, "", whole, exercise.timeout))
    return rows


def timeout_problems(rows: list[PartTime]) -> list[str]:
    """One line per row under ``HEADROOM``: the part, its slowest reference test, and the two figures."""
    return [
        f"timeout: {row.part} allows {row.timeout:g} s, only {row.headroom:.1f}x the reference's "
        f"{row.seconds:.1f} s{f' in {row.test}' if row.test else ''} (at least {HEADROOM:g}x: raise it in "
        "course.yml)"
        for row in rows
        if row.short
    ]
