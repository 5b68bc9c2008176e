"""What this catches: the first things to get right in each part, on 2 and 4 ranks. Run: `grade exercise 11`.

Each test sends every rank its shard of a small float64 problem, runs your code through a trusted program in
rank_programs.py, and compares with the unsplit computation done here. The hidden suite checks more: every
gradient, the exact collectives of forward and backward, and the activation memory your block keeps.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.harness import World, assert_close, assert_equal

TOL = dict(rtol=1e-10, atol=1e-12)  # float64: only the order of the sums differs from the dense version
NO_ALL_REDUCE = ["all_reduce", "broadcast", "reduce"]  # sequence parallelism replaces them


def randn(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


@pytest.mark.part("11.regions")
@pytest.mark.concept("conjugate_collectives")
def test_gather_then_reduce_scatter(world: World) -> None:
    t, s = world.size, 2
    xs = [
        torch.arange(s * 3, dtype=torch.float64).view(s, 1, 3) + 100 * r for r in range(t)
    ]  # exact integers
    dys = [torch.ones(t * s, 1, 3, dtype=torch.float64) for _ in range(t)]
    inputs = [{"which": "gather", "x": x, "dy": dy} for x, dy in zip(xs, dys, strict=True)]
    for res in world.run("rank_programs:region", inputs=inputs, forbid=NO_ALL_REDUCE):
        assert_equal(res.value["y"], torch.cat(xs), rank=res.rank, world_size=t, what="all-gathered sequence")
        # every rank used every row once, so each row's gradient is 1 summed over t ranks
        want = torch.full((s, 1, 3), float(t), dtype=torch.float64)
        assert_equal(res.value["x_grad"], want, rank=res.rank, world_size=t, what="gradient of my shard")


@pytest.mark.part("11.linear")
@pytest.mark.concept("column_parallel_gradients")
def test_linear_forward(world: World) -> None:
    t, s, b, h, o = world.size, 2, 1, 4, 8
    x, w, bias = randn((t * s, b, h), 1), randn((o, h), 2), randn((o,), 3)
    dy = torch.zeros(t * s, b, o, dtype=torch.float64)
    inputs = [
        {"x": x.chunk(t)[r], "weight": w.chunk(t)[r], "bias": bias.chunk(t)[r], "dy": dy.chunk(t, dim=2)[r]}
        for r in range(t)
    ]
    y = x @ w.t() + bias  # (S, B, O)
    for res in world.run("rank_programs:linear", inputs=inputs, forbid=NO_ALL_REDUCE):
        want = y.chunk(t, dim=2)[res.rank]  # all S tokens, my O/t output features
        assert_close(res.value["y"], want, rank=res.rank, world_size=t, what="Y (S, B, O/t)", **TOL)


def dense_params() -> dict[str, torch.Tensor]:
    h, f = 4, 8
    return {
        "norm.weight": 1 + randn((h,), 1, 0.1),
        "norm.bias": randn((h,), 2, 0.1),
        "fc1.weight": randn((f, h), 3, 0.5),
        "fc1.bias": randn((f,), 4, 0.1),
        "fc2.weight": randn((h, f), 5, 0.3),
        "fc2.bias": randn((h,), 6, 0.1),
    }


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_block_matches_dense")
def test_block_forward_without_dropout(world: World) -> None:
    t, p = world.size, dense_params()
    x = randn((2 * t, 1, 4), 7)
    h = F.layer_norm(x, (4,), p["norm.weight"], p["norm.bias"])
    y = x + F.linear(F.gelu(F.linear(h, p["fc1.weight"], p["fc1.bias"])), p["fc2.weight"], p["fc2.bias"])
    inputs = dict(dense=p, x=x, dy=torch.zeros_like(x), p_drop=0.0, seed=0)
    for res in world.run("rank_programs:mlp", inputs=inputs, forbid=NO_ALL_REDUCE):
        want = y.chunk(t)[res.rank]
        assert_close(res.value["y"], want, rank=res.rank, world_size=t, what="block output, my tokens", **TOL)


@pytest.mark.part("11.dropout")
@pytest.mark.concept("per_rank_dropout_stream")
def test_dropout_differs_across_ranks(world: World) -> None:
    t, p, seed = world.size, 0.5, 5
    x = torch.ones(4, 2, 8, dtype=torch.float64)
    results = world.run("rank_programs:dropout", inputs={"x": x, "p": p, "seed": seed})
    masks = [
        res.value != 0 for res in results
    ]  # which elements each rank dropped (the scaling is not judged here)
    for r in range(1, t):
        assert not torch.equal(masks[r], masks[0]), (
            f"ranks 0 and {r} drew the same dropout mask; each rank needs its own random stream"
        )
