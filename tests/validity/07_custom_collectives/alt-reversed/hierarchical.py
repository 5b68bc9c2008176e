"""Hierarchical collectives as schedules: cross the slow inter-node links as little and as widely as possible.

n nodes of g GPUs, p = n*g ranks; rank = node * g + local (local index loc in 0..g-1, node i in 0..n-1).
All-gather: ring across nodes first (1 chunk per NIC per round), then ring inside each node (n chunks).
All-reduce: ring reduce-scatter inside nodes, ring all-reduce across nodes on 1/g of the data, ring all-gather
inside nodes. Every phase is the ring of exercise 02 on a sub-ring. This is BlueConnect's split (Cho et al.,
MLSys 2019) as MSCCLang writes it: microsoft/msccl-tools examples/mscclang/hierarchical_allreduce.py and
hierarchical_allgather.py (across nodes first, then inside).
Language: coursekit/schedules.py, a Step(src, dst, chunk, op) per chunk moved; check: `grade exercise 07`.
"""

from __future__ import annotations

from coursekit.schedules import Schedule, Step


def rank_of(node: int, local: int, gpus_per_node: int) -> int:
    """Global rank of GPU `local` on node `node`."""
    return node * gpus_per_node + local


def hierarchical_allgather(nodes: int, gpus_per_node: int) -> Schedule:
    """All-gather of p = nodes * gpus_per_node chunks (chunk c is rank c's input) in (n-1) + (g-1) rounds.

    1. Inter-node ring, rounds t = 0..n-2: GPU (i, loc) sends chunk rank_of((i - t) % n, loc) to GPU
       ((i + 1) % n, loc), op "copy". After it, GPU (i, loc) holds column loc: the chunks of ranks (*, loc).
    2. Intra-node ring, rounds s = 0..g-2: GPU (i, loc) sends the n chunks of column (loc - s) % g, one Step
       each in node order, to GPU (i, (loc + 1) % g), op "copy".
    """
    # Every ring runs the other way round: to node i-1 across nodes, to local loc-1 inside a node.
    n, g = nodes, gpus_per_node
    rounds: list[list[Step]] = []
    for t in range(n - 1):
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of((i - 1) % n, loc, g), rank_of((i + t) % n, loc, g), "copy")
                for i in range(n)
                for loc in range(g)
            ]
        )
    for s in range(g - 1):
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of(i, (loc - 1) % g, g), rank_of(k, (loc + s) % g, g), "copy")
                for i in range(n)
                for loc in range(g)
                for k in range(n)
            ]
        )
    return Schedule("allgather", n * g, n * g, rounds)


def hierarchical_allreduce(nodes: int, gpus_per_node: int) -> Schedule:
    """All-reduce in 2(g-1) + 2(n-1) rounds over p = n*g chunks, grouped g groups of n: group j = chunks
    j*n .. j*n + n-1, and piece k of group j is chunk j*n + k.

    1. Intra-node ring reduce-scatter of groups, rounds s = 0..g-2: GPU (i, loc) sends every chunk of group
       (loc - s) % g to GPU (i, (loc + 1) % g), op "reduce". After it GPU (i, loc) holds node i's sum of group
       j = (loc + 1) % g.
    2. Inter-node ring all-reduce of the pieces of that group j among the GPUs with local index loc:
       reduce-scatter rounds t = 0..n-2, GPU (i, loc) sends chunk j*n + (i - t) % n to ((i + 1) % n, loc),
       "reduce"; then all-gather rounds t = 0..n-2, it sends chunk j*n + (i + 1 - t) % n, "copy".
    3. Intra-node ring all-gather of groups, rounds s = 0..g-2: GPU (i, loc) sends every chunk of group
       (loc + 1 - s) % g to GPU (i, (loc + 1) % g), op "copy".
    Within a round, steps go in order of node, then local index, then chunk.
    """
    # The three rings of the documented schedule, each run in the opposite direction.
    n, g = nodes, gpus_per_node
    rounds: list[list[Step]] = []

    def group(j: int) -> range:
        return range(j * n, j * n + n)

    for s in range(g - 1):  # reduce-scatter inside nodes: GPU (i, loc) ends with group (loc - 1) % g
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of(i, (loc - 1) % g, g), c, "reduce")
                for i in range(n)
                for loc in range(g)
                for c in group((loc + s) % g)
            ]
        )
    for op in ("reduce", "copy"):  # ring all-reduce across nodes on group (loc - 1) % g
        for t in range(n - 1):
            shift = 0 if op == "reduce" else -1
            rounds.append(
                [
                    Step(
                        rank_of(i, loc, g),
                        rank_of((i - 1) % n, loc, g),
                        ((loc - 1) % g) * n + (i + t + shift) % n,
                        op,
                    )
                    for i in range(n)
                    for loc in range(g)
                ]
            )
    for s in range(g - 1):  # all-gather inside nodes
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of(i, (loc - 1) % g, g), c, "copy")
                for i in range(n)
                for loc in range(g)
                for c in group((loc - 1 + s) % g)
            ]
        )
    return Schedule("allreduce", n * g, n * g, rounds)
