"""Data parallelism: each rank holds the whole model, trains on its slice of the batch, averages gradients.

With equal local batches, the mean of the R local mean-gradients IS the full-batch gradient, so R ranks
taking the same optimizer step stay identical to one process training on the whole batch.
Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020
(https://arxiv.org/abs/2006.15704), Sec. 3.2: first naively (one blocking all-reduce per parameter after
backward), then with gradient buckets whose all-reduces start asynchronously *during* backward.
Check: `grade exercise 09`.
Shapes: R = world size; a bucket's flat buffer holds the gradients of its parameters back to back.
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist
from torch import nn

# ---------------------------------------------------------------------------------------------------------
# 09.naive: broadcast once, then one blocking all-reduce per parameter after backward


def broadcast_parameters(module: nn.Module, src: int = 0, group=None) -> None:
    """Overwrite every parameter and buffer of `module`, in place, with rank `src`'s values.

    DDP's constructor does this, so that all replicas start from the same state (PyTorch DDP design note).
    """
    for t in itertools.chain(module.parameters(), module.buffers()):
        dist.broadcast(t.data, src, group=group)


def allreduce_gradients(module: nn.Module, group=None) -> None:
    """After backward: replace every `p.grad` by its mean over the ranks, one blocking all-reduce each.

    Parameters whose `.grad` is None (frozen, or unused in this step) are skipped.
    """
    scale = 1.0 / dist.get_world_size(group)
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    for g in grads:
        g.mul_(scale)  # pre-divide: the sum of the scaled gradients is the mean
        dist.all_reduce(g, group=group)


# ---------------------------------------------------------------------------------------------------------
# 09.buckets: which gradients travel together


def assign_buckets(nbytes: list[int], cap_bytes: int) -> list[list[int]]:
    """Group parameters into gradient buckets of at most `cap_bytes` bytes each, last parameter first.

    nbytes[i] is the gradient size in bytes of parameter i, in registration order (model.parameters()).
    Walk i = n-1, n-2, ..., 0: backward produces gradients in roughly that order. Parameter i joins the
    current bucket if the bucket's total stays <= cap_bytes; otherwise it opens a new bucket. A parameter
    bigger than the cap therefore sits alone in its own bucket.
    Returns the buckets in launch order (bucket 0 first), each listing its parameter indices in the order
    they joined (descending). Example: nbytes [8, 8, 16, 4], cap 20 -> [[3, 2], [1, 0]].
    """
    order = list(range(len(nbytes) - 1, -1, -1))
    out: list[list[int]] = []
    start = 0
    while start < len(order):
        end, total = start + 1, nbytes[order[start]]
        while end < len(order) and total + nbytes[order[end]] <= cap_bytes:
            total += nbytes[order[end]]
            end += 1
        out.append(order[start:end])
        start = end
    return out


# ---------------------------------------------------------------------------------------------------------
# 09.overlap: bucketed, asynchronous all-reduce driven by gradient hooks


class BucketedDDP(nn.Module):
    """Wraps `module`; during backward, each full bucket starts one asynchronous all-reduce.

        ddp = BucketedDDP(model, bucket_cap_bytes=...)   # replicas must already be equal
        loss_fn(ddp(x), y).backward()                    # hooks launch the bucket all-reduces as grads land
        ddp.finish_gradient_synchronization()            # wait for them; p.grad becomes the mean
        optimizer.step()

    Communication of the buckets that are done overlaps with the backward computation of the rest.
    Every parameter that requires grad must get a gradient in every backward.
    """

    def __init__(self, module: nn.Module, bucket_cap_bytes: int = 25 * 2**20, group=None) -> None:
        super().__init__()
        self.module, self.group = module, group
        self.world_size = dist.get_world_size(group)
        # The parameters to synchronize, in registration order; bucket entries are indices into this list.
        self.params = [p for p in module.parameters() if p.requires_grad]
        # 25 MiB is DDP's default bucket_cap_mb (torch/nn/parallel/distributed.py, _DEFAULT_BUCKET_CAP_MB).
        self.buckets = assign_buckets([p.numel() * p.element_size() for p in self.params], bucket_cap_bytes)
        self.bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}  # param -> bucket
        self._ready: list[set[int]] = [set() for _ in self.buckets]
        self._launched: list[tuple[torch.Tensor, object]] = []
        self._hooks = [
            p.register_post_accumulate_grad_hook(self._hook_for(i)) for i, p in enumerate(self.params)
        ]

    def _hook_for(self, index: int):
        def hook(_param: torch.Tensor) -> None:
            self._on_grad_ready(index)

        return hook

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _on_grad_ready(self, index: int) -> None:
        """Hook: self.params[index].grad is final. Launch each bucket that is now complete, in bucket order.

        Bucket b is launched only after buckets 0..b-1: every rank must issue its all-reduces in the same
        order, whatever order its gradients happen to arrive in. Each launch is ONE all-reduce of the
        bucket's gradients flattened into one buffer, with async_op=True, so that it does not block backward.
        """
        self._ready[self.bucket_of[index]].add(index)
        for b in range(len(self._launched), len(self.buckets)):
            if len(self._ready[b]) < len(self.buckets[b]):
                break  # bucket b is not complete: later buckets must wait for it
            grads = [self.params[i].grad for i in self.buckets[b]]
            flat = torch._utils._flatten_dense_tensors(grads) / self.world_size  # pre-scaled copy
            self._launched.append((flat, dist.all_reduce(flat, group=self.group, async_op=True)))

    def finish_gradient_synchronization(self) -> None:
        """After backward, before the optimizer step: wait for every bucket, write the mean into each p.grad.

        Raises RuntimeError if some bucket never completed (a parameter got no gradient). Leaves the
        object ready for the next backward.
        """
        if len(self._launched) < len(self.buckets):
            raise RuntimeError("some bucket never completed: a parameter got no gradient in this backward")
        for (flat, handle), bucket in zip(self._launched, self.buckets, strict=True):
            handle.wait()
            grads = [self.params[i].grad for i in bucket]
            for g, mean in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads), strict=True):
                g.copy_(mean)
        self._launched = []
        self._ready = [set() for _ in self.buckets]
