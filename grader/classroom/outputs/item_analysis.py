"""What the class missed: score statistics, concepts earned, item analysis, verdicts, hangs and late work.

Computed from a batch's records (``grades/NN_slug/records``) and the reference's record, with nothing but the
standard library, so the numbers can be checked by hand:
- an *item* is one test (part and pytest node name) of the reference's run; a graded student who has no
  passing result for it (a test that never ran counts too) did not pass it;
- *discrimination* is the point-biserial correlation between passing the item (1/0) and the student's
  *rest score*, the total minus the item's own points (the corrected item-total correlation, so that an
  item does not correlate with itself); population standard deviations; None when either side is constant;
- invalid uploads are counted, and left out of every statistic.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from grader.classroom.state.records import Record
from grader.core.results import ExerciseResult, Status, TestResult

NEGATIVE_DISCRIMINATION = 0.0
"""An item whose discrimination is below this is flagged: stronger students fail it more often."""
_STUCK = re.compile(
    r"(?:blocked in dist\.(?P<collective>\w+)|still running \(not inside torch\.distributed\))"
    r"(?: at (?P<file>[^:\s]+):\d+ in (?P<function>[\w<>.]+))?"
)


@dataclass(frozen=True)
class Item:
    part: str
    name: str
    concept: str
    points: float
    passed: int
    takers: int
    discrimination: float | None
    reference: str
    """The reference's status on this test ('passed' when the suite is sound)."""

    @property
    def pass_rate(self) -> float:
        return self.passed / self.takers if self.takers else 0.0

    @property
    def flags(self) -> tuple[str, ...]:
        flags = []
        if self.takers and self.passed == self.takers:
            flags.append("everyone passes")
        if self.takers and self.passed == 0:
            flags.append("nobody passes")
        if self.discrimination is not None and self.discrimination < NEGATIVE_DISCRIMINATION:
            flags.append("negative discrimination")
        return tuple(flags)


@dataclass(frozen=True)
class ConceptShare:
    part: str
    name: str
    idea: str
    points: float
    earned: int
    graded: int

    @property
    def share(self) -> float:
        return self.earned / self.graded if self.graded else 0.0


@dataclass(frozen=True)
class Hang:
    place: str
    """'<function>: dist.<collective>' (or '... (not in torch.distributed)'), from the timeout's stacks."""
    students: tuple[str, ...]


@dataclass(frozen=True)
class Late:
    student: str
    submitted: str
    hours: float


@dataclass(frozen=True)
class ClassAnalysis:
    exercise: str
    title: str
    max_score: float
    records: tuple[Record, ...]
    """Every record, invalid uploads included, sorted by student."""
    scores: tuple[float, ...]
    """The graded students' scores (invalid uploads left out)."""
    concepts: tuple[ConceptShare, ...]
    """Most missed first."""
    items: tuple[Item, ...]
    verdicts: dict[str, int]
    """Students per verdict of their whole run."""
    test_statuses: dict[str, int]
    """Tests per status, over every graded student."""
    hangs: tuple[Hang, ...]
    """Where timed-out tests were stuck, most students first."""
    late: tuple[Late, ...]

    def summary(self) -> dict[str, float]:
        s = sorted(self.scores)
        if not s:
            return {}
        q1, median, q3 = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else (s[0],) * 3
        return {
            "students": len(s),
            "mean": statistics.fmean(s),
            "median": median,
            "q1": q1,
            "q3": q3,
            "min": s[0],
            "max": s[-1],
        }


def analyze(
    records: list[Record], reference: ExerciseResult | None, deadline: datetime | None = None
) -> ClassAnalysis:
    """The class's statistics from its records; ``reference`` lists the items (else the graded tests do)."""
    ordered = tuple(sorted(records, key=lambda r: r.student))
    graded = [r for r in ordered if r.result.verdict is not Status.INVALID]
    first = (reference or (graded[0].result if graded else None)) if ordered else None
    return ClassAnalysis(
        exercise=first.exercise if first else "",
        title=first.title if first else "",
        max_score=reference.max_score if reference else max((r.result.max_score for r in graded), default=0),
        records=ordered,
        scores=tuple(r.result.score for r in graded),
        concepts=_concepts(graded, reference),
        items=_items(graded, reference),
        verdicts=dict(Counter(str(r.result.verdict) for r in ordered)),
        test_statuses=dict(Counter(str(t.status) for r in graded for t in r.result.tests)),
        hangs=_hangs(graded),
        late=_late(ordered, deadline),
    )


