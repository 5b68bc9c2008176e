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
    rank = dist.get_rank(group)
    g = torch.Generator().manual_seed(seed + TP_SEED_OFFSET + rank)
    drop = torch.rand(x.shape, generator=g, dtype=x.dtype) < p  # bool: 1 byte per element
    return x.masked_fill(drop.to(x.device), 0.0) / (1 - p)


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
        normed = F.layer_norm(x, x.shape[-1:], self.norm.weight, self.norm.bias, self.norm.eps)
        inner = F.gelu(AllGatherColumnLinear.apply(normed, self.fc1_weight, self.fc1_bias, self.group))
        out = reduce_scatter_to_sequence_parallel(F.linear(inner, self.fc2_weight), self.group)
        out = sequence_parallel_dropout(out + self.fc2_bias, self.p_drop, self.seed, self.group)
        return x + out

    def allreduce_sequence_parallel_grads(self) -> None:
        """After backward: sum over the TP group the .grad of every REPLICATED parameter that this rank
        applied to its own tokens only, in ONE all-reduce (flatten the grads, all-reduce, copy back), as
        Megatron's finalize_model_grads._allreduce_layernorm_grads does. Leave the sharded ones alone."""
        params = [self.norm.weight, self.norm.bias, self.fc2_bias]
        flat = torch.cat([q.grad.reshape(-1) for q in params])
        dist.all_reduce(flat, group=self.group)
        offset = 0
        for q in params:
            n = q.grad.numel()
            q.grad.copy_(flat[offset : offset + n].view_as(q.grad))
            offset += n
