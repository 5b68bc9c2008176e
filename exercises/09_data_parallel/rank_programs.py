"""Trusted rank programs for exercise 09: build the model from the judge's weights, train, log what happens.

Each program trains `steps` SGD steps on this rank's slice of the batch with the student's synchronization,
and returns the parameters afterwards. `train_bucketed` also returns a log of the run, made by wrapping
`dist.all_reduce` and the handles it returns for the duration of the program:
  ["ready", i]            parameter i's gradient was accumulated (our own hook, registered before yours)
  ["launch", n, numel, async_op]   all-reduce number n of the step started, on a tensor of `numel` elements
  ["wait", n]             handle n was waited on
  ["backward_done"]       loss.backward() returned
  ["step"]                the optimizer step is about to run
Indices i refer to the parameters that require grad, in model.parameters() order (BucketedDDP.params).

09.streams (a GPU part) runs the student's streams.py against a compute stream these programs own: they
queue the producer and the matmuls on the current stream, time everything with their own CUDA events, and
return only counts and milliseconds (see "09.streams" below).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn.functional as F

from coursekit.toy_models import SGD, linear_chain


def _model(ctx: Any, weights: list[torch.Tensor], head_first: bool, frozen_first: bool) -> torch.nn.Module:
    model = linear_chain([w.to(ctx.device) for w in weights], head_first=head_first)
    if frozen_first:  # the first layer's weight and bias get no gradient
        for p in list(model.parameters())[:2]:
            p.requires_grad_(False)
    return model


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _my_group(ctx: Any, groups: list[list[int]] | None) -> Any:
    """None (the world), or the process group among `groups` that holds this rank. Every rank creates every
    group, in the same order, as torch.distributed requires."""
    if groups is None:
        return None
    mine = None
    for ranks in groups:
        group = dist.new_group(ranks)
        if ctx.rank in ranks:
            mine = group
    return mine


def train_naive(
    ctx: Any,
    *,
    weights: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    steps: int,
    lr: float,
    momentum: float,
    head_first: bool = False,
    frozen_first: bool = False,
    groups: list[list[int]] | None = None,
) -> dict[str, Any]:
    """broadcast_parameters, then `steps` x (backward, allreduce_gradients, SGD step); with `groups`, the
    gradients are averaged over this rank's group only."""
    ddp = ctx.submission("ddp")
    model = _model(ctx, weights, head_first, frozen_first)
    x, y = x.to(ctx.device), y.to(ctx.device)
    group = _my_group(ctx, groups)
    ddp.broadcast_parameters(model)
    after_broadcast = _params(model)
    opt = SGD([p for p in model.parameters() if p.requires_grad], lr=lr, momentum=momentum)
    grads: list[Any] = []
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        ddp.allreduce_gradients(model, group=group)
        grads = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
        opt.step()
    return {"after_broadcast": after_broadcast, "params": _params(model), "last_grads": grads}


