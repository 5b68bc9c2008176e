"""Megatron tensor parallelism (alternative-correct case)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class CopyToTPRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        total = grad.clone()
        dist.all_reduce(total, group=ctx.group)  # the R branches' shares of dL/dX, summed
        return total, None


class ReduceFromTPRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        total = x.clone()
        dist.all_reduce(total, group=group)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad.clone(), None


class ColumnParallelLinear(nn.Module):
    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, *, group=None, dtype=None, device=None
    ) -> None:
        super().__init__()
        self.group = group
        self.tp_size, self.tp_rank = dist.get_world_size(group), dist.get_rank(group)
        self.in_features, self.out_features = in_features, out_features
        if out_features % self.tp_size != 0:
            raise ValueError(f"{out_features} output features do not split over {self.tp_size} ranks")
        rows = out_features // self.tp_size
        self.weight = nn.Parameter(torch.zeros(rows, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = nn.Parameter(torch.zeros(rows, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        rows = self.out_features // self.tp_size
        start = self.tp_rank * rows
        self.weight.copy_(weight.narrow(0, start, rows))
        if self.bias is not None:
            self.bias.copy_(bias.narrow(0, start, rows))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(CopyToTPRegion.apply(x, self.group), self.weight.t())
        return y if self.bias is None else torch.add(y, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, *, group=None, dtype=None, device=None
    ) -> None:
        super().__init__()
        self.group = group
        self.tp_size, self.tp_rank = dist.get_world_size(group), dist.get_rank(group)
        self.in_features, self.out_features = in_features, out_features
        if in_features % self.tp_size != 0:
            raise ValueError(f"{in_features} input features do not split over {self.tp_size} ranks")
        cols = in_features // self.tp_size
        self.weight = nn.Parameter(torch.zeros(out_features, cols, dtype=dtype, device=device))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        cols = self.in_features // self.tp_size
        self.weight.copy_(weight.narrow(1, self.tp_rank * cols, cols))
        if self.bias is not None:
            self.bias.copy_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = ReduceFromTPRegion.apply(torch.matmul(x, self.weight.t()), self.group)
        return z if self.bias is None else torch.add(z, self.bias)  # once, after the sum


class TensorParallelMLP(nn.Module):
    def __init__(self, hidden: int, ffn: int, *, group=None, dtype=None, device=None) -> None:
        super().__init__()
        self.up_proj = ColumnParallelLinear(hidden, ffn, group=group, dtype=dtype, device=device)
        self.down_proj = RowParallelLinear(ffn, hidden, group=group, dtype=dtype, device=device)

    def load_full(self, w_up, b_up, w_down, b_down) -> None:
        self.up_proj.load_full(w_up, b_up)
        self.down_proj.load_full(w_down, b_down)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.up_proj(x), approximate="none"))


class TensorParallelAttention(nn.Module):
    def __init__(self, hidden: int, num_heads: int, *, group=None, dtype=None, device=None) -> None:
        super().__init__()
        self.hidden, self.num_heads = hidden, num_heads
        self.tp_size, self.tp_rank = dist.get_world_size(group), dist.get_rank(group)
        if num_heads % self.tp_size != 0:
            raise ValueError(f"{num_heads} heads do not split over {self.tp_size} ranks")
        self.local_heads = num_heads // self.tp_size
        self.head_size = hidden // num_heads
        self.qkv_proj = ColumnParallelLinear(hidden, 3 * hidden, group=group, dtype=dtype, device=device)
        self.out_proj = RowParallelLinear(hidden, hidden, group=group, dtype=dtype, device=device)

    @torch.no_grad()
    def load_full(self, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o) -> None:
        width = self.hidden // self.tp_size
        start = self.tp_rank * width
        for block, (w, b) in enumerate([(w_q, b_q), (w_k, b_k), (w_v, b_v)]):
            self.qkv_proj.weight.narrow(0, block * width, width).copy_(w.narrow(0, start, width))
            self.qkv_proj.bias.narrow(0, block * width, width).copy_(b.narrow(0, start, width))
        self.out_proj.load_full(w_o, b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        nh, hd = self.local_heads, self.head_size
        qkv = self.qkv_proj(x).reshape(batch, seq, 3, nh, hd).permute(2, 0, 3, 1, 4)  # (3, B, nh, S, hd)
        q, k, v = (t.reshape(batch * nh, seq, hd) for t in qkv.unbind(0))
        scores = torch.einsum("nid,njd->nij", q, k) / math.sqrt(hd)
        future = torch.full((seq, seq), float("-inf"), dtype=x.dtype, device=x.device).triu(1)
        weights = torch.softmax(scores + future, dim=-1)
        heads = torch.einsum("nij,njd->nid", weights, v).reshape(batch, nh, seq, hd)
        return self.out_proj(heads.permute(0, 2, 1, 3).reshape(batch, seq, nh * hd))
