"""What a test expects the messages to look like, so a diagram can name where a recording departs from it.

A test states its pattern once, before its calls: ``world.expect(ring(messages=lambda p: 2 * (p - 1)))``.
When the test fails (or with ``--trace``), the judge compares each group's point-to-point messages with it
and writes the first departure, in time, into the diagram: "step 3: rank 2 sent to rank 0; a ring sends to
rank 3". Steps count as ``comm_trace`` counts them: step k of a rank is its k-th send (or k-th receive),
from 0; ranks are group ranks.

Diagnostics only: the recording comes from the ranks and no grade reads the departure. A pattern says only
what the exercise's README demands (a binomial broadcast may use any tree; it must only forward what it has).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from grader.core.timeline import Call, Timeline

Count = int | Callable[[int], int] | None
"""Messages each rank sends: a number, a function of the group's size, or None (not checked)."""


@dataclass(frozen=True)
class Departure:
    at: float
    """When it happened (the call's start; a missing message: the rank's last call's end)."""
    rank: int
    """The global rank."""
    index: int | None
    """The call's index (None: a message that never came)."""
    text: str


@dataclass(frozen=True)
class Traffic:
    """One group's point-to-point calls, in group ranks: each rank's sends and receives in call order."""

    members: tuple[int, ...]
    sends: tuple[tuple[Call, ...], ...]
    recvs: tuple[tuple[Call, ...], ...]
    whole_world: bool

    @property
    def size(self) -> int:
        return len(self.members)

    def peer(self, call: Call) -> int | None:
        """The call's peer as a group rank (None: any source, or not in the group)."""
        if call.group_peer is not None:
            return call.group_peer
        return self.members.index(call.peer) if call.peer in self.members else None

    def who(self, rank: int | None) -> str:
        """'rank 2' in the whole world; 'group rank 2 (rank 5)' in a sub-group."""
        if rank is None or not 0 <= rank < self.size:
            return "an unknown rank" if rank is None else "a rank outside the group"
        return f"rank {rank}" if self.whole_world else f"group rank {rank} (rank {self.members[rank]})"

    def at(self, rank: int, call: Call, text: str) -> Departure:
        return Departure(call.start, self.members[rank], call.index, text)

    def after_last(self, rank: int, text: str) -> Departure:
        """A departure that is a message missing from ``rank``: placed after its last call."""
        calls = [*self.sends[rank], *self.recvs[rank]]
        last = max((c.end or c.start for c in calls), default=float("inf"))
        return Departure(last, self.members[rank], None, text)


class Pattern(Protocol):
    name: str
    """How the departure's text names it: 'a ring', 'a broadcast from rank 0'."""

    def departure(self, traffic: Traffic) -> Departure | None:
        """The first place, in time, where ``traffic`` departs from the pattern; None if it does not."""
        ...


def first_departure(pattern: Pattern, timeline: Timeline) -> Departure | None:
    """The earliest departure from ``pattern`` over every group with point-to-point traffic."""
    found = [pattern.departure(t) for t in group_traffic(timeline)]
    return min((d for d in found if d is not None), key=lambda d: d.at, default=None)


def group_traffic(timeline: Timeline) -> list[Traffic]:
    """Each group's sends and receives, per group rank, in call order."""
    out = []
    for group in timeline.groups:
        mine = [c for c in timeline.calls if c.group == group.name and c.kind in ("send", "recv")]
        if not mine:
            continue
        by_rank = [[c for c in mine if c.rank == member] for member in group.members]
        out.append(
            Traffic(
                members=group.members,
                sends=tuple(tuple(c for c in calls if c.kind == "send") for calls in by_rank),
                recvs=tuple(tuple(c for c in calls if c.kind == "recv") for calls in by_rank),
                whole_world=group.members == tuple(range(timeline.world_size)),
            )
        )
    return out


def _earliest(found: Sequence[Departure | None]) -> Departure | None:
    return min((d for d in found if d is not None), key=lambda d: d.at, default=None)


def _count(messages: Count, size: int) -> int | None:
    return messages(size) if callable(messages) else messages


def _stopped(traffic: Traffic, r: int) -> bool:
    """Whether rank ``r`` was stopped inside a call (a hang): it never came to its remaining messages."""
    return any(c.end is None for c in (*traffic.sends[r], *traffic.recvs[r]))


