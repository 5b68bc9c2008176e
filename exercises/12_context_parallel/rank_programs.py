"""Trusted rank programs for exercise 12: run Ulysses forward and backward, and weigh its all-to-alls.

The harness counts send/recv bytes itself (ring attention needs nothing more), but it records collectives
by name only. `AllToAllBytes` wraps dist.all_to_all_single and dist.all_to_all for the duration of one call
and adds up the bytes each one sends to OTHER ranks (the slice a rank keeps never leaves it). Call them as
`dist.all_to_all_single(...)`: a name imported with `from torch.distributed import ...` before the wrap
is not seen.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

NAMES = ("all_to_all_single", "all_to_all")


class AllToAllBytes:
    """Context manager: `.calls`, one entry per all-to-all, the bytes this rank sent to other ranks."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size, self.calls = rank, world_size, []
        self._originals = {name: getattr(dist, name) for name in NAMES}

    def _single(self, output, input, output_split_sizes=None, input_split_sizes=None, *args, **kwargs):
        rows = input.shape[0] if input.dim() else 1
        row_bytes = input.numel() // max(rows, 1) * input.element_size()
        splits = input_split_sizes or [rows // self.world_size] * self.world_size
        self.calls.append(sum(n for j, n in enumerate(splits) if j != self.rank) * row_bytes)
        original = self._originals["all_to_all_single"]
        return original(output, input, output_split_sizes, input_split_sizes, *args, **kwargs)

    def _list(self, output_tensor_list, input_tensor_list, *args, **kwargs):
        sent = [t.numel() * t.element_size() for j, t in enumerate(input_tensor_list) if j != self.rank]
        self.calls.append(sum(sent))
        return self._originals["all_to_all"](output_tensor_list, input_tensor_list, *args, **kwargs)

    def __enter__(self) -> AllToAllBytes:
        for module in (dist, c10d):
            module.all_to_all_single, module.all_to_all = self._single, self._list
        return self

    def __exit__(self, *exc: object) -> None:
        for module in (dist, c10d):
            for name in NAMES:
                setattr(module, name, self._originals[name])


def _leaf(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)


def ulysses(
    ctx: Any, *, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, causal: bool
) -> dict[str, Any]:
    """ulysses_attention on this rank's (B, s, H, D) shards, then backward(dout); with all-to-all bytes."""
    ulysses_mod = ctx.submission("ulysses")
    q, k, v = (_leaf(t.to(ctx.device)) for t in (q, k, v))  # inputs arrive on the CPU
    dout = dout.to(ctx.device)
    with AllToAllBytes(ctx.rank, ctx.world_size) as a2a:
        out = ulysses_mod.ulysses_attention(q, k, v, causal=causal)
        forward = list(a2a.calls)
        out.backward(dout)
    return {
        "out": out.detach(),
        "grads": [q.grad, k.grad, v.grad],
        "fwd_bytes": forward,
        "bwd_bytes": a2a.calls[len(forward) :],
    }


def region(ctx: Any, *, which: str, x: torch.Tensor, dy: torch.Tensor) -> dict[str, Any]:
    """y = SeqToHead.apply(x) or HeadToSeq.apply(x); then y.backward(dy)."""
    ulysses_mod = ctx.submission("ulysses")
    fn = {"seq_to_head": ulysses_mod.SeqToHead, "head_to_seq": ulysses_mod.HeadToSeq}[which]
    x, dy = _leaf(x.to(ctx.device)), dy.to(ctx.device)
    with AllToAllBytes(ctx.rank, ctx.world_size) as a2a:
        y = fn.apply(x, None)
        y.backward(dy)
    return {"y": y.detach(), "x_grad": x.grad, "bytes": a2a.calls}


def ring_overlap(ctx: Any, *, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, Any]:
    """Non-causal ring_attention_forward, recording the order of isends and block computations.

    `block_attention` and `merge_attention` are looked up in ring_attention's namespace at call time, so
    wrapping them there sees each block's compute; `dist.isend` is wrapped for the duration. Returns
    "events": "send" or "compute" in the order they happened.
    """
    ring = ctx.submission("ring_attention")
    events: list[str] = []
    originals = {name: getattr(ring, name, None) for name in ("block_attention", "merge_attention")}
    isend = dist.isend

    def compute(name: str):  # record the first call of each pair (block_attention, then its merge)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if name == "block_attention" or not events or events[-1] != "compute":
                events.append("compute")
            return originals[name](*args, **kwargs)

        return wrapper

    def sending(*args: Any, **kwargs: Any) -> Any:
        events.append("send")
        return isend(*args, **kwargs)

    try:
        for name, original in originals.items():
            if original is not None:
                setattr(ring, name, compute(name))
        dist.isend = sending
        q, k, v = (t.to(ctx.device) for t in (q, k, v))
        ring.ring_attention_forward(q, k, v, causal=False, layout="contiguous")
    finally:
        dist.isend = isend
        for name, original in originals.items():
            if original is not None:
                setattr(ring, name, original)
    return {"events": events}
