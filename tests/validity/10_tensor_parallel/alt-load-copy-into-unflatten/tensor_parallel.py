"""Megatron-LM tensor parallelism: split each weight matrix across R ranks, and all-reduce only where needed.

Column-parallel Y_r = X W_r^T (W's output rows split; Y stays split) feeds row-parallel Z = sum_r Y_r V_r^T
(V's input columns split). Two small autograd functions, f (entering the split region) and g (leaving it),
hold all the communication; what each does in forward and in backward is yours to derive.
Shoeybi et al. 2019, Sec. 3 and Fig. 3 (https://arxiv.org/abs/1909.08053). Check: `grade exercise 10`.
Shapes: B batch, S sequence, H hidden, F ffn size, R = tp world size, r = tp rank, nh heads, hd = H / nh.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------------------
# f and g (Megatron-LM megatron/core/tensor_parallel/mappings.py: copy_to_tensor_model_parallel_region,
# reduce_from_tensor_model_parallel_region)


class CopyToTPRegion(torch.autograd.Function):
    """f, where a column-parallel layer takes its input X (..., in), the same tensor on every rank of `group`.

    Forward returns X's values, for this rank's shard to consume. Backward receives this rank's gradient of
    the loss with respect to that output, which covers only what this rank's shard computed, and must
    return the gradient of the loss with respect to X: the same on every rank. Megatron-LM mappings.py.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)  # nothing to move: every rank already holds all of X

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        # each rank holds only its branch's share of dL/dX; sum the shares (into a buffer of our own,
        # never into autograd's grad tensor)
        total = grad.contiguous().clone()
        dist.all_reduce(total, group=ctx.group)
        return total, None


class ReduceFromTPRegion(torch.autograd.Function):
    """g, where the row-parallel layer leaves the split region: x (..., out) is this rank's partial result,
    one of the R terms whose sum over the ranks of `group` is the layer's output.

    Forward returns the whole sum, the same on every rank. Backward receives the gradient of the loss with
    respect to that sum and must return the gradient with respect to this rank's term (Megatron-LM
    mappings.py).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        # x is a fresh partial product that nothing else holds, so summing in place is safe.
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=group)
        return x  # (..., out): the full sum on every rank

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None  # every rank already holds the whole dL/dZ


# ---------------------------------------------------------------------------------------------------------
# the two layers


class ColumnParallelLinear(nn.Module):
    """Y_r = X W_r^T + b_r. W (out, in) is split by output rows: rank r holds rows r*out/R .. (r+1)*out/R - 1.

    Input: the full X (..., in), the same on every rank. Output: this rank's shard Y_r (..., out/R).
    Parameters: weight (out/R, in), bias (out/R,) or None. Raises ValueError if R does not divide out.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, *, group=None, dtype=None, device=None
    ) -> None:
        super().__init__()
        self.group = group
        self.tp_size, self.tp_rank = dist.get_world_size(group), dist.get_rank(group)
        self.in_features, self.out_features = in_features, out_features
        if out_features % self.tp_size != 0:
            raise ValueError(
                f"ColumnParallelLinear: out_features={out_features} does not divide over {self.tp_size} ranks"
            )
        self.out_per_rank = out_features // self.tp_size
        kw = dict(dtype=dtype, device=device)
        self.weight = nn.Parameter(torch.empty(self.out_per_rank, in_features, **kw))
        self.bias = nn.Parameter(torch.empty(self.out_per_rank, **kw)) if bias else None
        # same distribution as the dense nn.Linear(in, out) would draw from (fan_in = in_features)
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shards of the dense layer's weight (out, in) and bias (out,) into the layer."""
        if tuple(weight.shape) != (self.out_features, self.in_features):
            raise ValueError(
                f"expected a weight of shape {(self.out_features, self.in_features)}, "
                f"got {tuple(weight.shape)}"
            )
        # view the dense rows as R stacked blocks and copy block r into this layer's own storage
        self.weight.copy_(weight.unflatten(0, (self.tp_size, self.out_per_rank))[self.tp_rank])
        if self.bias is not None and bias is not None:
            self.bias.copy_(bias.unflatten(0, (self.tp_size, self.out_per_rank))[self.tp_rank])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = CopyToTPRegion.apply(x, self.group)
        y = torch.matmul(x, self.weight.transpose(0, 1))
        return y if self.bias is None else y + self.bias


class RowParallelLinear(nn.Module):
    """Z = sum_r X_r V_r^T + b. V (out, in) is split by input columns: rank r holds r*in/R .. (r+1)*in/R - 1.

    Input: this rank's shard X_r (..., in/R), e.g. a column-parallel output. Output: the full Z (..., out) =
    X V^T + b on every rank. Parameters: weight (out, in/R); bias (out,) whole, the same on every rank (not
    split), or None. Raises ValueError if R does not divide in.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, *, group=None, dtype=None, device=None
    ) -> None:
        super().__init__()
        self.group = group
        self.tp_size, self.tp_rank = dist.get_world_size(group), dist.get_rank(group)
        self.in_features, self.out_features = in_features, out_features
        if in_features % self.tp_size:
            raise ValueError(f"in_features={in_features} is not divisible by the TP size {self.tp_size}")
        local_in = in_features // self.tp_size
        self.weight = nn.Parameter(torch.empty(out_features, local_in, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device)) if bias else None

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shard of the dense layer's weight (out, in) and its whole bias (out,)."""
        self.weight.copy_(weight.chunk(self.tp_size, dim=1)[self.tp_rank])  # (out, in/R): our input columns
        if self.bias is not None:
            self.bias.copy_(bias)  # (out,): replicated, not split

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = F.linear(x, self.weight)  # (..., out): X_r V_r^T, one of R terms of the sum
        z = ReduceFromTPRegion.apply(partial, self.group)  # (..., out): the one all-reduce of this layer
        # Bias after the sum: added before it, every rank's copy would be summed, giving R * b.
        return z if self.bias is None else z + self.bias