class _Handle:
    """Stands in for the dist.Work that all_reduce returned; logs wait() and forwards everything else."""

    def __init__(self, work: Any, number: int, log: list[list[Any]]) -> None:
        self._work, self._number, self._log = work, number, log

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        self._log.append(["wait", self._number])
        return self._work.wait(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


@contextmanager
def _recording_all_reduce(log: list[list[Any]]) -> Iterator[list[int]]:
    """Wrap dist.all_reduce (already the harness's counting wrapper) to log launches and waits."""
    original = dist.all_reduce
    launched = [0]  # launches in the current step; the caller resets it

    def all_reduce(tensor: torch.Tensor, *args: Any, async_op: bool = False, **kwargs: Any) -> Any:
        number = launched[0]
        launched[0] += 1
        log.append(["launch", number, tensor.numel(), bool(async_op)])
        work = original(tensor, *args, async_op=async_op, **kwargs)
        return _Handle(work, number, log) if work is not None else None

    dist.all_reduce = c10d.all_reduce = all_reduce
    try:
        yield launched
    finally:
        dist.all_reduce = c10d.all_reduce = original


def train_bucketed(
    ctx: Any,
    *,
    weights: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    steps: int,
    lr: float,
    momentum: float,
    cap_bytes: int,
    head_first: bool = False,
    frozen_first: bool = False,
    groups: list[list[int]] | None = None,
) -> dict[str, Any]:
    """BucketedDDP(model, cap_bytes), then `steps` x (backward, finish_gradient_synchronization, SGD step);
    with `groups`, BucketedDDP gets this rank's group."""
    ddp = ctx.submission("ddp")
    model = _model(ctx, weights, head_first, frozen_first)
    x, y = x.to(ctx.device), y.to(ctx.device)
    group = _my_group(ctx, groups)
    log: list[list[Any]] = []
    for i, p in enumerate([p for p in model.parameters() if p.requires_grad]):
        p.register_post_accumulate_grad_hook(lambda p, i=i: log.append(["ready", i]))
    logs = []
    with _recording_all_reduce(log) as launched:
        wrapped = ddp.BucketedDDP(model, bucket_cap_bytes=cap_bytes, group=group)
        opt = SGD([p for p in model.parameters() if p.requires_grad], lr=lr, momentum=momentum)
        for _ in range(steps):
            opt.zero_grad()
            log.clear()
            launched[0] = 0
            F.mse_loss(wrapped(x), y).backward()
            log.append(["backward_done"])
            wrapped.finish_gradient_synchronization()
            log.append(["step"])
            logs.append(list(log))
            opt.step()
    buckets = wrapped.buckets
    if isinstance(buckets, list) and all(isinstance(b, list) for b in buckets):
        buckets = [[int(i) for i in b] for b in buckets]  # plain ints for the judge
    else:
        buckets = repr(buckets)
    return {"params": _params(model), "logs": logs, "buckets": buckets}


def broadcast_state(
    ctx: Any, *, weights: list[torch.Tensor], buffers: list[torch.Tensor], src: int = 0
) -> dict[str, Any]:
    """broadcast_parameters on a linear chain followed by a BatchNorm1d whose buffers are set from `buffers`
    (running_mean, running_var, num_batches_tracked): different on every rank before the call."""
    ddp = ctx.submission("ddp")
    chain = linear_chain([w.to(ctx.device) for w in weights])
    norm = torch.nn.BatchNorm1d(weights[-1].shape[0], dtype=weights[-1].dtype, device=ctx.device)
    with torch.no_grad():
        for buf, value in zip(norm.buffers(), buffers, strict=True):
            buf.copy_(value)
    model = torch.nn.Sequential(chain, norm)
    before = [*model.parameters(), *model.buffers()]
    ddp.broadcast_parameters(model, src=src)
    after = [*model.parameters(), *model.buffers()]
    return {
        "params": _params(model),
        "buffers": [b.detach().clone() for b in model.buffers()],
        "same_tensors": len(before) == len(after) and all(a is b for a, b in zip(before, after, strict=True)),
    }


def bucketed_missing_gradient(
    ctx: Any, *, weights: list[torch.Tensor], x: torch.Tensor, cap_bytes: int
) -> dict[str, Any]:
    """BucketedDDP over a chain plus one extra Linear that forward never uses, so its parameters get no
    gradient; one backward, then finish_gradient_synchronization. Reports the exception it raises, if any."""
    ddp = ctx.submission("ddp")
    chain = linear_chain([w.to(ctx.device) for w in weights])
    unused = torch.nn.Linear(2, 2, dtype=weights[0].dtype, device=ctx.device)
    model = torch.nn.ModuleDict({"unused": unused, "chain": chain})  # unused registered first: last bucket
    x = x.to(ctx.device)
    wrapped = ddp.BucketedDDP(model, bucket_cap_bytes=cap_bytes)
    wrapped.module["chain"](x).square().mean().backward()
    try:
        wrapped.finish_gradient_synchronization()
    except Exception as exc:  # the test wants to see which one
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"raised": None, "message": ""}


# ---------------------------------------------------------------------------------------------------------
# 09.streams (device: gpu): the student's side-stream copy against a compute stream these programs own.
# The compute stream is the current stream; the matmuls on it stand in for the rest of backward, the copy of
# the bucket to the host for its all-reduce. Every figure is a CUDA-event time in ms taken here, never by
# the student's code, except in event_timer, whose point is to compare the student's timer with ours.

