"""Data parallelism (alternative-correct case)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


def broadcast_parameters(module: nn.Module, src: int = 0, group=None) -> None:
    tensors = [p for _, p in module.named_parameters()] + [b for _, b in module.named_buffers()]
    for t in tensors:
        incoming = t.detach().clone()
        dist.broadcast(incoming, src=src, group=group)
        with torch.no_grad():
            t.copy_(incoming)


def allreduce_gradients(module: nn.Module, group=None) -> None:
    size = dist.get_world_size(group)
    for p in module.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=group, async_op=True).wait()
            p.grad.div_(size)


def assign_buckets(nbytes: list[int], cap_bytes: int) -> list[list[int]]:
    order = list(range(len(nbytes)))[::-1]
    buckets: list[list[int]] = []
    k = 0
    while k < len(order):
        bucket, used = [order[k]], nbytes[order[k]]
        k += 1
        while k < len(order) and used + nbytes[order[k]] <= cap_bytes:
            used += nbytes[order[k]]
            bucket.append(order[k])
            k += 1
        buckets.append(bucket)
    return buckets


class BucketedDDP(nn.Module):
    def __init__(self, module: nn.Module, bucket_cap_bytes: int = 25 * 2**20, group=None) -> None:
        super().__init__()
        self.module, self.group = module, group
        self.world_size = dist.get_world_size(group)
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.buckets = assign_buckets([p.numel() * p.element_size() for p in self.params], bucket_cap_bytes)
        self.bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}
        self._reset()
        for index, param in enumerate(self.params):
            param.register_post_accumulate_grad_hook(self._hook_for(index))

    def _hook_for(self, index: int):
        def hook(_param: torch.Tensor) -> None:
            self._on_grad_ready(index)

        return hook

    def _reset(self) -> None:
        self._missing = [set(bucket) for bucket in self.buckets]
        self._launched: list[tuple[object, torch.Tensor]] = []

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _on_grad_ready(self, index: int) -> None:
        self._missing[self.bucket_of[index]].discard(index)
        while len(self._launched) < len(self.buckets) and not self._missing[len(self._launched)]:
            bucket = self.buckets[len(self._launched)]
            buffer = torch.cat([self.params[i].grad.flatten() for i in bucket])
            work = dist.all_reduce(buffer, group=self.group, async_op=True)
            self._launched.append((work, buffer))

    def finish_gradient_synchronization(self) -> None:
        if len(self._launched) < len(self.buckets):
            raise RuntimeError("a bucket never completed: some parameter received no gradient")
        for bucket, (work, buffer) in zip(self.buckets, self._launched, strict=True):
            work.wait()
            pieces = torch.split(buffer, [self.params[i].numel() for i in bucket])
            for i, piece in zip(bucket, pieces, strict=True):
                grad = self.params[i].grad
                grad.copy_(piece.view_as(grad)).div_(self.world_size)
        self._reset()
