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

import torch
import torch.distributed as dist
from torch import nn

# ---------------------------------------------------------------------------------------------------------
# 09.naive: broadcast once, then one blocking all-reduce per parameter after backward


def broadcast_parameters(module: nn.Module, src: int = 0, group=None) -> None:
    """Overwrite every parameter and buffer of `module`, in place, with rank `src`'s values.

    DDP's constructor does this, so that all replicas start from the same state (PyTorch DDP design note).
    """
    # state_dict(keep_vars=True) lists every parameter and every registered buffer (running stats, ...)
    for tensor in module.state_dict(keep_vars=True).values():
        dist.broadcast(tensor.data, src=src, group=group)


def allreduce_gradients(module: nn.Module, group=None) -> None:
    """After backward: replace every `p.grad` by its mean over the ranks, one blocking all-reduce each.

    Parameters whose `.grad` is None (frozen, or unused in this step) are skipped.
    """
    world = dist.get_world_size(group)
    for p in module.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=group)
            p.grad.div_(world)


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
    buckets: list[list[int]] = []
    used = 0
    for i in reversed(range(len(nbytes))):
        if buckets and used + nbytes[i] <= cap_bytes:
            buckets[-1].append(i)
            used += nbytes[i]
        else:
            buckets.append([i])
            used = nbytes[i]
    return buckets


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
        self._missing = [len(b) for b in self.buckets]  # gradients each bucket still waits for
        self._next = 0  # the next bucket to launch
        self._inflight: list[tuple[int, torch.Tensor, object]] = []  # (bucket, flat buffer, handle)
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(lambda _p, i=i: self._on_grad_ready(i))

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _on_grad_ready(self, index: int) -> None:
        """Hook: self.params[index].grad is final. Launch each bucket that is now complete, in bucket order.

        Bucket b is launched only after buckets 0..b-1: every rank must issue its all-reduces in the same
        order, whatever order its gradients happen to arrive in. Each launch is ONE all-reduce of the
        bucket's gradients flattened into one buffer, with async_op=True, so that it does not block backward.
        """
        self._missing[self.bucket_of[index]] -= 1
        while self._next < len(self.buckets) and self._missing[self._next] == 0:
            b = self._next
            flat = torch.cat([self.params[i].grad.reshape(-1) for i in self.buckets[b]])
            handle = dist.all_reduce(flat, group=self.group, async_op=True)
            self._inflight.append((b, flat, handle))
            self._next += 1

    def finish_gradient_synchronization(self) -> None:
        """After backward, before the optimizer step: wait for every bucket, write the mean into each p.grad.

        Raises RuntimeError if some bucket never completed (a parameter got no gradient). Leaves the
        object ready for the next backward.
        """
        if self._next != len(self.buckets):
            raise RuntimeError(f"only {self._next} of {len(self.buckets)} buckets completed")
        for b, flat, handle in self._inflight:
            handle.wait()
            flat /= self.world_size
            offset = 0
            for i in self.buckets[b]:
                g = self.params[i].grad
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
        self._inflight = []
        self._next = 0
        self._missing = [len(b) for b in self.buckets]
