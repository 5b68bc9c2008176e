"""The judge's side of space-time diagrams: a test's ``Timeline`` from its world's flight files.

``timeline_of`` reads what every rank recorded during the test's last world task (``flight``), adds what the
judge knows (the test, its verdict, where a hang's ranks wait, the pattern it expected) and, outside
``--trace``, keeps the earliest ``KEPT_CALLS`` calls so that records and diagrams stay small.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from grader.core.results import TestResult
from grader.core.timeline import Call, Group, Timeline
from grader.harness.flight import FlightCall, RankFlight, read_flight
from grader.harness.patterns import Pattern, first_departure

KEPT_CALLS = 2_000
"""Calls a timeline keeps outside ``--trace`` (every rank's unfinished calls always stay): enough for any
test of this course, and a diagram of that many stays near 0.5 MB."""
CALLS_PER_RUN = 10_000
"""Calls the timelines of one grading run may hold together outside ``--trace`` (a result's records and a
student's diagrams stay small); the failing tests past it get no timeline, and the result says how many."""


@dataclass(frozen=True)
class TestFacts:
    """What the judge knows about the test a timeline belongs to."""

    __test__ = False  # not a pytest test class, despite the name

    test: str
    number: str
    part: str
    concept: str
    idea: str
    status: str
    verdict: str
    stuck: dict[int, str]
    """A hang's stuck ranks and where the verdict says each waits; empty for any other outcome."""

    @classmethod
    def of(cls, result: TestResult, idea: str, stuck: dict[int, str]) -> TestFacts:
        """The facts of ``result``: its verdict is its message's first lines."""
        verdict = "\n".join(result.output.splitlines()[:4])
        fields = (result.name, result.number, result.part, result.concept)
        return cls(*fields, idea=idea, status=str(result.status), verdict=verdict, stuck=stuck)


class Timelines:
    """The timelines of one grading run, in the order tests end; within ``CALLS_PER_RUN`` unless traced."""

    def __init__(self, *, trace: bool) -> None:
        self.trace = trace
        self.kept: list[Timeline] = []
        self.left_out = 0
        """Tests whose timeline did not fit ``CALLS_PER_RUN``."""
        self._calls = 0

    def add(self, flights: list[bytes], facts: TestFacts, pattern: Pattern | None) -> None:
        """Keep the timeline the flight files make, unless it has no call or does not fit."""
        timeline = timeline_of(flights, facts, pattern=pattern, keep=None if self.trace else KEPT_CALLS)
        if not timeline.calls:
            return
        if not self.trace and self._calls + len(timeline.calls) > CALLS_PER_RUN:
            self.left_out += 1
            return
        self._calls += len(timeline.calls)
        self.kept.append(timeline)


def timeline_of(
    flights: list[bytes], facts: TestFacts, *, pattern: Pattern | None, keep: int | None = KEPT_CALLS
) -> Timeline:
    """``flights``: each rank's flight file, in rank order. ``keep``: None keeps every call."""
    parsed = [read_flight(data) for data in flights]
    calls = _calls(parsed)
    groups: dict[str, tuple[int, ...]] = {}
    for flight in parsed:
        for name, members in flight.groups.items():
            groups.setdefault(name, members)
    timeline = Timeline(
        test=facts.test,
        number=facts.number,
        part=facts.part,
        concept=facts.concept,
        idea=facts.idea,
        world_size=len(flights),
        status=facts.status,
        verdict=facts.verdict,
        calls=calls,
        groups=tuple(Group(name, members) for name, members in groups.items()),
        truncated=tuple(rank for rank, flight in enumerate(parsed) if flight.truncated),
        stuck=tuple(sorted(facts.stuck.items())),
    )
    if pattern is not None:
        departure = first_departure(pattern, timeline)
        timeline = replace(
            timeline,
            expected=pattern.name,
            departure=departure.text if departure else "",
            departure_at=(departure.rank, departure.index)
            if departure and departure.index is not None
            else None,
        )
    return _kept(timeline, keep)


def _calls(parsed: list[RankFlight]) -> tuple[Call, ...]:
    """Every rank's calls, times made relative to the earliest start and rounded to the microsecond."""
    starts = [c["start"] for flight in parsed for c in flight.calls]
    origin = min(starts, default=0.0)
    return tuple(_call(rank, row, origin) for rank, flight in enumerate(parsed) for row in flight.calls)


def _call(rank: int, row: FlightCall, origin: float) -> Call:
    end = row["end"]
    return Call(
        rank=rank,
        index=row["index"],
        op=row["op"],
        peer=row["peer"],
        group_peer=row["group_peer"],
        nbytes=row["nbytes"],
        tag=row["tag"],
        group=row["group"],
        start=round(row["start"] - origin, 6),
        end=None if end is None else round(max(end, row["start"]) - origin, 6),
        ok=row["ok"],
        of=row["of"],
    )


def _kept(timeline: Timeline, keep: int | None) -> Timeline:
    """The earliest ``keep`` calls, and every call that never returned (where a hang stands)."""
    if keep is None or len(timeline.calls) <= keep:
        return timeline
    earliest = sorted(timeline.calls, key=lambda c: c.start)[:keep]
    chosen = set(map(id, earliest)) | {id(c) for c in timeline.calls if c.end is None}
    calls = tuple(c for c in timeline.calls if id(c) in chosen)
    return replace(timeline, calls=calls, dropped=len(timeline.calls) - len(calls))
