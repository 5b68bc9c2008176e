"""The flight file: each rank's calls to the network, written as they start and end, for space-time diagrams.

A rank appends one record per call as the call starts and one as it returns, so the judge can read what
every rank did even when a rank hangs and never answers (``LiveRanks.read_flights``). Records are packed
binary (``struct``, little-endian), each led by its kind byte; a 0 byte ends the file's records:

- ``n`` (``NAME``): a name (an op's or a group's) and the number later records call it by, once per task;
- ``g`` (``GROUP``): a process group's name number and its global ranks (once per task, before its first
  call);
- ``b`` (``BEGIN``): call ``index`` started: its op, peer, group peer, bytes, tag, group, start and, for a
  wait, the call it waits for (``CALL_FIELDS``);
- ``e`` (``END``): call ``index`` returned (``ok`` 0: it raised); ``peer``: the sender a receive from any
  source got;
- ``x``: the cap was reached (or the file is full); later calls of the task are not recorded.

A field that holds no plain int of its width (None, or whatever else student code passed) is stored as the
width's smallest value and read back as None. Packing a call's two records took 1.3 us where formatting
them as JSON text took 9 us (docs/benchmarks.md, "Timing every call for space-time diagrams"): a rank may
make thousands of calls a second.

Times are ``time.monotonic()`` seconds: one clock for every process of a machine, so the ranks of a
single-node world share it. The file is diagnostics, never grading: the rank writes it, and student code in
that rank can write anything into it. The reader takes well-formed records, skips those that name what
was never named, and stops at the first it cannot frame.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import time
from dataclasses import dataclass, field
from typing import TypedDict

MAX_CALLS_PER_TEST = 20_000
"""Calls recorded per test (one world task), shared evenly by the ranks: 20,000 // world size per rank. A
rank past its share records nothing more for that task and marks the truncation (``x``)."""
FLIGHT_BYTES = 2 << 20
"""The size of a rank's flight file, mapped into the rank's memory: a rank's share of the cap (at most
10,000 calls of 63 bytes, two ranks being the fewest drawn) fits. A rank that fills it records no more
in that task, marked as past the cap."""
MAX_FLIGHT_BYTES = FLIGHT_BYTES
"""What the judge reads of one rank's file."""
CALL_FIELDS = ("index", "op", "peer", "group_peer", "nbytes", "tag", "group", "start", "of")
"""The fields of a ``b`` record, in order, after its kind."""

NAME = struct.Struct("<BHB")
"""kind ``n``, the name's number, its length in UTF-8 bytes (the bytes follow)."""
GROUP = struct.Struct("<BHH")
"""kind ``g``, the group's name number, its member count (the members follow, ``MEMBER`` each)."""
MEMBER = struct.Struct("<i")
BEGIN = struct.Struct("<BIHiiqqHdi")
"""kind ``b``, then ``CALL_FIELDS``: op and group as name numbers, ``start`` a double."""
END = struct.Struct("<BIdBi")
"""kind ``e``, the call's index, its end time, ok (1 or 0), the peer it learnt."""
KIND_END, KIND_CUT = 0, ord("x")
KIND_BEGIN, KIND_RETURN, KIND_GROUP, KIND_NAME = ord("b"), ord("e"), ord("g"), ord("n")
NONE32, NONE64 = -(1 << 31), -(1 << 63)
"""What a field without a plain int of its width holds."""
MAX_NAME_BYTES = 64
MAX_NAMES = 1 << 16


def _i32(value: object) -> int:
    return value if type(value) is int and NONE32 < value < 1 << 31 else NONE32


def _i64(value: object) -> int:
    return value if type(value) is int and NONE64 < value < 1 << 63 else NONE64


# ---------------------------------------------------------------------------------------------------------
# the rank's side