# ---------------------------------------------------------------------------------------------------------
# blocks


class TensorParallelMLP(nn.Module):
    """GELU(X A^T + a) B^T + b on every rank, A (F, H) split in `up_proj` (a ColumnParallelLinear(H, F)) and
    B (H, F) split in `down_proj` (a RowParallelLinear(F, H)). GELU is F.gelu (exact erf form).

    Budget: one all-reduce in forward and one in backward for the whole block (Megatron Sec. 3).
    """

    def __init__(self, hidden: int, ffn: int, *, group=None, dtype=None, device=None) -> None:
        super().__init__()
        kw = dict(group=group, dtype=dtype, device=device)
        self.up_proj = ColumnParallelLinear(hidden, ffn, **kw)  # (H -> F/R)
        self.down_proj = RowParallelLinear(ffn, hidden, **kw)  # (F/R -> H), sums over ranks

    def load_full(
        self, w_up: torch.Tensor, b_up: torch.Tensor, w_down: torch.Tensor, b_down: torch.Tensor
    ) -> None:
        """Load the dense MLP's weights: w_up (F, H), b_up (F,), w_down (H, F), b_down (H,)."""
        self.up_proj.load_full(w_up, b_up)
        self.down_proj.load_full(w_down, b_down)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up_proj(x))  # (B, S, F/R): this rank's columns of GELU(X A^T + a)
        return self.down_proj(h)  # (B, S, H) on every rank


class TensorParallelAttention(nn.Module):
    """Causal self-attention, heads split across ranks: rank r computes heads r*nh/R .. (r+1)*nh/R - 1.

    `qkv_proj` is ONE column-parallel layer H -> 3H whose local weight (3H/R, H) stacks this rank's rows of
    W_q, W_k and W_v in that order; `out_proj` is row-parallel H -> H. One all-reduce forward, one backward.
    The dense block is coursekit.toy_models.dense_attention (head j = features j*hd .. (j+1)*hd - 1).
    Raises ValueError if R does not divide num_heads.
    """

    def __init__(self, hidden: int, num_heads: int, *, group=None, dtype=None, device=None) -> None:
        super().__init__()
        self.hidden, self.num_heads = hidden, num_heads
        self.tp_size, self.tp_rank = dist.get_world_size(group), dist.get_rank(group)
        if num_heads % self.tp_size:
            raise ValueError(f"num_heads={num_heads} is not divisible by the TP size {self.tp_size}")
        self.head_dim = hidden // num_heads  # hd: the same as in the dense block
        self.num_local_heads = num_heads // self.tp_size  # nh/R
        kw = dict(group=group, dtype=dtype, device=device)
        self.qkv_proj = ColumnParallelLinear(hidden, 3 * hidden, **kw)  # (H -> 3H/R): q_r, k_r, v_r
        self.out_proj = RowParallelLinear(hidden, hidden, **kw)  # (H/R -> H), sums over ranks

    @torch.no_grad()
    def load_full(self, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o) -> None:
        """Load the dense block's weights: w_q, w_k, w_v, w_o (H, H) and biases (H,)."""
        R, r = self.tp_size, self.tp_rank
        # Not qkv_proj.load_full(cat([w_q, w_k, w_v])): chunk r of the stacked (3H, H) matrix would be
        # a slice of W_q alone for r = 0. Each rank needs ITS rows of each of W_q, W_k and W_v.
        self.qkv_proj.weight.copy_(torch.cat([w.chunk(R, dim=0)[r] for w in (w_q, w_k, w_v)]))  # (3H/R, H)
        self.qkv_proj.bias.copy_(torch.cat([b.chunk(R, dim=0)[r] for b in (b_q, b_k, b_v)]))  # (3H/R,)
        self.out_proj.load_full(w_o, b_o)  # (H, H/R): the input columns of our heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, _ = x.shape
        local = self.num_local_heads * self.head_dim  # H/R
        q, k, v = self.qkv_proj(x).split(local, dim=-1)  # 3 x (B, S, H/R)
        q, k, v = (t.view(B, S, self.num_local_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, nh/R, S, S): no communication,
        future = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)  # heads are independent
        probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1)  # (B, nh/R, S, S)
        o = (probs @ v).transpose(1, 2).reshape(B, S, local)  # (B, S, H/R): our heads, side by side
        return self.out_proj(o)  # (B, S, H) on every rank
