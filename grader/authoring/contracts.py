"""``grade validate``'s checks that each stated contract costs what it teaches, and a bug what it breaks.

A concept of concepts.yml is either *core* (``core:``, the misconception a TA would call "did not understand
the exercise") or *minor* (``minor:``, one line saying why missing it is not missing the exercise). Issue 41:
  - each core concept is worth at least ``CORE_SHARE_FLOOR`` of its exercise on its own (a misconception
    summed over several concepts let one of them cost 3 %, and a bug that broke only it, only that);
  - each core concept has a bug of the corpus that breaks it alone: every failing test of its part is one of
    that concept's, so within the part the bug loses that concept's share and nothing else (other parts that
    call the same function may lose too: the entry's ``loses:`` pins them);
  - a bug that fails tests of ``BUNDLE_LIMIT`` or more concepts of its own part is flagged (a warning): the
    tests of the other concepts probably run the scenario the bug is about (07's fused part ran every overlap
    check on 8 ranks inside sub-groups too, so a sub-group mistake cost five concepts).
``grade validate --contracts`` prints, per concept, its share, core or minor, the bugs that break it alone,
and the generated tests (inputs drawn in the judge) that grade it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grader.authoring.generated import generated_concepts
from grader.core.catalogue import CORE_SHARE_FLOOR, Exercise
from grader.core.results import ExerciseResult, Status

ConceptKey = tuple[str, str]
"""(part id, concept name)."""
Graded = tuple[str, str, ExerciseResult]
"""A graded bug: its name, the concept its entry names, its result."""
BUNDLE_LIMIT = 3
"""A bug failing tests of this many concepts of its own part is flagged as a bundle."""


def weight_problems(exercise: Exercise) -> list[str]:
    """No core concept at all, a core concept under the floor on its own, a concept neither core nor minor."""
    if not any(p.concepts for p in exercise.parts):
        return []
    shares = exercise.core_shares()
    problems = [] if shares else ["weights: no concept marks a core misconception (`core:` in concepts.yml)"]
    problems += [
        f"weights: core concept {part}: {name} is {share:.1%} of the exercise, under {CORE_SHARE_FLOOR:.0%}"
        for (part, name), share in shares.items()
        if share < CORE_SHARE_FLOOR - 1e-9
    ]
    return problems + [
        f"weights: concept {p.id}: {c.name} is neither core (`core:`) nor marked `minor:` with a reason"
        for p in exercise.parts
        for c in p.concepts
        if c.core is None and c.minor is None
    ]


def broken_concepts(result: ExerciseResult) -> set[ConceptKey]:
    """The concepts with a test that did not pass (a blocked test shows nothing either way)."""
    return {(t.part, t.concept) for t in result.tests if t.status not in (Status.PASSED, Status.BLOCKED)}


def broken_alone(result: ExerciseResult) -> set[ConceptKey]:
    """The concepts that ``result`` breaks alone: the only concept of its part with a failing test."""
    broken = broken_concepts(result)
    return {(part, name) for part, name in broken if [c for p, c in broken if p == part] == [name]}


def isolation_problems(exercise: Exercise, reference: ExerciseResult, bugs: Sequence[Graded]) -> list[str]:
    """One problem per core concept that no bug breaks alone. A concept whose tests were all blocked here (a
    GPU part on a CPU run) is judged where it runs."""
    ran = {(t.part, t.concept) for t in reference.tests if t.status is not Status.BLOCKED}
    alone = set().union(*(broken_alone(result) for _, _, result in bugs))
    return [
        f"contracts: core concept {part}: {name} has no bug of the corpus that breaks it alone (no other "
        "concept of its part failing): add one, or split the tests that bundle another concept's scenario"
        for part, name in exercise.core_shares()
        if (part, name) in ran and (part, name) not in alone
    ]


def bundle_warnings(exercise: Exercise, bugs: Sequence[Graded]) -> list[str]:
    """A bug meant for one concept that fails tests of ``BUNDLE_LIMIT`` or more concepts of its part."""
    warnings = []
    for name, concept, result in bugs:
        part = next((p.id for p in exercise.parts if p.concept(concept)), None)
        hit = sorted(c for p, c in broken_concepts(result) if p == part)
        if len(hit) >= BUNDLE_LIMIT:
            warnings.append(
                f"bundle: bug {name} (meant for {concept}) fails tests of {len(hit)} concepts of {part}: "
                f"{', '.join(hit)}; do their tests run the scenario it is about?"
            )
    return warnings


def contract_rows(
    exercise: Exercise, reference: ExerciseResult, bugs: Sequence[Graded]
) -> list[dict[str, Any]]:
    """Per concept: part, name, share of the exercise, core name, minor reason, the bugs that break it alone,
    and the generated tests that grade it (test names without their parameters)."""
    generated = generated_concepts(reference)
    return [
        {
            "part": p.id,
            "concept": c.name,
            "share": round(exercise.share(p, c), 4),
            "core": c.core,
            "minor": c.minor,
            "alone": [name for name, _, result in bugs if (p.id, c.name) in broken_alone(result)],
            "generated": sorted({t.split("[")[0] for t in generated.get((p.id, c.name), [])}),
        }
        for p in exercise.parts
        for c in p.concepts
    ]


def contract_lines(title: str, rows: Sequence[dict[str, Any]]) -> list[tuple[str, bool]]:
    """``grade validate --contracts``: a title, then one line per concept, each with whether it falls short
    (a core concept under the floor, or that no bug breaks alone)."""
    lines = [(f"{title}: share, core or minor, bugs that break it alone, generated tests", False)]
    for row in rows:
        kind = f"core {row['core']}" if row["core"] else "minor"
        alone = ", ".join(row["alone"]) or "-"
        generated = ", ".join(row["generated"]) or "-"
        line = f"  {row['part']} {row['concept']} {row['share']:.1%} {kind}; alone: {alone}"
        line += f"; generated: {generated}"
        short = row["core"] and (row["share"] < CORE_SHARE_FLOOR - 1e-9 or not row["alone"])
        lines.append((line, bool(short)))
    return lines
