"""Alpha-beta costs from explicit step tables (an alternative-correct case for exercise 03)."""

from __future__ import annotations

import math

Step = tuple[float, bool]  # (bytes one message carries, as a fraction of n or absolute; reduced on arrival?)


def _totals(steps: list[Step]) -> tuple[int, float, float]:
    """(messages, bytes sent, bytes reduced) along the critical path of a lock-step schedule."""
    return len(steps), sum(b for b, _ in steps), sum(b for b, red in steps if red)


def _cost(steps: list[Step], alpha: float, beta: float, gamma: float) -> float:
    a, b, c = _totals(steps)
    return a * alpha + b * beta + c * gamma


def _ring(p: int, n: float) -> list[Step]:
    chunk = n / p
    return [(chunk, True)] * (p - 1) + [(chunk, False)] * (p - 1)


def _tree(p: int, n: float) -> list[Step]:
    rounds = 0
    while (1 << rounds) < p:
        rounds += 1
    return [(n, True)] * rounds + [(n, False)] * rounds


def _core(p: int) -> int:
    q = 1
    while q * 2 <= p:
        q *= 2
    return q


def _recursive_doubling(p: int, n: float) -> list[Step]:
    q = _core(p)
    steps = [(n, True)] * int(math.log2(q))
    if q != p:
        steps = [(n, True), *steps, (n, False)]  # fold in, core, hand back
    return steps


def _rabenseifner(p: int, n: float) -> list[Step]:
    q = _core(p)
    halving, part = [], n
    for _ in range(int(math.log2(q))):
        part /= 2
        halving.append((part, True))  # send half of what I still own, reduce the half I keep
    doubling = [(b, False) for b, _ in reversed(halving)]
    steps = halving + doubling
    if q != p:
        steps = [(n, True), *steps, (n, False)]
    return steps


def ring_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    return _cost(_ring(p, n), alpha, beta, gamma)


def tree_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    return _cost(_tree(p, n), alpha, beta, gamma)


def recursive_doubling_allreduce_time(
    p: int, n: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    return _cost(_recursive_doubling(p, n), alpha, beta, gamma)


def rabenseifner_allreduce_time(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    return _cost(_rabenseifner(p, n), alpha, beta, gamma)


def pairwise_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    return _cost([(block, False)] * (p - 1), alpha, beta, 0.0)


def bruck_alltoall_time(p: int, block: float, alpha: float, beta: float) -> float:
    steps: list[Step] = []
    hop = 1
    while hop < p:
        moving = [b for b in range(1, p) if b & hop]  # distances that take this hop now
        steps.append((len(moving) * block, False))
        hop *= 2
    return _cost(steps, alpha, beta, 0.0)


def crossover(d_alpha: float, d_bytes: float) -> float:
    if d_alpha >= 0:
        return 0.0
    if d_bytes > 0:
        return -d_alpha / d_bytes
    return math.inf


def _against_ring(other: list[Step], p: int, alpha: float, beta: float, gamma: float) -> float:
    a_o, b_o, c_o = _totals(other)  # built with n = 1: byte counts are per byte of vector
    a_r, b_r, c_r = _totals(_ring(p, 1.0))
    return crossover((a_o - a_r) * alpha, (b_o - b_r) * beta + (c_o - c_r) * gamma)


def crossover_ring_tree(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    return _against_ring(_tree(p, 1.0), p, alpha, beta, gamma)


def crossover_ring_recursive_doubling(p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    return _against_ring(_recursive_doubling(p, 1.0), p, alpha, beta, gamma)
