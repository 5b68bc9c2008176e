"""Points follow concepts: all-or-nothing per concept; a hang costs only the call that hung, in any order.

The fixture course (tests/fixtures/concepts) has a part of two concepts with unequal test counts: three
tests of the sum (weight 3) and one of the maximum (weight 1), at 2 and 3 ranks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.core.course import Course, CourseConfigError, load_course
from grader.core.results import ExerciseResult, Status, TestResult
from grader.core.scoring import score_by_concept
from grader.learner.checkpoint import missed_concepts
from grader.runners import GradeJob
from grader.runners.local import LocalRunner

FIXTURE = Path(__file__).parent / "fixtures" / "concepts"


@pytest.fixture(scope="module")
def course() -> Course:
    return load_course(FIXTURE / "course.yml")


def grade(runner: LocalRunner, course: Course, submission: str) -> ExerciseResult:
    exercise = course.exercises[0]
    source = (
        course.solution_dir(exercise) if submission == "reference" else FIXTURE / "submissions" / submission
    )
    return runner.run(
        GradeJob(course=course, exercise=exercise, source=source, label=submission, device="cpu")
    )


def concept_scores(result: ExerciseResult) -> dict[str, float]:
    return {c.name: c.score for c in result.concepts}


def test_concepts_yml_gives_each_concept_its_share(course: Course) -> None:
    reduce = course.exercises[0].parts[0]
    assert [c.name for c in reduce.concepts] == ["sum_over_ranks", "max_over_ranks"]
    assert reduce.concept_points("sum_over_ranks") == 3.0
    assert reduce.concept_points("max_over_ranks") == 1.0


def synthetic(statuses: list[tuple[str, Status]]) -> tuple[TestResult, ...]:
    return tuple(
        TestResult(
            name=f"t{i}",
            number=f"1.{i}",
            part="01.reduce",
            concept=concept,
            score=0.5 if status is Status.PASSED else 0.0,
            max_score=0.5,
            status=status,
        )
        for i, (concept, status) in enumerate(statuses, start=1)
    )


def test_one_failing_test_costs_its_whole_concept_and_nothing_else(course: Course) -> None:
    exercise = course.exercises[0]
    tests = synthetic(
        [("sum_over_ranks", Status.PASSED)] * 5
        + [("sum_over_ranks", Status.FAILED)]
        + [("max_over_ranks", Status.PASSED)] * 2
    )
    rescored, concepts = score_by_concept(tests, exercise)
    by_name = {c.name: c for c in concepts}
    assert by_name["sum_over_ranks"].score == 0 and by_name["sum_over_ranks"].passed == 5
    assert by_name["max_over_ranks"].score == by_name["max_over_ranks"].max_score == 1.0
    assert sum(t.score for t in rescored) == 1.0  # the five passing sum tests score nothing
    assert all("scores only once every test" in t.output for t in rescored[:5])


@pytest.mark.slow
def test_a_wrong_operation_loses_its_concept_though_most_tests_pass(
    runner: LocalRunner, course: Course
) -> None:
    result = grade(runner, course, "wrong_largest")
    passed = sum(t.status is Status.PASSED for t in result.tests)
    assert passed == 7 and len(result.tests) == 9  # an even split over tests would give 4.11 of 5
    assert concept_scores(result) == {"sum_over_ranks": 3.0, "max_over_ranks": 0.0, "square_value": 1.0}
    assert result.score == 4.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_a_hang_costs_only_the_call_that_hung_whatever_the_order(
    runner: LocalRunner, course: Course, seed: int | None
) -> None:
    shuffled = LocalRunner(shuffle_seed=seed) if seed is not None else runner
    result = grade(shuffled, course, "hang_total")
    assert concept_scores(result) == {"sum_over_ranks": 0.0, "max_over_ranks": 1.0, "square_value": 1.0}
    assert result.score == 2.0
    by_status = {t.name: t.status for t in result.tests}
    assert all(by_status[f"test_max[{p}ranks]"] is Status.PASSED for p in (2, 3))
    sums = [t for t in result.tests if t.name.startswith("test_sum")]
    assert all(t.status is Status.TIMEOUT for t in sums)
    skipped = [t for t in sums if "not run" in t.output]
    assert len(skipped) == 4  # per world size: the first call hung, the two others with it were not made
    assert all("already hung at" in t.output and "pair.py:10" in t.output for t in skipped)


def test_a_checkpoint_is_not_passed_with_a_concept_missed(course: Course) -> None:
    exercise, section = course.exercises[0], course.sections[0]
    tests = synthetic([("sum_over_ranks", Status.PASSED)] * 6 + [("max_over_ranks", Status.FAILED)])
    _, concepts = score_by_concept(tests, exercise)
    result = ExerciseResult(exercise="01", title="", graded="", device="cpu", tests=tests, concepts=concepts)
    assert missed_concepts([result], section, 0.5) == ["01 pair, 01.reduce: max_over_ranks"]
    blocked = synthetic([("sum_over_ranks", Status.PASSED), ("max_over_ranks", Status.BLOCKED)])
    _, concepts = score_by_concept(blocked, exercise)
    only_blocked = ExerciseResult(
        exercise="01", title="", graded="", device="cpu", tests=blocked, concepts=concepts
    )
    assert missed_concepts([only_blocked], section, 0.5) == []  # nothing was shown wrong without a GPU


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "reduce: {}\nsquare: {s: {weight: 1, idea: " + "x" * 50 + "}}\n",
            "expected a mapping of at least one",
        ),
        ("square: {s: {weight: 1, idea: " + "x" * 50 + "}}\n", "missing required key 'reduce'"),
        (
            "reduce: {a: {weight: 0, idea: "
            + "x" * 50
            + "}}\nsquare: {s: {weight: 1, idea: "
            + "x" * 50
            + "}}\n",
            "expected a positive number",
        ),
        (
            "reduce: {a: {weight: 1, idea: short}}\nsquare: {s: {weight: 1, idea: " + "x" * 50 + "}}\n",
            "a sentence a student can learn from",
        ),
        (
            "reduce: {a: {weight: 1, idea: "
            + "x" * 50
            + "}}\nsquare: {a: {weight: 1, idea: "
            + "x" * 50
            + "}}\n",
            "also declared for reduce",
        ),
    ],
)
def test_concepts_yml_is_strict(tmp_path: Path, text: str, message: str) -> None:
    import shutil

    shutil.copytree(FIXTURE, tmp_path / "course", ignore=shutil.ignore_patterns("submissions"))
    (tmp_path / "course" / "exercises" / "01_pair" / "concepts.yml").write_text(text)
    with pytest.raises(CourseConfigError, match=message):
        load_course(tmp_path / "course" / "course.yml").find("01")


HANG_ON_LONG = """import torch
import torch.distributed as dist


