"""What collectives cost in the alpha-beta model, and the message size where one algorithm overtakes another.

Hockney's model: one message of m bytes costs alpha + m * beta; reducing m bytes costs m * gamma. An algorithm
costs (messages on its critical path) * alpha + (bytes sent on it) * beta + (bytes reduced on it) * gamma;
finding those three counts for each algorithm, as functions of p, is the exercise (README.md).
Sources: the algorithms of MPICH (pmodels/mpich src/mpi/coll/), from R. Thakur, R. Rabenseifner and
W. Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005
(ground-truth.md §2).
Check: `grade exercise 03`.
Units: seconds, bytes, seconds per byte. p ranks; n = bytes of the vector every rank holds (all-reduce);
block = bytes one rank sends to EACH other rank (all-to-all). Every algorithm runs in lock step: all ranks
take step s at the same time, and a rank sends, receives and reduces in the same step. p = 1 costs nothing.
Chunks may be fractional (n / p bytes): the model counts bytes, not whole elements.
"""

from __future__ import annotations

import math


def _ceil_lg(p: int) -> int:
    """ceil(log2 p) for p >= 1."""
    return (p - 1).bit_length()


def _floor_lg(p: int) -> int:
    """floor(log2 p) for p >= 1: the exponent of the largest power of two <= p."""
    return p.bit_length() - 1


# ------------------------------------------------------------------------------------------------------------
# 03.alpha_beta


def ring_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Seconds for a ring all-reduce of an n-byte vector on p ranks (any p; MPICH allreduce_intra_ring.c,
    exercise 02): a reduce-scatter then an all-gather around the ring, the vector cut into p equal chunks,
    each step one message from every rank to its next neighbour."""
    raise NotImplementedError("TODO(03.alpha_beta): not implemented yet")


def tree_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Seconds for a binomial-tree reduce of the n-byte vector to rank 0 followed by a binomial-tree broadcast
    of the result from rank 0 (exercise 01's reduce and broadcast; MPICH reduce_intra_binomial.c and
    bcast_intra_binomial.c), any p. Every message carries the whole vector (no pipelining)."""
    raise NotImplementedError("TODO(03.alpha_beta): not implemented yet")


def recursive_doubling_allreduce_time(
    p: int, n: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Seconds for a recursive-doubling all-reduce (MPICH allreduce_intra_recursive_doubling.c): partners at
    distance 1, 2, 4, ... exchange their whole vectors and reduce. For p not a power of two, exercise 02's
    scheme: the ranks beyond the largest power of two first fold their vector into a partner inside it, and
    get the result back from that partner at the end."""
    raise NotImplementedError("TODO(03.alpha_beta): not implemented yet")


def rabenseifner_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Seconds for Rabenseifner's all-reduce (MPICH allreduce_intra_reduce_scatter_allgather.c): a
    reduce-scatter by recursive halving (each step a rank sends half of the part it is still responsible for
    to its partner and reduces the half it receives), then an all-gather by recursive doubling. For p not a
    power of two, the same fold-in before and hand-back after as recursive doubling. (MPICH's source comment
    states this case's cost with p where the power-of-two core has fewer ranks; both counts are accepted.)"""
    raise NotImplementedError("TODO(03.alpha_beta): not implemented yet")


def pairwise_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Seconds for a pairwise-exchange all-to-all (MPICH alltoall_intra_pairwise.c): every rank sends its
    block to each other rank in its own step, one peer per step."""
    raise NotImplementedError("TODO(03.alpha_beta): not implemented yet")


def bruck_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Seconds for Bruck's all-to-all (Bruck et al. 1997; MPICH alltoall_intra_brucks.c), any p. A block
    headed for the rank at distance b (1 <= b < p) travels in hops of 2^k, one for each bit k set in b; in
    step k every rank sends, in ONE message to the rank 2^k ahead, every block that takes that hop. The local
    rotations before and after cost nothing here."""
    raise NotImplementedError("TODO(03.alpha_beta): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 03.crossover


def crossover(d_alpha: float, d_bytes: float) -> float:
    """Smallest n >= 0 from which the ring is at least as fast as another algorithm, given that
    T_other(n) - T_ring(n) = d_alpha + n * d_bytes for every n (d_alpha in seconds, d_bytes in seconds per
    byte). 0.0 if the ring is at least as fast for every n >= 0; math.inf if it is slower for every n."""
    raise NotImplementedError("TODO(03.crossover): not implemented yet")


def crossover_ring_tree(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and tree_allreduce_time are equal; below it the tree is faster.
    A closed form from your two cost models, not a numerical search. 0.0 and math.inf as in `crossover`."""
    raise NotImplementedError("TODO(03.crossover): not implemented yet")


def crossover_ring_recursive_doubling(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and recursive_doubling_allreduce_time are equal (below it,
    recursive doubling is faster); same conventions as crossover_ring_tree."""
    raise NotImplementedError("TODO(03.crossover): not implemented yet")
