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
"""

from __future__ import annotations

from collections.abc import Iterator
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
