"""A small schedule language for collectives, in the spirit of MSCCLang: steps, a simulator, a cost model.

A schedule is a list of ROUNDS; a round is a list of STEPS that run at the same time. A step
`Step(src, dst, chunk, op)` moves chunk `chunk` of rank `src`'s buffer to rank `dst`, which either overwrites
its own copy (`op="copy"`) or adds it in (`op="reduce"`). Every rank's buffer has `nchunks` chunks; chunk c is
`torch.tensor_split(flat, nchunks)[c]` on every rank. Within a round every step reads the buffers as they were
when the round began (sends go out before anything arrives), as in MSCCLang's chunk-level programs
(microsoft/msccl-tools, examples/mscclang/*.py: `chunk(rank, Buffer.input, index).copy(...)`, `.reduce(...)`).

    from coursekit.schedules import H100_2X4, Schedule, Step, check, schedule_time
    s = Schedule("allreduce", 2, 1, [[Step(0, 1, 0, "reduce"), Step(1, 0, 0, "reduce")]])  # 2 ranks swap-add
    check(s)                              # raises ScheduleError unless every rank ends with the full sum
    schedule_time(s, H100_2X4, 2**30)     # seconds for a 1 GiB buffer on H100_2X4's links

Simulation is symbolic: a chunk holds the sorted tuple of ranks whose input it sums, so (0, 1, 1) means rank
1 was counted twice. `execute` runs the same schedule for real with isend/irecv on a process group.
Check: `python -m pytest tests/test_coursekit_schedules.py`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from coursekit.hardware import load as load_hardware

COLLECTIVES = ("allreduce", "allgather")
OPS = ("copy", "reduce")


class ScheduleError(ValueError):
    """A schedule that is malformed, reads a chunk it does not hold, or misses its postcondition."""


class Step(NamedTuple):
    src: int
    dst: int
    chunk: int
    op: str  # "copy" or "reduce"


@dataclass
class Schedule:
    """`rounds[i]` runs after `rounds[i-1]` has finished; its steps run concurrently."""

    collective: str  # "allreduce": every rank ends with the sum; "allgather": chunk c ends as rank c's chunk
    nranks: int
    nchunks: int
    rounds: list[list[Step]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------
# plain data: schedules cross the judge/worker boundary as dicts of lists


def to_data(schedule: Any) -> dict[str, Any]:
    """The schedule as JSON values: {collective, nranks, nchunks, rounds: [[[src, dst, chunk, op], ...]]}."""
    if not isinstance(schedule, Schedule):
        raise ScheduleError(f"expected a coursekit.schedules.Schedule, got {type(schedule).__name__}")
    rounds = [[[*step] for step in rnd] for rnd in schedule.rounds]
    return {"collective": schedule.collective, "nranks": schedule.nranks, "nchunks": schedule.nchunks,
            "rounds": rounds}  # fmt: skip


def from_data(data: dict[str, Any]) -> Schedule:
    """Rebuild and validate a schedule from `to_data`'s form."""
    rounds = [[Step(*step) for step in rnd] for rnd in data["rounds"]]
    schedule = Schedule(data["collective"], data["nranks"], data["nchunks"], rounds)
    validate(schedule)
    return schedule


def validate(s: Schedule) -> None:
    """Types and ranges only: ranks in [0, nranks), chunks in [0, nchunks), src != dst, op copy or reduce."""
    if s.collective not in COLLECTIVES:
        raise ScheduleError(f"collective {s.collective!r} is not one of {COLLECTIVES}")
    if not (type(s.nranks) is int and s.nranks >= 1 and type(s.nchunks) is int and s.nchunks >= 1):
        raise ScheduleError(f"nranks and nchunks must be positive ints, got {s.nranks!r} and {s.nchunks!r}")
    if s.collective == "allgather" and s.nchunks != s.nranks:
        raise ScheduleError(
            f"an allgather has one chunk per rank: nchunks must be {s.nranks}, not {s.nchunks}"
        )
    if not isinstance(s.rounds, list | tuple):
        raise ScheduleError(f"rounds must be a list of lists of Step, got {type(s.rounds).__name__}")
    for i, rnd in enumerate(s.rounds):
        if not isinstance(rnd, list | tuple):
            raise ScheduleError(f"round {i} must be a list of Step, got {type(rnd).__name__}")
        for step in rnd:
            if not (isinstance(step, tuple) and len(step) == 4):
                raise ScheduleError(f"round {i}: {step!r} is not a Step(src, dst, chunk, op)")
            src, dst, chunk, op = step
            if not all(type(v) is int for v in (src, dst, chunk)) or op not in OPS:
                raise ScheduleError(f"round {i}: {step!r}: src, dst, chunk must be ints and op one of {OPS}")
            if not (0 <= src < s.nranks and 0 <= dst < s.nranks and 0 <= chunk < s.nchunks) or src == dst:
                raise ScheduleError(
                    f"round {i}: {step!r} is out of range (nranks={s.nranks}, nchunks={s.nchunks}) or sends "
                    "to itself"
                )


