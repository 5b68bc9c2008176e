"""What this catches: the first things to get right in each all-reduce, on 2, 3, 6 and 8 ranks.

Run them with `grade exercise 02`. Each test gives every rank its own integer tensor, calls your function on
every rank, and compares what each rank holds afterwards with the elementwise sum, exactly. The hidden suite
checks more: N smaller than p, other dtypes and shapes, world sizes you have not seen, sub-groups, the bytes
and partners of every message, the shape of your tree and its pipeline, and every number of lower_bounds.
"""

import pytest
import torch

from grader.harness import COLLECTIVES, World, assert_equal, peers, ring

# Your code must build the all-reduce from send/recv: calling one of these fails the test.
FORBID = list(COLLECTIVES)  # every collective the harness knows


RING = ring(messages=lambda p: 2 * (p - 1))
"""Every message one way round the ring, 2(p-1) per rank: (p-1) reduce-scatter steps, (p-1) all-gather."""
RECURSIVE_DOUBLING = peers(
    "recursive doubling",
    lambda r, p: {r ^ (1 << k) for k in range(p.bit_length() - 1)},  # one partner per bit, p a power of two
    messages=lambda p: p.bit_length() - 1,
    each_once=True,
)


def inputs_for(p: int, n: int) -> list[torch.Tensor]:
    """Rank r's input: distinct integers, so a chunk that misses a rank shows."""
    return [torch.arange(n) + 100 * r for r in range(p)]


def check_sum(world: World, function: str, inputs: list[torch.Tensor]) -> list:
    results = world.call("allreduce", function, args=[(x.clone(),) for x in inputs], forbid=FORBID)
    for res in results:
        # res.args[0] is the tensor your function was given: write the sum into it, do not rebind the name
        assert_equal(
            res.args[0], sum(inputs), rank=res.rank, world_size=world.size, what=f"tensor after {function}"
        )
    return results


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept("ring_sum")
def test_ring_sum(world: World) -> None:
    world.expect(RING)  # what a failure's space-time diagram compares your messages with
    check_sum(world, "ring_allreduce", inputs_for(world.size, 2 * world.size + 1))  # N not a multiple of p


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept("ring_steps")
def test_ring_steps(world: World) -> None:
    p = world.size
    world.expect(RING)
    # Only the messages here: test_ring_sum checks the values.
    results = world.call(
        "allreduce", "ring_allreduce", args=[(x,) for x in inputs_for(p, 4 * p)], forbid=FORBID
    )
    for res in results:
        assert res.comm.sends == 2 * (p - 1) and res.comm.recvs == 2 * (p - 1), (
            f"rank {res.rank}/{p} sent {res.comm.sends} and received {res.comm.recvs} messages; a ring "
            f"all-reduce is (p-1) reduce-scatter steps then (p-1) all-gather steps: {2 * (p - 1)} of each"
        )
        assert all(e.numel == 4 for e in res.comm.events), (
            f"rank {res.rank}/{p}: with N = 4p every message is one chunk of N/p = 4 elements; got "
            f"{[e.numel for e in res.comm.events]}"
        )


@pytest.mark.part("02.recursive_doubling")
@pytest.mark.concept("rd_sum")
def test_recursive_doubling_sum(world: World) -> None:
    check_sum(world, "recursive_doubling_allreduce", inputs_for(world.size, 5))


@pytest.mark.part("02.recursive_doubling")
@pytest.mark.parametrize("world", [2, 8], indirect=True)
@pytest.mark.concept("rd_rounds")
def test_recursive_doubling_rounds_power_of_two(world: World) -> None:
    p = world.size
    rounds = p.bit_length() - 1  # log2 p
    world.expect(RECURSIVE_DOUBLING)
    # Only the messages here: test_recursive_doubling_sum checks the values.
    results = world.call(
        "allreduce", "recursive_doubling_allreduce", args=[(x,) for x in inputs_for(p, 3)], forbid=FORBID
    )
    for res in results:
        assert res.comm.sends == rounds and res.comm.recvs == rounds, (
            f"rank {res.rank}/{p} sent {res.comm.sends} and received {res.comm.recvs} messages; recursive "
            f"doubling on a power of two takes log2 p = {rounds} rounds of one exchange each"
        )


@pytest.mark.part("02.binary_tree")
@pytest.mark.concept("bt_tree")
def test_binary_tree_small(world: World) -> None:
    for p in (1, 2, 5, 8):
        [res] = world.call("allreduce", "binary_tree", args=[(p,)])
        parents = res.returned
        assert isinstance(parents, list) and len(parents) == p, f"binary_tree({p}) returned {parents!r}"
        assert parents.count(-1) == 1, (
            f"binary_tree({p}) = {parents}: a tree has exactly one root (parent -1)"
        )
        for r in range(p):
            kids = [c for c in range(p) if parents[c] == r]
            assert len(kids) <= 2, f"binary_tree({p}) = {parents}: rank {r} has children {kids}"


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_sum")
def test_tree_sum(world: World) -> None:
    p = world.size
    for k in (1, 3):
        inputs = inputs_for(p, 10)
        results = world.call(
            "allreduce",
            "tree_allreduce",
            args=[(x.clone(),) for x in inputs],
            kwargs={"num_chunks": k},
            forbid=FORBID,
        )
        for res in results:
            assert_equal(
                res.args[0],
                sum(inputs),
                rank=res.rank,
                world_size=p,
                what=f"tensor after tree_allreduce ({k=})",
            )


@pytest.mark.part("02.lower_bounds")
@pytest.mark.concept("lb_ring_tree")
def test_ring_reaches_the_bandwidth_bound(world: World) -> None:
    for p in (2, 4, 8):
        [res] = world.call("allreduce", "bound_ratios", args=[("ring", p)])
        assert isinstance(res.returned, dict), f"bound_ratios('ring', {p}) returned {res.returned!r}"
        assert abs(res.returned["bandwidth"] - 1.0) < 1e-9, (
            f"bound_ratios('ring', {p})['bandwidth'] = {res.returned['bandwidth']!r}; the ring moves exactly "
            "what the bandwidth bound asks for"
        )
