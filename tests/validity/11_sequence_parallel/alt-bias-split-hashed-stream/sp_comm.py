"""Sequence-parallel regions and the all-gather column linear (alternative-correct case)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_gather_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    world = dist.get_world_size(group)
    x = x.contiguous()
    gathered = torch.empty((world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x, group=group)
    return gathered


def reduce_scatter_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    world = dist.get_world_size(group)
    n = x.shape[0]
    if n % world != 0:
        raise ValueError(f"cannot split {n} tokens evenly over {world} ranks")
    mine = torch.empty((n // world, *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(mine, x.contiguous(), op=dist.ReduceOp.SUM, group=group)
    return mine


class GatherFromSequenceParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return all_gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        # every rank used every token: my tokens' gradient is the sum over ranks, and only I need it
        return reduce_scatter_seq(grad, ctx.group), None


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return reduce_scatter_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        # my whole partial sum fed every output token: I need all ranks' output gradients
        return all_gather_seq(grad, ctx.group), None


def gather_from_sequence_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    return GatherFromSequenceParallel.apply(x, group)


def reduce_scatter_to_sequence_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    return ReduceScatterToSequenceParallel.apply(x, group)


class AllGatherColumnLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, group):
        ctx.group = group
        ctx.save_for_backward(x, weight)
        full = all_gather_seq(x, group)
        return torch.einsum("sbh,oh->sbo", full, weight) + bias

    @staticmethod
    def backward(ctx, grad_y):
        shard, weight = ctx.saved_tensors
        full = all_gather_seq(shard, ctx.group)
        grad_full = torch.einsum("sbo,oh->sbh", grad_y, weight)
        grad_shard = reduce_scatter_seq(grad_full, ctx.group)
        grad_w = torch.tensordot(grad_y, full, dims=([0, 1], [0, 1]))
        grad_b = grad_y.sum(dim=(0, 1))
        return grad_shard, grad_w, grad_b, None
