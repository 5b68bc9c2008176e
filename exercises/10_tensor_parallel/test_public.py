"""What this catches: the first things to get right in Megatron tensor parallelism, on 2 and 4 ranks.

Run them with `grade exercise 10`. Each check builds the dense layer or block in plain torch from random
float64 weights, runs forward and backward, and compares every rank's output and gradients with the dense
ones: rank r's weight gradient must equal its shard of the dense gradient, `dense.grad.chunk(R, dim)[r]`.
The hidden suite checks more: layers without a bias, 2-D inputs, local parameter shapes, no plain
nn.Linear left in a block, all-reduce counts of every layer, several heads per rank, indivisible head counts.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from coursekit.toy_models import dense_attention, dense_mlp
from grader.harness import World, assert_close

# float64: the ranks' partial sums are added in another order than the dense matmul adds them, so results
# agree to ~1e-16, not bit for bit. 1e-10 leaves room for that and for no real bug.
RTOL, ATOL = 1e-10, 1e-12


def rand(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def close(res, p: int, got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert_close(got, want, rtol=RTOL, atol=ATOL, rank=res.rank, world_size=p, what=what)


def grad(res, name: str) -> torch.Tensor:
    """The gradient of parameter `name` on this rank (named as in module.named_parameters())."""
    grads = res.value["grads"]
    assert name in grads, f"rank {res.rank}: no parameter named {name!r}; the layer has {sorted(grads)}"
    return grads[name]


def column_run(world: World) -> tuple[list, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A column-parallel layer on every rank; returns the results and the dense y, x.grad, w.grad, b.grad."""
    p = world.size
    w, b, x = (rand(8, 6, seed=0), rand(8, seed=1), rand(2, 3, 6, seed=2))
    w.requires_grad_(), b.requires_grad_(), x.requires_grad_()
    y = F.linear(x, w, b)
    grad_out = rand(2, 3, 8, seed=3)
    y.backward(grad_out)
    inputs = [
        dict(weight=w.detach(), bias=b.detach(), x=x.detach(), grad_out=grad_out.chunk(p, -1)[r])
        for r in range(p)
    ]
    return world.run("rank_programs:column", inputs=inputs), y.detach(), x.grad, w.grad, b.grad


@pytest.mark.part("10.column_parallel")
@pytest.mark.concept("column_output_shards")
def test_column_parallel(world: World) -> None:
    p = world.size
    results, y, _, w_grad, b_grad = column_run(world)
    for res in results:
        r = res.rank
        close(res, p, res.value["out"], y.chunk(p, -1)[r], "output (this rank's columns of Y)")
        close(res, p, grad(res, "weight"), w_grad.chunk(p, 0)[r], "weight gradient shard")
        close(res, p, grad(res, "bias"), b_grad.chunk(p, 0)[r], "bias gradient shard")


@pytest.mark.part("10.column_parallel")
@pytest.mark.concept("f_sums_input_grad")
def test_column_parallel_input_grad(world: World) -> None:
    results, _, x_grad, _, _ = column_run(world)
    for res in results:
        close(res, world.size, res.value["x_grad"], x_grad, "input gradient (all-reduced by f in backward)")
        assert res.value["all_reduces"] == {"forward": 0, "backward": 1}, res.value["all_reduces"]


