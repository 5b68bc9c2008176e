"""``grade validate``'s contract checks (issue 41), on graded results made by hand: a core concept needs a
bug that breaks it alone, a bug failing three concepts of its part is flagged, ``--contracts`` lists both."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.authoring.contracts import (
    broken_alone,
    bundle_warnings,
    contract_lines,
    contract_rows,
    isolation_problems,
)
from grader.core.course import CONCEPTS_FILE, Exercise, load_course
from grader.core.results import ExerciseResult, Status, TestResult

FIXTURE = Path(__file__).parent / "fixtures" / "concepts"
IDEA = "x" * 50
CONCEPTS = (
    f"reduce:\n"
    f"  sum: {{weight: 4, idea: {IDEA}, core: rank_sum, why: the part exists to teach the sum}}\n"
    f"  ranks: {{weight: 4, idea: {IDEA}, core: group_rank, why: a group rank is the first torch mistake}}\n"
    f"  dtype: {{weight: 1, idea: {IDEA}, minor: only a float detour breaks it as an edge case}}\n"
    f"square:\n  sq: {{weight: 1, idea: {IDEA}, core: square, why: the whole part is this one idea}}\n"
)
SQ_BLOCKED = {"01.square": Status.BLOCKED}


@pytest.fixture(scope="module")
def exercise(tmp_path_factory: pytest.TempPathFactory) -> Exercise:
    root = tmp_path_factory.mktemp("contracts") / "course"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("submissions"))
    (root / "exercises" / "01_pair" / CONCEPTS_FILE).write_text(CONCEPTS)
    return load_course(root / "course.yml").exercises[0]


def graded(failing: set[str], *, blocked: dict[str, Status] | None = None) -> ExerciseResult:
    """One test per concept (two for `ranks`, one of them generated), failing those named in ``failing``."""
    tests = [
        ("sum", "01.reduce", False),
        ("ranks", "01.reduce", False),
        ("ranks", "01.reduce", True),
        ("dtype", "01.reduce", False),
        ("sq", "01.square", False),
    ]
    results = []
    for i, (concept, part, generated) in enumerate(tests):
        status = Status.FAILED if concept in failing else Status.PASSED
        status = (blocked or {}).get(part, status)
        results.append(
            TestResult(
                name=f"test_{concept}_{i}[2ranks]",
                number=f"1.{i + 1}",
                part=part,
                score=0.0 if status is Status.FAILED else 1.0,
                max_score=1.0,
                status=status,
                concept=concept,
                generated=generated,
            )
        )
    return ExerciseResult(exercise="01", title="Pair", graded="x", device="cpu", tests=tuple(results))


def test_a_bug_breaks_a_concept_alone_when_no_other_concept_of_its_part_fails() -> None:
    """Another part that calls the same function may fail too (the entry's `loses:` pins it)."""
    assert broken_alone(graded({"ranks"})) == {("01.reduce", "ranks")}
    assert broken_alone(graded({"ranks", "sum"})) == set()
    assert broken_alone(graded({"ranks", "sq"})) == {("01.reduce", "ranks"), ("01.square", "sq")}
    assert broken_alone(graded(set())) == set()
    assert broken_alone(graded({"sum"}, blocked=SQ_BLOCKED)) == {("01.reduce", "sum")}


def test_every_core_concept_needs_a_bug_that_breaks_it_alone(exercise: Exercise) -> None:
    reference = graded(set())
    bugs = [("global_rank", "ranks", graded({"ranks"})), ("both", "sum", graded({"sum", "ranks"}))]
    problems = isolation_problems(exercise, reference, bugs)
    assert [p.split(" has ")[0] for p in problems] == [
        "contracts: core concept 01.reduce: sum",
        "contracts: core concept 01.square: sq",
    ]


def test_a_concept_blocked_here_is_not_asked_for_a_bug(exercise: Exercise) -> None:
    """A GPU part on a CPU run: its bugs are judged by scripts/gpu-check, not here."""
    reference = graded(set(), blocked=SQ_BLOCKED)
    bugs = [("a", "ranks", graded({"ranks"})), ("b", "sum", graded({"sum"}, blocked=SQ_BLOCKED))]
    assert isolation_problems(exercise, reference, bugs) == []


def test_a_bug_failing_three_concepts_of_its_part_is_flagged(exercise: Exercise) -> None:
    bundled = graded({"sum", "ranks", "dtype", "sq"})
    (warning,) = bundle_warnings(exercise, [("sub_group_only", "ranks", bundled)])
    assert (
        "sub_group_only (meant for ranks) fails tests of 3 concepts of 01.reduce: dtype, ranks, sum"
        in warning
    )
    assert bundle_warnings(exercise, [("two", "ranks", graded({"sum", "ranks", "sq"}))]) == []


def test_contract_rows_name_the_bugs_alone_and_the_generated_tests(exercise: Exercise) -> None:
    bugs = [("global_rank", "ranks", graded({"ranks"})), ("float_detour", "dtype", graded({"dtype"}))]
    rows = {r["concept"]: r for r in contract_rows(exercise, graded(set()), bugs)}
    assert rows["ranks"]["alone"] == ["global_rank"] and rows["ranks"]["generated"] == ["test_ranks_2"]
    assert rows["ranks"]["share"] == pytest.approx(4 / 9 * 4 / 5, abs=1e-4)
    assert rows["dtype"]["minor"].startswith("only a float") and rows["dtype"]["core"] is None
    assert rows["sum"]["alone"] == [] and rows["sum"]["generated"] == []
    lines = contract_lines("01 pair", list(rows.values()))
    short = [line for line, bad in lines if bad]
    assert [line.split()[1] for line in short] == ["sum", "sq"]  # core, and no bug breaks them alone
    assert any(
        "ranks 35.6% core group_rank; alone: global_rank; generated: test_ranks_2" in line
        for line, _ in lines
    )
