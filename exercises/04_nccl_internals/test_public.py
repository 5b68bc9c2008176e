"""What this catches: the first things to get right in each part. Run them with `grade exercise 04`.

Every expected value here is worked out by hand from NCCL's sources (see README.md), not taken from a
reference solution. The hidden suite checks every function on more systems, sizes, strings and rank counts.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from grader.harness import World

PROTOS = ("LL", "LL128", "Simple")
ONE_NODE = dict(n_ranks=8, n_nodes=1, n_channels=16, bw_intra=20.0, bw_inter=20.0, nvlink=True, ll128=True)
FOUR_NODES = dict(n_ranks=32, n_nodes=4, n_channels=8, bw_intra=20.0, bw_inter=12.0, nvlink=True, ll128=True)


def many(world: World, module: str, function: str, calls: list[tuple], system: Any = None) -> list[Any]:
    inputs = {
        "module": module,
        "function": function,
        "calls": [{"args": list(c)} for c in calls],
        "system": system,
    }
    [res] = world.run("rank_programs:call_many", inputs=inputs)
    return res.value


@pytest.mark.part("04.protocols")
@pytest.mark.concept("proto_efficiency")
def test_efficiencies_and_buffers(world: World) -> None:
    eff = many(world, "protocols", "proto_efficiency", [(p,) for p in PROTOS])
    assert eff == [0.5, 120 / 128, 1.0], (
        f"proto_efficiency of LL, LL128, Simple: got {eff}, expected 0.5, 0.9375, 1"
    )
    buffers = many(world, "protocols", "default_buffer_bytes", [(p,) for p in PROTOS])
    # ground-truth.md §3 (src/init.cc): the default buffers per connection
    assert buffers == [524288, 4915200, 4194304], f"default_buffer_bytes: got {buffers}"


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_latency")
def test_latency_by_hand(world: World) -> None:
    # README.md, "Check yourself": Ring/Simple AllReduce on 8 NVLink GPUs 56.0 us; Tree/Simple 64.4 us
    calls = [("AllReduce", "Ring", "Simple"), ("AllReduce", "Tree", "Simple")]
    got = many(world, "tuner", "algo_latency", calls, ONE_NODE)
    for args, value, expected in zip(calls, got, (56.0, 64.4), strict=True):
        assert math.isclose(value, expected, rel_tol=1e-9), (
            f"algo_latency{args}: got {value}, expected {expected}"
        )


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_selection")
def test_small_and_large_messages(world: World) -> None:
    # one node: LL for tiny messages, Simple for 1 GiB, always on rings; four nodes: a tree for tiny ones
    got = many(world, "tuner", "select_algo_proto", [("AllReduce", 8), ("AllReduce", 1 << 30)], ONE_NODE)
    assert got == [["Ring", "LL"], ["Ring", "Simple"]], f"8 B and 1 GiB on one node: got {got}"
    got = many(world, "tuner", "select_algo_proto", [("AllReduce", 8), ("AllReduce", 1 << 30)], FOUR_NODES)
    assert got == [["Tree", "LL"], ["Ring", "Simple"]], f"8 B and 1 GiB on four nodes: got {got}"


@pytest.mark.part("04.env_parsing")
@pytest.mark.concept("parse_lists")
def test_tuning_cc_examples(world: World) -> None:
    funcs = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
    got = many(world, "nccl_env", "parse_nccl_list", [("^LL128;allreduce:LL128", list(PROTOS))])[0]
    expected = {f: ["LL", "Simple"] for f in funcs} | {"AllReduce": ["LL128"]}
    assert got == expected, f'NCCL_PROTO="^LL128;allreduce:LL128": got {got}, expected {expected}'


@pytest.mark.part("04.chunks")
@pytest.mark.concept("chunk_layout")
def test_ll_pieces_by_hand(world: World) -> None:
    # 100,000 floats, LL, 4 ranks, 2 channels, 512 threads: a first loop of full chunks, interleaved, then a
    # second, shorter loop whose chunk has shrunk to what is left, the last piece holding the remainder.
    [got] = many(world, "protocols", "ring_allreduce_chunks", [(100_000, 4, 4, 2, "LL", 512, None)])
    c0 = [[0, 8192], [16384, 8192], [32768, 8192], [49152, 8192]]
    c0 += [[65536, 5120], [75776, 5120], [86016, 5120], [96256, 3744]]
    c1 = [
        [8192, 8192],
        [24576, 8192],
        [40960, 8192],
        [57344, 8192],
        [70656, 5120],
        [80896, 5120],
        [91136, 5120],
    ]
    assert got == [c0, c1], f"pieces per channel: got {got}, expected {[c0, c1]}"


@pytest.mark.part("04.trees")
@pytest.mark.concept("btree_bits")
def test_picture_of_14_ranks(world: World) -> None:
    got = many(world, "trees", "dtree", [(14, r) for r in (0, 8, 13)])

    def node(n: Any) -> tuple:  # a tree is who is whose child, not the order NCCL stores the children in
        return (n["parent"], sorted(n["children"]))

    assert node(got[0][0]) == (-1, [8]), f"rank 0, tree 0: got {got[0][0]}"
    assert node(got[1][0]) == (0, [4, 12]), f"rank 8, tree 0: got {got[1][0]}"
    assert node(got[2][0]) == (12, []), f"rank 13, tree 0: got {got[2][0]}"
    # 14 is even, so tree 1 mirrors tree 0: rank 13 takes rank 0's place at the root
    assert node(got[2][1]) == (-1, [5]), f"rank 13, tree 1: got {got[2][1]}"
