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
    ### BEGIN SOLUTION 03.alpha_beta
    share = (p - 1) / p  # each of the 2(p-1) steps moves one chunk of n/p bytes
    return 2 * (p - 1) * alpha + 2 * share * n * beta + share * n * gamma
    ### END SOLUTION


def tree_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Seconds for a binomial-tree reduce of the n-byte vector to rank 0 followed by a binomial-tree broadcast
    of the result from rank 0 (exercise 01's reduce and broadcast; MPICH reduce_intra_binomial.c and
    bcast_intra_binomial.c), any p. Every message carries the whole vector (no pipelining)."""
    ### BEGIN SOLUTION 03.alpha_beta
    rounds = _ceil_lg(p)  # exercise 01's broadcast: ceil(log2 p) rounds, for any p
    # the root receives (and reduces) one whole vector per round, then sends one per round
    return 2 * rounds * (alpha + n * beta) + rounds * n * gamma
    ### END SOLUTION


def recursive_doubling_allreduce_time(
    p: int, n: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Seconds for a recursive-doubling all-reduce (MPICH allreduce_intra_recursive_doubling.c): partners at
    distance 1, 2, 4, ... exchange their whole vectors and reduce. For p not a power of two, exercise 02's
    scheme: the ranks beyond the largest power of two first fold their vector into a partner inside it, and
    get the result back from that partner at the end."""
    ### BEGIN SOLUTION 03.alpha_beta
    k = _floor_lg(p)
    extra = 0 if p == 1 << k else 1  # fold + unfold: two messages, one reduction
    return (k + 2 * extra) * (alpha + n * beta) + (k + extra) * n * gamma
    ### END SOLUTION


def rabenseifner_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Seconds for Rabenseifner's all-reduce (MPICH allreduce_intra_reduce_scatter_allgather.c): a
    reduce-scatter by recursive halving (each step a rank sends half of the part it is still responsible for
    to its partner and reduces the half it receives), then an all-gather by recursive doubling. For p not a
    power of two, the same fold-in before and hand-back after as recursive doubling. (MPICH's source comment
    states this case's cost with p where the power-of-two core has fewer ranks; both counts are accepted.)"""
    ### BEGIN SOLUTION 03.alpha_beta
    share = (p - 1) / p
    k = _floor_lg(p)
    if p == 1 << k:
        return 2 * k * alpha + 2 * share * n * beta + share * n * gamma
    # the fold-in and hand-back of the non-power-of-two case cost a whole vector each way
    return (2 * k + 2) * alpha + (2 * share + 2) * n * beta + (1 + share) * n * gamma
    ### END SOLUTION


def pairwise_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Seconds for a pairwise-exchange all-to-all (MPICH alltoall_intra_pairwise.c): every rank sends its
    block to each other rank in its own step, one peer per step."""
    ### BEGIN SOLUTION 03.alpha_beta
    return (p - 1) * (alpha + block * beta)
    ### END SOLUTION


def bruck_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Seconds for Bruck's all-to-all (Bruck et al. 1997; MPICH alltoall_intra_brucks.c), any p. A block
    headed for the rank at distance b (1 <= b < p) travels in hops of 2^k, one for each bit k set in b; in
    step k every rank sends, in ONE message to the rank 2^k ahead, every block that takes that hop. The local
    rotations before and after cost nothing here."""
    ### BEGIN SOLUTION 03.alpha_beta
    steps = _ceil_lg(p)
    # store-and-forward: a block travels once for every 1 bit of its distance b
    blocks_sent = sum(1 for k in range(steps) for b in range(1, p) if b >> k & 1)
    return steps * alpha + blocks_sent * block * beta
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 03.crossover


def crossover(d_alpha: float, d_bytes: float) -> float:
    """Smallest n >= 0 from which the ring is at least as fast as another algorithm, given that
    T_other(n) - T_ring(n) = d_alpha + n * d_bytes for every n (d_alpha in seconds, d_bytes in seconds per
    byte). 0.0 if the ring is at least as fast for every n >= 0; math.inf if it is slower for every n."""
    ### BEGIN SOLUTION 03.crossover
    if d_alpha >= 0:
        return 0.0  # the ring has no more latency terms, and never more bytes: it wins from the start
    if d_bytes <= 0:
        return math.inf  # the other algorithm is ahead on latency and not behind on bytes
    return -d_alpha / d_bytes
    ### END SOLUTION


def crossover_ring_tree(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and tree_allreduce_time are equal; below it the tree is faster.
    A closed form from your two cost models, not a numerical search. 0.0 and math.inf as in `crossover`."""
    ### BEGIN SOLUTION 03.crossover
    lg, share = _ceil_lg(p), (p - 1) / p
    d_alpha = (2 * lg - 2 * (p - 1)) * alpha  # the tree has fewer latencies ...
    d_bytes = (2 * lg - 2 * share) * beta + (lg - share) * gamma  # ... and more bytes per byte of vector
    return crossover(d_alpha, d_bytes)
    ### END SOLUTION


def crossover_ring_recursive_doubling(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and recursive_doubling_allreduce_time are equal (below it,
    recursive doubling is faster); same conventions as crossover_ring_tree."""
    ### BEGIN SOLUTION 03.crossover
    k, share = _floor_lg(p), (p - 1) / p
    extra = 0 if p == 1 << k else 1
    d_alpha = (k + 2 * extra - 2 * (p - 1)) * alpha
    d_bytes = (k + 2 * extra - 2 * share) * beta + (k + extra - share) * gamma
    return crossover(d_alpha, d_bytes)
    ### END SOLUTION
