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
    raise NotImplementedError("TODO(07.hierarchical_allgather): not implemented yet")


def hierarchical_allreduce(nodes: int, gpus_per_node: int) -> Schedule:
    """All-reduce as Schedule("allreduce", p, p, rounds), p = nodes * gpus_per_node chunks.

    Afterwards every rank's every chunk is the sum over all p ranks (`coursekit.schedules.check`).
    Budget: exactly 2(g-1) + 2(n-1) rounds; on the network (a step between GPUs of different nodes) every
    GPU sends and receives at most one chunk per round and at most 2(n-1) chunks in all, and over NVLink at
    most n chunks per round, one message per GPU and link kind per round. Any n >= 1, g >= 1.
    """
    raise NotImplementedError("TODO(07.hierarchical_allreduce): not implemented yet")
