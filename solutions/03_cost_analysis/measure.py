"""Measure gloo's all-reduce on this machine and fit the alpha-beta model to it by least squares.

The time of one all-reduce of S bytes is modeled as t(S) = alpha + beta * S: alpha is what even an empty
message costs (software, synchronization), 1/beta the bandwidth it reaches on large messages. If the library
ran a ring, your ring cost model (costs.py) turns them back into one message's alpha and beta.
Check: `grade exercise 03` (fits are checked exactly; the measurement on 2 ranks).
Units: seconds, bytes, seconds per byte.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

# ------------------------------------------------------------------------------------------------------------
# 03.fit


def fit_alpha_beta(sizes: list[float], times: list[float], weights: list[float] | None = None) -> list[float]:
    """[alpha, beta] minimizing sum_i w_i (times_i - alpha - beta * sizes_i)^2, with w_i = 1 when `weights` is
    None: a weighted least-squares line (w multiplies the SQUARED residual). Two plain floats; at least two
    distinct sizes are given. Exact up to float rounding (no iterative search)."""
    ### BEGIN SOLUTION 03.fit
    w = [1.0] * len(sizes) if weights is None else list(weights)
    total = sum(w)
    x_mean = sum(wi * x for wi, x in zip(w, sizes, strict=True)) / total
    y_mean = sum(wi * y for wi, y in zip(w, times, strict=True)) / total
    # weighted normal equations, centered so the large sizes do not cancel each other out
    sxy = sum(wi * (x - x_mean) * (y - y_mean) for wi, x, y in zip(w, sizes, times, strict=True))
    sxx = sum(wi * (x - x_mean) ** 2 for wi, x in zip(w, sizes, strict=True))
    beta = sxy / sxx
    return [y_mean - beta * x_mean, beta]
    ### END SOLUTION


def link_alpha_beta(alpha: float, beta: float, p: int) -> list[float]:
    """[alpha_link, beta_link]: the cost of one message (seconds, seconds per byte) that makes your ring
    all-reduce model on p >= 2 ranks (gamma = 0) cost exactly alpha + beta * n for every n."""
    ### BEGIN SOLUTION 03.fit
    return [alpha / (2 * (p - 1)), beta * p / (2 * (p - 1))]
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 03.measure


def measure_allreduce(sizes: list[int], iters: int = 10, warmup: int = 2, group=None) -> list[float]:
    """Seconds per dist.all_reduce (sum) of a float32 tensor of nbytes // 4 elements, for each nbytes in
    `sizes`, in that order. Per size: `warmup` untimed calls, then `iters` timed calls, each one timed with
    time.perf_counter right after a dist.barrier(group) so that all ranks start together; the size's time is
    the median of its `iters` timings. Then the ranks agree: return, on every rank, the largest time any rank
    measured for each size (one dist.all_reduce with ReduceOp.MAX over a float64 tensor of the medians)."""
    ### BEGIN SOLUTION 03.measure
    medians = []
    for nbytes in sizes:
        x = torch.ones(max(1, nbytes // 4))  # (nbytes / 4,) float32
        timings = []
        for i in range(warmup + iters):
            dist.barrier(group=group)  # start together, or we time the last rank's arrival
            t0 = time.perf_counter()
            dist.all_reduce(x, group=group)
            if i >= warmup:  # the first calls pay for connection setup and cold caches
                timings.append(time.perf_counter() - t0)
        medians.append(statistics.median(timings))  # robust to a stray slow call (another process ran)
    agreed = torch.tensor(medians, dtype=torch.float64)  # (len(sizes),)
    # a collective finishes when its slowest rank does: every rank reports that time
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX, group=group)
    return agreed.tolist()
    ### END SOLUTION
