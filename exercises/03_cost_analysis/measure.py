"""Measure gloo's all-reduce and a GPU's host-to-device copies, and fit the alpha-beta model to them.

The time of one all-reduce (or copy) of S bytes is modeled as t(S) = alpha + beta * S: alpha is what even an
empty message costs (software, synchronization), 1/beta the bandwidth it reaches on large messages. If the
library ran a ring, your ring cost model (costs.py) turns them back into one message's alpha and beta.
Check: `grade exercise 03` (fits are checked exactly; the all-reduce on 2 ranks; the copies on a GPU only).
Units: seconds, bytes, seconds per byte, except where a name says otherwise (alpha_us, bandwidth_gbs).
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


# ------------------------------------------------------------------------------------------------------------
# 03.copy_model


def copy_model(sizes: list[int], times: list[float]) -> dict[str, float]:
    """The alpha-beta line of measured copies, fitted by relative error (your fit_alpha_beta, weighted as the
    README says) to copy sizes in bytes and times in seconds, in the units a GPU's figures are quoted in:
    {"alpha_us": the latency in microseconds, "bandwidth_gbs": 1/beta in GB/s (GB = 1e9 bytes),
    "n_half_bytes": Hockney's half-performance length, the copy size in bytes at which the latency and the
    bytes cost the same time}. Plain floats."""
    raise NotImplementedError("TODO(03.copy_model): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 03.device_copies


def time_copies(sizes: list[int], device: torch.device, iters: int = 20, warmup: int = 3) -> list[float]:
    """Seconds per host-to-device copy of nbytes bytes, for each nbytes in `sizes`, in that order: from a
    pinned (page-locked) uint8 tensor in host memory into a uint8 tensor on `device`, a CUDA device, both
    allocated once per size outside the timing. The time of a copy is the GPU's: from when the copy starts on
    the device until it has finished there, not how long the host took to ask for it. Per size: `warmup`
    untimed copies, then `iters` copies each timed on its own; the size's time is the median of those
    `iters`. Plain floats."""
    raise NotImplementedError("TODO(03.device_copies): not implemented yet")
