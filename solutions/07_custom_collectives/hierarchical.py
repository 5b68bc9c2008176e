"""Hierarchical collectives as schedules: cross the slow inter-node links as little and as widely as possible.

n nodes of g GPUs, p = n*g ranks; rank = node * g + local (local index l in 0..g-1, node i in 0..n-1).
Inside a node GPUs talk over NVLink; between nodes each GPU has its own, much slower, NIC. The idea is
BlueConnect's (Cho et al., MLSys 2019), and MSCCLang writes such schedules in microsoft/msccl-tools
examples/mscclang/hierarchical_allreduce.py and hierarchical_allgather.py.
Language: coursekit/schedules.py, a Step(src, dst, chunk, op) per chunk moved; check: `grade exercise 07`.
"""

from __future__ import annotations

from coursekit.schedules import Schedule, Step


def rank_of(node: int, local: int, gpus_per_node: int) -> int:
    """Global rank of GPU `local` on node `node`."""
    return node * gpus_per_node + local


def hierarchical_allgather(nodes: int, gpus_per_node: int) -> Schedule:
    """All-gather of p = nodes * gpus_per_node chunks as Schedule("allgather", p, p, rounds).

    Chunk c is rank c's input; afterwards every rank holds all p chunks (`coursekit.schedules.check`).
    Budget: exactly (n-1) + (g-1) rounds; on the network (a step between GPUs of different nodes) every GPU
    sends and receives at most one chunk per round and at most n-1 chunks in all, and over NVLink at most n
    chunks per round, one message per GPU and link kind per round. Any n >= 1, g >= 1.
    """
    ### BEGIN SOLUTION 07.hierarchical_allgather
    n, g = nodes, gpus_per_node
    rounds = []
    # 1. Across nodes: n-1 rounds in which all g NICs of a node work at once, each on one chunk.
    for t in range(n - 1):
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of((i + 1) % n, loc, g), rank_of((i - t) % n, loc, g), "copy")
                for i in range(n)
                for loc in range(g)
            ]
        )
    # 2. Inside nodes: g-1 rounds over NVLink, each forwarding a whole column (n chunks, one per node).
    for s in range(g - 1):
        rounds.append(
            [
                Step(rank_of(i, loc, g), rank_of(i, (loc + 1) % g, g), rank_of(j, (loc - s) % g, g), "copy")
                for i in range(n)
                for loc in range(g)
                for j in range(n)
            ]
        )
    return Schedule("allgather", n * g, n * g, rounds)
    ### END SOLUTION


def hierarchical_allreduce(nodes: int, gpus_per_node: int) -> Schedule:
    """All-reduce as Schedule("allreduce", p, p, rounds), p = nodes * gpus_per_node chunks.

    Afterwards every rank's every chunk is the sum over all p ranks (`coursekit.schedules.check`).
    Budget: exactly 2(g-1) + 2(n-1) rounds; on the network (a step between GPUs of different nodes) every
    GPU sends and receives at most one chunk per round and at most 2(n-1) chunks in all, and over NVLink at
    most n chunks per round, one message per GPU and link kind per round. Any n >= 1, g >= 1.
    """
    ### BEGIN SOLUTION 07.hierarchical_allreduce
    n, g = nodes, gpus_per_node
    gpus = [(i, loc) for i in range(n) for loc in range(g)]

    def intra(s: int, first: int, op: str) -> list[Step]:
        # every GPU sends group (loc + first - s) % g, all n of its chunks, to its right neighbour in the node
        return [
            Step(rank_of(i, loc, g), rank_of(i, (loc + 1) % g, g), ((loc + first - s) % g) * n + k, op)
            for i, loc in gpus
            for k in range(n)
        ]

    def inter(t: int, first: int, op: str) -> list[Step]:
        # GPU (i, loc) works on group (loc + 1) % g, the one it finished in phase 1: one piece per round
        return [
            Step(
                rank_of(i, loc, g),
                rank_of((i + 1) % n, loc, g),
                ((loc + 1) % g) * n + (i + first - t) % n,
                op,
            )
            for i, loc in gpus
        ]

    rounds = [intra(s, 0, "reduce") for s in range(g - 1)]  # 1. node sums, 1/g of the data per GPU
    rounds += [inter(t, 0, "reduce") for t in range(n - 1)]  # 2a. only 1/g of the data crosses a NIC...
    rounds += [inter(t, 1, "copy") for t in range(n - 1)]  # 2b. ...and all g NICs of a node work at once
    rounds += [intra(s, 1, "copy") for s in range(g - 1)]  # 3. share the finished groups inside the node
    return Schedule("allreduce", n * g, n * g, rounds)
    ### END SOLUTION
