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
        raise NotImplementedError("TODO(10.column_parallel): not implemented yet")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        raise NotImplementedError("TODO(10.column_parallel): not implemented yet")


class ReduceFromTPRegion(torch.autograd.Function):
    """g, where the row-parallel layer leaves the split region: x (..., out) is this rank's partial result,
    one of the R terms whose sum over the ranks of `group` is the layer's output.

    Forward returns the whole sum, the same on every rank. Backward receives the gradient of the loss with
    respect to that sum and must return the gradient with respect to this rank's term (Megatron-LM
    mappings.py).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        raise NotImplementedError("TODO(10.row_parallel): not implemented yet")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        raise NotImplementedError("TODO(10.row_parallel): not implemented yet")


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
        raise NotImplementedError("TODO(10.column_parallel): not implemented yet")

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shards of the dense layer's weight (out, in) and bias (out,) into the layer."""
        raise NotImplementedError("TODO(10.column_parallel): not implemented yet")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("TODO(10.column_parallel): not implemented yet")


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
        raise NotImplementedError("TODO(10.row_parallel): not implemented yet")

    @torch.no_grad()
    def load_full(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Copy this rank's shard of the dense layer's weight (out, in) and its whole bias (out,)."""
        raise NotImplementedError("TODO(10.row_parallel): not implemented yet")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("TODO(10.row_parallel): not implemented yet")


# ---------------------------------------------------------------------------------------------------------
# blocks


class TensorParallelMLP(nn.Module):
    """GELU(X A^T + a) B^T + b on every rank, A (F, H) split in `up_proj` (a ColumnParallelLinear(H, F)) and
    B (H, F) split in `down_proj` (a RowParallelLinear(F, H)). GELU is F.gelu (exact erf form).

    Budget: one all-reduce in forward and one in backward for the whole block (Megatron Sec. 3).
    """

    def __init__(self, hidden: int, ffn: int, *, group=None, dtype=None, device=None) -> None:
        super().__init__()
        raise NotImplementedError("TODO(10.mlp): not implemented yet")

    def load_full(
        self, w_up: torch.Tensor, b_up: torch.Tensor, w_down: torch.Tensor, b_down: torch.Tensor
    ) -> None:
        """Load the dense MLP's weights: w_up (F, H), b_up (F,), w_down (H, F), b_down (H,)."""
        raise NotImplementedError("TODO(10.mlp): not implemented yet")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("TODO(10.mlp): not implemented yet")


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
        raise NotImplementedError("TODO(10.attention): not implemented yet")

    @torch.no_grad()
    def load_full(self, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o) -> None:
        """Load the dense block's weights: w_q, w_k, w_v, w_o (H, H) and biases (H,)."""
        raise NotImplementedError("TODO(10.attention): not implemented yet")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("TODO(10.attention): not implemented yet")
