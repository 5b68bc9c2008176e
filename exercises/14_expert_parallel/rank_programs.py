"""Trusted rank programs for exercise 14: run the student's dispatch/combine or MoE layer, and measure bytes.

Every dist.all_to_all_single the student makes is recorded on the way through: the input's shape, dtype and
element size, and the split sizes it was given. The judge computes the bytes from these. The student must
call it as `dist.all_to_all_single(...)` (looked up at call time); the count of calls the harness saw is
returned too, so a call that bypassed the recorder shows up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d


@contextmanager
def recording_all_to_all() -> Iterator[list[dict[str, Any]]]:
    """Wrap dist.all_to_all_single for the duration; yields the list that collects one dict per call."""
    calls: list[dict[str, Any]] = []
    original = dist.all_to_all_single

    def wrapper(output, input, output_split_sizes=None, input_split_sizes=None, *args: Any, **kwargs: Any):
        calls.append(
            {
                "shape": list(input.shape),
                "dtype": str(input.dtype).removeprefix("torch."),
                "element_size": input.element_size(),
                "input_split_sizes": None
                if input_split_sizes is None
                else [int(s) for s in input_split_sizes],
                "output_split_sizes": None
                if output_split_sizes is None
                else [int(s) for s in output_split_sizes],
            }
        )
        return original(output, input, output_split_sizes, input_split_sizes, *args, **kwargs)

    dist.all_to_all_single = c10d.all_to_all_single = wrapper
    try:
        yield calls
    finally:
        dist.all_to_all_single = c10d.all_to_all_single = original


def _on(ctx: Any, tensors: dict[str, Any]) -> dict[str, Any]:
    return {k: v.to(ctx.device) if isinstance(v, torch.Tensor) else v for k, v in tensors.items()}


def _shares_storage(out: Any, *inputs: torch.Tensor) -> bool:
    """Whether `out` (a non-empty tensor) lives in the memory of one of `inputs` (a view or the same one)."""
    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return False
    ptr = out.untyped_storage().data_ptr()
    return any(t.numel() and t.untyped_storage().data_ptr() == ptr for t in inputs)


def dispatch_combine(ctx: Any, **inputs: Any) -> dict[str, Any]:
    """dispatch(x, experts, keep, E); a trusted 'expert' scales row by (global expert id + 1); combine.

    Also returns the caller's tensors as they are after the calls ("after": x, experts, keep, gates, and the
    expert output handed to combine next to a copy taken before), and whether recv_x or y lives in the memory
    of a tensor the caller passed in ("shared")."""
    moe = ctx.submission("moe")
    a = _on(ctx, inputs)
    with recording_all_to_all() as calls:
        recv_x, plan = moe.dispatch(a["x"], a["experts"], a["keep"], a["num_experts"])
        local = a["num_experts"] // ctx.world_size
        # the layout contract: rows grouped by source rank, then local expert (counts in plan.recv_counts)
        labels = [
            e
            for source in range(ctx.world_size)
            for e in range(local)
            for _ in range(int(plan.recv_counts.reshape(ctx.world_size, local)[source, e]))
        ]
        label = torch.tensor(labels, dtype=torch.int64, device=ctx.device)  # (N_recv,) local expert of a row
        scale = (ctx.rank * local + label + 1).to(recv_x.dtype).unsqueeze(1)  # (N_recv, 1)
        expert_out = recv_x * scale
        expert_out_before = expert_out.clone()
        y = moe.combine(expert_out, plan, a["gates"])
    return {
        "after": {n: a[n] for n in ("x", "experts", "keep", "gates")} | {"expert_out": expert_out},
        "expert_out_before": expert_out_before,
        "shared": {
            "recv_x": _shares_storage(recv_x, a["x"], a["experts"], a["keep"]),
            "y": _shares_storage(y, expert_out, a["gates"]),
        },
        "recv_x": recv_x,
        "send_order": plan.send_order,
        "input_splits": plan.input_splits,
        "output_splits": plan.output_splits,
        "recv_counts": plan.recv_counts,
        "y": y,
        "calls": calls,
    }


def moe_layer(ctx: Any, **inputs: Any) -> dict[str, Any]:
    """moe_forward on this rank's tokens and experts; returns y, tokens_per_expert and the recorded calls."""
    moe = ctx.submission("moe")
    a = _on(ctx, inputs)
    forward: Callable[..., Any] = moe.moe_forward
    with recording_all_to_all() as calls:
        y, tokens_per_expert = forward(
            a["x"], a["router_weight"], a["w1"], a["w2"], a["k"], a["capacity_factor"]
        )
    return {"y": y, "tokens_per_expert": tokens_per_expert, "calls": calls}


def moe_layer_twice(ctx: Any, **inputs: Any) -> dict[str, Any]:
    """moe_forward twice in a row on the same tensors, as a training loop calls a layer: both outputs, and
    the caller's tensors (x, router_weight, w1, w2: its experts) as they are after each call (a change the
    second call undoes, such as a swap made twice, shows after the first)."""
    moe = ctx.submission("moe")
    a = _on(ctx, inputs)
    args = (a["x"], a["router_weight"], a["w1"], a["w2"], a["k"], a["capacity_factor"])
    ys, afters = [], []
    for _ in range(2):
        ys.append(moe.moe_forward(*args)[0])
        afters.append({name: a[name].clone() for name in ("x", "router_weight", "w1", "w2")})
    return {"ys": ys, "afters": afters}
