"""Measure gloo's all-reduce on this machine and fit the alpha-beta model to it by least squares.

The time of one all-reduce of S bytes is modeled as t(S) = alpha + beta * S: alpha is what even an empty
message costs (software, synchronization), 1/beta the bandwidth it reaches on large messages. For a ring on
p ranks, alpha = 2(p-1) alpha_link and beta = 2(p-1)/p beta_link (costs.py), which gives the per-message
parameters back. Check: `grade exercise 03` (fits are checked exactly; the measurement on 2 ranks).
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
    None. With w_i = 1 / times_i^2 this minimizes the RELATIVE error, so that a 1 ms large message does not
    drown out a 50 us small one. Needs at least two distinct sizes."""
    # the README's weighted means, written out
    w = [1.0] * len(sizes) if weights is None else [float(x) for x in weights]
    sw = sum(w)
    s_bar = sum(wi * si for wi, si in zip(w, sizes, strict=True)) / sw
    t_bar = sum(wi * ti for wi, ti in zip(w, times, strict=True)) / sw
    num = sum(wi * (si - s_bar) * (ti - t_bar) for wi, si, ti in zip(w, sizes, times, strict=True))
    den = sum(wi * (si - s_bar) ** 2 for wi, si in zip(w, sizes, strict=True))
    beta = num / den
    return [float(t_bar - beta * s_bar), float(beta)]


def link_alpha_beta(alpha: float, beta: float, p: int) -> list[float]:
    """[alpha_link, beta_link] of one message, if the measured all-reduce (alpha, beta) ran a ring on p ranks:
    alpha = 2(p-1) alpha_link and beta = 2(p-1)/p beta_link."""
    steps = 2 * (p - 1)
    return [alpha / steps, beta * p / steps]


# ------------------------------------------------------------------------------------------------------------
# 03.measure


def measure_allreduce(sizes: list[int], iters: int = 10, warmup: int = 2, group=None) -> list[float]:
    """Seconds per dist.all_reduce (sum) of a float32 tensor of nbytes // 4 elements, for each nbytes in
    `sizes`, in that order. Per size: `warmup` untimed calls, then `iters` timed calls, each one timed with
    time.perf_counter right after a dist.barrier(group) so that all ranks start together; the size's time is
    the median of its `iters` timings. Then the ranks agree: return, on every rank, the largest time any rank
    measured for each size (one dist.all_reduce with ReduceOp.MAX over a float64 tensor of the medians)."""
    medians = []
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(x, group=group)
        samples = []
        for _ in range(iters):
            dist.barrier(group=group)
            t0 = time.perf_counter()
            dist.all_reduce(x, group=group)
            samples.append(time.perf_counter() - t0)
        medians.append(statistics.median(samples))
    agreed = torch.tensor(medians, dtype=torch.float64)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX, group=group)
    return agreed.tolist()


# ------------------------------------------------------------------------------------------------------------
# 03.copy_model


def copy_model(sizes: list[int], times: list[float]) -> dict[str, float]:
    """alpha in us, 1/beta in GB/s and Hockney's n_1/2 in bytes, from a relative-error fit of the copies."""
    alpha, beta = fit_alpha_beta(sizes, times, [t**-2 for t in times])
    alpha_us = alpha / 1e-6
    bandwidth_gbs = (1.0 / beta) / 1e9
    # equal latency and bytes terms: alpha = beta n, written with the quoted figures converted back
    n_half = (alpha_us * 1e-6) * (bandwidth_gbs * 1e9)
    return {"alpha_us": float(alpha_us), "bandwidth_gbs": float(bandwidth_gbs), "n_half_bytes": float(n_half)}


# ------------------------------------------------------------------------------------------------------------
# 03.device_copies


def time_copies(sizes: list[int], device: torch.device, iters: int = 20, warmup: int = 3) -> list[float]:
    """Seconds per pinned host-to-device copy, timed by CUDA events one copy at a time, median over iters."""
    result = []
    for nbytes in sizes:
        host = torch.zeros(nbytes, dtype=torch.uint8).pin_memory()
        gpu = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        for _ in range(warmup):
            gpu.copy_(host)  # blocking copies: fine for warming up
        samples = []
        for _ in range(iters):
            t_start = torch.cuda.Event(enable_timing=True)
            t_end = torch.cuda.Event(enable_timing=True)
            t_start.record()  # current stream of the current device, where copy_ runs
            gpu.copy_(host)
            t_end.record()
            t_end.synchronize()  # wait for this copy before reading its time
            samples.append(t_start.elapsed_time(t_end) * 1e-3)  # ms -> s
        result.append(float(statistics.median(samples)))
    return result
