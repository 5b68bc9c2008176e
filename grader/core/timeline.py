"""One test's recording, as plain data: every rank's calls to the network, timed, for space-time diagrams.

The judge builds a ``Timeline`` from the ranks' flight files (``grader.harness.flight``) after a multi-rank
test fails (after every test with ``--trace``) and carries it in ``ExerciseResult.timelines``. Diagnostics
only: the ranks wrote what it holds, so student code could have forged any of it, and no grade reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SENDS = ("send", "isend")
RECVS = ("recv", "irecv")
WAIT = "wait"


@dataclass(frozen=True, slots=True)
class Call:
    """One call a rank made: a message sent or received, a wait for one, or a collective."""

    rank: int
    index: int
    """Its place among the rank's recorded calls, from 0."""
    op: str
    """send, recv, isend, irecv, wait, or the collective's name (all_reduce, barrier, ...)."""
    peer: int | None
    """The other rank of a message, as a global rank; None: any source, or not a message."""
    group_peer: int | None
    """The same rank in the call's group."""
    nbytes: int | None
    tag: int | None
    group: str
    """The process group's name (``Timeline.groups`` has its members)."""
    start: float
    """Seconds since the timeline's first call started."""
    end: float | None
    """When it returned; None: it never did (a hang, or the rank was killed)."""
    ok: bool = True
    """False: it raised."""
    of: int | None = None
    """For a wait: the index of the call whose request it waits for."""

    @property
    def kind(self) -> str:
        """'send', 'recv', 'wait' or 'collective'."""
        if self.op in SENDS:
            return "send"
        if self.op in RECVS:
            return "recv"
        return "wait" if self.op == WAIT else "collective"


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    members: tuple[int, ...]
    """Global ranks, in group-rank order."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    """Every rank's calls during the last world task of one test, and what the judge knows about them."""

    test: str
    number: str
    part: str
    concept: str
    idea: str = ""
    world_size: int
    status: str
    """The test's status (``Status`` value)."""
    verdict: str = ""
    """The test's message to the student (its first lines)."""
    calls: tuple[Call, ...] = ()
    groups: tuple[Group, ...] = ()
    truncated: tuple[int, ...] = ()
    """Ranks whose recording reached the cap (``flight.MAX_CALLS_PER_TEST``): later calls are missing."""
    dropped: int = 0
    """Calls left out of this timeline to keep diagrams small (the latest ones)."""
    stuck: tuple[tuple[int, str], ...] = ()
    """For a hang: each rank still running at the deadline and where the hang verdict says it waits."""
    expected: str = ""
    """The pattern the test expected (``World.expect``), in words; '' when it states none."""
    departure: str = ""
    """The first point where the recording departs from that pattern; '' when none was found."""
    departure_at: tuple[int, int] | None = None
    """(rank, call index) of the call where it departs."""

    def members(self, group: str) -> tuple[int, ...]:
        """The global ranks of ``group``; () when the recording did not say."""
        return next((g.members for g in self.groups if g.name == group), ())

    def to_dict(self) -> dict[str, object]:
        """JSON values; each call as a list in ``Call``'s field order (a timeline may hold thousands)."""
        data = {name: getattr(self, name) for name in self.__slots__}
        data["calls"] = [[getattr(c, name) for name in Call.__slots__] for c in self.calls]
        data["groups"] = [[g.name, list(g.members)] for g in self.groups]
        data["stuck"] = [list(s) for s in self.stuck]
        return data

    @classmethod
    # Any: timeline JSON (to_dict's), read by field; what does not fit is a ValueError
    def from_dict(cls, data: dict[str, Any]) -> Timeline:
        """Rebuild from ``to_dict``; ``ValueError`` on anything else."""
        try:
            calls = tuple(Call(*row) for row in data["calls"])
            groups = tuple(Group(name, tuple(members)) for name, members in data["groups"])
            stuck = tuple((int(rank), str(place)) for rank, place in data["stuck"])
            at = data.get("departure_at")
            plain = {k: v for k, v in data.items() if k not in ("calls", "groups", "stuck", "departure_at")}
            return cls(
                calls=calls,
                groups=groups,
                stuck=stuck,
                departure_at=None if at is None else (int(at[0]), int(at[1])),
                **plain | {"truncated": tuple(data["truncated"])},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a timeline: {exc}") from None
