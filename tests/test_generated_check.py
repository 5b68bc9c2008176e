"""``grade validate``'s check on generated inputs: each concept a generated test grades needs a bug of the
corpus that the generated cases catch on their own."""

from __future__ import annotations

from dataclasses import replace

from grader.authoring.generated import caught_by_generated, generated_problems
from grader.core.results import ExerciseResult, Status, TestResult

CONCEPT = ("24.plans", "good_plan")


def made(name: str, status: Status, *, generated: bool, concept: str = "good_plan") -> TestResult:
    return TestResult(
        name=name,
        number="1.1",
        part="24.plans",
        concept=concept,
        score=0,
        max_score=1,
        status=status,
        generated=generated,
    )


def result(*tests: TestResult) -> ExerciseResult:
    return ExerciseResult(exercise="24", title="t", graded="g", device="cpu", tests=tests)


def graded(named: Status, drawn: Status, other: Status = Status.PASSED) -> ExerciseResult:
    """One named problem and one generated one of the concept, and a generated test of another concept."""
    return result(
        made("test_named_plan", named, generated=False),
        made("test_generated_plan[dense-1]", drawn, generated=True),
        made("test_generated_reading[dense-1]", other, generated=True, concept="reading"),
    )


REFERENCE = graded(Status.PASSED, Status.PASSED)


def test_a_bug_counts_when_a_generated_test_of_the_concept_fails() -> None:
    assert caught_by_generated(graded(Status.PASSED, Status.FAILED), CONCEPT)  # only the seeds catch it
    assert caught_by_generated(graded(Status.FAILED, Status.TIMEOUT), CONCEPT)  # the named catch it too
    assert not caught_by_generated(graded(Status.FAILED, Status.PASSED), CONCEPT)  # the seeds miss it
    assert not caught_by_generated(graded(Status.BLOCKED, Status.BLOCKED), CONCEPT)  # nothing ran
    never_started = replace(
        made("test_generated_plan[dense-1]", Status.TIMEOUT, generated=True),
        output="[24.plans] not run: the exercise's time budget of 60 s is used up",
    )
    assert not caught_by_generated(result(never_started), CONCEPT)
    assert not caught_by_generated(graded(Status.PASSED, Status.PASSED, Status.FAILED), CONCEPT)  # another


def test_every_generated_concept_needs_such_a_bug() -> None:
    named_only = ("named_only", graded(Status.FAILED, Status.PASSED))
    reading = ("reading_bug", graded(Status.PASSED, Status.PASSED, Status.FAILED))
    problems = generated_problems(REFERENCE, [named_only, reading])
    assert len(problems) == 1 and "24.plans: good_plan" in problems[0]
    assert "test_generated_plan" in problems[0]  # names the generated tests, without their ids
    seeds_too = ("named_and_generated", graded(Status.FAILED, Status.FAILED))
    assert generated_problems(REFERENCE, [named_only, seeds_too, reading]) == []


def test_no_generated_test_no_demand() -> None:
    plain = result(made("test_named_plan", Status.PASSED, generated=False))
    assert generated_problems(plain, []) == []
