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
    raise NotImplementedError("TODO(09.naive): not implemented yet")


def allreduce_gradients(module: nn.Module, group=None) -> None:
    """After backward: replace every `p.grad` by its mean over the ranks of `group`, with one blocking
    collective per parameter.

    Parameters whose `.grad` is None (frozen, or unused in this step) are skipped.
    """
    raise NotImplementedError("TODO(09.naive): not implemented yet")


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
    raise NotImplementedError("TODO(09.buckets): not implemented yet")


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
        raise NotImplementedError("TODO(09.overlap): not implemented yet")

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _on_grad_ready(self, index: int) -> None:
        """Hook: self.params[index].grad now holds this backward's gradient. Launch every bucket that may go.

        Contract: bucket b is launched only after buckets 0..b-1 (every rank must issue its all-reduces in the
        same order, whatever order its gradients happen to arrive in), and as soon as it may be (from the
        hook call that makes it launchable). Each launch is ONE asynchronous all-reduce over `self.group` of
        all the bucket's gradients in one flat buffer; it must not block backward.
        """
        raise NotImplementedError("TODO(09.overlap): not implemented yet")

    def finish_gradient_synchronization(self) -> None:
        """After backward, before the optimizer step: every p.grad in self.params becomes its mean over the
        ranks of `self.group`, and no all-reduce is left in flight.

        Raises RuntimeError if some bucket never completed (a parameter got no gradient). Leaves the
        object ready for the next backward.
        """
        raise NotImplementedError("TODO(09.overlap): not implemented yet")