def total(tensor):
    if tensor.numel() == 64:  # the one case it gets wrong: every rank receives first, and waits for ever
        dist.recv(torch.empty_like(tensor), (dist.get_rank() - 1) % dist.get_world_size())
    dist.all_reduce(tensor)


def largest(tensor):
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)


def square(x):
    return x * x
"""

SMALL_SUM_TEST = """

@pytest.mark.part("01.reduce")
@pytest.mark.concept("sum_of_three")
def test_sum_of_three(world: World) -> None:
    given = inputs(world.size, 3)
    for res in world.call("pair", "total", args=[(x.clone(),) for x in given]):
        assert_equal(res.args[0], sum(given), rank=res.rank, world_size=world.size, what="tensor after total")
"""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [None, 3])
def test_a_test_kept_from_running_by_another_concepts_hang_is_run_again_in_a_fresh_world(
    tmp_path: Path, seed: int | None
) -> None:
    """The same call (``total`` at the same size) hangs on 64 elements only: the concept with that case
    loses, the concept whose own test passes once it runs keeps its points, in any order."""
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root)
    suite = root / "solutions" / "01_pair" / "test_hidden.py"
    suite.write_text(suite.read_text() + SMALL_SUM_TEST)
    concepts = root / "exercises" / "01_pair" / "concepts.yml"
    idea = "A sum over ranks is right for every length, however short, not only for the lengths tried first."
    concepts.write_text(
        concepts.read_text().replace(
            "  max_over_ranks:", f"  sum_of_three:\n    weight: 1\n    idea: {idea}\n  max_over_ranks:"
        )
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pair.py").write_text(HANG_ON_LONG)
    course = load_course(root / "course.yml")
    exercise = course.exercises[0]
    result = LocalRunner(shuffle_seed=seed).run(
        GradeJob(course=course, exercise=exercise, source=tmp_path / "sub", label="hang", device="cpu")
    )
    assert concept_scores(result) == {
        "sum_over_ranks": 0.0,
        "sum_of_three": 0.8,
        "max_over_ranks": 0.8,
        "square_value": 1.0,
    }
    small = [t for t in result.tests if t.name.startswith("test_sum_of_three")]
    assert [t.status for t in small] == [Status.PASSED, Status.PASSED]
