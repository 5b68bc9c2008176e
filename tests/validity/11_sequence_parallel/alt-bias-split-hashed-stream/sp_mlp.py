"""Sequence-parallel MLP block (alternative-correct case)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sp_comm import AllGatherColumnLinear, reduce_scatter_to_sequence_parallel
from torch import nn

TP_SEED_OFFSET = 2718


def sequence_parallel_dropout(x: torch.Tensor, p: float, seed: int, group=None) -> torch.Tensor:
    rank = dist.get_rank(group)
    stream = torch.Generator(device="cpu")
    stream.manual_seed((seed * 1_000_003 + 7919 * (rank + 1)) % (2**61 - 1))  # one stream per (seed, rank)
    drop = torch.rand(tuple(x.shape), generator=stream, dtype=torch.float64) < p  # bool: True = dropped
    return x.masked_fill(drop.to(x.device), 0.0) * (1.0 / (1.0 - p))


class SequenceParallelMLP(nn.Module):
    def __init__(
        self, hidden: int, ffn: int, *, p_drop: float, seed: int, group=None, dtype=torch.float64
    ) -> None:
        super().__init__()
        t = dist.get_world_size(group)
        if ffn % t:
            raise ValueError(f"ffn width {ffn} is not divisible by the TP group size {t}")
        self.group, self.p_drop, self.seed = group, p_drop, seed
        self.norm = nn.LayerNorm(hidden, dtype=dtype)
        self.fc1_weight = nn.Parameter(torch.empty(ffn // t, hidden, dtype=dtype))
        self.fc1_bias = nn.Parameter(torch.empty(ffn // t, dtype=dtype))
        self.fc2_weight = nn.Parameter(torch.empty(hidden, ffn // t, dtype=dtype))
        self.fc2_bias = nn.Parameter(torch.empty(hidden, dtype=dtype))

    @torch.no_grad()
    def load_dense(self, dense: dict[str, torch.Tensor]) -> None:
        r, t = dist.get_rank(self.group), dist.get_world_size(self.group)
        self.norm.weight.copy_(dense["norm.weight"])
        self.norm.bias.copy_(dense["norm.bias"])
        self.fc1_weight.copy_(dense["fc1.weight"].chunk(t, dim=0)[r])
        self.fc1_bias.copy_(dense["fc1.bias"].chunk(t, dim=0)[r])
        self.fc2_weight.copy_(dense["fc2.weight"].chunk(t, dim=1)[r])
        self.fc2_bias.copy_(dense["fc2.bias"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = dist.get_world_size(self.group)
        normed = F.layer_norm(x, (x.shape[-1],), self.norm.weight, self.norm.bias, self.norm.eps)
        hidden = F.gelu(AllGatherColumnLinear.apply(normed, self.fc1_weight, self.fc1_bias, self.group))
        # every rank adds b2 / t to its partial sum: the reduce-scatter adds the t shares back to b2
        partial = F.linear(hidden, self.fc2_weight, self.fc2_bias / t)
        out = reduce_scatter_to_sequence_parallel(partial, self.group)
        return x + sequence_parallel_dropout(out, self.p_drop, self.seed, self.group)

    def allreduce_sequence_parallel_grads(self) -> None:
        # applied to this rank's tokens only (fc2's bias: through the reduce-scatter's all-gather backward,
        # a 1/t share of every token): partial on each rank, the dense gradient is their sum
        partial = [self.fc2_bias, self.norm.bias, self.norm.weight]
        grads = [p.grad for p in partial]
        flat = torch.nn.utils.parameters_to_vector(grads)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group)
        torch.nn.utils.vector_to_parameters(flat, grads)
