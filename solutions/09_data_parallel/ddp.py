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
    ### BEGIN SOLUTION 09.naive
    for t in itertools.chain(module.parameters(), module.buffers()):
        # .data: an in-place write to a leaf that requires grad is not something autograd should record
        dist.broadcast(t.data, src=src, group=group)  # src sends, everyone else receives into t
    ### END SOLUTION


def allreduce_gradients(module: nn.Module, group=None) -> None:
    """After backward: replace every `p.grad` by its mean over the ranks of `group`, with one blocking
    collective per parameter.

    Parameters whose `.grad` is None (frozen, or unused in this step) are skipped.
    """
    ### BEGIN SOLUTION 09.naive
    world = dist.get_world_size(group)
    for p in module.parameters():
        if p.grad is None:  # nothing to average; every rank skips the same ones
            continue
        # Sum, then divide: gloo has no ReduceOp.AVG (NCCL does). One collective per parameter: simple,
        # but for a model with hundreds of small tensors that is hundreds of latency-bound messages.
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=group)
        p.grad /= world
    ### END SOLUTION


# ---------------------------------------------------------------------------------------------------------
# 09.buckets: which gradients travel together


def assign_buckets(nbytes: list[int], cap_bytes: int) -> list[list[int]]:
    """Group parameters into gradient buckets, in the order backward can complete them.

    nbytes[i] is the gradient size in bytes of parameter i, in registration order (model.parameters()).
    Returns a list of buckets in launch order (bucket 0 first), each a list of parameter indices, such that:
    every index is in exactly one bucket; each bucket holds consecutive indices, listed in the order
    backward produces their gradients (the README: roughly the reverse of registration), and bucket 0 is the
    one backward completes first; a bucket's bytes stay <= cap_bytes, except a bucket of one parameter that
    alone is bigger than the cap; and a bucket is closed only when the next parameter would not fit in it.
    Example: nbytes [8, 8, 16, 4], cap 20 -> [[3, 2], [1, 0]].
    """
    ### BEGIN SOLUTION 09.buckets
    buckets: list[list[int]] = []
    size = 0  # bytes in the open bucket
    for i in reversed(range(len(nbytes))):
        if not buckets or size + nbytes[i] > cap_bytes:
            buckets.append([])  # open a new bucket (the first one, or the old one is full)
            size = 0
        buckets[-1].append(i)
        size += nbytes[i]
    return buckets
    ### END SOLUTION


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
        # Yours: whatever state your hooks need, and the hooks themselves (see the README, "Overlap").
        ### BEGIN SOLUTION 09.overlap
        self._pending = [len(bucket) for bucket in self.buckets]  # gradients each bucket still waits for
        self._next = 0  # the next bucket to launch
        self._inflight: list[tuple[dist.Work, torch.Tensor]] = []  # (handle, flat buffer), bucket order
        for i, p in enumerate(self.params):
            # Fires once p.grad holds this backward's gradient (after accumulation), not before.
            p.register_post_accumulate_grad_hook(lambda p, i=i: self._on_grad_ready(i))
        ### END SOLUTION

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _on_grad_ready(self, index: int) -> None:
        """Hook: self.params[index].grad now holds this backward's gradient. Launch every bucket that may go.

        Contract: bucket b is launched only after buckets 0..b-1 (every rank must issue its all-reduces in the
        same order, whatever order its gradients happen to arrive in), and as soon as it may be (from the
        hook call that makes it launchable). Each launch is ONE asynchronous all-reduce over `self.group` of
        all the bucket's gradients in one flat buffer; it must not block backward.
        """
        ### BEGIN SOLUTION 09.overlap
        self._pending[self.bucket_of[index]] -= 1
        # Launch in bucket-index order, not ready order (PyTorch DDP design note): a rank that launched
        # bucket 1 before bucket 0 would pair its all-reduce with another rank's bucket 0, or hang.
        while self._next < len(self.buckets) and self._pending[self._next] == 0:
            bucket = self.buckets[self._next]
            flat = torch.cat([self.params[i].grad.reshape(-1) for i in bucket])  # (numel of the bucket,)
            # async_op=True returns a handle at once; the sum travels while backward computes the rest.
            handle = dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group, async_op=True)
            self._inflight.append((handle, flat))
            self._next += 1
        ### END SOLUTION

    def finish_gradient_synchronization(self) -> None:
        """After backward, before the optimizer step: every p.grad in self.params becomes its mean over the
        ranks of `self.group`, and no all-reduce is left in flight.

        Raises RuntimeError if some bucket never completed (a parameter got no gradient). Leaves the
        object ready for the next backward.
        """
        ### BEGIN SOLUTION 09.overlap
        if self._next != len(self.buckets):
            raise RuntimeError(f"bucket {self._next} never completed: a parameter got no gradient")
        for bucket, (handle, flat) in zip(self.buckets, self._inflight, strict=True):
            handle.wait()  # flat holds the sum only from here on
            flat /= self.world_size  # sum -> mean
            offset = 0
            for i in bucket:  # unflatten: same order as the cat above
                grad = self.params[i].grad
                grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
                offset += grad.numel()
        # Reset for the next backward.
        self._pending = [len(bucket) for bucket in self.buckets]
        self._next, self._inflight = 0, []
        ### END SOLUTION