def _too_many_or_few(traffic: Traffic, name: str, messages: Count) -> Departure | None:
    """Where a rank sends more messages than ``messages``, or ends with fewer (not one a hang stopped)."""
    want = _count(messages, traffic.size)
    if want is None:
        return None
    found: list[Departure | None] = []
    for r, sends in enumerate(traffic.sends):
        if len(sends) > want:
            text = f"step {want}: {traffic.who(r)} sent one message more; {name} sends {want} per rank"
            found.append(traffic.at(r, sends[want], text))
        elif len(sends) < want and not _stopped(traffic, r):
            text = f"{traffic.who(r)} sent {len(sends)} message(s); {name} sends {want} per rank"
            found.append(traffic.after_last(r, text))
    return _earliest(found)


# ---------------------------------------------------------------------------------------------------------
# the patterns


Allowed = Callable[[int, int, int], Collection[int]]
"""(rank, step, group size) -> the group ranks a rank may send to (or receive from) at that step."""


@dataclass(frozen=True)
class Peers:
    """At step k, rank r sends only to ``to(r, k, p)`` and receives only from ``source(r, k, p)``; with
    ``each_once``, it does either with each rank at most once."""

    name: str
    to: Allowed
    source: Allowed
    messages: Count = None
    each_once: bool = False

    def departure(self, traffic: Traffic) -> Departure | None:
        found: list[Departure | None] = [_too_many_or_few(traffic, self.name, self.messages)]
        for r in range(traffic.size):
            found.append(self._wrong(traffic, r, "sent to", "sends to", self.to, traffic.sends[r]))
            found.append(
                self._wrong(traffic, r, "received from", "receives from", self.source, traffic.recvs[r])
            )
        return _earliest(found)

    def _wrong(
        self, traffic: Traffic, r: int, did: str, does: str, allowed: Allowed, calls: Sequence[Call]
    ) -> Departure | None:
        seen: set[int] = set()
        for k, call in enumerate(calls):
            got, ok = traffic.peer(call), set(allowed(r, k, traffic.size))
            if got is None:
                continue
            if got not in ok:
                ranks = " or ".join(traffic.who(a) for a in sorted(ok))
                text = f"step {k}: {traffic.who(r)} {did} {traffic.who(got)}; {self.name} {does} {ranks}"
                return traffic.at(r, call, text)
            if self.each_once and got in seen:
                again = f"{traffic.who(got)} again"
                text = f"step {k}: {traffic.who(r)} {did} {again}; {self.name} {does} each rank once"
                return traffic.at(r, call, text)
            seen.add(got)
        return None


@dataclass(frozen=True)
class Ring:
    """Each rank sends only to its neighbour on one side and receives only from the other: r -> r+d."""

    direction: int | None = None
    """+1 (r -> r+1) or -1; None: whichever the group's first message takes."""
    messages: Count = None
    name: str = "a ring"

    def departure(self, traffic: Traffic) -> Departure | None:
        p = traffic.size
        first = min((c for sends in traffic.sends for c in sends), key=lambda c: c.start, default=None)
        if first is None or p < 2:
            return None
        r, to = traffic.members.index(first.rank), traffic.peer(first)
        d = self.direction or (1 if to == (r + 1) % p else -1 if to == (r - 1) % p else None)
        if d is None:
            either = f"{traffic.who((r + 1) % p)} or {traffic.who((r - 1) % p)}"
            text = f"step 0: {traffic.who(r)} sent to {traffic.who(to)}; {self.name} sends to {either}"
            return traffic.at(r, first, text)
        step = d

        def ahead(rank: int, k: int, size: int) -> set[int]:
            return {(rank + step) % size}

        def behind(rank: int, k: int, size: int) -> set[int]:
            return {(rank - step) % size}

        return Peers(self.name, ahead, behind, self.messages).departure(traffic)


@dataclass(frozen=True)
class _Rooted:
    """A pattern around a root, checked rank by rank: the earliest of each rank's first departure."""

    root: int
    """A group rank."""

    def departure(self, traffic: Traffic) -> Departure | None:
        return _earliest([self._rank(traffic, r) for r in range(traffic.size)])

    def _rank(self, traffic: Traffic, r: int) -> Departure | None:
        raise NotImplementedError


