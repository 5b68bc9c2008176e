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
    x = x.contiguous()
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x, group=group)  # the list form: one collective, then concatenate
    return torch.cat(parts, dim=0)


def reduce_scatter_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    """(S, ...) partial sums on every rank -> (S/t, ...): rank r gets rows [r*s, (r+1)*s) of the SUM over
    ranks. One reduce-scatter. Raises ValueError if S is not a multiple of t."""
    t = dist.get_world_size(group)
    if x.shape[0] % t != 0:
        raise ValueError(f"sequence length {x.shape[0]} is not a multiple of the group size {t}")
    pieces = [piece.contiguous() for piece in x.split(x.shape[0] // t, dim=0)]
    out = torch.empty_like(pieces[0])
    dist.reduce_scatter(out, pieces, group=group)
    return out


class GatherFromSequenceParallel(torch.autograd.Function):
    """Forward: all-gather the sequence shards (s, B, H) -> (S, B, H). Backward: reduce-scatter the gradient.

    Megatron's `g` with SP (_GatherFromSequenceParallelRegion). After the gather, each rank feeds all S
    tokens to ITS OWN weight shard, so each rank holds a partial gradient for all S tokens; the gradient of
    rank r's tokens is the sum over ranks, and only rank r needs it: a reduce-scatter.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return all_gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return reduce_scatter_seq(grad, ctx.group), None


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    """Forward: reduce-scatter partial sums (S, B, H) -> (s, B, H). Backward: all-gather the gradient.

    Megatron's `g-bar` with SP (_ReduceScatterToSequenceParallelRegion). Each rank's partial sum (over its own
    F/t features) went into every output token, so every rank needs the gradient of all S tokens: an
    all-gather of the shards' gradients.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return reduce_scatter_seq(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_gather_seq(grad, ctx.group), None


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
        ctx.save_for_backward(x, weight)  # the shard, not the gathered input
        ctx.group = group
        full = all_gather_seq(x, group)  # (S, B, H), dropped after forward
        return torch.addmm(bias, full.flatten(0, -2), weight.t()).view(*full.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        x, weight = ctx.saved_tensors
        full = all_gather_seq(x, ctx.group)  # gather again
        g2 = grad_y.reshape(-1, grad_y.shape[-1])  # (S*B, O/t)
        grad_w = g2.t().mm(full.reshape(-1, full.shape[-1]))
        grad_b = g2.sum(dim=0)
        grad_x = reduce_scatter_seq(grad_y.matmul(weight), ctx.group)
        return grad_x, grad_w, grad_b, None
