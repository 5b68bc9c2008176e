"""What collectives cost in the alpha-beta model, and the message size where one algorithm overtakes another.

Hockney's model: one message of m bytes costs alpha + m * beta; reducing m bytes costs m * gamma. An algorithm
is then a * alpha + b * n * beta + c * n * gamma, where the counts a, b, c depend on p and on the algorithm.
Sources: the cost comments in MPICH (pmodels/mpich src/mpi/coll/), from R. Thakur, R. Rabenseifner and
W. Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005
(ground-truth.md §2).
Check: `grade exercise 03`.
Units: seconds, bytes, seconds per byte. p ranks; n = bytes of the vector every rank holds (all-reduce);
block = bytes one rank sends to EACH other rank (all-to-all). lg p = log2 p.
"""

from __future__ import annotations

import math


def _ceil_lg(p: int) -> int:
    """ceil(log2 p): rounds of a binomial tree, or of Bruck's algorithm."""
    return (p - 1).bit_length()


def _floor_lg(p: int) -> int:
    """floor(log2 p): rounds of recursive doubling among the largest power of two <= p."""
    return p.bit_length() - 1


# ------------------------------------------------------------------------------------------------------------
# 03.alpha_beta


def ring_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Ring all-reduce (reduce-scatter + all-gather, any p; MPICH allreduce_intra_ring.c):
    2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma."""
    ### BEGIN SOLUTION 03.alpha_beta
    share = (p - 1) / p  # each of the 2(p-1) steps moves one chunk of n/p bytes
    return 2 * (p - 1) * alpha + 2 * share * n * beta + share * n * gamma
    ### END SOLUTION


def tree_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast, each ceil(lg p) rounds of the whole
    vector (MPICH: binomial reduce lgp (alpha + n beta + n gamma), bcast_intra_binomial.c
    lgp (alpha + n beta)): 2 ceil(lg p) alpha + 2 ceil(lg p) n beta + ceil(lg p) n gamma."""
    ### BEGIN SOLUTION 03.alpha_beta
    rounds = _ceil_lg(p)  # exercise 01's broadcast: ceil(log2 p) rounds, for any p
    return 2 * rounds * (alpha + n * beta) + rounds * n * gamma
    ### END SOLUTION


def recursive_doubling_allreduce_time(
    p: int, n: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive doubling (allreduce_intra_recursive_doubling.c): lg p (alpha + n beta + n gamma) when p is a
    power of two. Otherwise, with k = floor(lg p), the extra ranks first fold their vector in (one message and
    one reduction) and get the result back at the end (one more message), exercise 02's algorithm:
    (k + 2) alpha + (k + 2) n beta + (k + 1) n gamma."""
    ### BEGIN SOLUTION 03.alpha_beta
    k = _floor_lg(p)
    extra = 0 if p == 1 << k else 1  # fold + unfold: two messages, one reduction
    return (k + 2 * extra) * (alpha + n * beta) + (k + extra) * n * gamma
    ### END SOLUTION


def rabenseifner_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive doubling
    (allreduce_intra_reduce_scatter_allgather.c), exactly as MPICH's comment gives it.
    p a power of two: 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
    Otherwise:        (2 floor(lg p) + 2) alpha + (2 (p-1)/p + 2) n beta + (1 + (p-1)/p) n gamma."""
    ### BEGIN SOLUTION 03.alpha_beta
    share = (p - 1) / p
    k = _floor_lg(p)
    if p == 1 << k:
        return 2 * k * alpha + 2 * share * n * beta + share * n * gamma
    # the fold-in and hand-back of the non-power-of-two case cost a whole vector each way
    return (2 * k + 2) * alpha + (2 * share + 2) * n * beta + (1 + share) * n * gamma
    ### END SOLUTION


def pairwise_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Pairwise exchange (alltoall_intra_pairwise.c): p-1 steps, each sending one block to one peer.
    MPICH writes it (p-1) alpha + n beta with n = (p-1) block, the bytes sent to all other ranks."""
    ### BEGIN SOLUTION 03.alpha_beta
    return (p - 1) * (alpha + block * beta)
    ### END SOLUTION


def bruck_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Bruck et al. 1997 (alltoall_intra_brucks.c): ceil(lg p) steps; in step k every rank sends, in one
    message, each block b in 1..p-1 whose bit k is set. Cost: ceil(lg p) alpha + (number of such (k, b)
    pairs) block beta, which for p a power of two is lg p alpha + (p/2) lg p block beta, MPICH's
    "lgp.alpha + (n/2).lgp.beta" with n = p * block."""
    ### BEGIN SOLUTION 03.alpha_beta
    steps = _ceil_lg(p)
    # store-and-forward: a block travels once for every 1 bit of its distance b
    blocks_sent = sum(1 for k in range(steps) for b in range(1, p) if b >> k & 1)
    return steps * alpha + blocks_sent * block * beta
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 03.crossover: T_other(n) - T_ring(n) = (a_o - a_r) alpha + n ((b_o - b_r) beta + (c_o - c_r) gamma)


def crossover(d_alpha: float, d_bytes: float) -> float:
    """Smallest n >= 0 from which the ring is at least as fast as another algorithm, given
    T_other(n) - T_ring(n) = d_alpha + n * d_bytes: 0.0 if the ring is never slower (d_alpha >= 0),
    math.inf if it never catches up (d_alpha < 0 and d_bytes <= 0), else the n where the two are equal."""
    ### BEGIN SOLUTION 03.crossover
    if d_alpha >= 0:
        return 0.0  # the ring has no more latency terms, and never more bytes: it wins from the start
    if d_bytes <= 0:
        return math.inf  # the other algorithm is ahead on latency and not behind on bytes
    return -d_alpha / d_bytes
    ### END SOLUTION


def crossover_ring_tree(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and tree_allreduce_time are equal; below it the tree is faster.
    Closed form from the two cost formulas: n* = (2(p-1) - 2L) alpha / ((2L - 2(p-1)/p) beta +
    (L - (p-1)/p) gamma) with L = ceil(lg p). Return 0.0 if the ring is never slower (p <= 3), math.inf if
    it is never faster."""
    ### BEGIN SOLUTION 03.crossover
    lg, share = _ceil_lg(p), (p - 1) / p
    d_alpha = (2 * lg - 2 * (p - 1)) * alpha  # the tree has fewer latencies ...
    d_bytes = (2 * lg - 2 * share) * beta + (lg - share) * gamma  # ... and more bytes per byte of vector
    return crossover(d_alpha, d_bytes)
    ### END SOLUTION


def crossover_ring_recursive_doubling(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and recursive_doubling_allreduce_time are equal (below it,
    recursive doubling is faster); same conventions as crossover_ring_tree. For p = 2 and gamma = 0 both
    move n bytes and recursive doubling has one latency less: math.inf."""
    ### BEGIN SOLUTION 03.crossover
    k, share = _floor_lg(p), (p - 1) / p
    extra = 0 if p == 1 << k else 1
    d_alpha = (k + 2 * extra - 2 * (p - 1)) * alpha
    d_bytes = (k + 2 * extra - 2 * share) * beta + (k + extra - share) * gamma
    return crossover(d_alpha, d_bytes)
    ### END SOLUTION
