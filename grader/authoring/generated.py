"""``grade validate``'s check on generated problems: a concept graded on inputs drawn from seeds must be shown
to be exercised by them.

A test is *generated* when it draws its inputs (models, clusters, shapes, world sizes) from seeds in the judge
and says so with ``@pytest.mark.generated`` (or ``pytest.param(..., marks=pytest.mark.generated)``); the
plugin records that on ``TestResult.generated``. For each concept a generated test grades, the bug corpus
must hold a bug that the generated cases catch on their own: some generated test of the concept fails.
Without one, nothing shows that the seeds ever reach the mistake the concept is about (issue 30: 24's dense
problems never exposed a planner that drops the optimizer states under ZeRO-1). Bugs that only the seeds
catch, because no named case has the feature they need, are welcome in the corpus but not demanded: where the
named cases already hold every feature a mistake can depend on (each code of a fixed table), none exists.
"""

from __future__ import annotations

from collections.abc import Sequence

from grader.core.results import ExerciseResult, Status

Concept = tuple[str, str]
"""(part id, concept name)."""


def generated_concepts(reference: ExerciseResult) -> dict[Concept, list[str]]:
    """Each concept some generated test grades, with those tests' names."""
    found: dict[Concept, list[str]] = {}
    for test in reference.tests:
        if test.generated:
            found.setdefault((test.part, test.concept), []).append(test.name)
    return found


def caught_by_generated(result: ExerciseResult, concept: Concept) -> bool:
    """Some generated test of ``concept`` ran and lost (blocked or never started: it shows nothing)."""
    return any(
        t.generated and t.ran and t.status not in (Status.PASSED, Status.BLOCKED)
        for t in result.tests
        if (t.part, t.concept) == concept
    )


def generated_problems(reference: ExerciseResult, bugs: Sequence[tuple[str, ExerciseResult]]) -> list[str]:
    """One problem per concept graded by generated tests that no bug (name, its graded result) of the
    corpus makes a generated test of fail."""
    problems = []
    for concept, names in generated_concepts(reference).items():
        if not any(caught_by_generated(result, concept) for _, result in bugs):
            tests = ", ".join(sorted({n.split("[")[0] for n in names}))
            problems.append(
                f"generated: {concept[0]}: {concept[1]} is graded on generated inputs ({tests}), but they "
                "catch no bug of the corpus: add a bug of the concept, or seeds that reach the mistakes"
            )
    return problems