def point_biserial(passed: list[bool], scores: list[float]) -> float | None:
    """Pearson's r between 1/0 and ``scores``, population moments; None when either is constant."""
    n = len(passed)
    if n < 2:
        return None
    x = [1.0 if p else 0.0 for p in passed]
    mean_x, mean_y = sum(x) / n, sum(scores) / n
    var_x = sum((v - mean_x) ** 2 for v in x) / n
    var_y = sum((v - mean_y) ** 2 for v in scores) / n
    if var_x == 0 or var_y < 1e-12:
        return None
    cov = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, scores, strict=True)) / n
    return cov / math.sqrt(var_x * var_y)


def stuck_places(test: TestResult) -> list[str]:
    """Where a timed-out test's ranks were stuck, as '<function>: dist.<collective>', once each."""
    places = []
    for match in _STUCK.finditer(test.output):
        function = match["function"] or "?"
        what = f"dist.{match['collective']}" if match["collective"] else "not in torch.distributed"
        places.append(f"{function}: {what}")
    return list(dict.fromkeys(places))


def _items(graded: list[Record], reference: ExerciseResult | None) -> tuple[Item, ...]:
    tests = reference.tests if reference else _union(graded)
    items = []
    for test in tests:
        passing = [_passed(r.result, test) for r in graded]
        rest = [r.result.score - (test.max_score if p else 0.0) for r, p in zip(graded, passing, strict=True)]
        items.append(
            Item(
                part=test.part,
                name=test.name,
                concept=test.concept,
                points=test.max_score,
                passed=sum(passing),
                takers=len(graded),
                discrimination=point_biserial(passing, rest),
                reference=str(test.status) if reference else "-",
            )
        )
    return tuple(items)


def _union(graded: list[Record]) -> list[TestResult]:
    seen: dict[tuple[str, str], TestResult] = {}
    for record in graded:
        for test in record.result.tests:
            if not test.name.endswith("(all tests)"):
                seen.setdefault((test.part, test.name), test)
    return list(seen.values())


def _passed(result: ExerciseResult, item: TestResult) -> bool:
    return any(t.status is Status.PASSED for t in result.tests if (t.part, t.name) == (item.part, item.name))


def _concepts(graded: list[Record], reference: ExerciseResult | None) -> tuple[ConceptShare, ...]:
    """Per concept of the reference's run, how many graded students earned it; most missed first."""
    listed = reference.concepts if reference else (graded[0].result.concepts if graded else ())
    shares = []
    for concept in listed:
        earned = sum(
            any(c.part == concept.part and c.name == concept.name and c.earned for c in r.result.concepts)
            for r in graded
        )
        shares.append(
            ConceptShare(concept.part, concept.name, concept.idea, concept.max_score, earned, len(graded))
        )
    return tuple(sorted(shares, key=lambda c: (c.share, -c.points, c.part, c.name)))


def _hangs(graded: list[Record]) -> tuple[Hang, ...]:
    students: dict[str, set[str]] = {}
    for record in graded:
        for test in record.result.tests:
            if test.status is Status.TIMEOUT:
                for place in stuck_places(test):
                    students.setdefault(place, set()).add(record.student)
    hangs = [Hang(place, tuple(sorted(who))) for place, who in students.items()]
    return tuple(sorted(hangs, key=lambda h: (-len(h.students), h.place)))


def _late(records: tuple[Record, ...], deadline: datetime | None) -> tuple[Late, ...]:
    if deadline is None:
        return ()
    late = []
    for record in records:
        if record.submitted:
            hours = (datetime.fromisoformat(record.submitted) - deadline).total_seconds() / 3600
            if hours > 0:
                late.append(Late(record.student, record.submitted, hours))
    return tuple(late)
