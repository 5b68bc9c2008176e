"""What this catches: the first things to get right in each collective, on 2, 3, 6 and 8 ranks.

Run them with `grade exercise 01`. Each test builds per-rank inputs here, calls your function on every rank,
and compares what each rank holds afterwards with what torch.distributed's own collective gives. The hidden
suite checks more: other roots, dtypes and shapes, uneven sizes, sub-groups of the world, and the number of
messages and rounds.
"""

import pytest
import torch

from grader.harness import World, assert_equal, from_root, pairwise, to_root

# Your code must build these from send/recv: calling one of them fails the test.
FORBID = [
    "broadcast",
    "reduce",
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
]


def inputs_for(p: int, shape: tuple[int, ...] = (5,)) -> list[torch.Tensor]:
    """Rank r's input: distinct integers, so a value from the wrong rank shows."""
    return [torch.arange(torch.Size(shape).numel()).reshape(shape) + 100 * r for r in range(p)]


@pytest.mark.part("01.broadcast")
@pytest.mark.concept("bcast_copy")
def test_broadcast_from_rank_0(world: World) -> None:
    inputs = inputs_for(world.size)
    world.expect(from_root(0))  # what a failure's space-time diagram compares your messages with
    results = world.call("collectives", "broadcast", args=[(x, 0) for x in inputs], forbid=FORBID)
    for res in results:
        assert_equal(
            res.args[0], inputs[0], rank=res.rank, world_size=world.size, what="tensor after broadcast"
        )


@pytest.mark.part("01.broadcast")
@pytest.mark.concept("bcast_copy")
def test_broadcast_from_last_rank(world: World) -> None:
    # A non-zero root: the tree hangs from src, not from rank 0.
    src = world.size - 1
    inputs = inputs_for(world.size, (2, 3))
    world.expect(from_root(src))
    results = world.call("collectives", "broadcast", args=[(x, src) for x in inputs], forbid=FORBID)
    for res in results:
        assert_equal(
            res.args[0], inputs[src], rank=res.rank, world_size=world.size, what="tensor after broadcast"
        )


@pytest.mark.part("01.reduce")
@pytest.mark.concept("reduce_sum")
def test_reduce_to_rank_0(world: World) -> None:
    inputs = inputs_for(world.size)
    world.expect(to_root(0))
    results = world.call("collectives", "reduce", args=[(x, 0) for x in inputs], forbid=FORBID)
    assert_equal(results[0].args[0], sum(inputs), rank=0, world_size=world.size, what="sum on dst")


@pytest.mark.part("01.reduce")
@pytest.mark.concept("reduce_inputs_untouched")
def test_reduce_leaves_the_other_ranks_tensors(world: World) -> None:
    inputs = inputs_for(world.size)
    results = world.call("collectives", "reduce", args=[(x, 0) for x in inputs], forbid=FORBID)
    for res in results[1:]:  # this course's reduce leaves the other ranks' tensors as they were
        assert_equal(
            res.args[0],
            inputs[res.rank],
            rank=res.rank,
            world_size=world.size,
            what="tensor on a rank other than dst (must be unchanged)",
        )


@pytest.mark.part("01.all_gather")
@pytest.mark.concept("gather_slots")
def test_all_gather(world: World) -> None:
    p = world.size
    inputs = inputs_for(p)
    args = [([torch.zeros(5, dtype=torch.int64) for _ in range(p)], inputs[r]) for r in range(p)]
    world.expect(pairwise())
    for res in world.call("collectives", "all_gather", args=args, forbid=FORBID):
        tensor_list, _ = res.args
        for j in range(p):
            assert_equal(tensor_list[j], inputs[j], rank=res.rank, world_size=p, what=f"tensor_list[{j}]")


@pytest.mark.part("01.reduce_scatter")
@pytest.mark.concept("rs_sum")
def test_reduce_scatter(world: World) -> None:
    p = world.size
    # input_lists[r][j]: rank r's contribution to rank j's output (4 elements each).
    input_lists = [[torch.arange(4) + 10 * r + 1000 * j for j in range(p)] for r in range(p)]
    args = [(torch.zeros(4, dtype=torch.int64), input_lists[r]) for r in range(p)]
    world.expect(pairwise())
    for res in world.call("collectives", "reduce_scatter", args=args, forbid=FORBID):
        expected = sum(input_lists[r][res.rank] for r in range(p))
        assert_equal(res.args[0], expected, rank=res.rank, world_size=p, what="output")


@pytest.mark.part("01.all_to_all")
@pytest.mark.concept("a2a_transpose")
def test_all_to_all(world: World) -> None:
    p = world.size
    # input_lists[r][j]: the block rank r sends to rank j (3 elements each).
    input_lists = [[torch.arange(3) + 10 * r + 1000 * j for j in range(p)] for r in range(p)]
    args = [([torch.zeros(3, dtype=torch.int64) for _ in range(p)], input_lists[r]) for r in range(p)]
    world.expect(pairwise())
    for res in world.call("collectives", "all_to_all", args=args, forbid=FORBID):
        outputs, _ = res.args
        for j in range(p):
            assert_equal(
                outputs[j],
                input_lists[j][res.rank],
                rank=res.rank,
                world_size=p,
                what=f"output_tensor_list[{j}]",
            )


@pytest.mark.part("01.all_reduce")
@pytest.mark.concept("allreduce_sum")
def test_all_reduce(world: World) -> None:
    inputs = inputs_for(world.size, (7,))
    results = world.call("collectives", "all_reduce", args=[(x,) for x in inputs], forbid=FORBID)
    for res in results:
        assert_equal(
            res.args[0], sum(inputs), rank=res.rank, world_size=world.size, what="tensor after all_reduce"
        )
