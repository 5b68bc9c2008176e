"""Megatron-LM tensor parallelism: split each weight matrix across R ranks, and all-reduce only where needed.

Column-parallel Y_r = X W_r^T (W's output rows split; Y stays split) feeds row-parallel Z = sum_r Y_r V_r^T
(V's input columns split); the sum is the one all-reduce. The f and g functions put the collectives in:
f = identity forward / all-reduce backward, g = all-reduce forward / identity backward.
Shoeybi et al. 2019, Sec. 3 and Fig. 3 (https://arxiv.org/abs/1909.08053). Check: `grade exercise 10`.
Shapes: B batch, S sequence, H hidden, F ffn size, R = tp world size, r = tp rank, nh heads, hd = H / nh.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------------------
# f and g, Megatron style: the collective works in place on the tensor it is given.


class CopyToTPRegion(torch.autograd.Function):
    """f: identity in forward; all-reduce (sum) of the gradient over `group` in backward.

    Every rank feeds the same X into its own shard, so dL/dX is the sum of every rank's contribution.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)  # an alias, so autograd still sees a new node

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)  # in place on the incoming gradient
        return grad, None


class ReduceFromTPRegion(torch.autograd.Function):
    """g: all-reduce (sum) over `group` in forward; identity in backward.

    The sum's gradient with respect to each partial sum is the incoming gradient itself.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        x = x.contiguous()
        dist.all_reduce(x, group=group)  # in place on the partial sum (Megatron's _reduce)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


# ---------------------------------------------------------------------------------------------------------
# the two layers


def _check_divides(n: int, tp_size: int, what: str) -> int:
    if n % tp_size:
        raise ValueError(f"{what}={n} does not divide by the tensor-parallel size {tp_size}")
    return n // tp_size


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
        self.local_out = _check_divides(out_features, self.tp_size, "out_features")
        kw = dict(dtype=dtype, device=device)
        self.weight = nn.Parameter(torch.zeros(self.local_out, in_features, **kw))
        if bias:
            self.bias = nn.Parameter(torch.zeros(self.local_out, **kw))
        else:
            self.register_parameter("bias", None)

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shards of the dense layer's weight (out, in) and bias (out,) into the layer."""
        start = self.tp_rank * self.local_out
        self.weight.copy_(weight.narrow(0, start, self.local_out))
        if self.bias is not None and bias is not None:
            self.bias.copy_(bias.narrow(0, start, self.local_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = CopyToTPRegion.apply(x, self.group)
        y = torch.matmul(x, self.weight.t())  # (..., out/R)
        return y if self.bias is None else y + self.bias


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
        self.local_in = _check_divides(in_features, self.tp_size, "in_features")
        kw = dict(dtype=dtype, device=device)
        self.weight = nn.Parameter(torch.zeros(out_features, self.local_in, **kw))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features, **kw))
        else:
            self.register_parameter("bias", None)

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shard of the dense layer's weight (out, in) and its whole bias (out,)."""
        self.weight.copy_(weight.narrow(1, self.tp_rank * self.local_in, self.local_in))
        if self.bias is not None and bias is not None:
            self.bias.copy_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = torch.einsum("...i,oi->...o", x, self.weight)  # (..., out): this rank's share of the sum
        z = ReduceFromTPRegion.apply(partial, self.group)
        return z if self.bias is None else z + self.bias


# ---------------------------------------------------------------------------------------------------------
# blocks


class TensorParallelMLP(nn.Module):
    """GELU(X A^T + a) B^T + b with A column-parallel (`up_proj`) and B row-parallel (`down_proj`).

    GELU acts elementwise, so it applies to each rank's shard of X A^T on its own (Megatron Sec. 3): one
    all-reduce in forward (g in down_proj), one in backward (f in up_proj). GELU is F.gelu (exact erf form).
    """

    def __init__(self, hidden: int, ffn: int, *, group=None, dtype=None, device=None) -> None:
        super().__init__()
        kw = dict(group=group, dtype=dtype, device=device)
        self.up_proj = ColumnParallelLinear(hidden, ffn, **kw)
        self.down_proj = RowParallelLinear(ffn, hidden, **kw)

    def load_full(
        self, w_up: torch.Tensor, b_up: torch.Tensor, w_down: torch.Tensor, b_down: torch.Tensor
    ) -> None:
        """Load the dense MLP's weights: w_up (F, H), b_up (F,), w_down (H, F), b_down (H,)."""
        self.up_proj.load_full(w_up, b_up)
        self.down_proj.load_full(w_down, b_down)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.up_proj(x), approximate="none"))


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
        kw = dict(group=group, dtype=dtype, device=device)
        self.qkv_proj = ColumnParallelLinear(hidden, 3 * hidden, **kw)
        self.out_proj = RowParallelLinear(hidden, hidden, **kw)
        self.local_heads = _check_divides(num_heads, self.tp_size, "num_heads")
        self.head_dim = hidden // num_heads

    @torch.no_grad()
    def load_full(self, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o) -> None:
        """Load the dense block's weights: w_q, w_k, w_v, w_o (H, H) and biases (H,)."""
        n, start = self.hidden // self.tp_size, self.tp_rank * (self.hidden // self.tp_size)
        self.qkv_proj.weight.copy_(torch.cat([w.narrow(0, start, n) for w in (w_q, w_k, w_v)]))
        self.qkv_proj.bias.copy_(torch.cat([b.narrow(0, start, n) for b in (b_q, b_k, b_v)]))
        self.out_proj.load_full(w_o, b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, _ = x.shape
        qkv = self.qkv_proj(x)  # (B, S, 3H/R) = [q_r | k_r | v_r]
        qkv = qkv.view(B, S, 3, self.local_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, nh/R, S, hd)
        o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)  # (B, nh/R, S, hd)
        o = o.transpose(1, 2).reshape(B, S, self.local_heads * self.head_dim)  # (B, S, H/R)
        return self.out_proj(o)
