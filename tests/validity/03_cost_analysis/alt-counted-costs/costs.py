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
    steps = 2 * (p - 1)  # reduce-scatter then all-gather, one message per step
    per_step = n / p
    return steps * (alpha + per_step * beta) + (p - 1) * per_step * gamma


def tree_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast, each ceil(lg p) rounds of the whole
    vector (MPICH: binomial reduce lgp (alpha + n beta + n gamma), bcast_intra_binomial.c
    lgp (alpha + n beta)): 2 ceil(lg p) alpha + 2 ceil(lg p) n beta + ceil(lg p) n gamma."""
    rounds = _ceil_lg(p)
    reduce_part = rounds * (alpha + n * beta + n * gamma)
    bcast_part = rounds * (alpha + n * beta)
    return reduce_part + bcast_part


def recursive_doubling_allreduce_time(
    p: int, n: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive doubling (allreduce_intra_recursive_doubling.c): lg p (alpha + n beta + n gamma) when p is a
    power of two. Otherwise, with k = floor(lg p), the extra ranks first fold their vector in (one message and
    one reduction) and get the result back at the end (one more message), exercise 02's algorithm:
    (k + 2) alpha + (k + 2) n beta + (k + 1) n gamma."""
    k = _floor_lg(p)
    messages = k if (1 << k) == p else k + 2
    reductions = k if (1 << k) == p else k + 1
    return messages * (alpha + n * beta) + reductions * n * gamma


def rabenseifner_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive doubling
    (allreduce_intra_reduce_scatter_allgather.c), exactly as MPICH's comment gives it.
    p a power of two: 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
    Otherwise:        (2 floor(lg p) + 2) alpha + (2 (p-1)/p + 2) n beta + (1 + (p-1)/p) n gamma."""
    k = _floor_lg(p)
    share = (p - 1) / p
    if (1 << k) == p:
        return 2 * k * alpha + 2 * share * n * beta + share * n * gamma
    return (2 * k + 2) * alpha + (2 * share + 2) * n * beta + (1 + share) * n * gamma


def pairwise_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Pairwise exchange (alltoall_intra_pairwise.c): p-1 steps, each sending one block to one peer.
    MPICH writes it (p-1) alpha + n beta with n = (p-1) block, the bytes sent to all other ranks."""
    total = 0.0
    for _ in range(p - 1):
        total += alpha + block * beta
    return total


def bruck_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    """Bruck et al. 1997 (alltoall_intra_brucks.c): ceil(lg p) steps; in step k every rank sends, in one
    message, each block b in 1..p-1 whose bit k is set. Cost: ceil(lg p) alpha + (number of such (k, b)
    pairs) block beta, which for p a power of two is lg p alpha + (p/2) lg p block beta, MPICH's
    "lgp.alpha + (n/2).lgp.beta" with n = p * block."""
    steps = _ceil_lg(p)
    forwarded = sum(1 for k in range(steps) for b in range(1, p) if (b >> k) & 1)
    return steps * alpha + forwarded * block * beta


# ------------------------------------------------------------------------------------------------------------
# 03.crossover: T_other(n) - T_ring(n) = (a_o - a_r) alpha + n ((b_o - b_r) beta + (c_o - c_r) gamma)


def crossover(d_alpha: float, d_bytes: float) -> float:
    """Smallest n >= 0 from which the ring is at least as fast as another algorithm, given
    T_other(n) - T_ring(n) = d_alpha + n * d_bytes: 0.0 if the ring is never slower (d_alpha >= 0),
    math.inf if it never catches up (d_alpha < 0 and d_bytes <= 0), else the n where the two are equal."""
    if d_alpha >= 0:
        return 0.0
    if d_bytes <= 0:
        return math.inf
    return -d_alpha / d_bytes


def crossover_ring_tree(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and tree_allreduce_time are equal; below it the tree is faster.
    Closed form from the two cost formulas: n* = (2(p-1) - 2L) alpha / ((2L - 2(p-1)/p) beta +
    (L - (p-1)/p) gamma) with L = ceil(lg p). Return 0.0 if the ring is never slower (p <= 3), math.inf if
    it is never faster."""

    # read the three counts off the cost functions themselves: T(0) gives alpha's, the slope gives the rest
    def counts(f):
        a = f(p, 0.0, 1.0, 0.0, 0.0)
        b = f(p, 1.0, 0.0, 1.0, 0.0)
        c = f(p, 1.0, 0.0, 0.0, 1.0)
        return a, b, c

    ra, rb, rc = counts(ring_allreduce_time)
    ta, tb, tc = counts(tree_allreduce_time)
    return crossover((ta - ra) * alpha, (tb - rb) * beta + (tc - rc) * gamma)


def crossover_ring_recursive_doubling(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Bytes n at which ring_allreduce_time and recursive_doubling_allreduce_time are equal (below it,
    recursive doubling is faster); same conventions as crossover_ring_tree. For p = 2 and gamma = 0 both
    move n bytes and recursive doubling has one latency less: math.inf."""
    ra = ring_allreduce_time(p, 0.0, alpha, beta, gamma)
    da = recursive_doubling_allreduce_time(p, 0.0, alpha, beta, gamma) - ra
    # the slope of each cost in n, exactly: evaluate at n = 1 with alpha switched off
    slope_ring = ring_allreduce_time(p, 1.0, 0.0, beta, gamma)
    slope_rd = recursive_doubling_allreduce_time(p, 1.0, 0.0, beta, gamma)
    return crossover(da, slope_rd - slope_ring)