# ---------------------------------------------------------------------------------------------------------
# simulation


Holding = (
    tuple[int, ...] | None
)  # the ranks whose input a chunk sums (sorted, repeats kept); None: nothing yet


def initial_buffers(s: Schedule) -> list[list[Holding]]:
    """allreduce: rank r holds its own input in every chunk. allgather: rank r holds only chunk r."""
    if s.collective == "allreduce":
        return [[(r,) for _ in range(s.nchunks)] for r in range(s.nranks)]
    return [[(r,) if c == r else None for c in range(s.nchunks)] for r in range(s.nranks)]


def simulate(s: Schedule) -> list[list[Holding]]:
    """Run the schedule symbolically; `[rank][chunk]` holdings at the end. ScheduleError on a bad step."""
    validate(s)
    buf = initial_buffers(s)
    for i, rnd in enumerate(s.rounds):
        before = [row[:] for row in buf]  # every step of the round reads the buffers as they were here
        writers: dict[tuple[int, int], list[Step]] = defaultdict(list)
        for step in rnd:
            writers[step.dst, step.chunk].append(step)
        for (dst, chunk), steps in writers.items():
            ops = sorted(st.op for st in steps)
            if ops != ["copy"] and "copy" in ops:  # two copies, or a copy and a reduce: who wins?
                raise ScheduleError(
                    f"round {i}: rank {dst} chunk {chunk} is written by {len(steps)} steps, "
                    f"{[tuple(st) for st in steps]}; a copy must be the only write to its chunk in a round"
                )
            for st in steps:
                if before[st.src][chunk] is None:
                    raise ScheduleError(
                        f"round {i}: {tuple(st)}: rank {st.src} does not hold chunk {chunk} yet"
                    )
            if ops == ["copy"]:
                buf[dst][chunk] = before[steps[0].src][chunk]
            else:
                held = before[dst][chunk]
                if held is None:
                    raise ScheduleError(
                        f"round {i}: {tuple(steps[0])}: reduces into a chunk rank {dst} does not hold"
                    )
                total = list(held)
                for st in steps:  # every source holds its chunk: checked above
                    total += cast(tuple[int, ...], before[st.src][chunk])
                buf[dst][chunk] = tuple(sorted(total))
    return buf


def check(s: Schedule) -> None:
    """Simulate, then raise ScheduleError naming the first rank and chunk that misses the postcondition."""
    buf = simulate(s)
    everyone = tuple(range(s.nranks))
    for r in range(s.nranks):
        for c in range(s.nchunks):
            want = everyone if s.collective == "allreduce" else (c,)
            got = buf[r][c]
            if got != want:
                raise ScheduleError(f"after the schedule, rank {r} chunk {c} {_describe(got, want)}")


def _describe(got: Holding, want: tuple[int, ...]) -> str:
    if got is None:
        return f"holds nothing; it should hold {_sum_of(want)}"
    missing = sorted(set(want) - set(got))
    twice = sorted({r for r in got if got.count(r) > 1})
    extra = sorted(set(got) - set(want))
    why = "; ".join(
        part
        for part in (
            f"missing rank(s) {missing}" if missing else "",
            f"counting rank(s) {twice} more than once" if twice else "",
            f"with rank(s) {extra} that do not belong" if extra else "",
        )
        if part
    )
    return f"holds {_sum_of(got)} instead of {_sum_of(want)} ({why})"


def _sum_of(ranks: tuple[int, ...]) -> str:
    return f"rank {ranks[0]}'s input" if len(ranks) == 1 else f"the sum of ranks {list(ranks)}"


# ---------------------------------------------------------------------------------------------------------
# cost model


@dataclass(frozen=True)
class Link:
    alpha: float  # seconds per message (start-up latency)
    bandwidth: float  # bytes per second, ONE direction of one GPU's port


@dataclass(frozen=True)
class Topology:
    nodes: int
    gpus_per_node: int
    intra: Link  # between GPUs of one node (NVLink through NVSwitch)
    inter: Link  # between nodes (each GPU has its own NIC)

    @property
    def nranks(self) -> int:
        return self.nodes * self.gpus_per_node

    def node(self, rank: int) -> int:
        return rank // self.gpus_per_node  # rank = node * gpus_per_node + local index

    def link(self, src: int, dst: int) -> Link:
        return self.intra if self.node(src) == self.node(dst) else self.inter


