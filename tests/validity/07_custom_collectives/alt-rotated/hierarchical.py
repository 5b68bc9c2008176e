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
    n, g, p = nodes, gpus_per_node, nodes * gpus_per_node
    have = [{r} for r in range(p)]  # which chunks each rank holds, to build the rounds greedily
    rounds: list[list[Step]] = []
    # across nodes: each rank forwards to the next node the chunk it received last (its own at first)
    last = list(range(p))
    for _ in range(n - 1):
        rnd = []
        for r in range(p):
            node, local = divmod(r, g)
            rnd.append(Step(r, rank_of((node + 1) % n, local, g), last[r], "copy"))
        new_last = [0] * p
        for st in rnd:
            new_last[st.dst] = st.chunk
            have[st.dst].add(st.chunk)
        last = new_last
        rounds.append(rnd)
    # inside nodes: forward the column received last (one's own column at first)
    column = [r % g for r in range(p)]
    for _ in range(g - 1):
        rnd = []
        for r in range(p):
            node, local = divmod(r, g)
            dst = rank_of(node, (local + 1) % g, g)
            rnd += [Step(r, dst, rank_of(k, column[r], g), "copy") for k in reversed(range(n))]
        column = [column[rank_of(r // g, (r % g - 1) % g, g)] for r in range(p)]
        rounds.append(rnd)
    return Schedule("allgather", p, p, rounds)


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
    # A rotation of the documented schedule: GPU (i, loc) ends the intra-node reduce-scatter owning group loc
    # (not loc + 1), and the inter-node ring hands piece i + t + 1 down the ring instead of piece i - t up.
    n, g, p = nodes, gpus_per_node, nodes * gpus_per_node
    rounds: list[list[Step]] = []
    for s in range(g - 1):
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of(i, (loc + 1) % g, g), j * n + k, "reduce")
                for loc in range(g)
                for i in range(n)
                for j in [(loc - s - 1) % g]
                for k in range(n)
            ]
        )
    for t in range(n - 1):  # reduce-scatter across nodes, in the other direction, on group loc
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of((i - 1) % n, loc, g), loc * n + (i + t + 1) % n, "reduce")
                for loc in range(g)
                for i in range(n)
            ]
        )
    for t in range(n - 1):  # all-gather across nodes: piece i + t is complete on node i at round t
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of((i - 1) % n, loc, g), loc * n + (i + t) % n, "copy")
                for loc in range(g)
                for i in range(n)
            ]
        )
    for s in range(g - 1):
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of(i, (loc + 1) % g, g), ((loc - s) % g) * n + k, "copy")
                for loc in range(g)
                for i in range(n)
                for k in range(n)
            ]
        )
    return Schedule("allreduce", p, p, rounds)
