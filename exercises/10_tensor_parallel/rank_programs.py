"""Trusted rank programs for exercise 10: build your TP module from dense weights, run forward and backward.

Every program takes the FULL dense weights (the same on every rank) and lets your `load_full` pick this
rank's shard. It returns plain tensors and facts:
  out            the module's output (this rank's shard for a lone column-parallel layer, else the full one)
  x_grad         the gradient of the input this rank was given
  grads / shapes {parameter name: .grad} and {parameter name: shape}, from module.named_parameters()
  all_reduces    {"forward": n, "backward": n}: dist.all_reduce calls during each phase
  dense_linears  names of submodules that are plain torch.nn.Linear (a TP module should have none)
  kinds          {attribute: True if it is an instance of your ColumnParallelLinear / RowParallelLinear}
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d


@contextmanager
def _counting_all_reduce(counts: dict[str, int], phase: list[str]) -> Iterator[None]:
    """Count dist.all_reduce calls per phase; the harness's own wrapper underneath still records them all."""
    original = dist.all_reduce

    def all_reduce(*args: Any, **kwargs: Any) -> Any:
        counts[phase[0]] += 1
        return original(*args, **kwargs)

    dist.all_reduce = c10d.all_reduce = all_reduce
    try:
        yield
    finally:
        dist.all_reduce = c10d.all_reduce = original


def _run(ctx: Any, module: torch.nn.Module, x: torch.Tensor, grad_out: torch.Tensor) -> dict[str, Any]:
    """Forward on x, backward with grad_out; gradients, shapes and collective counts."""
    x = x.to(ctx.device).requires_grad_()
    counts, phase = {"forward": 0, "backward": 0}, ["forward"]
    with _counting_all_reduce(counts, phase):
        out = module(x)
        phase[0] = "backward"
        out.backward(grad_out.to(ctx.device))
    return {
        "out": out.detach(),
        "x_grad": x.grad,
        "grads": {n: p.grad for n, p in module.named_parameters()},
        "shapes": {n: list(p.shape) for n, p in module.named_parameters()},
        "all_reduces": counts,
        "dense_linears": [n for n, m in module.named_modules() if type(m) is torch.nn.Linear],
    }


def _on(ctx: Any, tensors: list[torch.Tensor | None]) -> list[torch.Tensor | None]:
    return [None if t is None else t.to(ctx.device) for t in tensors]


def column(
    ctx: Any, *, weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor, grad_out: torch.Tensor
) -> dict[str, Any]:
    """ColumnParallelLinear(in, out).load_full(weight, bias); grad_out is this rank's shard (..., out/R)."""
    tp = ctx.submission("tensor_parallel")
    out_features, in_features = weight.shape
    layer = tp.ColumnParallelLinear(
        in_features, out_features, bias=bias is not None, dtype=weight.dtype, device=ctx.device
    )
    layer.load_full(*_on(ctx, [weight, bias]))
    return _run(ctx, layer, x, grad_out)


def row(
    ctx: Any, *, weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor, grad_out: torch.Tensor
) -> dict[str, Any]:
    """RowParallelLinear(in, out).load_full(weight, bias); x is this rank's shard (..., in/R)."""
    tp = ctx.submission("tensor_parallel")
    out_features, in_features = weight.shape
    layer = tp.RowParallelLinear(
        in_features, out_features, bias=bias is not None, dtype=weight.dtype, device=ctx.device
    )
    layer.load_full(*_on(ctx, [weight, bias]))
    return _run(ctx, layer, x, grad_out)


def mlp(ctx: Any, *, weights: list[torch.Tensor], x: torch.Tensor, grad_out: torch.Tensor) -> dict[str, Any]:
    """TensorParallelMLP(H, F).load_full(w_up, b_up, w_down, b_down)."""
    tp = ctx.submission("tensor_parallel")
    ffn, hidden = weights[0].shape
    block = tp.TensorParallelMLP(hidden, ffn, dtype=weights[0].dtype, device=ctx.device)
    block.load_full(*_on(ctx, weights))
    result = _run(ctx, block, x, grad_out)
    result["kinds"] = {
        "up_proj": isinstance(getattr(block, "up_proj", None), tp.ColumnParallelLinear),
        "down_proj": isinstance(getattr(block, "down_proj", None), tp.RowParallelLinear),
    }
    return result


def attention(
    ctx: Any, *, weights: list[torch.Tensor], num_heads: int, x: torch.Tensor, grad_out: torch.Tensor
) -> dict[str, Any]:
    """TensorParallelAttention(H, num_heads).load_full(w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o)."""
    tp = ctx.submission("tensor_parallel")
    hidden = weights[0].shape[0]
    block = tp.TensorParallelAttention(hidden, num_heads, dtype=weights[0].dtype, device=ctx.device)
    block.load_full(*_on(ctx, weights))
    result = _run(ctx, block, x, grad_out)
    result["kinds"] = {
        "qkv_proj": isinstance(getattr(block, "qkv_proj", None), tp.ColumnParallelLinear),
        "out_proj": isinstance(getattr(block, "out_proj", None), tp.RowParallelLinear),
    }
    return result


def construct_attention(ctx: Any, *, hidden: int, num_heads: int) -> dict[str, Any]:
    """Only construct TensorParallelAttention(hidden, num_heads); report the exception it raises, if any."""
    tp = ctx.submission("tensor_parallel")
    try:
        tp.TensorParallelAttention(hidden, num_heads, dtype=torch.float64, device=ctx.device)
    except Exception as exc:  # the test wants to see which one, and its message
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"raised": None, "message": ""}


def loaded_then_overwritten(
    ctx: Any, *, kind: str, weight: torch.Tensor, bias: torch.Tensor
) -> dict[str, Any]:
    """ColumnParallelLinear or RowParallelLinear(in, out).load_full(weight, bias); then the caller overwrites
    its dense weight and bias in place (as it would when it loads the next layer into the same buffers). The
    layer's parameters before and after that write."""
    tp = ctx.submission("tensor_parallel")
    cls = {"column": tp.ColumnParallelLinear, "row": tp.RowParallelLinear}[kind]
    out_features, in_features = weight.shape
    layer = cls(in_features, out_features, bias=True, dtype=weight.dtype, device=ctx.device)
    weight, bias = (t.to(ctx.device) for t in (weight, bias))
    layer.load_full(weight, bias)
    before = {n: p.detach().clone() for n, p in layer.named_parameters()}
    with torch.no_grad():
        weight.fill_(-7.0)
        bias.fill_(-7.0)
    return {"before": before, "after": {n: p.detach().clone() for n, p in layer.named_parameters()}}


def construct_linear(ctx: Any, *, kind: str, in_features: int, out_features: int) -> dict[str, Any]:
    """Only construct ColumnParallelLinear or RowParallelLinear(in, out); report the exception, if any."""
    tp = ctx.submission("tensor_parallel")
    cls = {"column": tp.ColumnParallelLinear, "row": tp.RowParallelLinear}[kind]
    try:
        cls(in_features, out_features, dtype=torch.float64, device=ctx.device)
    except Exception as exc:  # the test wants to see which one, and its message
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"raised": None, "message": ""}
