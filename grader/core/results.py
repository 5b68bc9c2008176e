"""Grading results as plain data: a superset of Gradescope's results.json, built only from JSON values."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from grader.core.course import Exercise
from grader.core.timeline import Timeline


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    OOM = "oom"
    BLOCKED = "blocked"
    INVALID = "invalid"  # the upload cannot be graded (empty, corrupt, none of the files): nothing ran
    ERROR = "error"
    """The grader or the course itself broke (e.g. a hidden suite that does not import); never the student."""


NOT_RUN = "not run: "
"""How the harness begins the message of a test it never started (after its '[part] ' tag): the time budget
was used up, or the same call had hung in another test."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest test class, despite the name

    name: str
    """The pytest node name, e.g. 'test_uneven_sizes[4ranks]'."""
    number: str
    """Gradescope's 'number': '<part index>.<test index>', both from 1."""
    part: str
    score: float
    """``max_score`` when the test's whole concept is earned (all its tests passed), else 0."""
    max_score: float
    """The test's even share of its concept's points."""
    status: Status
    output: str = ""
    """One or more lines for the student; failures start with '[part rank r/R]'."""
    suite: str = "hidden"
    """'public' (exercises/, shipped to students) or 'hidden' (solutions/, instructor-only)."""
    world_size: int | None = None
    seconds: float = 0.0
    concept: str = ""
    """The concept the test scores for (course concepts.yml); the part's name when the part declares none."""
    generated: bool = False
    """The test draws its inputs from seeds in the judge (marked ``pytest.mark.generated``)."""

    @property
    def visibility(self) -> str:
        return "visible" if self.suite == "public" else "after_published"

    @property
    def ran(self) -> bool:
        """False for a test the harness never started (its message's first line says ``NOT_RUN``)."""
        return f"] {NOT_RUN}" not in self.output.partition("\n")[0]


@dataclass(frozen=True, kw_only=True, slots=True)
class ConceptScore:
    """One concept of one part: earned in full when every one of its tests passed, else not at all."""

    part: str
    name: str
    idea: str
    score: float
    max_score: float
    passed: int
    """Tests of the concept that passed, of ``tests``."""
    tests: int

    @property
    def earned(self) -> bool:
        return self.passed == self.tests


@dataclass(frozen=True, kw_only=True, slots=True)
class ExerciseResult:
    exercise: str
    """Two-digit number, e.g. '02'."""
    title: str
    graded: str
    """What was graded: 'your work in exercises/02_ring_tree', 'the reference solution', a submission path."""
    device: str
    tests: tuple[TestResult, ...] = ()
    execution_time: float = 0.0
    notes: tuple[str, ...] = field(default=())
    """Run-level remarks, e.g. 'the hidden suite is not available: public checks only'."""
    concepts: tuple[ConceptScore, ...] = ()
    """Score per concept (``grader.core.scoring``); empty for a result no test reported for."""
    timelines: tuple[Timeline, ...] = ()
    """Space-time recordings of failing multi-rank tests (of every test with ``--trace``), in test order:
    diagnostics for diagrams, never read by scoring."""

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 6)

    @property
    def max_score(self) -> float:
        return round(sum(t.max_score for t in self.tests), 6)

    @property
    def full_marks(self) -> bool:
        return bool(self.tests) and all(t.status is Status.PASSED for t in self.tests)

    @property
    def all_graded_passed(self) -> bool:
        """Every test that could run here passed: full marks but for the tests blocked here (a GPU part on a
        machine without a GPU), which are neither won nor lost."""
        ran = [t for t in self.tests if t.status is not Status.BLOCKED]
        return bool(ran) and all(t.status is Status.PASSED for t in ran)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["tests"] = [asdict(t) | {"status": str(t.status)} for t in self.tests]
        data["timelines"] = [t.to_dict() for t in self.timelines]
        return data

    @classmethod
    def for_every_part(
        cls, *, exercise: Exercise, status: Status, reason: str, graded: str, device: str
    ) -> ExerciseResult:
        """One synthetic test per part, all with ``status``: when no test could report for itself."""
        tests = tuple(
            TestResult(
                name=f"{part.id} (all tests)",
                number=f"{i}.1",
                part=part.id,
                score=0.0,
                max_score=part.points,
                status=status,
                output=f"[{part.id}] {reason}",
            )
            for i, part in enumerate(exercise.parts, start=1)
        )
        return cls(exercise=exercise.key, title=exercise.title, graded=graded, device=device, tests=tests)

    def not_started(self) -> tuple[str, ...]:
        """The parts no work has reached yet: every test of the part that ran (blocked ones aside) stopped at
        an untouched stub's ``NotImplementedError("TODO(<part id>): ...")`` of this exercise (what
        ``grade stubs`` writes), and at least one at the part's own. A part whose tests stop at another
        part's stub only is started: its own code ran."""
        stub = f"NotImplementedError: TODO({self.exercise}."
        parts = []
        for part in dict.fromkeys(t.part for t in self.tests):
            ran = [t for t in self.tests if t.part == part and t.status is not Status.BLOCKED]
            if (
                ran
                and all(t.status is Status.FAILED and stub in t.output for t in ran)
                and any(f"NotImplementedError: TODO({part})" in t.output for t in ran)
            ):
                parts.append(part)
        return tuple(parts)

    @property
    def verdict(self) -> Status:
        """The submission at a glance: passed when full marks, else its gravest test status (an upload
        that was not graded is ``invalid`` whatever else)."""
        order = (
            Status.INVALID,
            Status.ERROR,
            Status.CRASHED,
            Status.OOM,
            Status.TIMEOUT,
            Status.FAILED,
            Status.BLOCKED,
        )
        present = {t.status for t in self.tests}
        return next((s for s in order if s in present), Status.PASSED)

    @classmethod
    # Any: results JSON (to_dict's, e.g. from a container), read by field; what does not fit is a ValueError
    def from_dict(cls, data: dict[str, Any]) -> ExerciseResult:
        """Rebuild from ``to_dict`` output (e.g. JSON from a container); ``ValueError`` on anything else."""
        try:
            tests = tuple(TestResult(**t | {"status": Status(t["status"])}) for t in data["tests"])
            concepts = tuple(ConceptScore(**c) for c in data.get("concepts", ()))
            timelines = tuple(Timeline.from_dict(t) for t in data.get("timelines", ()))
            fields = {k: data[k] for k in ("exercise", "title", "graded", "device", "execution_time")}
            notes = tuple(data.get("notes", ()))
            return cls(tests=tests, notes=notes, concepts=concepts, timelines=timelines, **fields)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a grading result: {exc}") from None
