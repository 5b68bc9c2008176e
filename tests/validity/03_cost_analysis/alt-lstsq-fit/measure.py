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
    s = torch.tensor(sizes, dtype=torch.float64)
    t = torch.tensor(times, dtype=torch.float64)
    w = torch.ones_like(t) if weights is None else torch.tensor(weights, dtype=torch.float64)
    root = w.sqrt()
    design = torch.stack([torch.ones_like(s), s], dim=1) * root[:, None]  # (k, 2), rows scaled by sqrt(w)
    sol = torch.linalg.lstsq(design, (t * root)[:, None]).solution  # (2, 1)
    return [float(sol[0, 0]), float(sol[1, 0])]


def link_alpha_beta(alpha: float, beta: float, p: int) -> list[float]:
    """[alpha_link, beta_link] of one message, if the measured all-reduce (alpha, beta) ran a ring on p ranks:
    alpha = 2(p-1) alpha_link and beta = 2(p-1)/p beta_link."""
    return [alpha / (2 * (p - 1)), beta / (2 * (p - 1) / p)]


# ------------------------------------------------------------------------------------------------------------
# 03.measure


def measure_allreduce(sizes: list[int], iters: int = 10, warmup: int = 2, group=None) -> list[float]:
    """Seconds per dist.all_reduce (sum) of a float32 tensor of nbytes // 4 elements, for each nbytes in
    `sizes`, in that order. Per size: `warmup` untimed calls, then `iters` timed calls, each one timed with
    time.perf_counter right after a dist.barrier(group) so that all ranks start together; the size's time is
    the median of its `iters` timings. Then the ranks agree: return, on every rank, the largest time any rank
    measured for each size (one dist.all_reduce with ReduceOp.MAX over a float64 tensor of the medians)."""
    result = torch.zeros(len(sizes), dtype=torch.float64)
    for i, nbytes in enumerate(sizes):
        buf = torch.rand(nbytes // 4)  # float32
        timings = []
        for it in range(warmup + iters):
            dist.barrier(group)
            start = time.perf_counter_ns()
            dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
            if it >= warmup:
                timings.append((time.perf_counter_ns() - start) * 1e-9)
        result[i] = statistics.median(timings)
    dist.all_reduce(result, op=dist.ReduceOp.MAX, group=group)  # the slowest rank decides
    return [float(x) for x in result]


# ------------------------------------------------------------------------------------------------------------
# 03.copy_model


def copy_model(sizes: list[int], times: list[float]) -> dict[str, float]:
    """The copy line in GPU units: alpha_us, bandwidth_gbs (GB = 1e9 B) and n_half_bytes."""
    t = torch.tensor(times, dtype=torch.float64)
    alpha, beta = fit_alpha_beta(list(sizes), list(times), (1 / t / t).tolist())  # relative error
    return {"alpha_us": alpha * 1e6, "bandwidth_gbs": 1e-9 / beta, "n_half_bytes": alpha / beta}


# ------------------------------------------------------------------------------------------------------------
# 03.device_copies


def time_copies(sizes: list[int], device: torch.device, iters: int = 20, warmup: int = 3) -> list[float]:
    """Copies and events on one side stream of `device`; all timed copies queued, then one wait."""
    side = torch.cuda.Stream(device=device)
    out = []
    for nbytes in sizes:
        pinned = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
        target = torch.empty(nbytes, dtype=torch.uint8, device=device)
        torch.cuda.synchronize(device)  # target's allocation is done before the side stream uses it
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * iters)]
        with torch.cuda.stream(side):  # copy_ and record() now go to the side stream
            for _ in range(warmup):
                target.copy_(pinned, non_blocking=True)
            for k in range(iters):
                events[2 * k].record()
                target.copy_(pinned, non_blocking=True)
                events[2 * k + 1].record()
        side.synchronize()
        ms = sorted(events[2 * k].elapsed_time(events[2 * k + 1]) for k in range(iters))
        middle = ms[iters // 2] if iters % 2 else (ms[iters // 2 - 1] + ms[iters // 2]) / 2
        out.append(middle / 1000.0)
    return out
