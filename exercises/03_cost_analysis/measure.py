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
    raise NotImplementedError("TODO(03.fit): not implemented yet")


def link_alpha_beta(alpha: float, beta: float, p: int) -> list[float]:
    """[alpha_link, beta_link]: the cost of one message (seconds, seconds per byte) that makes your ring
    all-reduce model on p >= 2 ranks (gamma = 0) cost exactly alpha + beta * n for every n."""
    raise NotImplementedError("TODO(03.fit): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 03.measure


def measure_allreduce(sizes: list[int], iters: int = 10, warmup: int = 2, group=None) -> list[float]:
    """Seconds per dist.all_reduce (sum) of a float32 tensor of nbytes // 4 elements, for each nbytes in
    `sizes`, in that order. Per size: `warmup` untimed calls, then `iters` timed calls, each one timed with
    time.perf_counter right after a dist.barrier(group) so that all ranks start together; the size's time is
    the median of its `iters` timings. Then the ranks agree: return, on every rank, the largest time any rank
    measured for each size (one dist.all_reduce with ReduceOp.MAX over a float64 tensor of the medians)."""
    raise NotImplementedError("TODO(03.measure): not implemented yet")
