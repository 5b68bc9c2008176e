"""Trusted rank programs for exercise 03: many calls of one pure function in a single round trip."""

from __future__ import annotations

from typing import Any


def call_many(ctx: Any, *, module: str, function: str, calls: list[list[Any]]) -> list[Any]:
    """[module.function(*args) for args in calls], in order, from the student's module."""
    fn = getattr(ctx.submission(module), function)
    return [fn(*args) for args in calls]


def host_to_device_copies(
    ctx: Any, *, sizes: list[int], iters: int, warmup: int, paired_copies: int, with_model: bool
) -> dict[str, Any]:
    """The student's time_copies(sizes) on this rank's GPU, between two paired measurements of the largest
    size taken by this program, and with `with_model` the student's copy_model of those times.

    {"times": the student's list, or None with "bad": its repr when it is not plain floats; "paired": the
    program's seconds per largest copy, before and after; "model": copy_model's dict or None}. Keeping the
    two programs apart means a copy_model still to be written does not fail the timing checks.
    """
    measure = ctx.submission("measure")
    largest = max(sizes)
    before = _paired_copy_seconds(largest, ctx.device, paired_copies)
    times = measure.time_copies(list(sizes), ctx.device, iters, warmup)
    after = _paired_copy_seconds(largest, ctx.device, paired_copies)
    result: dict[str, Any] = {"times": times, "paired": [before, after], "model": None}
    plain = isinstance(times, list) and len(times) == len(sizes) and all(type(t) is float for t in times)
    if not plain:
        result.update(times=None, bad=repr(times)[:300])
    elif with_model and all(t > 0 for t in times):
        result["model"] = measure.copy_model(list(sizes), times)
    return result


def _paired_copy_seconds(nbytes: int, device: Any, copies: int) -> float:
    """Seconds per host-to-device copy of `nbytes` from pinned memory, measured as throughput: `copies`
    back-to-back copies between two synchronizations, on the host's clock. Far above the half-performance
    length the host's overhead is a rounding error, so this is the link's time for the bytes, and a reference
    for the student's largest copy; it says nothing about the latency of a small one."""
    import time

    import torch

    host = torch.zeros(nbytes, dtype=torch.uint8).pin_memory()
    on_gpu = torch.zeros(nbytes, dtype=torch.uint8, device=device)
    on_gpu.copy_(host, non_blocking=True)  # once untimed: first use of both buffers
    torch.cuda.synchronize(device)
    began = time.perf_counter()
    for _ in range(copies):
        on_gpu.copy_(host, non_blocking=True)
    torch.cuda.synchronize(device)
    return (time.perf_counter() - began) / copies
