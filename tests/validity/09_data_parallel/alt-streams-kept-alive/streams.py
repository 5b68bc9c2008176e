"""Alternative-correct 09.streams: events, not wait_stream; buckets kept alive, not record_stream."""

from __future__ import annotations

from collections.abc import Callable

import torch

_SIDE: dict[int, torch.cuda.Stream] = {}  # device index -> this module's copy stream
_IN_FLIGHT: list[tuple[torch.cuda.Event, torch.Tensor]] = []  # buckets whose copies may still be running


def host_buffer_like(bucket: torch.Tensor) -> torch.Tensor:
    return torch.zeros(bucket.shape, dtype=bucket.dtype).pin_memory()


def start_copy_to_host(bucket: torch.Tensor, host: torch.Tensor) -> torch.cuda.Event:
    # Forget the buckets whose copies are over; the allocator may reuse their memory from now on.
    _IN_FLIGHT[:] = [(ev, t) for ev, t in _IN_FLIGHT if not ev.query()]
    index = bucket.device.index if bucket.device.index is not None else torch.cuda.current_device()
    if index not in _SIDE:
        _SIDE[index] = torch.cuda.Stream(device=bucket.device)
    copier = _SIDE[index]
    produced = torch.cuda.Event()
    produced.record(torch.cuda.current_stream(bucket.device))  # after the producer's queued kernels
    copier.wait_event(produced)
    with torch.cuda.stream(copier):
        host.copy_(bucket, non_blocking=True)
    copied = copier.record_event()
    _IN_FLIGHT.append((copied, bucket))  # the bucket lives until the copy has read it
    return copied


def gpu_times_ms(fn: Callable[[], object], repeats: int) -> list[float]:
    marks = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)
    ]
    torch.cuda.synchronize()
    for first, last in marks:  # queued back to back; each pair brackets one run on the current stream
        first.record()
        fn()
        last.record()
    torch.cuda.synchronize()
    return [first.elapsed_time(last) for first, last in marks]