MATMUL = 4096  # (4096 x 4096) @ (4096 x 4096) in fp32: 137 GFLOP, a few ms on an H100/H200
STALE, SENTINEL, NEXT = 1000.0, -1000.0, 500.0  # outside the pattern's -125..125: a wrong byte shows


def matmul_reps(copy_ms: float, matmul_ms: float, most: int = 64) -> int:
    """How many matmuls the compute stream runs per step so that they last about as long as one copy of
    the bucket (at least 1, at most `most`): the overlap is then measurable on any GPU, whatever its ratio
    of copy bandwidth to FLOPs."""
    if matmul_ms <= 0:
        return most
    return max(1, min(most, round(copy_ms / matmul_ms)))


def _time_ms(fn: Callable[[], object]) -> float:
    """GPU time of one fn() in ms, by CUDA events on the current stream, from an idle device."""
    torch.cuda.synchronize()
    begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    fn()
    finish.record()
    finish.synchronize()
    return begin.elapsed_time(finish)


def _pattern(shape: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The gradient values backward produces: integers -125..125, exact in fp32, fp16 and bf16."""
    n = math.prod(shape)
    return ((torch.arange(n, device=device) % 251) - 125).to(dtype).reshape(shape)


class _Compute:
    """The compute stream's work: `reps` matmuls into one output, `reps` calibrated against one copy."""

    def __init__(self, device: torch.device, seed: int) -> None:
        g = torch.Generator(device=device).manual_seed(seed)
        self.a = torch.randn(MATMUL, MATMUL, device=device, generator=g)
        self.b = torch.randn(MATMUL, MATMUL, device=device, generator=g)
        self.out = torch.empty(MATMUL, MATMUL, device=device)
        self.reps = 1
        for _ in range(3):  # warm-up: cuBLAS handle, workspace and kernel choice on first use
            self.run()
        torch.cuda.synchronize()
        self.expected = self.out.clone()  # every run writes the same product: the serial result

    def run(self) -> None:
        for _ in range(self.reps):
            torch.matmul(self.a, self.b, out=self.out)

    def calibrate(self, copy: Callable[[], object]) -> None:
        for _ in range(3):  # warm-up of the copy path
            copy()
        copy_ms = statistics.median(_time_ms(copy) for _ in range(3))
        one_ms = statistics.median(_time_ms(self.run) for _ in range(3))  # reps is still 1
        self.reps = matmul_reps(copy_ms, one_ms)

    def matches(self) -> bool:
        # Same kernel, same inputs, same stream: the same bits; the tolerance only allows cuBLAS another
        # split of the reduction. A wrong product here would be garbage, far outside it.
        return bool(torch.allclose(self.out, self.expected, rtol=1e-4, atol=1e-3))


def _describe_host(host: Any, shape: list[int], dtype: torch.dtype) -> dict[str, Any]:
    """What host_buffer_like returned, as plain data; `ok` when the copy can go into it at all."""
    if not isinstance(host, torch.Tensor):
        return {"ok": False, "what": f"a {type(host).__name__}, not a torch.Tensor"}
    info = {
        "ok": host.device.type == "cpu" and list(host.shape) == list(shape) and host.dtype == dtype,
        "what": f"a {host.device.type} tensor of shape {list(host.shape)} and dtype {host.dtype}",
        "pinned": bool(host.device.type == "cpu" and host.is_pinned()),
        "contiguous": host.is_contiguous(),
    }
    return info


TAIL = 64  # elements at the end of the host buffer, read the moment the event says the copy is done


def _read_after_event(done: Any, host: torch.Tensor, want: torch.Tensor) -> dict[str, Any]:
    """Wait on the student's event, read host at once (before anything else waits for the GPU), compare.

    The copy engine writes the buffer front to back, and the host reads a large buffer more slowly than it
    arrives, so a full read right after an early event could still see every byte. The last TAIL elements,
    read first, cannot: an event that completes before the copy leaves them unwritten for milliseconds."""
    if not isinstance(done, torch.cuda.Event):
        torch.cuda.synchronize()
        return {"event": f"a {type(done).__name__}, not a torch.cuda.Event"}
    done.synchronize()
    flat_host = host.reshape(-1)  # a view (host_buffer_like's tensor is contiguous), so nothing is read yet
    tail = flat_host[-TAIL:].clone()  # what a consumer that trusts the event sees at once
    got = flat_host.clone()
    flat_want = want.reshape(-1)
    torch.cuda.synchronize()
    got[-TAIL:] = tail
    wrong = got != flat_want
    first = int(wrong.nonzero()[0, 0]) if bool(wrong.any()) else -1
    if first >= 0 and bool((tail != flat_want[-TAIL:]).any()):
        first = len(flat_want) - TAIL + int((tail != flat_want[-TAIL:]).nonzero()[0, 0])  # the telling one
    return {
        "event": None,
        "numel": want.numel(),
        "wrong": int(wrong.sum()),
        "first_wrong": first,
        "got": float(got[first]) if first >= 0 else None,
        "want": float(flat_want[first]) if first >= 0 else None,
    }


def _race_round(
    sub: Any, compute: _Compute, bucket: torch.Tensor, host: torch.Tensor, want: torch.Tensor
) -> dict:
    """The producer is still running when the copy is queued: matmuls, THEN the gradient lands in bucket.
    A copy that does not wait for it reads the stale values."""
    want_cpu = want.cpu()  # now: a .cpu() after the queueing below would wait for the compute stream
    bucket.fill_(STALE)
    host.fill_(SENTINEL)
    torch.cuda.synchronize()
    compute.run()  # backward still computing this gradient (as long as one copy takes)
    bucket.copy_(want)  # ... and writing it
    done = sub.start_copy_to_host(bucket, host)
    compute.run()  # the rest of backward, meant to run during the copy
    result = _read_after_event(done, host, want_cpu)
    result["bucket_intact"] = bool(torch.equal(bucket.cpu(), want_cpu))
    result["matmul_ok"] = compute.matches()
    return result


def copy_round(ctx: Any, *, shape: list[int], dtype: str, seed: int, reuse: bool = False) -> dict[str, Any]:
    """One checked copy of a bucket of `shape` and `dtype` (a torch dtype's name) behind the matmuls.

    reuse=False: the producer is still running when start_copy_to_host is called (see _race_round).
    reuse=True: the bucket is fresh memory from the compute stream's pool; right after the call the caller
    drops it, and the next bucket (same size) is allocated and filled on the compute stream.
    """
    sub = ctx.submission("streams")
    dt = getattr(torch, dtype)
    want = _pattern(shape, dt, ctx.device)
    compute = _Compute(ctx.device, seed)
    probe = torch.empty(shape, dtype=dt, device=ctx.device)
    host = sub.host_buffer_like(probe)
    info = _describe_host(host, shape, dt)
    if not info["ok"]:
        return {"host": info}
    compute.calibrate(functools.partial(host.copy_, probe, non_blocking=True))
    if not reuse:
        return {"host": info, **_race_round(sub, compute, probe, host, want)}
    del probe
    want_cpu = want.cpu()  # before the queueing below: a .cpu() there would wait for the compute stream
    host.fill_(SENTINEL)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # no free block of this size but the one the bucket is about to give back
    bucket = want.clone()  # the gradient, produced on the compute stream into fresh memory
    done = sub.start_copy_to_host(bucket, host)
    del bucket  # the caller's last reference: the allocator may now recycle the block
    following = torch.empty(shape, dtype=dt, device=ctx.device)  # the next bucket, same size
    following.fill_(NEXT)  # ... written on the compute stream at once
    compute.run()
    result = _read_after_event(done, host, want_cpu)
    result["matmul_ok"] = compute.matches()
    return {"host": info, **result}


def copy_overlap(ctx: Any, *, numel: int, repeats: int, seed: int) -> dict[str, Any]:
    """Paired timings of one training step, serial and overlapped, interleaved, `repeats` times each:
      serial:     producer; copy on the compute stream into a pinned buffer of ours; matmuls
      overlapped: producer; the student's start_copy_to_host; matmuls; the compute stream waits on the event
      copy, matmul: each alone, for the denominator of the overlap fraction
    plus one checked round (_race_round) that gates the timings on correctness."""
    sub = ctx.submission("streams")
    want = _pattern([numel], torch.float32, ctx.device)
    compute = _Compute(ctx.device, seed)
    bucket = torch.empty(numel, device=ctx.device)
    host = sub.host_buffer_like(bucket)
    info = _describe_host(host, [numel], torch.float32)
    if not info["ok"]:
        return {"host": info}
    ours = torch.empty(numel, pin_memory=True)
    current = torch.cuda.current_stream(ctx.device)
    copy = lambda: ours.copy_(bucket, non_blocking=True)  # noqa: E731
    produce = lambda: bucket.copy_(want)  # noqa: E731
    compute.calibrate(copy)
    check = _race_round(sub, compute, bucket, host, want)

    def serial() -> None:
        produce()
        copy()
        compute.run()

    def overlapped() -> None:
        produce()
        done = sub.start_copy_to_host(bucket, host)
        compute.run()
        current.wait_event(done)  # the step ends when both the matmuls and the copy have

    figures: dict[str, list[float]] = {"serial_ms": [], "overlapped_ms": [], "copy_ms": [], "matmul_ms": []}
    if check.get("event") is None:
        for _ in range(2):  # warm-up of both paths
            _time_ms(serial), _time_ms(overlapped)
        for i in range(repeats):
            pair = [("serial_ms", serial), ("overlapped_ms", overlapped)]
            for key, fn in pair if i % 2 == 0 else pair[::-1]:  # neither always runs first
                figures[key].append(_time_ms(fn))
            figures["copy_ms"].append(_time_ms(copy))
            figures["matmul_ms"].append(_time_ms(compute.run))
    return {"host": info, "reps": compute.reps, "check": check, **figures}


def _floats(value: Any, n: int) -> list[float] | str:
    """The student's timings as n plain floats, or what was wrong with them."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if not isinstance(value, list | tuple) or len(value) != n:
        return f"{type(value).__name__} {value!r:.80}, not a list of {n} floats"
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        return f"a list holding {sorted({type(x).__name__ for x in value})}, not floats"
    return [float(x) for x in value]


def event_timer(
    ctx: Any, *, numel: int, rounds: int, per_round: int, seed: int, long_reps: int = 1
) -> dict[str, Any]:
    """The student's gpu_times_ms and ours time the same serial step (copy + matmuls, our code alone),
    in alternating rounds of `per_round` runs each.

    long_reps > 1: the runs are not alike. Within a round, the 2nd, 4th, ... call of the step runs the
    matmuls `long_reps` times over, so the k-th figure of a round must be that run's own time: a timer that
    spreads one total evenly over the runs shows. Then "calls" counts how often gpu_times_ms called the
    step (it must be `per_round`: the k-th call is the k-th run)."""
    sub = ctx.submission("streams")
    want = _pattern([numel], torch.float32, ctx.device)
    compute = _Compute(ctx.device, seed)
    ours = torch.empty(numel, pin_memory=True)
    copy = lambda: ours.copy_(want, non_blocking=True)  # noqa: E731
    compute.calibrate(copy)
    calls = [0]  # calls of the step in this round so far

    def step() -> None:
        copy()
        for _ in range(long_reps if calls[0] % 2 else 1):
            compute.run()
        calls[0] += 1

    trusted: list[float] = []
    student: list[float] = []
    for _ in range(rounds):
        calls[0] = 0
        trusted += [_time_ms(step) for _ in range(per_round)]
        calls[0] = 0
        got = _floats(sub.gpu_times_ms(step, per_round), per_round)
        if isinstance(got, str):
            return {"problem": got}
        if long_reps > 1 and calls[0] != per_round:
            return {"problem": f"{calls[0]} runs of fn for repeats={per_round}: run it exactly repeats times"}
        student += got
    torch.cuda.synchronize()
    return {"problem": None, "trusted_ms": trusted, "student_ms": student}
