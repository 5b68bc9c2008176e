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
    ### BEGIN SOLUTION 09.streams
    # Page-locked memory: the copy engine DMAs straight into it. Into pageable memory the driver stages the
    # copy and cudaMemcpyAsync returns only when it is done (CUDA runtime, "API synchronization behavior").
    return torch.empty(bucket.shape, dtype=bucket.dtype, device="cpu", pin_memory=True)
    ### END SOLUTION


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
    ### BEGIN SOLUTION 09.streams
    compute = torch.cuda.current_stream(bucket.device)
    side = torch.cuda.Stream(device=bucket.device)  # from PyTorch's pool; non-blocking w.r.t. stream 0
    # Producer -> copy: the side stream starts only after everything queued on compute so far, which
    # includes the kernels that write bucket. Without it the copy races the producer and reads old bytes.
    side.wait_stream(compute)
    with torch.cuda.stream(side):
        host.copy_(bucket, non_blocking=True)  # D2H on the copy engine, queued on side
    # Lifetime: bucket's memory belongs to compute's pool. If the caller frees it, the caching allocator
    # would hand it to the next tensor on compute at once, while side is still reading it. record_stream
    # makes the allocator wait for side's work queued so far before reusing the block.
    bucket.record_stream(side)
    # Copy -> consumer: an event recorded on side after the copy; whoever reads host waits on it.
    done = torch.cuda.Event()
    done.record(side)
    return done
    ### END SOLUTION


def gpu_times_ms(fn: Callable[[], object], repeats: int) -> list[float]:
    """Run fn() `repeats` times; return the GPU time of each run in milliseconds, measured with CUDA events
    on the current stream (fn queues its work there, or joins whatever it queued elsewhere back into it).

    One float per run, in run order. Each figure covers the GPU work of that run alone, from its first
    kernel or copy to its last, and only work that has finished counts.
    """
    ### BEGIN SOLUTION 09.streams
    times: list[float] = []
    for _ in range(repeats):  # one pair of events per run
        start = torch.cuda.Event(enable_timing=True)  # timing is off by default: elapsed_time would raise
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()  # nothing earlier still running inside this run's window
        start.record()
        fn()  # queues work and returns at once: host time here says nothing about the GPU
        end.record()
        end.synchronize()  # the GPU has reached `end`; only now is elapsed_time defined
        times.append(start.elapsed_time(end))  # ms between the two events, on the GPU's clock
    return times  # ms, in run order
    ### END SOLUTION
