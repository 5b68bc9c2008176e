"""Reading a ``Timeline``: which send each receive got, which collective calls belong together, who waits.

Messages match as gloo and NCCL match them: between two ranks of one group, with one tag, the k-th send
from a to b is the k-th receive at b from a ("messages between the same two ranks arrive in the order they
were sent"). The k-th collective call on a group is one collective across its members.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from grader.core.timeline import Call, Timeline


@dataclass(frozen=True)
class Message:
    """A send and the receive that got it; one of the two is None when it never found its match."""

    send: Call | None
    recv: Call | None
    src: int | None
    """The sender (global rank); None: a receive from any source that got nothing."""
    dst: int | None
    arrived: float | None
    """When the receiver had it: the receive's end, or the end of its wait (irecv); None: never."""

    @property
    def matched(self) -> bool:
        return self.send is not None and self.recv is not None

    def story(self) -> str:
        """One sentence for an unmatched message: 'rank 2 waits for a message from rank 1 that was never
        sent'."""
        if self.recv is not None and self.send is None:
            source = "any rank" if self.src is None else f"rank {self.src}"
            if self.arrived is None:
                return f"rank {self.dst} waits for a message from {source} that was never sent"
            return f"rank {self.dst} received a message from {source} that the recording has no send for"
        assert self.send is not None
        if self.send.end is None:
            return f"rank {self.src} waits in a send to rank {self.dst}, which never posted the receive"
        return f"rank {self.src} sent a message to rank {self.dst} that was never received"


@dataclass(frozen=True)
class Collective:
    """The k-th collective call of a group, on each member that made it."""

    group: str
    k: int
    members: tuple[int, ...]
    calls: tuple[Call, ...]
    """In member order; members that never made it have none."""

    @property
    def missing(self) -> tuple[int, ...]:
        called = {c.rank for c in self.calls}
        return tuple(m for m in self.members if m not in called)

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.op for c in self.calls))

    def story(self) -> str:
        """'' when every member made the same call; else what went wrong, in one sentence."""
        name = f"{'/'.join(self.ops)} #{self.k} of group {self.group}"
        if len(self.ops) > 1:
            said = ", ".join(f"rank {c.rank} {c.op}" for c in self.calls)
            return f"{name}: the ranks called different collectives ({said})"
        if self.missing:
            return f"{name}: rank(s) {', '.join(map(str, self.missing))} never called it"
        return ""


@dataclass(frozen=True)
class Blocked:
    """A rank still running when the world was stopped: the call it was in and the ranks it waits for."""

    rank: int
    call: Call | None
    """None: it was not inside a recorded call (busy in its own code, or in a call no wrapper saw)."""
    waits_for: tuple[int, ...]
    text: str
    """'blocked in recv from rank 1'."""
    place: str
    """Where the hang verdict says it waits (its stack)."""


def messages(timeline: Timeline) -> list[Message]:
    """Every point-to-point message, matched where it can be, sends in rank and call order."""
    Key = tuple[str, int | None, int | None, int]  # group, source, destination, tag
    sends: dict[Key, list[Call]] = defaultdict(list)
    recvs: dict[Key, list[Call]] = defaultdict(list)
    for call in timeline.calls:
        if call.kind == "send":
            sends[call.group, call.rank, call.peer, call.tag or 0].append(call)
        elif call.kind == "recv":
            recvs[call.group, call.peer, call.rank, call.tag or 0].append(call)
    waits: dict[tuple[int, int | None], Call] = {
        (c.rank, c.of): c for c in timeline.calls if c.kind == "wait"
    }
    found = []
    for key in sorted(set(sends) | set(recvs), key=lambda k: (-1 if k[1] is None else k[1], k[2] or 0)):
        out, into = sends.get(key, []), recvs.get(key, [])
        for k in range(max(len(out), len(into))):
            send = out[k] if k < len(out) else None
            recv = into[k] if k < len(into) else None
            found.append(Message(send, recv, key[1], key[2], _arrived(recv, waits)))
    return found


def _arrived(recv: Call | None, waits: dict[tuple[int, int | None], Call]) -> float | None:
    if recv is None:
        return None
    wait = waits.get((recv.rank, recv.index))
    return wait.end if wait is not None and recv.op == "irecv" else recv.end


def collectives(timeline: Timeline) -> list[Collective]:
    """Every collective, as the k-th call of its group on each member, in group and call order."""
    by_group: dict[str, dict[int, list[Call]]] = defaultdict(lambda: defaultdict(list))
    for call in timeline.calls:
        if call.kind == "collective":
            by_group[call.group][call.rank].append(call)
    found = []
    for group, per_rank in by_group.items():
        members = timeline.members(group) or tuple(sorted(per_rank))
        for k in range(max(len(calls) for calls in per_rank.values())):
            calls = tuple(per_rank[m][k] for m in members if k < len(per_rank.get(m, [])))
            found.append(Collective(group, k, members, calls))
    return found


def blocked(timeline: Timeline) -> list[Blocked]:
    """The ranks the hang verdict names as stuck, each with its last unfinished call and whom it waits for."""
    by_index: dict[tuple[int, int | None], Call] = {(c.rank, c.index): c for c in timeline.calls}
    open_collectives = {id(c): col for col in collectives(timeline) for c in col.calls if c.end is None}
    found = []
    for rank, place in timeline.stuck:
        pending = [c for c in timeline.calls if c.rank == rank and c.end is None]
        call = max(pending, key=lambda c: c.start, default=None)
        if call is None:
            found.append(Blocked(rank, None, (), "not inside a recorded call", place))
            continue
        waited = by_index.get((rank, call.of)) if call.kind == "wait" else call
        text, waits_for = _waiting(call, waited, open_collectives.get(id(call)))
        found.append(Blocked(rank, call, waits_for, text, place))
    return found


def _waiting(call: Call, waited: Call | None, collective: Collective | None) -> tuple[str, tuple[int, ...]]:
    if collective is not None:
        name = f"{call.op} of group {call.group}"
        if collective.missing:
            return (
                f"blocked in {name}, which rank(s) {_ranks(collective.missing)} never called",
                collective.missing,
            )
        return f"blocked in {name}", ()
    target = waited or call
    peer = () if target.peer is None else (target.peer,)
    who = "any rank" if target.peer is None else f"rank {target.peer}"
    if target.kind == "send":
        what = f"send to {who}"
    elif target.kind == "recv":
        what = f"recv from {who}"
    else:
        what = target.op
    return (f"waiting for its {target.op} ({what})" if call.kind == "wait" else f"blocked in {what}"), peer


def deadlock(found: list[Blocked]) -> list[int]:
    """A cycle of ranks each waiting for the next (the first found), or [] when there is none."""
    waits = {b.rank: b.waits_for for b in found}
    for start in waits:
        path, rank = [start], start
        while len(waits.get(rank, ())) == 1 and waits[rank][0] not in path:
            rank = waits[rank][0]
            path.append(rank)
        if waits.get(rank) == (start,) and len(path) > 1:
            return path
    return []


def _ranks(ranks: tuple[int, ...]) -> str:
    return ", ".join(map(str, ranks))
