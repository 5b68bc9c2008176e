"""What this catches: schedules that are wrong on 2 nodes of 4 GPUs, take the wrong number of rounds, lose to
the flat ring, or go wrong when run for real on 4 gloo ranks.

Run them with `grade exercise 07`. Your schedule is built on one rank and sent back as plain data; these
checks simulate and cost it with coursekit.schedules, as you can yourself. More checks run at submission:
other shapes (1x4, 4x1, 3x2, 2x3, ...), the documented steps round by round, and real runs on 8 ranks.
"""

from __future__ import annotations

import pytest
import torch

from coursekit.schedules import (
    H100_2X4,
    Schedule,
    ScheduleError,
    check,
    from_data,
    ring_allreduce,
    schedule_time,
)
from grader.harness import World, assert_equal


def build(world: World, function: str, nodes: int, gpus: int) -> Schedule:
    kwargs = {"nodes": nodes, "gpus_per_node": gpus}
    [res] = world.run("rank_programs:build", inputs={"function": function, "kwargs": kwargs})
    try:
        schedule = from_data(res.value)
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
    s = build(world, "hierarchical_allreduce", 2, 4)
    assert len(s.rounds) == 2 * 3 + 2 * 1, f"{len(s.rounds)} rounds; 2(g-1) + 2(n-1) = 8 for 2 nodes x 4 GPUs"
    for nbytes in (1e3, 2**30):
        t, ring = schedule_time(s, H100_2X4, nbytes), schedule_time(ring_allreduce(8), H100_2X4, nbytes)
        assert t < ring, f"{nbytes:.0f} B: {t * 1e6:.1f} us, the flat ring takes {ring * 1e6:.1f} us"


@pytest.mark.concept("allreduce_phases_compose")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [4], indirect=True)
def test_allreduce_for_real_2x2(world: World) -> None:
    inputs = [torch.arange(10, dtype=torch.int64) + 100 * r for r in range(4)]
    kwargs = {"nodes": 2, "gpus_per_node": 2}
    results = world.run(
        "rank_programs:run",
        inputs=[
            {"function": "hierarchical_allreduce", "kwargs": kwargs, "tensor": x.clone()} for x in inputs
        ],
    )
    for res in results:
        assert_equal(res.value, sum(inputs), rank=res.rank, world_size=4, what="buffer after the all-reduce")
