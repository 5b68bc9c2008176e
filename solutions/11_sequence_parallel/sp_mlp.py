"""A sequence-parallel MLP block: LayerNorm and dropout on S/t tokens, the MLP itself split over t ranks.

  x (s,B,H) -LN-> (s,B,H) -all-gather, fc1 (rows r of W1)-> (S,B,F/t) -GeLU-> fc2 (columns r of W2)
            -> (S,B,H) partial -reduce-scatter-> (s,B,H) -dropout-> + x  ->  y (s,B,H)
  (where fc2's replicated bias enters is yours to work out)

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

# Megatron-LM megatron/core/tensor_parallel/random.py, model_parallel_cuda_manual_seed: the offset Megatron
# adds to the seed of its model-parallel RNG ("2718 is just for fun"); transformer_block.py forks that RNG
# around the whole block when sequence_parallel is on. Yours to use or not.
TP_SEED_OFFSET = 2718


def sequence_parallel_dropout(x: torch.Tensor, p: float, seed: int, group=None) -> torch.Tensor:
    """Dropout on this rank's sequence shard x (s, B, H): returns x with dropped elements zeroed and kept ones
    scaled by 1 / (1 - p), so that the output's expectation is x. Each element is kept with probability 1 - p.

    The mask is this rank's own: it depends only on (seed, the rank in `group`, x.shape, p), never on x's
    values or on any RNG state outside this call, so two calls with the same arguments drop the same
    elements, and the t ranks of the group draw masks that are independent of one another. Rank r's tokens
    are rows r*s.. of the full sequence, so the dense block's mask is the t ranks' masks side by side.
    Autograd must keep 1 byte per element for the mask (Korthikanti et al. count dropout masks that way).
    """
    ### BEGIN SOLUTION 11.dropout
    rank = dist.get_rank(group)
    # A different seed per rank: with one shared seed every shard would get the SAME mask, so token i of
    # every shard would be dropped together (Megatron's data-parallel RNG is the shared one). Megatron's
    # model-parallel RNG is seeded with seed + 2718 + tp_rank. A private CPU generator keeps the global RNG
    # untouched and gives the same mask on any device.
    gen = torch.Generator().manual_seed(seed + TP_SEED_OFFSET + rank)
    keep = torch.rand(x.shape, generator=gen, dtype=x.dtype).to(x.device) >= p  # (s, B, H) bool
    # bool mask: autograd keeps 1 byte per element for the product (a float64 mask would keep 8)
    return x * keep / (1 - p)
    ### END SOLUTION


class SequenceParallelMLP(nn.Module):
    """The dense block x + dropout(fc2(GeLU(fc1(LayerNorm(x))))), fc1 column- and fc2 row-parallel.

    Input and output are this rank's sequence shard (s, B, H). fc1 holds rows [r*F/t, (r+1)*F/t) of the
    dense (F, H) weight and of its bias, fc2 columns [r*F/t, (r+1)*F/t) of the dense (H, F) weight. The
    LayerNorm's weight and bias and fc2's bias are replicated: every rank holds all of them.
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
        """x (s, B, H), this rank's tokens -> y (s, B, H), this rank's rows of the dense block's output

            y = x + sequence_parallel_dropout(fc2(GeLU(fc1(LayerNorm(x)))), self.p_drop, self.seed, group)

        with GeLU exact (F.gelu), fc1 and fc2 with their biases, LayerNorm = self.norm. Communication: one
        all-gather and one reduce-scatter in forward, no all-reduce in forward or backward. Activation
        memory: the budget in the README (what autograd keeps for backward, measured)."""
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
        """After backward, before the optimizer step: make every parameter's .grad equal to this rank's
        share of the dense block's gradient (its shard for a split parameter, the whole gradient for a
        replicated one), with exactly ONE collective, an all-reduce, for all the parameters that need it
        (Megatron-LM finalize_model_grads._allreduce_layernorm_grads). Leave the others untouched."""
        ### BEGIN SOLUTION 11.grad_sync
        # LayerNorm's weight and bias and fc2's bias saw s tokens here, the other S - s on other ranks:
        # each rank holds a partial sum over tokens, and the dense gradient is the SUM of the t partials
        # (not their mean: unlike data parallelism, the ranks saw different tokens of ONE batch, and the
        # loss sums over all of them). fc1/fc2 weights and fc1's bias are shards, and their gradients are
        # already complete (fc1 saw all S gathered tokens). Megatron marks the first kind with
        # `param.sequence_parallel = True` (the row-parallel bias too, in RowParallelLinear).
        params = [self.norm.weight, self.norm.bias, self.fc2_bias]
        flat = torch.cat([p.grad.reshape(-1) for p in params])  # one message: one latency, not three
        dist.all_reduce(flat, group=self.group)
        for p, g in zip(params, flat.split([p.numel() for p in params]), strict=True):
            p.grad.copy_(g.view_as(p.grad))
        ### END SOLUTION
