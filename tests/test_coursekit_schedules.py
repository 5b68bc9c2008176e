"""coursekit.schedules: the simulator's semantics, its messages, the cost model by hand, and a real run."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from coursekit.schedules import (
    H100_2X4,
    Link,
    Schedule,
    ScheduleError,
    Step,
    Topology,
    check,
    execute,
    from_data,
    round_time,
    schedule_time,
    simulate,
    to_data,
)


def flat_ring_allgather(p: int) -> Schedule:
    """Exercise 02's ring in the schedule language (kept out of coursekit: it is 02's answer): p-1 rounds."""
    rounds = [[Step(r, (r + 1) % p, (r - s) % p, "copy") for r in range(p)] for s in range(p - 1)]
    return Schedule("allgather", p, p, rounds)


def flat_ring_allreduce(p: int) -> Schedule:
    """Exercise 02's ring all-reduce (kept out of coursekit): reduce-scatter, all-gather, 2(p-1) rounds."""
    reduce_scatter = [[Step(r, (r + 1) % p, (r - s) % p, "reduce") for r in range(p)] for s in range(p - 1)]
    all_gather = [[Step(r, (r + 1) % p, (r + 1 - s) % p, "copy") for r in range(p)] for s in range(p - 1)]
    return Schedule("allreduce", p, p, reduce_scatter + all_gather)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_flat_rings_are_correct(p: int) -> None:
    check(flat_ring_allreduce(p))
    check(flat_ring_allgather(p))
    assert len(flat_ring_allreduce(p).rounds) == 2 * (p - 1)
    assert len(flat_ring_allgather(p).rounds) == p - 1


def test_a_round_reads_the_buffers_as_they_were_when_it_began() -> None:
    # 0 and 1 swap-and-add chunk 0 in one round: each adds the other's ORIGINAL value, so both hold {0, 1}
    s = Schedule("allreduce", 2, 1, [[Step(0, 1, 0, "reduce"), Step(1, 0, 0, "reduce")]])
    assert simulate(s) == [[(0, 1)], [(0, 1)]]
    check(s)


