"""What a rank's wrapped calls did during one task, and the check on the calls no wrapper saw.

``comm``'s wrappers record into ``RECORDER``: point-to-point messages as events, collectives by name, and
what the process groups' sequence numbers advanced by while a wrapper let a call through. ``finish``
compares that with how far the sequence numbers really moved (see ``comm``'s docstring).

Each outermost call is also timed into ``FLIGHT``, the rank's flight file (``flight``), for space-time
diagrams: diagnostics only, which no grade reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
import torch._C._distributed_c10d as _C
import torch.distributed.distributed_c10d as c10d

from grader.harness.flight import FlightLog


class ForbiddenCollective(RuntimeError):
    """A collective the test forbade was called."""


@dataclass
class CommRecorder:
    """What this rank did during the current task; reset before each task."""

    events: list[dict[str, object]] = field(default_factory=list)
    collectives: list[str] = field(default_factory=list)
    collective_bytes: list[int] = field(default_factory=list)
    """Per entry of ``collectives``: the bytes of every tensor the call was handed (``tensor_bytes``)."""
    forbidden: frozenset[str] = frozenset()
    depth: int = 0
    """Nesting of wrapped calls: torch's ``send`` calls ``isend``; only the outer call is the student's."""
    accounted: int = 0
    """Sequence numbers the wrapped calls advanced the process groups by."""
    unrecorded: int = 0
    """Calls that advanced a group's sequence number without passing a wrapper (set by ``finish``)."""
    baseline: dict[int, int] = field(default_factory=dict)
    """Each known group's sequence number when the task started, by ``id``."""

    def reset(self, forbidden: frozenset[str]) -> None:
        self.events, self.collectives, self.forbidden, self.depth = [], [], forbidden, 0
        self.collective_bytes = []
        self.accounted, self.unrecorded, self.baseline = 0, 0, _sequence_numbers()
        FLIGHT.reset(c10d.get_world_size() if c10d.is_initialized() else 1)
        _WORKS.clear()

    def finish(self) -> None:
        """After the task: compare the groups' sequence numbers with what the wrappers let through.

        Raises ``ForbiddenCollective`` where the task forbids collectives and some call went around them."""
        now = _sequence_numbers()
        advanced = sum(seq - self.baseline.get(key, 0) for key, seq in now.items())
        self.unrecorded = advanced - self.accounted
        if self.unrecorded and self.forbidden:
            raise ForbiddenCollective(
                f"{abs(self.unrecorded)} collective or point-to-point call(s) went around torch.distributed "
                "and the process group's methods (the process group's sequence number moved by "
                f"{advanced}, the recorded calls account for {self.accounted}): collectives are not "
                "allowed here, and a call the harness cannot see cannot be checked; use dist.send, "
                "dist.recv, dist.isend and dist.irecv"
            )

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {
            "events": self.events,
            "collectives": self.collectives,
            "collective_bytes": self.collective_bytes,
        }
        if self.unrecorded:
            out["unrecorded"] = self.unrecorded
        return out


RECORDER = CommRecorder()
FLIGHT = FlightLog()
"""The rank's flight file: the worker opens it when the judge asks for timelines."""

# ---------------------------------------------------------------------------------------------------------
# the process groups and their sequence numbers

_GROUPS: dict[int, _C.ProcessGroup] = {}
"""Every process group a wrapper has seen or ``distributed_c10d`` listed, by ``id`` (held: ids stay valid)."""
_WORLD: object = None
"""``distributed_c10d._world`` at install: a reloaded module gets a new, empty one."""
# attr-defined: torch's stubs (torch/_C/_distributed_c10d.pyi) do not declare this private getter
_sequence_number: Callable[[_C.ProcessGroup], int] = _C.ProcessGroup._get_sequence_number_for_group  # type: ignore[attr-defined]
"""The unwrapped getter, taken before student code could replace it."""