def _h100_2x4() -> Topology:
    hw = load_hardware()
    # Bandwidths, per direction, from coursekit/hardware.yml: NVLink 4 gives an H100 450 GB/s each way through
    # the NVSwitches (the scaling book's figure; NVIDIA quotes 900 GB/s both ways); a DGX H100 has one
    # 400 Gb/s NDR ConnectX-7 per GPU, 50 GB/s each way (ground-truth.md §7.1, §7.2).
    # Latencies: NCCL's per-hop latency of a ring step with the Simple protocol,
    # hwLat[NVLINK|NET][RING][SIMPLE] = 3.4 us and 14.0 us in NVIDIA/nccl src/graph/tuning.cc
    # (commit b6475625; the same at 5067397c, NCCL 2.30.7, ground-truth.md §3). NCCL charges them per ring
    # step; this model charges them per message, a simplification.
    nvlink = Link(alpha=3.4e-6, bandwidth=hw.gpus["h100_sxm"].nvlink_gb_s * 1e9)
    ndr = Link(alpha=14.0e-6, bandwidth=hw.infiniband["ndr"].gb_s * 1e9)
    return Topology(nodes=2, gpus_per_node=4, intra=nvlink, inter=ndr)


H100_2X4 = _h100_2x4()  # two nodes of four H100s: NVLink inside a node, one NDR NIC per GPU between nodes


def round_time(rnd: list[Step], topo: Topology, chunk_bytes: float) -> float:
    """Seconds for one round: the busiest port's total, alpha + bytes / bandwidth per message on it.

    All steps of a round from one src to one dst form ONE message. Every GPU has an outgoing and an incoming
    port per link class (NVLink, NIC); messages sharing a port are serialized, different ports run in
    parallel, and the round ends when its busiest port is done.
    """
    messages: dict[tuple[int, int], int] = defaultdict(int)  # (src, dst) -> chunks
    for step in rnd:
        messages[step.src, step.dst] += 1
    ports: dict[tuple[int, str, str], float] = defaultdict(float)
    for (src, dst), nchunks in messages.items():
        link = topo.link(src, dst)
        kind = "intra" if link is topo.intra else "inter"
        seconds = link.alpha + nchunks * chunk_bytes / link.bandwidth
        ports[src, "out", kind] += seconds
        ports[dst, "in", kind] += seconds
    return max(ports.values(), default=0.0)


def schedule_time(s: Schedule, topo: Topology, nbytes: float) -> float:
    """Seconds to run `s` on `topo` for a buffer of `nbytes` (each chunk nbytes / nchunks), round by round."""
    validate(s)
    if s.nranks != topo.nranks:
        raise ScheduleError(f"the schedule has {s.nranks} ranks, the topology {topo.nranks}")
    return sum(round_time(rnd, topo, nbytes / s.nchunks) for rnd in s.rounds)


# ---------------------------------------------------------------------------------------------------------
# running a schedule for real


def execute(s: Schedule, tensor: Any, group: Any = None) -> None:
    """Run `s` in place on `tensor` (this rank's buffer) with isend/irecv over `group`.

    Each round: post every send of this rank (of a copy of the chunk as the round began) and every receive
    into a scratch buffer, wait for all of them, then copy or add what arrived. The tag is the step's index in
    its round, so two steps between the same pair of ranks in one round cannot be confused.
    """
    import torch
    import torch.distributed as dist

    validate(s)
    me, world = dist.get_rank(group), dist.get_world_size(group)
    if s.nranks != world:
        raise ScheduleError(f"the schedule is for {s.nranks} ranks; this group has {world}")
    peer = (lambda r: r) if group is None else (lambda r: dist.get_global_rank(group, r))
    chunks = torch.tensor_split(tensor.view(-1), s.nchunks)  # views: writing them writes `tensor`
    for rnd in s.rounds:
        requests, arrived = [], []
        for tag, step in enumerate(rnd):
            if step.src == me:
                outgoing = chunks[step.chunk].clone()  # the value at the start of the round
                requests.append(dist.isend(outgoing, peer(step.dst), group=group, tag=tag))
            if step.dst == me:
                incoming = torch.empty_like(chunks[step.chunk])
                requests.append(dist.irecv(incoming, peer(step.src), group=group, tag=tag))
                arrived.append((step, incoming))
        for request in requests:
            assert request is not None  # isend/irecv return None only on a rank outside `group`
            request.wait()
        for step, incoming in arrived:
            if step.op == "copy":
                chunks[step.chunk].copy_(incoming)
            else:
                chunks[step.chunk].add_(incoming)
