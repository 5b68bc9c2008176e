"""Points follow concepts: a part's points are split over its concepts by weight, all-or-nothing each.

Why all-or-nothing: a submission that breaks one concept must lose at least that concept's share, however
many other tests it passes. Partial credit inside a concept would let a planner that gets the central idea
wrong keep most of its points by passing the easy cases (docs/authoring.md, "How points are computed").
"""

from __future__ import annotations

from dataclasses import replace

from grader.core.course import Exercise
from grader.core.results import ConceptScore, Status, TestResult


def score_by_concept(
    tests: tuple[TestResult, ...], exercise: Exercise
) -> tuple[tuple[TestResult, ...], tuple[ConceptScore, ...]]:
    """``tests`` rescored so that a test earns its share only when its whole concept passed, and the
    score per concept, in the order the concepts first appear. Test ``max_score``s are kept."""
    parts = {p.id: p for p in exercise.parts}
    groups: dict[tuple[str, str], list[TestResult]] = {}
    for test in tests:
        groups.setdefault((test.part, test.concept), []).append(test)
    earned = {key: all(t.status is Status.PASSED for t in group) for key, group in groups.items()}
    rescored = tuple(_rescored(t, earned[t.part, t.concept]) for t in tests)
    concepts = []
    for (part_id, name), group in groups.items():
        concept = parts[part_id].concept(name) if part_id in parts else None
        max_score = round(sum(t.max_score for t in group), 6)
        concepts.append(
            ConceptScore(
                part=part_id,
                name=name,
                idea=concept.idea if concept else "",
                score=max_score if earned[part_id, name] else 0.0,
                max_score=max_score,
                passed=sum(t.status is Status.PASSED for t in group),
                tests=len(group),
            )
        )
    return rescored, tuple(concepts)


def _rescored(test: TestResult, concept_earned: bool) -> TestResult:
    if concept_earned or test.status is not Status.PASSED:
        return test
    note = f"[{test.part}] passed, but scores only once every test of concept '{test.concept}' passes"
    return replace(test, score=0.0, output=note)