@dataclass(frozen=True)
class FromRoot(_Rooted):
    """A broadcast: the root receives nothing; every other rank receives once, before it sends anything."""

    @property
    def name(self) -> str:
        return f"a broadcast from rank {self.root}"

    def _rank(self, traffic: Traffic, r: int) -> Departure | None:
        sends, recvs, who = traffic.sends[r], traffic.recvs[r], traffic.who(r)
        if r == self.root and recvs:
            return traffic.at(r, recvs[0], f"step 0: {who} received; in {self.name} the root only sends")
        if r == self.root:
            return None
        if len(recvs) > 1:
            return traffic.at(
                r, recvs[1], f"step 1: {who} received a second message; in {self.name} it receives once"
            )
        arrived = recvs[0].end if recvs and recvs[0].end is not None else float("inf")
        early = next((c for c in sends if c.start < arrived), None)
        if early is not None:
            text = (
                f"step 0: {who} sent to {traffic.who(traffic.peer(early))} before its message arrived; "
                f"{self.name} forwards only what it has received"
            )
            return traffic.at(r, early, text)
        if not recvs:
            return traffic.after_last(
                r, f"{who} received nothing; in {self.name} every other rank receives once"
            )
        return None


@dataclass(frozen=True)
class ToRoot(_Rooted):
    """A reduce: the root sends nothing; every other rank sends once, after everything it adds has arrived."""

    @property
    def name(self) -> str:
        return f"a reduce to rank {self.root}"

    def _rank(self, traffic: Traffic, r: int) -> Departure | None:
        sends, recvs, who = traffic.sends[r], traffic.recvs[r], traffic.who(r)
        if r == self.root:
            return (
                traffic.at(r, sends[0], f"step 0: {who} sent; in {self.name} the root only receives")
                if sends
                else None
            )
        if len(sends) > 1:
            return traffic.at(
                r,
                sends[1],
                f"step 1: {who} sent a second message; in {self.name} it sends its partial sum once",
            )
        if not sends:
            return traffic.after_last(r, f"{who} sent nothing; in {self.name} every other rank sends once")
        late = next((c for c in recvs if c.start > sends[0].start), None)
        if late is not None:
            text = (
                f"{who} received from {traffic.who(traffic.peer(late))} after it sent its partial sum; "
                f"{self.name} sends once everything has arrived"
            )
            return traffic.at(r, late, text)
        return None


# ---------------------------------------------------------------------------------------------------------
# what tests call


def ring(direction: int | None = None, *, messages: Count = None) -> Ring:
    """Every message goes one way round: r -> r+1 (``direction=1``), r -> r-1 (-1), or either (None)."""
    return Ring(direction, messages)


def exchange(name: str, partner: Callable[[int, int, int], int], *, messages: Count = None) -> Peers:
    """At step k, rank r sends to and receives from ``partner(r, k, p)`` (recursive doubling: r ^ 2^k)."""

    def allowed(rank: int, k: int, size: int) -> set[int]:
        return {partner(rank, k, size)}

    return Peers(name, allowed, allowed, messages)


def peers(
    name: str,
    allowed: Callable[[int, int], Collection[int]],
    *,
    messages: Count = None,
    each_once: bool = False,
) -> Peers:
    """Rank r sends to and receives from ``allowed(r, p)`` only (each of them once with ``each_once``)."""

    def any_step(rank: int, k: int, size: int) -> Collection[int]:
        return allowed(rank, size)

    return Peers(name, any_step, any_step, messages, each_once)


def pairwise() -> Peers:
    """Pairwise exchange: every rank sends to and receives from every other rank exactly once."""
    return peers(
        "pairwise exchange", lambda r, p: set(range(p)) - {r}, messages=lambda p: p - 1, each_once=True
    )


def from_root(root: int) -> FromRoot:
    """A broadcast from ``root`` (a group rank) along any tree."""
    return FromRoot(root)


def to_root(root: int) -> ToRoot:
    """A reduce to ``root`` (a group rank) along any tree."""
    return ToRoot(root)
