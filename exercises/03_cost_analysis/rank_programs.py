"""Trusted rank programs for exercise 03: many calls of one pure function in a single round trip."""

from __future__ import annotations

from typing import Any


def call_many(ctx: Any, *, module: str, function: str, calls: list[list[Any]]) -> list[Any]:
    """[module.function(*args) for args in calls], in order, from the student's module."""
    fn = getattr(ctx.submission(module), function)
    return [fn(*args) for args in calls]


def enclosed_measure(ctx: Any, *, sizes: list[int], iters: int, warmup: int) -> dict[str, Any]:
    """The student's measure_allreduce(sizes, iters, warmup) on this rank, and "span": the seconds this rank
    spent inside that call, on the host's clock around it. Every timed call lies inside the span, so the
    timings of one size, each a separate interval, add up to less than it: whatever the machine's load, the
    median of `iters` of them is at most 2 * span / iters. {"times": the student's list, or None with "bad":
    its repr when it is not plain floats; "span": seconds}."""
    import time

    measure = ctx.submission("measure")
    began = time.perf_counter()
    times = measure.measure_allreduce(list(sizes), iters=iters, warmup=warmup)
    span = time.perf_counter() - began
    plain = isinstance(times, list) and len(times) == len(sizes) and all(type(t) is float for t in times)
    return (
        {"times": times, "span": span} if plain else {"times": None, "bad": repr(times)[:300], "span": span}
    )


def host_to_device_copies(
    ctx: Any, *, sizes: list[int], iters: int, warmup: int, paired_copies: int, with_model: bool
) -> dict[str, Any]:
    """The student's time_copies(sizes) on this rank's GPU, between two paired measurements taken by this
    program, and with `with_model` the student's copy_model of those times.

    {"times": the student's list, or None with "bad": its repr when it is not plain floats; "paired": the
    program's seconds per largest copy, before and after; "events": the program's own CUDA-event time of
    one copy of each size, before and after (two lists); "host_synced": a host clock around one
    synchronized copy of each size, after; "model": copy_model's dict or None}. Keeping the two programs
    apart means a copy_model still to be written does not fail the timing checks.
    """
    measure = ctx.submission("measure")
    largest = max(sizes)
    before = _paired_copy_seconds(largest, ctx.device, paired_copies)
    events_before = _event_copy_seconds(list(sizes), ctx.device, paired_copies)
    times = measure.time_copies(list(sizes), ctx.device, iters, warmup)
    events_after = _event_copy_seconds(list(sizes), ctx.device, paired_copies)
    host_synced = _host_synced_copy_seconds(list(sizes), ctx.device, paired_copies)
    after = _paired_copy_seconds(largest, ctx.device, paired_copies)
    result: dict[str, Any] = {
        "times": times,
        "paired": [before, after],
        "events": [events_before, events_after],
        "host_synced": host_synced,
        "model": None,
    }
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


def _copy_buffers(nbytes: int, device: Any) -> tuple[Any, Any]:
    """A pinned host source and a device destination of `nbytes`, used once untimed (first-use costs)."""
    import torch

    host = torch.zeros(nbytes, dtype=torch.uint8).pin_memory()
    on_gpu = torch.zeros(nbytes, dtype=torch.uint8, device=device)
    on_gpu.copy_(host, non_blocking=True)
    torch.cuda.synchronize(device)
    return host, on_gpu


def _event_copy_seconds(sizes: list[int], device: Any, copies: int) -> list[float]:
    """Per size, the median over `copies` copies of one host-to-device copy from pinned memory, each between
    two CUDA events on the current stream (the copy's), all queued and read after one synchronization: the
    method the README describes, so that a correct time_copies agrees with it at every size."""
    return [_event_copy_median(size, device, copies) for size in sizes]


def _event_copy_median(size: int, device: Any, copies: int) -> float:
    import statistics

    import torch

    host, on_gpu = _copy_buffers(size, device)
    pairs = []
    for _ in range(copies):
        pair = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        pair[0].record()
        on_gpu.copy_(host, non_blocking=True)
        pair[1].record()
        pairs.append(pair)
    torch.cuda.synchronize(device)
    return statistics.median(a.elapsed_time(b) for a, b in pairs) / 1e3  # ms -> s


def _host_synced_copy_seconds(sizes: list[int], device: Any, copies: int) -> list[float]:
    """Per size, the median over `copies` of a host clock around one copy between two synchronizations:
    the copy plus the host's launch and wait, which is most of a small copy's time."""
    import statistics
    import time

    import torch

    seconds = []
    for host, on_gpu in (_copy_buffers(size, device) for size in sizes):
        runs = []
        for _ in range(copies):
            torch.cuda.synchronize(device)
            began = time.perf_counter()
            on_gpu.copy_(host, non_blocking=True)
            torch.cuda.synchronize(device)
            runs.append(time.perf_counter() - began)
        seconds.append(statistics.median(runs))
    return seconds
