"""The flight file: each rank's calls to the network, written as they start and end, for space-time diagrams.

A rank appends one JSON line per call as the call starts and one as it returns, so the judge can read what
every rank did even when a rank hangs and never answers (``LiveRanks.read_flights``). The lines:

- ``["g", name, [members]]``: a process group, its global ranks (once per task, before its first call);
- ``["b", i, op, peer, group_peer, nbytes, tag, group, start, of]``: call ``i`` started (``CALL_FIELDS``);
- ``["e", i, end, ok, peer]``: call ``i`` returned (``ok`` False: it raised); ``peer``: the sender a receive
  from any source got;
- ``["x"]``: the cap was reached (or the file is full); later calls of the task are not recorded.

Times are ``time.monotonic()`` seconds: one clock for every process of a machine, so the ranks of a
single-node world share it. The file is diagnostics, never grading: the rank writes it, and student code in
that rank can write anything into it. The reader takes well-formed lines and skips the rest.
"""

from __future__ import annotations

import json
import mmap
import os
import time
from dataclasses import dataclass, field
from typing import Any

MAX_CALLS_PER_TEST = 20_000
"""Calls recorded per test (one world task), shared evenly by the ranks: 20,000 // world size per rank. A
rank past its share records nothing more for that task and marks the truncation (``["x"]``)."""
FLIGHT_BYTES = 2 << 20
"""The size of a rank's flight file, mapped into the rank's memory: a rank's share of the cap (at most
10,000 calls of about 100 bytes, two ranks being the fewest drawn) fits. A rank that fills it records no more
in that task, marked as past the cap."""
MAX_FLIGHT_BYTES = FLIGHT_BYTES + 4096
"""What the judge reads of one rank's file."""
CALL_FIELDS = ("index", "op", "peer", "group_peer", "nbytes", "tag", "group", "start", "of")
"""The fields of a ``b`` line, in order, after its ``"b"``."""


# ---------------------------------------------------------------------------------------------------------
# the rank's side


@dataclass
class FlightLog:
    """Appends a rank's calls to its flight file; does nothing without one (``open`` never called).

    The file is mapped into memory (``mmap``, shared with the page cache): a call's lines cost a copy, not a
    system call, and what was copied is in the file even when the rank is killed mid-task. The text ends at
    the first NUL byte; each task starts again at offset 0."""

    memory: mmap.mmap | None = None
    offset: int = 0
    cap: int = MAX_CALLS_PER_TEST
    count: int = 0
    truncated: bool = False
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
        self.count, self.truncated, self.groups, self.offset = 0, False, set(), 0
        self.cap = max(1, MAX_CALLS_PER_TEST // max(world_size, 1))
        if self.memory is not None:
            self.memory[0] = 0

    def begin(
        self,
        op: str,
        *,
        peer: int | None,
        group_peer: int | None,
        nbytes: int,
        tag: int | None,
        group: tuple[str, tuple[int, ...]],
        of: int | None = None,
    ) -> int | None:
        """Record that call ``op`` starts now; its index, or None when it is not recorded (no file, cap)."""
        if self.memory is None:
            return None
        if self.count >= self.cap:
            if not self.truncated:
                self.truncated = True
                self._write('["x"]\n')
            return None
        name, members = group
        head = ""
        if name not in self.groups:
            self.groups.add(name)
            head = json.dumps(["g", name, list(members)]) + "\n"
        index, self.count = self.count, self.count + 1
        numbers = ",".join(_json_int(v) for v in (peer, group_peer, nbytes, tag))
        self._write(
            f'{head}["b",{index},{_quoted(op)},{numbers},{_quoted(name)},{time.monotonic()!r},{_json_int(of)}]\n'
        )
        return index

    def end(self, index: int | None, *, ok: bool, peer: int | None = None) -> None:
        """Record that call ``index`` (from ``begin``) returned, or raised when not ``ok``."""
        if index is not None and self.memory is not None:
            self._write(f'["e",{index},{time.monotonic()!r},{"true" if ok else "false"},{_json_int(peer)}]\n')

    def _write(self, text: str) -> None:
        """Append ``text`` (whole lines), then the NUL that ends the file's text; a line is JSON, formatted by
        hand because a rank may make thousands of calls a second (json.dumps costs several times more)."""
        memory, data = self.memory, text.encode()
        end = self.offset + len(data)
        if memory is None or end >= FLIGHT_BYTES - 8:
            if memory is not None and not self.truncated:  # full: say so where there is always room
                self.truncated = True
                memory[self.offset : self.offset + 7] = b'["x"]\n\0'
            return
        memory[self.offset : end + 1] = data + b"\0"
        self.offset = end


def _json_int(value: Any) -> str:
    """A rank, tag, size or index as JSON, when it is a plain int; anything else a student passed: null."""
    return str(value) if type(value) is int else "null"


_QUOTED: dict[str, str] = {}


def _quoted(name: str) -> str:
    """An op's or a group's name as a JSON string (a handful per run: kept once made)."""
    quoted = _QUOTED.get(name)
    if quoted is None:
        quoted = _QUOTED[name] = json.dumps(str(name))
    return quoted


# ---------------------------------------------------------------------------------------------------------
# the judge's side


@dataclass
class RankFlight:
    """What one rank's flight file says, as plain values: its calls, its groups, whether it was cut."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    """``CALL_FIELDS`` plus ``end`` (None: never returned) and ``ok``, in the order the calls started."""
    groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    truncated: bool = False


def read_flight(text: str) -> RankFlight:
    """Parse a flight file's text; lines that are not well formed (cut off, or written by student code
    over the recorder's) are skipped."""
    flight = RankFlight()
    by_index: dict[int, dict[str, Any]] = {}
    for line in text.partition("\0")[0].splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, list) or not row:
            continue
        _take(row, flight, by_index)
    return flight


def _take(row: list[Any], flight: RankFlight, by_index: dict[int, dict[str, Any]]) -> None:
    kind = row[0]
    if kind == "x":
        flight.truncated = True
    elif kind == "g" and len(row) == 3 and _is_name(row[1]) and _ints(row[2]):
        flight.groups[row[1]] = tuple(row[2])
    elif kind == "b" and len(row) == 1 + len(CALL_FIELDS):
        call = dict(zip(CALL_FIELDS, row[1:], strict=True))
        if _valid_call(call) and call["index"] not in by_index:
            call |= {"end": None, "ok": True}
            by_index[call["index"]] = call
            flight.calls.append(call)
    elif kind == "e" and len(row) == 5 and row[1] in by_index and _number(row[2]):
        call = by_index[row[1]]
        call["end"], call["ok"] = float(row[2]), row[3] is True
        if call["peer"] is None and _optional_int(row[4]):
            call["peer"] = row[4]


def _valid_call(call: dict[str, Any]) -> bool:
    return (
        type(call["index"]) is int
        and _is_name(call["op"])
        and all(_optional_int(call[k]) for k in ("peer", "group_peer", "tag", "of"))
        and _optional_int(call["nbytes"])
        and _is_name(call["group"])
        and _number(call["start"])
    )


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 64 and value.isprintable()


def _ints(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= 1 << 16 and all(type(v) is int for v in value)


def _optional_int(value: Any) -> bool:
    return value is None or type(value) is int


def _number(value: Any) -> bool:
    return type(value) in (int, float) and value == value  # not NaN
