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
    f = (p - 1) / p
    return 2 * (p - 1) * alpha + 2 * f * n * beta + f * n * gamma


def tree_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast, each ceil(lg p) rounds of the whole
    vector (MPICH: binomial reduce lgp (alpha + n beta + n gamma), bcast_intra_binomial.c
    lgp (alpha + n beta)): 2 ceil(lg p) alpha + 2 ceil(lg p) n beta + ceil(lg p) n gamma."""
    L = math.ceil(math.log2(p)) if p > 1 else 0
    return 2 * L * alpha + 2 * L * n * beta + L * n * gamma


def recursive_doubling_allreduce_time(
    p: int, n: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive doubling (allreduce_intra_recursive_doubling.c): lg p (alpha + n beta + n gamma) when p is a
    power of two. Otherwise, with k = floor(lg p), the extra ranks first fold their vector in (one message and
    one reduction) and get the result back at the end (one more message), exercise 02's algorithm:
    (k + 2) alpha + (k + 2) n beta + (k + 1) n gamma."""
    if p & (p - 1) == 0:  # power of two
        lg = math.log2(p)
        return lg * (alpha + n * beta + n * gamma)
    k = math.floor(math.log2(p))
    return (k + 2) * (alpha + n * beta) + (k + 1) * n * gamma


def rabenseifner_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive doubling
    (allreduce_intra_reduce_scatter_allgather.c), exactly as MPICH's comment gives it.
    p a power of two: 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
    Otherwise:        (2 floor(lg p) + 2) alpha + (2 (p-1)/p + 2) n beta + (1 + (p-1)/p) n gamma."""
    f = (p - 1) / p
    pow2 = p & (p - 1) == 0
    a = 2 * math.log2(p) if pow2 else 2 * math.floor(math.log2(p)) + 2
    b = 2 * f if pow2 else 2 * f + 2
    c = f if pow2 else 1 + f
    return a * alpha + b * n * beta + c * n * gamma


def pairwise_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Pairwise exchange (alltoall_intra_pairwise.c): p-1 steps, each sending one block to one peer.
    MPICH writes it (p-1) alpha + n beta with n = (p-1) block, the bytes sent to all other ranks."""
    return (p - 1) * alpha + (p - 1) * block * beta


def bruck_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Bruck et al. 1997 (alltoall_intra_brucks.c): ceil(lg p) steps; in step k every rank sends, in one
    message, each block b in 1..p-1 whose bit k is set. Cost: ceil(lg p) alpha + (number of such (k, b)
    pairs) block beta, which for p a power of two is lg p alpha + (p/2) lg p block beta, MPICH's
    "lgp.alpha + (n/2).lgp.beta" with n = p * block."""
    steps = (p - 1).bit_length()
    # every distance b in 1..p-1 is forwarded once per 1-bit
    hops = sum(bin(b).count("1") for b in range(1, p))
    return steps * alpha + hops * block * beta


# ------------------------------------------------------------------------------------------------------------
# 03.crossover: T_other(n) - T_ring(n) = (a_o - a_r) alpha + n ((b_o - b_r) beta + (c_o - c_r) gamma)


def crossover(d_alpha: float, d_bytes: float) -> float:
    """Smallest n >= 0 from which the ring is at least as fast as another algorithm, given
    T_other(n) - T_ring(n) = d_alpha + n * d_bytes: 0.0 if the ring is never slower (d_alpha >= 0),
    math.inf if it never catches up (d_alpha < 0 and d_bytes <= 0), else the n where the two are equal."""
    if d_alpha < 0 and d_bytes > 0:
        return -d_alpha / d_bytes
    return 0.0 if d_alpha >= 0 else math.inf


def crossover_ring_tree(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and tree_allreduce_time are equal; below it the tree is faster.
    Closed form from the two cost formulas: n* = (2(p-1) - 2L) alpha / ((2L - 2(p-1)/p) beta +
    (L - (p-1)/p) gamma) with L = ceil(lg p). Return 0.0 if the ring is never slower (p <= 3), math.inf if
    it is never faster."""
    L = (p - 1).bit_length()
    f = (p - 1) / p
    return crossover((2 * L - 2 * (p - 1)) * alpha, (2 * L - 2 * f) * beta + (L - f) * gamma)


def crossover_ring_recursive_doubling(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and recursive_doubling_allreduce_time are equal (below it,
    recursive doubling is faster); same conventions as crossover_ring_tree. For p = 2 and gamma = 0 both
    move n bytes and recursive doubling has one latency less: math.inf."""
    f = (p - 1) / p
    k = p.bit_length() - 1
    if 1 << k == p:
        a, b, c = k, k, k
    else:
        a, b, c = k + 2, k + 2, k + 1
    return crossover((a - 2 * (p - 1)) * alpha, (b - 2 * f) * beta + (c - f) * gamma)
