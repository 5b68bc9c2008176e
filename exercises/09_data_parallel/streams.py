"""Overlap on one GPU: a gradient bucket leaves the device while the compute stream keeps multiplying.

DDP hides a bucket's all-reduce behind the rest of backward because NCCL runs it on a stream of its own
(Li et al. 2020, Sec. 3.2; ProcessGroupNCCL). Here a device-to-host copy of the bucket stands in for that
communication: it runs on the GPU's copy engine, not its SMs, so it can proceed while a matmul occupies them,
but only if the two sit on different streams, ordered by events where they share data.
Check: `grade exercise 09 --device cuda` (on a machine without a GPU this part is reported blocked).
Shapes: a bucket is any contiguous CUDA tensor; its host copy has the same shape and dtype. Times in ms.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# ---------------------------------------------------------------------------------------------------------
# 09.streams: the copy on a side stream, and CUDA-event timing


def host_buffer_like(bucket: torch.Tensor) -> torch.Tensor:
    """A CPU tensor of `bucket`'s shape and dtype that a device-to-host copy can fill asynchronously: a copy
    into it, once queued, leaves the host thread free to queue more GPU work at once.

    Allocated once, at setup; its contents are unspecified.
    """
    raise NotImplementedError("TODO(09.streams): not implemented yet")


def start_copy_to_host(bucket: torch.Tensor, host: torch.Tensor) -> torch.cuda.Event:
    """Queue the copy bucket -> host and return at once, without waiting for the GPU.

    bucket: a contiguous CUDA tensor whose values are written by work the caller has ALREADY queued on the
    current stream (the backward that produced the gradients), and may not have run yet.
    host: from host_buffer_like(bucket).
    Returns a torch.cuda.Event: once it has completed (event.synchronize(), or a stream's wait_event), host
    holds the values the queued work left in bucket, bit for bit.
    Work the caller queues on the current stream after this call must be able to run WHILE the copy runs;
    that is the point. The caller may also drop its last reference to `bucket` right after the call, and its
    later work on the current stream allocates new tensors of the same size (the next bucket); neither may
    change what the copy reads. The caller does not write to bucket or read host before the event completes.
    """
    raise NotImplementedError("TODO(09.streams): not implemented yet")


def gpu_times_ms(fn: Callable[[], object], repeats: int) -> list[float]:
    """Run fn() `repeats` times; return the GPU time of each run in milliseconds, measured with CUDA events
    on the current stream (fn queues its work there, or joins whatever it queued elsewhere back into it).

    One float per run, in run order. Each figure covers the GPU work of that run alone, from its first
    kernel or copy to its last, and only work that has finished counts.
    """
    raise NotImplementedError("TODO(09.streams): not implemented yet")
