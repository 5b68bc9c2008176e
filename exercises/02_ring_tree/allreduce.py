"""All-reduce three ways from point-to-point messages only, and the bounds they are measured against.

ring_allreduce                 Patarasuk & Yuan 2009: reduce-scatter then all-gather around a ring.
recursive_doubling_allreduce   Thakur, Rabenseifner & Gropp 2005: log2 rounds of whole-tensor exchanges.
binary_tree / tree_allreduce   a binary tree: reduce up, broadcast down, pipelined in pieces (NCCL's tree).
lower_bounds / bound_ratios    the latency and bandwidth lower bounds; how far each algorithm is from them.
Check: `grade exercise 02`.
Shapes: N = tensor.numel(), p = the size of `group`, r = this rank's rank in `group`.

`group` is None (the default group: the whole world) or any process group this rank belongs to, made by
dist.new_group: a sub-group whose members may be any ranks (not necessarily 0, 1, ..., nor adjacent). Ring
neighbours, partners and tree ranks are group ranks 0..p-1; dist.send/dist.recv address global ranks, which
`_global` gives (dist.get_global_rank; dist.get_group_rank goes back). Only members call these functions,
and no message may go to a rank outside `group`.
"""

from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist


def _global(group, rank: int) -> int:
    """Rank in `group` -> global rank, which is what dist.send/recv address."""
    return rank if group is None else dist.get_global_rank(group, rank)


def ring_allreduce(tensor: torch.Tensor, group=None) -> None:
    """In-place sum all-reduce of a contiguous `tensor` (any shape, any dtype) over `group`, as a ring.

    Contract (what the grader checks):
    - afterwards every rank's `tensor` holds the elementwise sum over all ranks, added in its own dtype;
    - rank r sends only to one ring neighbour and receives only from the other, the same direction on every
      rank (either direction);
    - 2(p-1) sends and 2(p-1) receives per rank, each message one chunk of
      `torch.tensor_split(tensor.view(-1), p)` (so at most ceil(N/p) elements; empty chunks still travel);
    - per rank, about 2(p-1)/p * N elements sent: every chunk but one in each of the two phases.
    Which chunk moves at which step is yours to work out (README, "The ring").
    """
    raise NotImplementedError("TODO(02.ring_allreduce): not implemented yet")


def recursive_doubling_allreduce(tensor: torch.Tensor, group=None) -> None:
    """In-place sum all-reduce of `tensor` (any shape, any dtype) over `group` by recursive doubling.

    Contract (what the grader checks):
    - afterwards every rank's `tensor` holds the elementwise sum, added in its own dtype;
    - every message carries the whole tensor;
    - when p is a power of two, each rank sends and receives log2 p messages, and in each round the ranks
      pair off and swap;
    - when p is not, q = the largest power of two <= p: the p - q extra ranks each hand their tensor to a
      partner of their own and get the sum back from it (one message each way), while q ranks run the
      doubling among themselves. Which extra rank pairs with which partner is free.
    """
    raise NotImplementedError("TODO(02.recursive_doubling): not implemented yet")


# ---------------------------------------------------------------------------------------------------------
# A real tree: reduce up a binary tree, broadcast down the same tree, pipelined in pieces (NCCL's TREE)
# ---------------------------------------------------------------------------------------------------------


def binary_tree(p: int) -> list[int]:
    """A binary tree over ranks 0..p-1 (p >= 1): parents[r] is rank r's parent, -1 for the one root.

    Contract: following parents from any rank reaches the root without a cycle; no rank is the parent of
    more than two ranks; no rank is more than ceil(log2 p) hops from the root. Any such tree is fine
    (heap-numbered, in-order, NCCL's): the choice of root and numbering is yours.
    """
    raise NotImplementedError("TODO(02.binary_tree): not implemented yet")


