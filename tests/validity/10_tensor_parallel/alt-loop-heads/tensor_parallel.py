"""Megatron-LM tensor parallelism: split each weight matrix across R ranks, and all-reduce only where needed.

Column-parallel Y_r = X W_r^T (W's output rows split; Y stays split) feeds row-parallel Z = sum_r Y_r V_r^T
(V's input columns split); the sum is the one all-reduce. The f and g functions put the collectives in:
f = identity forward / all-reduce backward, g = all-reduce forward / identity backward.
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
# f and g


class CopyToTPRegion(torch.autograd.Function):
    """f: identity in forward; all-reduce (sum) of the gradient over `group` in backward.

    Every rank feeds the same X into its own shard, so dL/dX is the sum of every rank's contribution.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        total = grad.clone().contiguous()
        dist.all_reduce(total, group=ctx.group)
        return total, None


class ReduceFromTPRegion(torch.autograd.Function):
    """g: all-reduce (sum) over `group` in forward; identity in backward.

    The sum's gradient with respect to each partial sum is the incoming gradient itself.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        total = x.clone().contiguous()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad.clone(), None


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
                f"ColumnParallelLinear: {self.tp_size} ranks cannot split {out_features} outputs"
            )
        rows = out_features // self.tp_size
        self.weight = nn.Parameter(torch.randn(rows, in_features, dtype=dtype, device=device) * 0.02)
        self.bias = nn.Parameter(torch.zeros(rows, dtype=dtype, device=device)) if bias else None

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shards of the dense layer's weight (out, in) and bias (out,) into the layer."""
        rows = self.out_features // self.tp_size
        lo, hi = self.tp_rank * rows, (self.tp_rank + 1) * rows
        self.weight.data = weight[lo:hi].detach().clone().to(self.weight)
        if self.bias is not None:
            self.bias.data = bias[lo:hi].detach().clone().to(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = CopyToTPRegion.apply(x, self.group).reshape(-1, shape[-1])  # (N, in)
        y2 = F.linear(x2, self.weight, self.bias)  # (N, out/R)
        return y2.reshape(*shape[:-1], y2.shape[-1])


class RowParallelLinear(nn.Module):
    """Z = sum_r X_r V_r^T + b. V (out, in) is split by input columns: rank r holds r*in/R .. (r+1)*in/R - 1.

    Input: this rank's shard X_r (..., in/R), e.g. a column-parallel output. Output: the full Z (..., out) on
    every rank. Parameters: weight (out, in/R), bias (out,) whole, added once, after the sum.
    Raises ValueError if R does not divide in.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, *, group=None, dtype=None, device=None
    ) -> None:
        super().__init__()
        self.group = group
        self.tp_size, self.tp_rank = dist.get_world_size(group), dist.get_rank(group)
        self.in_features, self.out_features = in_features, out_features
        if in_features % self.tp_size != 0:
            raise ValueError(f"RowParallelLinear: {self.tp_size} ranks cannot split {in_features} inputs")
        cols = in_features // self.tp_size
        self.weight = nn.Parameter(torch.randn(out_features, cols, dtype=dtype, device=device) * 0.02)
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype, device=device)) if bias else None

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shard of the dense layer's weight (out, in) and its whole bias (out,)."""
        cols = self.in_features // self.tp_size
        self.weight.data = weight[:, self.tp_rank * cols : (self.tp_rank + 1) * cols].detach().clone()
        if self.bias is not None:
            self.bias.data = bias.detach().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = ReduceFromTPRegion.apply(F.linear(x, self.weight), self.group)  # (..., out), full sum
        if self.bias is not None:
            z = z + self.bias
        return z


# ---------------------------------------------------------------------------------------------------------
# blocks


class TensorParallelMLP(nn.Module):
    """GELU(X A^T + a) B^T + b with A column-parallel (`up_proj`) and B row-parallel (`down_proj`).

    GELU acts elementwise, so it applies to each rank's shard of X A^T on its own (Megatron Sec. 3): one
    all-reduce in forward (g in down_proj), one in backward (f in up_proj). GELU is F.gelu (exact erf form).
    """

    def __init__(self, hidden: int, ffn: int, *, group=None, dtype=None, device=None) -> None:
        super().__init__()
        self.up_proj = ColumnParallelLinear(hidden, ffn, True, group=group, dtype=dtype, device=device)
        self.down_proj = RowParallelLinear(ffn, hidden, True, group=group, dtype=dtype, device=device)

    def load_full(
        self, w_up: torch.Tensor, b_up: torch.Tensor, w_down: torch.Tensor, b_down: torch.Tensor
    ) -> None:
        """Load the dense MLP's weights: w_up (F, H), b_up (F,), w_down (H, F), b_down (H,)."""
        self.down_proj.load_full(w_down, b_down)
        self.up_proj.load_full(w_up, b_up)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up_proj(x)  # (..., F/R)
        h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))  # exact GELU, elementwise on the shard
        return self.down_proj(h)


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
            raise ValueError(f"{num_heads} heads cannot be split evenly over {self.tp_size} ranks")
        self.heads_here = num_heads // self.tp_size
        self.hd = hidden // num_heads
        self.qkv_proj = ColumnParallelLinear(hidden, 3 * hidden, group=group, dtype=dtype, device=device)
        self.out_proj = RowParallelLinear(hidden, hidden, group=group, dtype=dtype, device=device)

    @torch.no_grad()
    def load_full(self, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o) -> None:
        """Load the dense block's weights: w_q, w_k, w_v, w_o (H, H) and biases (H,)."""
        R, r = self.tp_size, self.tp_rank
        w = torch.cat([w_q.tensor_split(R)[r], w_k.tensor_split(R)[r], w_v.tensor_split(R)[r]])
        b = torch.cat([b_q.tensor_split(R)[r], b_k.tensor_split(R)[r], b_v.tensor_split(R)[r]])
        self.qkv_proj.weight.copy_(w)
        self.qkv_proj.bias.copy_(b)
        self.out_proj.load_full(w_o, b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        S = x.shape[-2]
        local = self.heads_here * self.hd  # H/R
        q, k, v = torch.split(self.qkv_proj(x), local, dim=-1)  # each (B, S, H/R)
        allowed = torch.tril(torch.ones(S, S, dtype=torch.bool, device=x.device))  # key j <= query i
        outs = []
        for h in range(self.heads_here):  # one local head at a time
            cols = slice(h * self.hd, (h + 1) * self.hd)
            scores = q[..., cols] @ k[..., cols].transpose(-2, -1) * (1.0 / math.sqrt(self.hd))  # (B, S, S)
            scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
            weights = torch.softmax(scores, dim=-1)
            outs.append(weights @ v[..., cols])  # (B, S, hd)
        return self.out_proj(torch.cat(outs, dim=-1))  # (B, S, H)