def watch_world() -> None:
    """Take ``distributed_c10d._world`` as it is now (at install) for ``_sequence_numbers`` to list."""
    global _WORLD
    _WORLD = getattr(c10d, "_world", None)


def note_group(group: object) -> None:
    """Hold ``group`` if it is a process group: its sequence number is read from now on."""
    if isinstance(group, _C.ProcessGroup) and id(group) not in _GROUPS:
        _GROUPS[id(group)] = group


def _sequence_numbers() -> dict[int, int]:
    """Each known group's count of collective and point-to-point calls so far."""
    for world in (_WORLD, getattr(c10d, "_world", None)):
        for group in list(getattr(world, "pg_map", {}) or {}):
            note_group(group)
    numbers = {}
    for key, group in list(_GROUPS.items()):
        try:
            numbers[key] = _sequence_number(group)
        except Exception:  # a backend without sequence numbers, a group shut down
            pass
    return numbers


def _sequence_total() -> int:
    return sum(_sequence_numbers().values())


# ---------------------------------------------------------------------------------------------------------
# recording


def global_rank(group: object, peer: int | None) -> int | None:
    """``peer``'s rank in the default group: the process-group methods and ops take the group's rank."""
    if peer is None or not isinstance(group, _C.ProcessGroup):
        return peer
    try:
        return c10d.get_global_rank(group, peer)
    except Exception:  # a group distributed_c10d does not know (a reload, one built by hand)
        return peer


def record_p2p(op: str, tensor: torch.Tensor, peer: object) -> None:
    """Record one message: ``tensor`` sent to or received from ``peer`` (None: not known; the rank, as the
    student's call gave it)."""
    RECORDER.events.append(
        {
            "op": op,
            "peer": peer,
            "numel": tensor.numel(),
            "nbytes": tensor.numel() * tensor.element_size(),
            "dtype": str(tensor.dtype).removeprefix("torch."),
            # where in its storage the message lives: tells chunk i of a tensor_split from a scratch buffer
            "offset": tensor.storage_offset(),
            "storage_numel": tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1),
        }
    )


def refuse_or_record(name: str, how: str, nbytes: int = 0) -> None:
    """Raise ``ForbiddenCollective`` if the task forbids collective ``name``, else record it and the bytes
    of the tensors it was handed."""
    if name in RECORDER.forbidden:
        raise ForbiddenCollective(
            f"dist.{name} is not allowed here{how}: build this operation from send/recv yourself"
        )
    RECORDER.collectives.append(name)
    RECORDER.collective_bytes.append(nbytes)


def tensor_bytes(args: tuple[object, ...], kwargs: Mapping[str, object]) -> int:
    """The bytes of every tensor among a call's arguments, those in a list or tuple included: for
    ``all_reduce(t)`` or ``broadcast(t, src)`` the message itself; for a collective with an input and an
    output (``all_gather``, ``reduce_scatter``) both."""
    total = 0
    for value in (*args, *kwargs.values()):
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, torch.Tensor):
                total += item.numel() * item.element_size()
    return total


class nested:
    """Track wrapper nesting; gives True for the outermost wrapped call. A class, not a generator: every
    wrapped call enters one (about 2 us a call less, thousands of calls a test)."""

    __slots__ = ()

    def __enter__(self) -> bool:
        RECORDER.depth += 1
        return RECORDER.depth == 1

    def __exit__(self, *_: object) -> None:
        RECORDER.depth -= 1


class accounted:
    """Add what the call advances the groups' sequence numbers by to what the wrappers let through."""

    __slots__ = ("before",)

    def __enter__(self) -> None:
        self.before = _sequence_total()

    def __exit__(self, *_: object) -> None:
        RECORDER.accounted += _sequence_total() - self.before


# ---------------------------------------------------------------------------------------------------------
# timing calls into the flight file

