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


@pytest.mark.part("10.column_parallel")
def test_column_parallel(world: World) -> None:
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
    for res in world.run("rank_programs:column", inputs=inputs):
        r = res.rank
        close(
            res, world.size, res.value["out"], y.detach().chunk(p, -1)[r], "output (this rank's columns of Y)"
        )
        close(res, world.size, res.value["x_grad"], x.grad, "input gradient (all-reduced by f in backward)")
        close(res, world.size, grad(res, "weight"), w.grad.chunk(p, 0)[r], "weight gradient shard")
        assert res.value["all_reduces"] == {"forward": 0, "backward": 1}, res.value["all_reduces"]


@pytest.mark.part("10.row_parallel")
def test_row_parallel(world: World) -> None:
    p = world.size
    w, b, x = (rand(6, 8, seed=4), rand(6, seed=5), rand(2, 3, 8, seed=6))
    w.requires_grad_(), b.requires_grad_(), x.requires_grad_()
    y = F.linear(x, w, b)
    grad_out = rand(2, 3, 6, seed=7)
    y.backward(grad_out)
    inputs = [
        dict(weight=w.detach(), bias=b.detach(), x=x.detach().chunk(p, -1)[r], grad_out=grad_out)
        for r in range(p)
    ]
    for res in world.run("rank_programs:row", inputs=inputs):
        r = res.rank
        close(res, world.size, res.value["out"], y.detach(), "output (the full sum, on every rank)")
        close(res, world.size, grad(res, "weight"), w.grad.chunk(p, 1)[r], "weight gradient shard")
        close(res, world.size, grad(res, "bias"), b.grad, "bias gradient (whole, not split)")
        assert res.value["all_reduces"] == {"forward": 1, "backward": 0}, res.value["all_reduces"]


@pytest.mark.part("10.mlp")
def test_mlp_one_all_reduce_each_way(world: World) -> None:
    weights = [rand(16, 8, seed=8), rand(16, seed=9), rand(8, 16, seed=10), rand(8, seed=11)]
    x = rand(2, 3, 8, seed=12)
    y = dense_mlp(x, *weights)
    for res in world.run("rank_programs:mlp", inputs=dict(weights=weights, x=x, grad_out=torch.ones_like(y))):
        close(res, world.size, res.value["out"], y, "MLP output")
        assert res.value["all_reduces"] == {"forward": 1, "backward": 1}, res.value["all_reduces"]


@pytest.mark.part("10.attention")
def test_attention_forward(world: World) -> None:
    weights = [rand(8, 8, seed=20 + i) if i % 2 == 0 else rand(8, seed=20 + i) for i in range(8)]
    x = rand(2, 3, 8, seed=30)
    y = dense_attention(x, *weights, num_heads=4)
    inputs = dict(weights=weights, num_heads=4, x=x, grad_out=torch.ones_like(y))
    for res in world.run("rank_programs:attention", inputs=inputs):
        close(res, world.size, res.value["out"], y, "attention output")
        assert res.value["all_reduces"] == {"forward": 1, "backward": 1}, res.value["all_reduces"]