def test_several_reduces_into_one_chunk_add_up() -> None:
    # a one-level tree: 1 and 2 reduce into 0 in the same round, then 0 copies the sum back
    s = Schedule(
        "allreduce",
        3,
        1,
        [[Step(1, 0, 0, "reduce"), Step(2, 0, 0, "reduce")], [Step(0, 1, 0, "copy"), Step(0, 2, 0, "copy")]],
    )
    check(s)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (Schedule("allgather", 3, 3, [[Step(0, 1, 2, "copy")]]), "rank 0 does not hold chunk 2 yet"),
        (
            Schedule("allgather", 2, 2, [[Step(0, 1, 0, "reduce")]]),
            "reduces into a chunk rank 1 does not hold",
        ),
        (
            Schedule("allreduce", 3, 1, [[Step(0, 2, 0, "copy"), Step(1, 2, 0, "reduce")]]),
            "written by 2 steps",
        ),
        (Schedule("allreduce", 3, 1, [[Step(0, 2, 0, "copy"), Step(1, 2, 0, "copy")]]), "written by 2 steps"),
        (Schedule("allreduce", 2, 1, [[Step(0, 0, 0, "copy")]]), "sends to itself"),
        (Schedule("allreduce", 2, 1, [[Step(0, 2, 0, "copy")]]), "out of range"),
        (Schedule("allreduce", 2, 1, [[Step(0, 1, 1, "copy")]]), "out of range"),
        (Schedule("allreduce", 2, 1, [[Step(0, 1, 0, "sum")]]), "op one of"),
        (Schedule("allreduce", 2, 1, [[(0, 1, 0)]]), "is not a Step"),
        (Schedule("allgather", 2, 4, []), "nchunks must be 2"),
        (Schedule("broadcast", 2, 1, []), "is not one of"),
    ],
)
def test_bad_steps_are_named(schedule: Schedule, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        simulate(schedule)


def test_postcondition_messages() -> None:
    short = flat_ring_allreduce(4)
    short.rounds.pop(2)  # one reduce-scatter round short
    with pytest.raises(ScheduleError, match=r"rank 0 chunk \d+ holds .*missing rank"):
        check(short)
    twice = flat_ring_allreduce(3)
    twice.rounds[-1] = [
        Step(*st[:3], "reduce") for st in twice.rounds[-1]
    ]  # all-gather adds instead of copying
    with pytest.raises(ScheduleError, match="more than once"):
        check(twice)
    with pytest.raises(ScheduleError, match="holds nothing"):
        check(Schedule("allgather", 2, 2, []))


def test_plain_data_round_trip() -> None:
    s = flat_ring_allreduce(4)
    data = to_data(s)
    assert data["rounds"][0][0] == [0, 1, 0, "reduce"]  # JSON values only: lists, ints, str
    assert from_data(data) == s
    with pytest.raises(ScheduleError, match=r"expected a coursekit\.schedules\.Schedule"):
        to_data({"rounds": []})


# ---------------------------------------------------------------------------------------------------------
# cost model


def test_h100_2x4_constants() -> None:
    # coursekit/hardware.yml (NVLink 4: 450 GB/s per direction; NDR: 400 Gb/s = 50 GB/s) and NCCL's hwLat
    assert H100_2X4.intra == Link(alpha=3.4e-6, bandwidth=450e9)
    assert H100_2X4.inter == Link(alpha=14.0e-6, bandwidth=50e9)
    assert [H100_2X4.node(r) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_round_time_by_hand() -> None:
    topo = Topology(2, 2, intra=Link(1.0, 10.0), inter=Link(5.0, 2.0))  # ranks 0,1 | 2,3
    assert round_time([Step(0, 1, 0, "copy")], topo, 20.0) == 1.0 + 20 / 10
    assert round_time([Step(0, 2, 0, "copy")], topo, 20.0) == 5.0 + 20 / 2
    # two chunks to one peer are one message: alpha once
    assert round_time([Step(0, 2, 0, "copy"), Step(0, 2, 1, "copy")], topo, 20.0) == 5.0 + 40 / 2
    # two messages through one outgoing NIC port are serialized; NVLink and NIC ports work in parallel
    assert round_time([Step(0, 2, 0, "copy"), Step(0, 3, 0, "copy")], topo, 20.0) == 2 * (5.0 + 10)
    assert round_time([Step(0, 1, 0, "copy"), Step(0, 2, 0, "copy")], topo, 20.0) == 5.0 + 10
    # two senders into one receiver: its incoming port is the bottleneck
    assert round_time([Step(2, 0, 0, "copy"), Step(3, 0, 0, "copy")], topo, 20.0) == 2 * (5.0 + 10)
    assert round_time([], topo, 20.0) == 0.0


def test_flat_ring_on_h100_2x4_is_bound_by_the_nic() -> None:
    # every round of the ring has two inter-node hops (3 -> 4, 7 -> 0): 14 rounds of one NIC message of S/8
    for nbytes in (8.0, 1e6, 2**30):
        want = 14 * (14.0e-6 + nbytes / 8 / 50e9)
        assert schedule_time(flat_ring_allreduce(8), H100_2X4, nbytes) == pytest.approx(want, rel=1e-12)
    with pytest.raises(ScheduleError, match="4 ranks, the topology 8"):
        schedule_time(flat_ring_allreduce(4), H100_2X4, 1.0)


# ---------------------------------------------------------------------------------------------------------
# running a schedule for real: gloo, 3 ranks


def _worker(rank: int, world: int, store: str, results: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    x = torch.arange(7, dtype=torch.int64) * (rank + 1)  # 7 elements, 3 chunks of 3, 2, 2
    execute(flat_ring_allreduce(world), x)
    y = torch.full((world * 2,), -1, dtype=torch.int64)
    y[2 * rank : 2 * rank + 2] = rank + 10
    execute(flat_ring_allgather(world), y)
    z = torch.tensor([rank + 1])  # the one-level tree with two reduces into rank 0 in one round
    tree = Schedule(
        "allreduce",
        3,
        1,
        [[Step(1, 0, 0, "reduce"), Step(2, 0, 0, "reduce")], [Step(0, 1, 0, "copy"), Step(0, 2, 0, "copy")]],
    )
    execute(tree, z)
    torch.save({"x": x, "y": y, "z": z}, os.path.join(results, f"{rank}.pt"))
    dist.destroy_process_group()


def test_execute_for_real_on_three_gloo_ranks() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        mp.start_processes(_worker, args=(3, store, tmp), nprocs=3, join=True, start_method="fork")
        for rank in range(3):
            out = torch.load(os.path.join(tmp, f"{rank}.pt"))
            assert torch.equal(out["x"], torch.arange(7) * 6)
            assert torch.equal(out["y"], torch.tensor([10, 10, 11, 11, 12, 12]))
            assert torch.equal(out["z"], torch.tensor([6]))