def row_run(
    world: World, with_bias: bool
) -> tuple[list, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A row-parallel layer on every rank; returns the results and the dense y, x.grad, w.grad and b.grad."""
    p = world.size
    w, b, x = (rand(6, 8, seed=4), rand(6, seed=5), rand(2, 3, 8, seed=6))
    w.requires_grad_(), b.requires_grad_(), x.requires_grad_()
    y = F.linear(x, w, b if with_bias else None)
    grad_out = rand(2, 3, 6, seed=7)
    y.backward(grad_out)
    inputs = [
        dict(
            weight=w.detach(),
            bias=b.detach() if with_bias else None,
            x=x.detach().chunk(p, -1)[r],
            grad_out=grad_out,
        )
        for r in range(p)
    ]
    return world.run("rank_programs:row", inputs=inputs), y.detach(), x.grad, w.grad, b.grad


@pytest.mark.part("10.row_parallel")
@pytest.mark.concept("g_sums_partial_products")
def test_row_parallel(world: World) -> None:
    results, y, _, _, _ = row_run(world, with_bias=False)
    for res in results:
        close(res, world.size, res.value["out"], y, "output (the full sum, on every rank)")
        assert res.value["all_reduces"] == {"forward": 1, "backward": 0}, res.value["all_reduces"]


@pytest.mark.part("10.row_parallel")
@pytest.mark.concept("row_input_shards")
def test_row_parallel_shards(world: World) -> None:
    p = world.size
    results, _, x_grad, w_grad, _ = row_run(world, with_bias=False)
    for res in results:
        r = res.rank
        close(res, p, res.value["x_grad"], x_grad.chunk(p, -1)[r], "input gradient (this rank's slice of it)")
        close(res, p, grad(res, "weight"), w_grad.chunk(p, 1)[r], "weight gradient shard")


@pytest.mark.part("10.row_parallel")
@pytest.mark.concept("row_bias_once")
def test_row_parallel_bias(world: World) -> None:
    results, _, _, _, b_grad = row_run(world, with_bias=True)
    without, _, _, _, _ = row_run(world, with_bias=False)
    for res, plain in zip(results, without, strict=True):
        # your output with the bias minus without it: the bias, once (test_row_parallel checks the sum)
        added = res.value["out"] - plain.value["out"]
        close(res, world.size, added, rand(6, seed=5).expand_as(added), "output with minus without the bias")
        close(res, world.size, grad(res, "bias"), b_grad, "bias gradient (whole, not split)")


def mlp_run(world: World) -> tuple[list, torch.Tensor]:
    weights = [rand(16, 8, seed=8), rand(16, seed=9), rand(8, 16, seed=10), rand(8, seed=11)]
    x = rand(2, 3, 8, seed=12)
    y = dense_mlp(x, *weights)
    inputs = dict(weights=weights, x=x, grad_out=torch.ones_like(y))
    return world.run("rank_programs:mlp", inputs=inputs), y


@pytest.mark.part("10.mlp")
@pytest.mark.concept("mlp_gelu_per_shard")
def test_mlp_output(world: World) -> None:
    results, y = mlp_run(world)
    for res in results:
        close(res, world.size, res.value["out"], y, "MLP output")


@pytest.mark.part("10.mlp")
@pytest.mark.concept("mlp_one_all_reduce_each_way")
def test_mlp_one_all_reduce_each_way(world: World) -> None:
    results, _ = mlp_run(world)
    for res in results:
        assert res.value["all_reduces"] == {"forward": 1, "backward": 1}, res.value["all_reduces"]


def attention_run(world: World) -> tuple[list, torch.Tensor]:
    weights = [rand(8, 8, seed=20 + i) if i % 2 == 0 else rand(8, seed=20 + i) for i in range(8)]
    x = rand(2, 3, 8, seed=30)
    y = dense_attention(x, *weights, num_heads=4)
    inputs = dict(weights=weights, num_heads=4, x=x, grad_out=torch.ones_like(y))
    return world.run("rank_programs:attention", inputs=inputs), y


@pytest.mark.part("10.attention")
@pytest.mark.concept("attn_heads_local")
def test_attention_forward(world: World) -> None:
    results, y = attention_run(world)
    for res in results:
        close(res, world.size, res.value["out"], y, "attention output")


@pytest.mark.part("10.attention")
@pytest.mark.concept("attn_one_all_reduce_each_way")
def test_attention_one_all_reduce_each_way(world: World) -> None:
    results, _ = attention_run(world)
    for res in results:
        assert res.value["all_reduces"] == {"forward": 1, "backward": 1}, res.value["all_reduces"]
