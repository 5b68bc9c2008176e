"""What this catches: schedules that are wrong on 2 nodes of 4 GPUs, take the wrong number of rounds, lose to
the flat ring, or go wrong when run for real on 4 gloo ranks; a fused all-gather + matmul that computes the
wrong product on 3 ranks, or that waits for a shard before issuing the product of the one before it.

Run them with `grade exercise 07`. Your schedule is built on one rank and sent back as plain data; these
checks simulate and cost it with coursekit.schedules, as you can yourself. More checks run at submission:
other shapes (1x4, 4x1, 3x2, 2x3, ...), costs against the bound, real runs on 8 ranks, and the fused
product on 4 and 8 ranks and in sub-groups of 3 and 5.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from coursekit.schedules import (
    H100_2X4,
    Schedule,
    ScheduleError,
    check,
    from_data,
    schedule_time,
)
from grader.harness import World, assert_equal, peers
from grader.harness.patterns import Peers

FLAT_RING_ALLREDUCE_S = {1e3: 196.035e-6, 2**30: 37.77696384e-3}
"""Exercise 02's flat ring all-reduce on the 8 GPUs of H100_2X4, as `schedule_time` prices it (README)."""


def hierarchical(gpus_per_node: int) -> Peers:
    """What a hierarchical schedule's messages may do: a GPU talks within its node, or to the GPU of the same
    local index on another node (rank = node * gpus_per_node + local, as `rank_of` says)."""
    g = gpus_per_node
    return peers(
        "a hierarchical schedule (within a node, or to the same GPU of another node)",
        lambda r, p: {j for j in range(p) if j != r and (j // g == r // g or j % g == r % g)},
    )


def build(world: World, function: str, nodes: int, gpus: int, *, simulate: bool = True) -> Schedule:
    kwargs = {"nodes": nodes, "gpus_per_node": gpus}
    [res] = world.run("rank_programs:build", inputs={"function": function, "kwargs": kwargs})
    try:
        schedule = from_data(res.value)
        if simulate:
            check(schedule)  # simulate: every rank must end with what the collective promises
    except ScheduleError as exc:
        raise AssertionError(f"{function}({nodes}, {gpus}): {exc}") from None
    return schedule


@pytest.mark.concept("allgather_correct")
@pytest.mark.part("07.hierarchical_allgather")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allgather_2x4(world: World) -> None:
    s = build(world, "hierarchical_allgather", 2, 4)
    assert len(s.rounds) == 1 + 3, f"{len(s.rounds)} rounds; 2 nodes x 4 GPUs take (2-1) + (4-1) = 4"


@pytest.mark.concept("one_gth_across_nodes")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allreduce_2x4_beats_the_ring(world: World) -> None:
    # what the schedule costs, whether or not its sums are right (test_allreduce_for_real_2x2 checks those)
    s = build(world, "hierarchical_allreduce", 2, 4, simulate=False)
    for nbytes in (1e3, 2**30):
        t, ring = schedule_time(s, H100_2X4, nbytes), FLAT_RING_ALLREDUCE_S[nbytes]
        assert t < ring, f"{nbytes:.0f} B: {t * 1e6:.1f} us, the flat ring takes {ring * 1e6:.1f} us"


@pytest.mark.concept("allreduce_phases_compose")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [4], indirect=True)
def test_allreduce_for_real_2x2(world: World) -> None:
    inputs = [torch.arange(10, dtype=torch.int64) + 100 * r for r in range(4)]
    kwargs = {"nodes": 2, "gpus_per_node": 2}
    world.expect(hierarchical(2))  # what a failure's space-time diagram compares the messages with
    results = world.run(
        "rank_programs:run",
        inputs=[
            {"function": "hierarchical_allreduce", "kwargs": kwargs, "tensor": x.clone()} for x in inputs
        ],
    )
    for res in results:
        assert_equal(res.value, sum(inputs), rank=res.rank, world_size=4, what="buffer after the all-reduce")


# ---------------------------------------------------------------------------------------------------------
# 07.fused_allgather_matmul on 3 ranks: the product, and the order of your calls
#
# rank_programs.fused runs your function with a recording `mm` and records every message you post and every
# receive you wait for; rank_programs.overlap_problems reads that order on each rank (read it: it is the
# contract). At submission: 4 and 8 ranks, seeded shapes, and sub-groups of 3 and 5 ranks.

_spec = importlib.util.spec_from_file_location("rank_programs_07", Path(__file__).parent / "rank_programs.py")
programs = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(programs)  # type: ignore[union-attr]


def run_fused(world: World, seed: int) -> list:
    cfg = {"seed": seed, "m": 2, "k": 3, "n": 2}
    return world.run("rank_programs:fused", inputs=cfg, forbid=["all_gather", "all_gather_into_tensor"])


@pytest.mark.concept("fused_result")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_fused_product_3(world: World) -> None:
    x = torch.cat([programs.fused_shard(3, j, 2, 3) for j in range(world.size)])  # (p*m, k)
    for res in run_fused(world, seed=3):
        want = x @ programs.fused_weight(3, res.rank, 3, 2)  # (p*m, n): this rank's weight
        assert_equal(
            res.value["out"], want, rank=res.rank, world_size=world.size, what="Y = all_gather(x) @ w"
        )


@pytest.mark.concept("compute_before_next_wait")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_fused_overlap_3(world: World) -> None:
    for res in run_fused(world, seed=4):
        problems = programs.overlap_problems(res.value["events"], res.rank, world.size)
        # the submission suite checks the other rules of the contract ("in_flight", "forward") as well
        for rule in ("budget", "overlap"):
            assert not problems[rule], f"rank {res.rank}: {problems[rule][0]}"
