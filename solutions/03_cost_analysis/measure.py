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


# ------------------------------------------------------------------------------------------------------------
# 03.copy_model


def copy_model(sizes: list[int], times: list[float]) -> dict[str, float]:
    """The alpha-beta line of measured copies, fitted by relative error (your fit_alpha_beta, weighted as the
    README says) to copy sizes in bytes and times in seconds, in the units a GPU's figures are quoted in:
    {"alpha_us": the latency in microseconds, "bandwidth_gbs": 1/beta in GB/s (GB = 1e9 bytes),
    "n_half_bytes": Hockney's half-performance length, the copy size in bytes at which the latency and the
    bytes cost the same time}. Plain floats."""
    ### BEGIN SOLUTION 03.copy_model
    alpha, beta = fit_alpha_beta(sizes, times, [1 / t**2 for t in times])  # relative error, as for gloo
    # n_1/2 = alpha / beta: alpha = beta * n there, so the copy moves at half of its asymptotic bandwidth
    return {"alpha_us": alpha * 1e6, "bandwidth_gbs": 1 / beta / 1e9, "n_half_bytes": alpha / beta}
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 03.device_copies


def time_copies(sizes: list[int], device: torch.device, iters: int = 20, warmup: int = 3) -> list[float]:
    """Seconds per host-to-device copy of nbytes bytes, for each nbytes in `sizes`, in that order: from a
    pinned (page-locked) uint8 tensor in host memory into a uint8 tensor on `device`, a CUDA device, both
    allocated once per size outside the timing. The time of a copy is the GPU's: from when the copy starts on
    the device until it has finished there, not how long the host took to ask for it. Per size: `warmup`
    untimed copies, then `iters` copies each timed on its own; the size's time is the median of those
    `iters`. Plain floats."""
    ### BEGIN SOLUTION 03.device_copies
    stream = torch.cuda.current_stream(device)  # the stream copy_ uses: copies and events queue in order
    times = []
    for size in sizes:
        src = torch.empty(size, dtype=torch.uint8, pin_memory=True)  # page-locked: the copy engine reads it
        dst = torch.empty(size, dtype=torch.uint8, device=device)
        for _ in range(warmup):  # the first copies pay for one-time setup (lazy init, allocator caches)
            dst.copy_(src, non_blocking=True)
        marks = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)
        ]
        for start, end in marks:
            start.record(stream)  # a timestamp the GPU takes when the stream reaches it
            dst.copy_(src, non_blocking=True)  # returns at once: the host only queues the copy
            end.record(stream)
        torch.cuda.synchronize(device)  # elapsed_time needs both events to have happened
        elapsed_ms = [start.elapsed_time(end) for start, end in marks]
        times.append(statistics.median(elapsed_ms) / 1e3)  # elapsed_time is in milliseconds
    return times
    ### END SOLUTION
