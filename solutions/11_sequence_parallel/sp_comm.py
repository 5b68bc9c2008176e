"""Sequence parallelism's two conjugate collectives, and the column-parallel linear that hides one of them.

Between tensor-parallel regions, Megatron-SP splits activations along the SEQUENCE, so LayerNorm and dropout
each run on S/t tokens. Entering a TP region all-gathers the sequence (g); leaving one reduce-scatters it
(g-bar); each is the other's backward. Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", arXiv 2205.05198, §4.2.2; Megatron-LM megatron/core/tensor_parallel/mappings.py.
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
    ### BEGIN SOLUTION 11.regions
    t = dist.get_world_size(group)
    out = x.new_empty((t * x.shape[0], *x.shape[1:]))  # (S, B, H)
    # all_gather_into_tensor concatenates the shards along dim 0, in rank order: exactly the sequence order
    # (with a batch-first layout it would interleave the batch, and we would need a transpose).
    dist.all_gather_into_tensor(out, x.contiguous(), group=group)
    return out
    ### END SOLUTION


def reduce_scatter_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    """(S, ...) partial sums on every rank -> (S/t, ...): rank r gets rows [r*s, (r+1)*s) of the SUM over
    ranks. One reduce-scatter. Raises ValueError if S is not a multiple of t."""
    ### BEGIN SOLUTION 11.regions
    t = dist.get_world_size(group)
    if x.shape[0] % t:
        raise ValueError(f"sequence length {x.shape[0]} is not divisible by the group size {t}")
    out = x.new_empty((x.shape[0] // t, *x.shape[1:]))  # (s, B, H)
    # Each rank ends up with 1/t of the sum and sends (t-1)/t of its tensor: half the traffic of an
    # all-reduce, which would leave every rank the whole sum only to throw (t-1)/t of it away.
    dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
    return out
    ### END SOLUTION


class GatherFromSequenceParallel(torch.autograd.Function):
    """Forward: all-gather the sequence shards (s, B, H) -> (S, B, H). Backward: reduce-scatter the gradient.

    Megatron's `g` with SP (_GatherFromSequenceParallelRegion). After the gather, each rank feeds all S
    tokens to ITS OWN weight shard, so each rank holds a partial gradient for all S tokens; the gradient of
    rank r's tokens is the sum over ranks, and only rank r needs it: a reduce-scatter.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ### BEGIN SOLUTION 11.regions
        ctx.group = group
        return all_gather_seq(x, group)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ### BEGIN SOLUTION 11.regions
        return reduce_scatter_seq(grad, ctx.group), None  # (S, B, H) partial -> (s, B, H) summed
        ### END SOLUTION


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    """Forward: reduce-scatter partial sums (S, B, H) -> (s, B, H). Backward: all-gather the gradient.

    Megatron's `g-bar` with SP (_ReduceScatterToSequenceParallelRegion). Each rank's partial sum (over its own
    F/t features) went into every output token, so every rank needs the gradient of all S tokens: an
    all-gather of the shards' gradients.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ### BEGIN SOLUTION 11.regions
        ctx.group = group
        return reduce_scatter_seq(x, group)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ### BEGIN SOLUTION 11.regions
        return all_gather_seq(grad, ctx.group), None  # (s, B, H) -> (S, B, H)
        ### END SOLUTION


def gather_from_sequence_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    return GatherFromSequenceParallel.apply(x, group)


def reduce_scatter_to_sequence_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    return ReduceScatterToSequenceParallel.apply(x, group)


class AllGatherColumnLinear(torch.autograd.Function):
    """Column-parallel linear on a sequence shard: Y = all_gather(X_shard) @ W_r^T + b_r.

    Forward: all-gather X (s, B, H) -> (S, B, H); return Y (S, B, O/t) for this rank's rows W_r (O/t, H).
    Saves for backward X_SHARD and W_r only, never the gathered X: that is what makes the saved input of
    this layer s*B*H instead of S*B*H (Korthikanti et al. §4.2.2). Backward gathers X again for grad W.
    Backward: grad_W_r = dY^T X (O/t, H) and grad_b_r = sum of dY over (S, B), from the re-gathered X;
    grad X = dY @ W_r is (S, B, H) and partial (rank r's share of the hidden sum): reduce-scatter it to
    this rank's (s, B, H). Megatron-LM megatron/core/tensor_parallel/layers.py,
    LinearWithGradAccumulationAndAsyncCommunication with sequence_parallel=True.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, group) -> torch.Tensor:
        ### BEGIN SOLUTION 11.linear
        ctx.save_for_backward(x, weight)  # the (s, B, H) shard: t times smaller than the gathered input
        ctx.group = group
        total_x = all_gather_seq(x, group)  # (S, B, H), dropped as soon as forward returns
        return torch.matmul(total_x, weight.t()) + bias  # (S, B, O/t)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        ### BEGIN SOLUTION 11.linear
        x, weight = ctx.saved_tensors
        # Megatron starts this gather asynchronously and overlaps it with the grad-input matmul below.
        total_x = all_gather_seq(x, ctx.group)  # (S, B, H) again: the price of saving only the shard
        grad_total_x = torch.matmul(grad_y, weight)  # (S, B, H), partial: this rank's O/t outputs only
        grad_x = reduce_scatter_seq(grad_total_x, ctx.group)  # (s, B, H), summed over the t ranks
        grad_w = grad_y.flatten(0, -2).t() @ total_x.flatten(0, -2)  # (O/t, S*B) @ (S*B, H) -> (O/t, H)
        grad_b = grad_y.sum(dim=tuple(range(grad_y.dim() - 1)))  # (O/t,)
        return grad_x, grad_w, grad_b, None
        ### END SOLUTION