Group = tuple[str, tuple[int, ...]]
"""A process group as the flight file names it: its name and its members' global ranks."""
_UNKNOWN: Group = ("?", ())
_GROUP_INFO: dict[int | None, tuple[object, Group]] = {}
"""By ``id`` of the group (None: the default group): the group itself (held, so the id stays its own) and
its ``Group``."""
_WORKS: dict[int, tuple[_C.Work, int, Group, int | None]] = {}
"""By ``id`` of a ``Work`` a recorded call returned: the work (held), the call's index, group and peer."""


def group_info(group: object) -> Group:
    """The name and members of ``group``: a process group, None for the default one, or a group's name (the
    functional collectives'); ``("?", ())`` when it is none of these."""
    key = None if group is None else id(group)
    cached = _GROUP_INFO.get(key)
    if cached is not None and cached[0] is group:
        return cached[1]
    info = _describe_group(_resolve(group))
    _GROUP_INFO[key] = (group, info)
    return info


def _resolve(group: object) -> object:
    if group is None and c10d.is_initialized():
        return c10d._get_default_group()
    if isinstance(group, str):
        names = getattr(getattr(c10d, "_world", None), "pg_names", {}) or {}
        return next((pg for pg, name in list(names.items()) if name == group), None)
    return group


def _describe_group(group: object) -> Group:
    if not isinstance(group, _C.ProcessGroup):
        return _UNKNOWN
    try:
        return str(group.group_name), tuple(c10d.get_process_group_ranks(group))
    except Exception:  # a group distributed_c10d does not know (a reload, one built by hand)
        return _UNKNOWN


def group_rank(group: object, peer: int | None) -> int | None:
    """Global rank ``peer``'s rank in ``group`` (None: the default group, where the two are the same)."""
    if peer is None or group is None:
        return peer
    members = group_info(group)[1]
    return members.index(peer) if peer in members else None


class TimedCall:
    """A call being timed, as the context of its ``with``: the end is recorded when the block ends (not
    ok when it raised); ``returned`` notes what it gave back (a ``Work`` to time its wait, a sender). A
    class, not a generator: a rank may make thousands of calls a second."""

    __slots__ = ("group", "index", "peer")

    def __init__(self, index: int | None, group: Group, peer: int | None) -> None:
        self.index, self.group, self.peer = index, group, peer

    def __enter__(self) -> TimedCall:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self.index is not None:
            FLIGHT.end(self.index, ok=kind is None, peer=self.peer)

    def returned(self, result: object, *, sender: bool = False) -> None:
        """``result`` of the call: a ``Work`` is remembered for its ``wait``; with ``sender``, the rank a
        receive from any source got its message from."""
        if self.index is None:
            return
        if sender and isinstance(result, int):
            self.peer = result
        elif isinstance(result, _C.Work):
            _WORKS[id(result)] = (result, self.index, self.group, self.peer)


def timed(
    op: str,
    group: object,
    *,
    peer: int | None = None,
    group_peer: int | None = None,
    nbytes: int = 0,
    tag: object = None,
) -> TimedCall:
    """Time call ``op`` on ``group`` into the flight file: a ``b`` record now, an ``e`` record when the
    ``with`` block it opens ends."""
    if FLIGHT.memory is None:
        return TimedCall(None, _UNKNOWN, peer)
    info = group_info(group)
    index = FLIGHT.begin(op, peer=peer, group_peer=group_peer, nbytes=nbytes, tag=tag, group=info)
    return TimedCall(index, info, peer)


def timed_wait(work: object) -> TimedCall:
    """Time a ``wait`` on ``work`` when a recorded call returned it (a student's ``req.wait()``)."""
    entry = _WORKS.get(id(work))
    if entry is None or entry[0] is not work or RECORDER.depth:
        return TimedCall(None, _UNKNOWN, None)
    _, of, group, peer = entry
    index = FLIGHT.begin("wait", peer=peer, group_peer=None, nbytes=0, tag=None, group=group, of=of)
    return TimedCall(index, group, None)
