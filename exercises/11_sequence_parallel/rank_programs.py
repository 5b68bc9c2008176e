"""Trusted rank programs for exercise 11: run your code forward and backward; count what it keeps and says.

- Activation memory is measured, not estimated, and without clocks or RSS: `torch.autograd.graph.
  saved_tensors_hooks` sees every tensor that an op or a custom Function saves for backward. The program adds
  up the bytes of the distinct storages saved during the forward, leaving out parameters (weights are not
  activations). A view keeps its whole storage alive, so it counts in full.
- Collectives: the harness records each torch.distributed collective by name (`grader.harness.comm`); the
  program cuts that list at the end of the forward, so a test sees forward and backward apart.
- Dropout: `mlp` also returns the factor the block's dropout multiplied by, element by element (what your
  sequence_parallel_dropout returned over what it was given, recorded while the block runs), so that the
  judge builds the dense block's mask from the t ranks' own masks; `dropout_facts` calls your dropout the
  ways its contract allows and reports what came back.
- `tp_mlp`: the baseline, a plain Megatron tensor-parallel MLP (f and g are all-reduces) whose LayerNorm and
  dropout run on all S tokens on every rank. Same weights, same math, same dense result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from grader.harness import comm


class SavedBytes:
    """Context manager: total bytes of the distinct non-parameter storages autograd saves inside it."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self._params = {p.untyped_storage().data_ptr() for p in params}
        self._storages: dict[int, int] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in self._params:
            self._storages[storage.data_ptr()] = storage.nbytes()
        return t

    def __enter__(self) -> SavedBytes:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)

    @property
    def total(self) -> int:
        return sum(self._storages.values())


def _collectives() -> list[str]:
    return list(comm.RECORDER.collectives)


def _leaf(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)


def _on(ctx: Any, value: Any) -> Any:
    """Inputs arrive on the CPU; move tensors (also inside dicts) to this rank's device (a GPU under NCCL)."""
    if isinstance(value, dict):
        return {k: _on(ctx, v) for k, v in value.items()}
    return value.to(ctx.device) if isinstance(value, torch.Tensor) else value


# ---------------------------------------------------------------------------------------------------------
# programs


def region(ctx: Any, *, which: str, x: torch.Tensor, dy: torch.Tensor) -> dict[str, Any]:
    """y = gather_from_sequence_parallel(x) or reduce_scatter_to_sequence_parallel(x); then y.backward(dy)."""
    sp_comm = ctx.submission("sp_comm")
    x, dy = _on(ctx, x), _on(ctx, dy)
    fn = {
        "gather": sp_comm.gather_from_sequence_parallel,
        "scatter": sp_comm.reduce_scatter_to_sequence_parallel,
    }
    x = _leaf(x)
    y = fn[which](x)
    fwd = _collectives()
    y.backward(dy)
    return {"y": y.detach(), "x_grad": x.grad, "fwd": fwd, "bwd": _collectives()[len(fwd) :]}


def linear(ctx: Any, *, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, dy: torch.Tensor) -> dict:
    """AllGatherColumnLinear on this rank's shard of x and rows of the weight; forward, then backward(dy)."""
    sp_comm = ctx.submission("sp_comm")
    x, weight, bias, dy = _on(ctx, x), _on(ctx, weight), _on(ctx, bias), _on(ctx, dy)
    x, weight, bias = _leaf(x), nn.Parameter(weight.clone()), nn.Parameter(bias.clone())
    with SavedBytes([weight, bias]) as saved:
        y = sp_comm.AllGatherColumnLinear.apply(x, weight, bias, None)
    fwd = _collectives()
    y.backward(dy)
    return {
        "y": y.detach(),
        "grads": {"x": x.grad, "weight": weight.grad, "bias": bias.grad},
        "fwd": fwd,
        "bwd": _collectives()[len(fwd) :],
        "saved_bytes": saved.total,
    }


def mlp(
    ctx: Any,
    *,
    dense: dict[str, torch.Tensor],
    x: torch.Tensor,
    dy: torch.Tensor,
    p_drop: float,
    seed: int,
    sync: bool = False,
    baseline: bool = False,
) -> dict[str, Any]:
    """Your SequenceParallelMLP on this rank's rows of x (S, B, H): forward, backward(dy rows), optionally
    allreduce_sequence_parallel_grads; and, with `baseline`, the plain TP block's saved bytes too."""
    sp_mlp = ctx.submission("sp_mlp")
    dense, x, dy = _on(ctx, dense), _on(ctx, x), _on(ctx, dy)
    r, t = ctx.rank, ctx.world_size
    hidden, ffn = dense["fc1.weight"].shape[1], dense["fc1.weight"].shape[0]
    block = sp_mlp.SequenceParallelMLP(hidden, ffn, p_drop=p_drop, seed=seed).to(ctx.device)
    block.load_dense(dense)
    x_shard = _leaf(x.chunk(t, dim=0)[r])  # (s, B, H)
    dropped: list[torch.Tensor] = []
    with SavedBytes(list(block.parameters())) as saved, _recording_dropout(sp_mlp, dropped):
        y = block(x_shard)
    fwd = _collectives()
    y.backward(dy.chunk(t, dim=0)[r])
    bwd = _collectives()[len(fwd) :]
    partial = {name: p.grad.clone() for name, p in block.named_parameters()}
    if sync:
        block.allreduce_sequence_parallel_grads()
    out = {
        "y": y.detach(),
        "x_grad": x_shard.grad,
        "grads": {name: p.grad for name, p in block.named_parameters()},
        "partial_grads": partial,
        "shapes": {name: list(p.shape) for name, p in block.named_parameters()},
        "fwd": fwd,
        "bwd": bwd,
        "sync": _collectives()[len(fwd) + len(bwd) :],
        "saved_bytes": saved.total,
    }
    if p_drop > 0:  # the factor this rank's dropout multiplied by: 0 or 1 / (1 - p), element by element
        if len(dropped) != 1:  # the block drew its mask some other way: ask the function, on ones
            with torch.no_grad():
                dropped = [sp_mlp.sequence_parallel_dropout(torch.ones_like(x_shard), p_drop, seed)]
        out["drop"] = dropped[0]
    if baseline:
        y_tp, out["tp_saved_bytes"] = tp_mlp(dense, x, p_drop, seed)
        out["tp_y"] = y_tp.chunk(t, dim=0)[r]
    return out


