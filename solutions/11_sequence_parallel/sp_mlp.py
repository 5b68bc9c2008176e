"""A sequence-parallel MLP block: LayerNorm and dropout on S/t tokens, the MLP itself split over t ranks.

  x (s,B,H) -LN-> (s,B,H) -all-gather + fc1 (cols r)-> (S,B,F/t) -GeLU-> fc2 (rows r) -> (S,B,H) partial
            -reduce-scatter-> (s,B,H) -+ b2, dropout-> + x  ->  y (s,B,H)

Plain tensor parallelism (Megatron-LM, Shoeybi et al. 2019) runs LayerNorm and dropout on all S tokens on
every rank; sequence parallelism (Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2) gives each rank S/t of
them, so their activations shrink t times, for the same communication volume: the all-reduce of plain TP
is a reduce-scatter plus an all-gather. Check: `grade exercise 11`.
Shapes: S sequence, B batch, H hidden, F ffn width, t = TP group size, s = S/t; sequence-first (S, B, H).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sp_comm import AllGatherColumnLinear, reduce_scatter_to_sequence_parallel
from torch import nn

# Megatron-LM megatron/core/tensor_parallel/random.py, model_parallel_cuda_manual_seed: the RNG used inside
# model-parallel regions is seeded with seed + 2718 + tp_rank ("2718 is just for fun"), so it differs across
# the TP group; transformer_block.py forks that RNG around the whole block when sequence_parallel is on.
TP_SEED_OFFSET = 2718


def sequence_parallel_dropout(x: torch.Tensor, p: float, seed: int, group=None) -> torch.Tensor:
    """Dropout on this rank's sequence shard x (s, B, H), with this rank's own random stream.

    keep = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed + TP_SEED_OFFSET + rank),
                      dtype=x.dtype) >= p    (drawn on the CPU, then moved to x.device)
    returns x * keep / (1 - p), with keep a bool tensor: autograd saves 1 byte per element for it, as
    Korthikanti et al. count dropout masks. Rank r's tokens are rows r*s.. of the full sequence, so the
    dense model's mask is the t shards' masks concatenated in rank order.
    """
    ### BEGIN SOLUTION 11.dropout_grads
    rank = dist.get_rank(group)
    # A different seed per rank: with one shared seed every shard would get the SAME mask, so token i of
    # every shard would be dropped together (Megatron's data-parallel RNG is the shared one).
    gen = torch.Generator().manual_seed(seed + TP_SEED_OFFSET + rank)
    keep = torch.rand(x.shape, generator=gen, dtype=x.dtype).to(x.device) >= p  # (s, B, H) bool
    return x * keep / (1 - p)
    ### END SOLUTION


class SequenceParallelMLP(nn.Module):
    """LayerNorm -> fc1 (column-parallel) -> GeLU -> fc2 (row-parallel) -> bias, dropout -> residual.

    Input and output are this rank's sequence shard (s, B, H). fc1 holds rows [r*F/t, (r+1)*F/t) of the
    dense (F, H) weight, fc2 columns [r*F/t, (r+1)*F/t) of the dense (H, F) weight. The LayerNorm and
    fc2's bias are replicated: every rank holds all of them, but applies them to its own tokens only.
    """

    def __init__(
        self, hidden: int, ffn: int, *, p_drop: float, seed: int, group=None, dtype=torch.float64
    ) -> None:
        super().__init__()
        t = dist.get_world_size(group)
        if ffn % t:
            raise ValueError(f"ffn width {ffn} is not divisible by the TP group size {t}")
        self.group, self.p_drop, self.seed = group, p_drop, seed
        self.norm = nn.LayerNorm(hidden, dtype=dtype)  # replicated (H,) weight and bias
        self.fc1_weight = nn.Parameter(torch.empty(ffn // t, hidden, dtype=dtype))  # (F/t, H)
        self.fc1_bias = nn.Parameter(torch.empty(ffn // t, dtype=dtype))  # (F/t,)
        self.fc2_weight = nn.Parameter(torch.empty(hidden, ffn // t, dtype=dtype))  # (H, F/t)
        self.fc2_bias = nn.Parameter(torch.empty(hidden, dtype=dtype))  # (H,) replicated

    @torch.no_grad()
    def load_dense(self, dense: dict[str, torch.Tensor]) -> None:
        """Copy this rank's slices of a dense MLP: norm.weight, norm.bias (H,), fc1.weight (F, H),
        fc1.bias (F,), fc2.weight (H, F), fc2.bias (H,)."""
        r, t = dist.get_rank(self.group), dist.get_world_size(self.group)
        self.norm.weight.copy_(dense["norm.weight"])
        self.norm.bias.copy_(dense["norm.bias"])
        self.fc1_weight.copy_(dense["fc1.weight"].chunk(t, dim=0)[r])
        self.fc1_bias.copy_(dense["fc1.bias"].chunk(t, dim=0)[r])
        self.fc2_weight.copy_(dense["fc2.weight"].chunk(t, dim=1)[r])
        self.fc2_bias.copy_(dense["fc2.bias"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (s, B, H), this rank's tokens -> y (s, B, H). One all-gather and one reduce-scatter, no
        all-reduce; use F.layer_norm (self.norm), F.gelu (exact erf form) and F.linear for fc2."""
        ### BEGIN SOLUTION 11.mlp_block
        h = self.norm(x)  # (s, B, H): LayerNorm needs only its own token's H features, so a shard will do
        # all-gather the sequence and multiply by this rank's fc1 rows; saves only the (s, B, H) shard
        h = AllGatherColumnLinear.apply(h, self.fc1_weight, self.fc1_bias, self.group)  # (S, B, F/t)
        h = F.gelu(h)  # (S, B, F/t): elementwise, each rank has its own F/t features of every token
        h = F.linear(h, self.fc2_weight)  # (S, B, H), rank r's share of the sum over F
        # reduce-scatter finishes the sum AND splits the sequence again: each rank keeps its s tokens
        h = reduce_scatter_to_sequence_parallel(h, self.group) + self.fc2_bias  # (s, B, H)
        return x + sequence_parallel_dropout(h, self.p_drop, self.seed, self.group)  # (s, B, H)
        ### END SOLUTION

    def allreduce_sequence_parallel_grads(self) -> None:
        """After backward: sum over the TP group the .grad of every REPLICATED parameter that this rank
        applied to its own tokens only, in ONE all-reduce (flatten the grads, all-reduce, copy back), as
        Megatron's finalize_model_grads._allreduce_layernorm_grads does. Leave the sharded ones alone."""
        ### BEGIN SOLUTION 11.dropout_grads
        # LayerNorm's weight and bias and fc2's bias saw s tokens here, the other S - s on other ranks:
        # each rank holds a partial sum over tokens. fc1/fc2 weights and fc1's bias are shards, and their
        # gradients are already complete (fc1 saw all S gathered tokens). Megatron marks the first kind
        # with `param.sequence_parallel = True` (the row-parallel bias too, in RowParallelLinear).
        params = [self.norm.weight, self.norm.bias, self.fc2_bias]
        flat = torch.cat([p.grad.reshape(-1) for p in params])  # one message: one latency, not three
        dist.all_reduce(flat, group=self.group)
        for p, g in zip(params, flat.split([p.numel() for p in params]), strict=True):
            p.grad.copy_(g.view_as(p.grad))
        ### END SOLUTION
