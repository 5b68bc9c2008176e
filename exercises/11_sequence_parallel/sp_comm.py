"""Sequence parallelism's two conjugate collectives, and the column-parallel linear that hides one of them.

Between tensor-parallel regions, Megatron-SP splits activations along the SEQUENCE, so LayerNorm and dropout
each run on S/t tokens. Entering a TP region all-gathers the sequence (g); leaving one reduce-scatters it
(g-bar). What each one's backward must be is the first thing to work out. Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198, §4.2.2; Megatron-LM
megatron/core/tensor_parallel/mappings.py.
Check: `grade exercise 11`.
Shapes: S sequence, B batch, H hidden, O output features, t = TP group size, s = S/t tokens per rank.
Every tensor is sequence-first (S, B, H), Megatron's layout: rank r's shard is rows [r*s, (r+1)*s) of dim 0,
so gathering along dim 0 is one contiguous concatenation, no transposes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_gather_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    """(s, ...) shard on every rank -> (t*s, ...), rank r's shard at rows [r*s, (r+1)*s). One all-gather."""
    raise NotImplementedError("TODO(11.regions): not implemented yet")


def reduce_scatter_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    """(S, ...) partial sums on every rank -> (S/t, ...): rank r gets rows [r*s, (r+1)*s) of the SUM over
    ranks. One reduce-scatter. Raises ValueError if S is not a multiple of t."""
    raise NotImplementedError("TODO(11.regions): not implemented yet")


class GatherFromSequenceParallel(torch.autograd.Function):
    """Forward: all-gather the sequence shards, this rank's (s, B, H) -> (S, B, H), shards in rank order.

    Backward: given this rank's gradient of the loss with respect to the gathered (S, B, H) (each rank has
    used all S tokens in its own way, e.g. with its own weight shard), return the gradient of the loss with
    respect to this rank's shard (s, B, H). One collective each way. Megatron's `g` with SP
    (_GatherFromSequenceParallelRegion).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        raise NotImplementedError("TODO(11.regions): not implemented yet")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        raise NotImplementedError("TODO(11.regions): not implemented yet")


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    """Forward: each rank holds a partial sum (S, B, H) (its own term of a sum over ranks); return this
    rank's rows [r*s, (r+1)*s) of the finished sum, (s, B, H).

    Backward: given the gradient with respect to this rank's output rows (s, B, H), return the gradient
    with respect to this rank's (S, B, H) input. One collective each way. Megatron's `g-bar` with SP
    (_ReduceScatterToSequenceParallelRegion).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        raise NotImplementedError("TODO(11.regions): not implemented yet")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        raise NotImplementedError("TODO(11.regions): not implemented yet")


def gather_from_sequence_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    return GatherFromSequenceParallel.apply(x, group)


def reduce_scatter_to_sequence_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    return ReduceScatterToSequenceParallel.apply(x, group)


class AllGatherColumnLinear(torch.autograd.Function):
    """Column-parallel linear on a sequence shard: Y = all_gather(X_shard) @ W_r^T + b_r.

    Input: this rank's shard X_r (s, B, H), its weight rows W_r (O/t, H) and bias rows b_r (O/t,). Forward
    returns Y (S, B, O/t): all S tokens, this rank's O/t output features. Backward returns the gradients of
    the loss with respect to X_r (s, B, H), W_r and b_r: each the dense layer's gradient restricted to
    what this rank holds.
    Memory: autograd may keep only X_r (and the weight) for backward, never the gathered (S, B, H) input,
    so this layer's saved activation is s*B*H elements, not S*B*H (Korthikanti et al. §4.2.2).
    Communication: one all-gather in forward; one all-gather and one reduce-scatter in backward.
    Megatron-LM megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication
    with sequence_parallel=True.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, group) -> torch.Tensor:
        raise NotImplementedError("TODO(11.linear): not implemented yet")

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        raise NotImplementedError("TODO(11.linear): not implemented yet")