@dataclass
class FlightLog:
    """Appends a rank's calls to its flight file; does nothing without one (``open`` never called).

    The file is mapped into memory (``mmap``, shared with the page cache): a call's records cost a copy,
    not a system call, and what was copied is in the file even when the rank is killed mid-task. The
    records end at the first 0 kind byte; each task starts again at offset 0."""

    memory: mmap.mmap | None = None
    offset: int = 0
    cap: int = MAX_CALLS_PER_TEST
    count: int = 0
    truncated: bool = False
    names: dict[str, int] = field(default_factory=dict)
    """Names already written in this task, by the number records use."""
    groups: set[str] = field(default_factory=set)
    """Groups already written in this task."""

    def open(self, fd: int) -> None:
        """Map the flight file behind ``fd`` (made ``FLIGHT_BYTES`` long, sparse); nothing is recorded if that
        fails."""
        try:
            os.ftruncate(fd, FLIGHT_BYTES)
            self.memory = mmap.mmap(fd, FLIGHT_BYTES)
        except (OSError, ValueError):
            self.memory = None

    def reset(self, world_size: int) -> None:
        """Empty the file for a new task; this rank may record its share of ``MAX_CALLS_PER_TEST``."""
        self.count, self.truncated, self.offset = 0, False, 0
        self.names, self.groups = {}, set()
        self.cap = max(1, MAX_CALLS_PER_TEST // max(world_size, 1))
        if self.memory is not None:
            self.memory[0] = KIND_END

    def begin(
        self,
        op: str,
        *,
        peer: int | None,
        group_peer: int | None,
        nbytes: int,
        tag: object,
        group: tuple[str, tuple[int, ...]],
        of: int | None = None,
    ) -> int | None:
        """Record that call ``op`` starts now; its index, or None when it is not recorded (no file, cap)."""
        if self.memory is None or self.truncated:
            return None
        if self.count >= self.cap:
            self._cut()
            return None
        name, members = group
        if name not in self.groups:
            self.groups.add(name)
            self._group(name, members)
        index = self.count
        fields = (_i32(peer), _i32(group_peer), _i64(nbytes), _i64(tag))
        op_number, group_number = self._name(op), self._name(name)
        at_start = time.monotonic()
        if not self._pack(BEGIN, KIND_BEGIN, index, op_number, *fields, group_number, at_start, _i32(of)):
            return None
        self.count += 1
        return index

    def end(self, index: int | None, *, ok: bool, peer: int | None = None) -> None:
        """Record that call ``index`` (from ``begin``) returned, or raised when not ``ok``."""
        if index is not None and self.memory is not None:
            self._pack(END, KIND_RETURN, index, time.monotonic(), 1 if ok else 0, _i32(peer))

    def _name(self, name: str) -> int:
        """The number records call ``name`` by, written once per task (a handful per task)."""
        number = self.names.get(name)
        if number is None:
            number = self.names[name] = len(self.names) % MAX_NAMES
            data = str(name).encode(errors="replace")[:MAX_NAME_BYTES]
            self._append(NAME.pack(KIND_NAME, number, len(data)) + data)
        return number

    def _group(self, name: str, members: tuple[int, ...]) -> None:
        kept = [_i32(m) for m in members[: MAX_NAMES - 1]]
        number = self._name(name)
        self._append(GROUP.pack(KIND_GROUP, number, len(kept)) + struct.pack(f"<{len(kept)}i", *kept))

    def _pack(self, layout: struct.Struct, *values: object) -> bool:
        """Append one record of ``layout``, then the 0 that ends the records; False (the file marked full)
        when there is no room for it. The hot path: no bytes object is made."""
        memory, start = self.memory, self.offset
        end = start + layout.size
        if memory is None or end > FLIGHT_BYTES - 3:
            self._cut()
            return False
        layout.pack_into(memory, start, *values)
        memory[end] = KIND_END
        self.offset = end
        return True

    def _append(self, record: bytes) -> None:
        """Append a whole record (a name or a group, with its bytes), as ``_pack`` does."""
        memory, end = self.memory, self.offset + len(record)
        if memory is None or end > FLIGHT_BYTES - 3:
            self._cut()
            return
        memory[self.offset : end] = record
        memory[end] = KIND_END
        self.offset = end

    def _cut(self) -> None:
        """Mark the task's recording as cut (past the cap, or the file full): later calls are not recorded,
        those already begun still record their end where there is room. Room for the mark is kept."""
        if self.memory is not None and not self.truncated:
            self.truncated = True
            self.memory[self.offset] = KIND_CUT
            self.memory[self.offset + 1] = KIND_END
            self.offset += 1


# ---------------------------------------------------------------------------------------------------------
# the judge's side


class FlightCall(TypedDict):
    """One call of a flight file, read back: a ``b`` record's ``CALL_FIELDS``, then its ``e`` record's."""

    index: int
    op: str
    peer: int | None
    group_peer: int | None
    nbytes: int | None
    tag: int | None
    group: str
    start: float
    of: int | None
    end: float | None
    """None: never returned."""
    ok: bool


@dataclass
class RankFlight:
    """What one rank's flight file says, as plain values: its calls, its groups, whether it was cut."""

    calls: list[FlightCall] = field(default_factory=list)
    """In the order the calls started."""
    groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    truncated: bool = False


def read_flight(data: bytes) -> RankFlight:
    """Parse a flight file's records; a record that names a name never written, or holds a time that is
    not a number, is skipped; the first that cannot be framed (cut off, or an unknown kind that student
    code wrote) ends the reading."""
    reading = _Reading(data)
    try:
        while reading.next():
            pass
    except struct.error:  # a record cut off by the end of the data
        pass
    return reading.flight


@dataclass
class _Reading:
    """``read_flight``'s place in ``data``, the names read so far and the calls, by index, that an ``e``
    record may end."""

    data: bytes
    offset: int = 0
    flight: RankFlight = field(default_factory=RankFlight)
    names: dict[int, str] = field(default_factory=dict)
    by_index: dict[int, FlightCall] = field(default_factory=dict)

    def next(self) -> bool:
        """Take the record at ``offset``; False at the end of the records."""
        if self.offset >= len(self.data):
            return False
        kind = self.data[self.offset]
        if kind == KIND_BEGIN:
            self._begin(BEGIN.unpack_from(self.data, self.offset))
            self.offset += BEGIN.size
        elif kind == KIND_RETURN:
            self._return(END.unpack_from(self.data, self.offset))
            self.offset += END.size
        elif kind == KIND_NAME:
            self._name()
        elif kind == KIND_GROUP:
            self._group()
        elif kind == KIND_CUT:
            self.flight.truncated = True
            self.offset += 1
        else:
            return False  # the end (0), or bytes no recorder wrote
        return True

    def _name(self) -> None:
        _, number, length = NAME.unpack_from(self.data, self.offset)
        start = self.offset + NAME.size
        raw = self.data[start : start + length]
        if len(raw) < length:
            raise struct.error("a name cut off")
        self.offset = start + length
        text = raw.decode(errors="replace")
        if text and text.isprintable():
            self.names[number] = text

    def _group(self) -> None:
        _, number, count = GROUP.unpack_from(self.data, self.offset)
        start = self.offset + GROUP.size
        members = struct.unpack_from(f"<{count}i", self.data, start)
        self.offset = start + count * MEMBER.size
        if number in self.names and NONE32 not in members:
            self.flight.groups[self.names[number]] = tuple(members)

    def _begin(self, row: tuple[int | float, ...]) -> None:
        _, index, op, peer, group_peer, nbytes, tag, group, start, of = row
        if op not in self.names or group not in self.names or not math.isfinite(start):
            return
        if index in self.by_index:
            return
        call = FlightCall(
            index=int(index),
            op=self.names[int(op)],
            peer=_none32(peer),
            group_peer=_none32(group_peer),
            nbytes=None if nbytes == NONE64 else int(nbytes),
            tag=None if tag == NONE64 else int(tag),
            group=self.names[int(group)],
            start=float(start),
            of=_none32(of),
            end=None,
            ok=True,
        )
        self.by_index[call["index"]] = call
        self.flight.calls.append(call)

    def _return(self, row: tuple[int | float, ...]) -> None:
        _, index, end, ok, peer = row
        call = self.by_index.get(int(index))
        if call is None or not math.isfinite(end):
            return
        call["end"], call["ok"] = float(end), ok == 1
        if call["peer"] is None:
            call["peer"] = _none32(peer)


def _none32(value: int | float) -> int | None:
    return None if value == NONE32 else int(value)