def tree_allreduce(tensor: torch.Tensor, group=None, num_chunks: int = 4) -> None:
    """In-place sum all-reduce of a contiguous `tensor` (any shape, any dtype) over `group`, along a binary
    tree: a reduce up the tree, then a broadcast down the same tree, pipelined in `num_chunks` pieces.

    Contract (what the grader checks):
    - afterwards every rank's `tensor` holds the elementwise sum, bitwise identical on every rank;
    - the messages form one binary tree over the ranks (a rank talks only to its parent and at most two
      children; no rank more than ceil(log2 p) hops from the root), the same tree up and down;
    - the flat tensor travels in exactly `num_chunks` pieces of at most ceil(N/num_chunks) elements (some
      empty when N < num_chunks): each tree edge carries each piece once up and once down, so a rank sends
      at most three times N elements;
    - a rank sends to its parent before it receives from it (the reduce goes up before the sum comes down);
    - pipelined, with two or more pieces: a rank passes its first piece on before it posts the receive of
      its last one, in the reduce (to its parent) and in the broadcast (to its children); and the reduce
      does not wait for the broadcast: a rank sends its second piece up before it receives its first back.
    You may use your own `binary_tree`.
    """
    raise NotImplementedError("TODO(02.tree_allreduce): not implemented yet")


# ---------------------------------------------------------------------------------------------------------
# Lower bounds (alpha-beta model): how close does each algorithm get?
# ---------------------------------------------------------------------------------------------------------

ALGORITHMS = ("ring", "recursive_doubling", "rabenseifner", "reduce_broadcast")
"""ring and recursive_doubling as in this file (recursive doubling with its fold when p is not a power of
two); rabenseifner (p a power of two); reduce_broadcast: exercise 01's binomial reduce then binomial
broadcast."""


def lower_bounds(p: int, nbytes: float, alpha: float, beta: float) -> dict[str, float]:
    """The two lower bounds on the time of an all-reduce of `nbytes` bytes per rank over p >= 2 ranks, in
    seconds, under the alpha-beta model (alpha s per message, beta s per byte):
    {"latency": the least time spent on message start-ups, "bandwidth": the least time spent moving bytes}.
    See the README ("The bandwidth bound", "The latency bound") and ../shared/reference/ground-truth.md,
    sections 1 and 2.
    """
    raise NotImplementedError("TODO(02.lower_bounds): not implemented yet")


def bound_ratios(algorithm: str, p: int) -> dict[str, float]:
    """How far `algorithm` (one of ALGORITHMS) is from each bound on p >= 2 ranks:
    {"latency": its alpha term / the latency bound, "bandwidth": its beta term / the bandwidth bound}.

    1.0 means the algorithm reaches that bound. Its terms are the alpha-beta costs in the README's table;
    where the table has none (recursive doubling when p is not a power of two), count the messages and
    bytes of your own schedule. Both ratios depend on p only, not on the size, alpha or beta.
    """
    raise NotImplementedError("TODO(02.lower_bounds): not implemented yet")


# ---------------------------------------------------------------------------------------------------------
# Measuring (ungraded). nccl-tests convention, doc/PERFORMANCE.md: algbw = S / t with S = N * element size
# and GB = 1e9 bytes; busbw = algbw * 2(p-1)/p, the fraction of S each rank must move at the very least.
# ---------------------------------------------------------------------------------------------------------


def bus_bandwidth(nbytes: int, seconds: float, world_size: int) -> float:
    """All-reduce bus bandwidth in GB/s (1e9 bytes), as nccl-tests reports it."""
    algbw = nbytes / seconds / 1e9
    return algbw * 2 * (world_size - 1) / world_size


def time_allreduce(fn, numel: int, *, iters: int = 10, warmup: int = 2, group=None) -> float:
    """Median seconds per call of `fn(tensor, group=group)` on a float32 tensor of `numel` elements."""
    x = torch.ones(numel)  # (N,)
    times = []
    for i in range(warmup + iters):
        dist.barrier(group=group)  # start together, or we time the slowest rank's arrival
        t0 = time.perf_counter()
        fn(x, group=group)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]
