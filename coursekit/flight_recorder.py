"""PyTorch flight-recorder dumps, written exactly as torch 2.13's JSON dump writes them, from scripted ranks.

Schema "2.10": `FlightRecorder<EventType>::dump_json` in torch/csrc/distributed/c10d/FlightRecorderDetail.hpp,
key names in FlightRecorder.hpp (installed torch 2.13.0, git cf30153c; ground-truth.md §18.3):

    {"version": "2.10", "comm_lib_version": str,
     "pg_config": {pg_name: {"name": pg_name, "desc": str, "ranks": "[0, 1, 2, 3]"}},   # ranks: a STRING
     "pg_status": {str(pg_id): {"last_enqueued_collective": "7", "last_started_collective": "7",
                                "last_completed_collective": "6"}},                     # strings; -1: none
     "entries": [  # oldest first; only the last TORCH_FR_BUFFER_SIZE survive (a ring buffer); absent if none
        {"record_id", "pg_id", "process_group": [pg_name, desc], "thread_name", "thread_id",
         "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name": "nccl:all_reduce" | "nccl:send 0->1",
         "time_created_ns", "input_sizes": [[...]], "input_dtypes": ["Float"], "output_sizes",
         "output_dtypes", "state": "scheduled" | "started" | "completed", "time_discovered_started_ns",
         "time_discovered_completed_ns" (0 when not yet), "retired", "timeout_ms", "is_p2p"}]}

Counters follow ProcessGroupNCCL: per group, `collective_seq_id` counts collectives (a send or recv records
the current value, unchanged), `p2p_seq_id` counts point-to-point ops, `op_id` counts both; `record_id`
counts every entry of the process, over all groups. A real dump is a pickle
(`torch._C._distributed_c10d._dump_fr_trace`) or this JSON (`_dump_fr_trace_json`); the course ships JSON
only, and tests/test_coursekit_flight_recorder.py compares these dumps with one recorded live from gloo.
Scripted hangs with their expected findings: coursekit/fr_scenarios.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = "2.10"  # DEFINE_CONSTANT(version_val, "2.10") in FlightRecorder.hpp
ENTRY_KEYS = frozenset(
    "record_id pg_id process_group thread_name thread_id collective_seq_id p2p_seq_id op_id profiling_name "
    "time_created_ns input_sizes input_dtypes output_sizes output_dtypes state time_discovered_started_ns "
    "time_discovered_completed_ns retired timeout_ms is_p2p".split()
)
NCCL_TIMEOUT_MS = 600_000  # kProcessGroupNCCLDefaultTimeout, 10 min (ProcessGroupNCCL.hpp)


@dataclass(frozen=True)
class Group:
    name: str  # "0" for the default group, then "1", "2", ... in creation order
    desc: str  # "default_pg", or what new_group(group_desc=...) was given ("undefined" if nothing)
    ranks: tuple[int, ...]


@dataclass
class _Counters:
    collective: int = 0
    p2p: int = 0
    op: int = 0


@dataclass
class Recorder:
    """One rank's flight recorder. Call `collective`/`send`/`recv` in program order, then `dump()`."""

    rank: int
    groups: list[Group]
    backend: str = "nccl"
    buffer_size: int = 2000  # TORCH_FR_BUFFER_SIZE; torch 2.13 defaults to 2000 (FlightRecorder.hpp)
    comm_lib_version: str = "2.27.5"  # illustrative NCCL version string
    clock_ns: int = 1_750_000_000_000_000_000
    entries: list[dict[str, Any]] = field(default_factory=list, init=False)
    counters: dict[str, _Counters] = field(default_factory=dict, init=False)

    def _group(self, name: str) -> Group:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(f"rank {self.rank} is not in a group named {name!r}")

    def _record(
        self, group: str, name: str, ins: list, outs: list, dtype: str, state: str, p2p: bool
    ) -> None:
        g = self._group(group)
        if self.rank not in g.ranks:
            raise ValueError(f"rank {self.rank} records an op on group {group}, which it is not a member of")
        c = self.counters.setdefault(group, _Counters())
        c.op += 1
        if p2p:
            c.p2p += 1
        else:
            c.collective += 1
        self.clock_ns += 1_000_000 + 7919 * (self.rank + 1)  # 1 ms apart, and different on every rank
        started = self.clock_ns + 20_000 if state in ("started", "completed") else 0
        self.entries.append(
            {
                "record_id": len(self.entries),
                "pg_id": self._pg_id(g),
                "process_group": [g.name, g.desc],
                "thread_name": "python",
                "thread_id": str(140_000_000_000_000 + self.rank),
                "collective_seq_id": c.collective,
                "p2p_seq_id": c.p2p,
                "op_id": c.op,
                "profiling_name": f"{self.backend}:{name}",
                "time_created_ns": self.clock_ns,
                "input_sizes": [list(s) for s in ins],
                "input_dtypes": [dtype] * len(ins),
                "output_sizes": [list(s) for s in outs],
                "output_dtypes": [dtype] * len(outs),
                "state": state,
                "time_discovered_started_ns": started,
                "time_discovered_completed_ns": started + 300_000 if state == "completed" else 0,
                "retired": state == "completed",
                "timeout_ms": NCCL_TIMEOUT_MS,
                "is_p2p": p2p,
            }
        )

    def collective(
        self, op: str, shape: list[int], *, group: str = "0", dtype: str = "Float", state: str = "completed"
    ) -> None:
        """in = out = shape, except all_gather (out (p, *shape)) and reduce_scatter (in (p, *shape))."""
        p = len(self._group(group).ranks)
        ins, outs = {
            "all_gather": ([shape], [[p, *shape]]),
            "reduce_scatter": ([[p, *shape]], [shape]),
        }.get(op, ([shape], [shape]))
        self._record(group, op, ins, outs, dtype, state, p2p=False)

    def send(
        self, peer: int, shape: list[int], *, group: str = "0", dtype: str = "Float", state: str = "completed"
    ) -> None:
        """`nccl:send me->peer`, ranks within the group (ProcessGroupNCCL::send's profiling title)."""
        self._record(group, f"send {self._local(group)}->{peer}", [shape], [shape], dtype, state, p2p=True)

    def recv(
        self, peer: int, shape: list[int], *, group: str = "0", dtype: str = "Float", state: str = "completed"
    ) -> None:
        """`nccl:recv me<-peer`."""
        self._record(group, f"recv {self._local(group)}<-{peer}", [shape], [shape], dtype, state, p2p=True)

    def _pg_id(self, g: Group) -> int:
        """ProcessGroupNCCL's local_id_: how many groups THIS process had created before (members only)."""
        return [x for x in self.groups if self.rank in x.ranks].index(g)

    def _local(self, group: str) -> int:
        return self._group(group).ranks.index(self.rank)

    def dump(self) -> dict[str, Any]:
        """The JSON dump as `_dump_fr_trace_json(includeCollectives=True, onlyActive=False)` returns it."""
        kept = self.entries[-self.buffer_size :]  # the ring buffer keeps the newest entries
        status = {}
        for g in self.groups:
            if self.rank not in g.ranks:
                continue
            mine = [e for e in self.entries if e["process_group"][0] == g.name and not e["is_p2p"]]

            def last(*states: str, mine: list = mine) -> str:  # ProcessGroupStatus starts every field at -1
                return str(max((e["collective_seq_id"] for e in mine if e["state"] in states), default=-1))

            status[str(self._pg_id(g))] = {
                "last_enqueued_collective": last("scheduled", "started", "completed"),
                "last_started_collective": last("started", "completed"),
                "last_completed_collective": last("completed"),
            }
        dump: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "comm_lib_version": self.comm_lib_version,
            "pg_config": {
                g.name: {"name": g.name, "desc": g.desc, "ranks": "[" + ", ".join(map(str, g.ranks)) + "]"}
                for g in self.groups
                if self.rank in g.ranks
            },
            "pg_status": status,
            "nccl_comm_state": {},  # per-communicator NCCL state; {} in torch 2.13's JSON when there is none
        }
        if kept:
            dump["entries"] = kept
        return dump


def world_group(nranks: int) -> Group:
    return Group("0", "default_pg", tuple(range(nranks)))


def dumps_of(recorders: list[Recorder]) -> dict[str, dict[str, Any]]:
    """Every rank's dump, keyed by str(rank) as in a JSON object (what an analyzer reads)."""
    return {str(r.rank): r.dump() for r in recorders}