@contextmanager
def _recording_dropout(sp_mlp: Any, dropped: list[torch.Tensor]) -> Iterator[None]:
    """While the block runs, record output / input of each sequence_parallel_dropout call it makes."""
    original = sp_mlp.sequence_parallel_dropout

    def recording(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = original(x, *args, **kwargs)
        if isinstance(out, torch.Tensor) and out.shape == x.shape:
            with torch.no_grad():  # outside autograd: nothing saved, the memory count stays the block's
                dropped.append(out.detach() / x.detach())  # x, a float activation, is never exactly 0
        return out

    sp_mlp.sequence_parallel_dropout = recording
    try:
        yield
    finally:
        sp_mlp.sequence_parallel_dropout = original


def dropout(ctx: Any, *, x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    return ctx.submission("sp_mlp").sequence_parallel_dropout(_on(ctx, x), p, seed)


def dropout_calls(ctx: Any, *, calls: list[dict[str, Any]]) -> list[torch.Tensor]:
    """sequence_parallel_dropout on ones, once per {seed, shape, p} of ``calls``, in that order, in one
    process: what a mask owes to the calls before it shows here."""
    drop = ctx.submission("sp_mlp").sequence_parallel_dropout
    return [
        drop(torch.ones(c["shape"], dtype=torch.float64, device=ctx.device), c["p"], c["seed"]) for c in calls
    ]


def dropout_facts(ctx: Any, *, x: torch.Tensor, p: float, seed: int) -> dict[str, Any]:
    """sequence_parallel_dropout on ones (twice, with the global RNG reseeded differently in between), on ones
    with seed + 1, and on x; and the bytes autograd keeps for it when x requires grad."""
    drop = ctx.submission("sp_mlp").sequence_parallel_dropout
    x = _on(ctx, x)
    ones = torch.ones_like(x)
    torch.manual_seed(1000 + ctx.rank)  # a mask that depends on the global RNG's state shows up here
    first = drop(ones, p, seed)
    torch.manual_seed(2000 + 7 * ctx.rank)
    torch.rand(17)
    again = drop(ones, p, seed)
    other_seed = drop(ones, p, seed + 1)
    leaf = _leaf(x)
    with SavedBytes([]) as saved:
        on_x = drop(leaf, p, seed)
    return {
        "first": first,
        "again": again,
        "other_seed": other_seed,
        "on_x": on_x.detach(),
        "saved_bytes": saved.total,
    }


# ---------------------------------------------------------------------------------------------------------
# the plain tensor-parallel baseline (Megatron-LM megatron/core/tensor_parallel/mappings.py: f and g)


class _CopyToTP(torch.autograd.Function):
    """f: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


def tp_mlp(dense: dict[str, torch.Tensor], x: torch.Tensor, p: float, seed: int) -> tuple[torch.Tensor, int]:
    """Plain TP forward on all S tokens of x (S, B, H): (output, bytes saved for backward on this rank)."""
    r, t = dist.get_rank(), dist.get_world_size()
    w = {
        "ln_w": dense["norm.weight"],
        "ln_b": dense["norm.bias"],
        "w1": dense["fc1.weight"].chunk(t, dim=0)[r],
        "b1": dense["fc1.bias"].chunk(t, dim=0)[r],
        "w2": dense["fc2.weight"].chunk(t, dim=1)[r],
        "b2": dense["fc2.bias"],
    }
    w = {k: nn.Parameter(v.clone()) for k, v in w.items()}
    x = _leaf(x)
    with SavedBytes(list(w.values())) as saved:
        h = F.layer_norm(x, x.shape[-1:], w["ln_w"], w["ln_b"])  # (S, B, H) on every rank
        h = F.gelu(F.linear(_CopyToTP.apply(h), w["w1"], w["b1"]))  # (S, B, F/t)
        h = _ReduceFromTP.apply(F.linear(h, w["w2"])) + w["b2"]  # (S, B, H), the whole sum
        # plain TP: every rank draws the same full-sequence mask from one shared seed, on the CPU
        keep = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype) >= p
        keep = keep.to(x.device)
        y = x + h * keep / (1 - p)
    return y.detach(), saved.total
