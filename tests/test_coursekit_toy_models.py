"""coursekit.toy_models: the dense references of exercises 09 and 10 agree with torch's own modules."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from coursekit.toy_models import SGD, dense_attention, dense_mlp, linear_chain, train_sgd


def rand(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def chain_weights() -> list[torch.Tensor]:
    return [rand(6, 4, seed=0), rand(6, seed=1), rand(5, 6, seed=2), rand(5, seed=3)]


def test_linear_chain_order_and_copies() -> None:
    weights = chain_weights()
    model = linear_chain(weights)
    params = list(model.parameters())
    assert [p.shape for p in params] == [w.shape for w in weights]
    assert all(torch.equal(p, w) for p, w in zip(params, weights, strict=True))
    with torch.no_grad():
        params[0].add_(1.0)
    assert not torch.equal(params[0], weights[0]), "the model must copy the weights, not alias them"
    x = rand(3, 4, seed=4)
    want = F.linear(torch.tanh(F.linear(x, weights[0], weights[1])), weights[2], weights[3])
    assert torch.equal(linear_chain(weights)(x), want)


def test_linear_chain_head_first_registers_the_head_first() -> None:
    weights = chain_weights()
    model = linear_chain(weights, head_first=True)
    shapes = [tuple(p.shape) for p in model.parameters()]
    assert shapes == [(5, 6), (5,), (6, 4), (6,)]
    x = rand(3, 4, seed=5)
    assert torch.equal(model(x), linear_chain(weights)(x))  # same function, other registration order


def test_sgd_matches_torch_optim_bit_for_bit() -> None:
    x, y = rand(8, 4, seed=6), rand(8, 5, seed=7)
    ours = train_sgd(linear_chain(chain_weights()), x, y, steps=4, lr=0.1, momentum=0.9)
    model = linear_chain(chain_weights())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    for _ in range(4):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    for got, want in zip(ours, model.parameters(), strict=True):
        assert torch.equal(got, want.detach())


def test_sgd_skips_parameters_without_grad() -> None:
    p, q = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    opt = SGD([p, q], lr=0.5, momentum=0.9)
    p.grad = torch.tensor([1.0, 2.0])
    opt.step()
    assert torch.equal(p.detach(), torch.tensor([0.5, 0.0])) and torch.equal(q.detach(), torch.ones(2))


def test_dense_mlp_is_gelu_between_two_linears() -> None:
    x, w1, b1, w2, b2 = (
        rand(2, 3, 4, seed=8),
        rand(8, 4, seed=9),
        rand(8, seed=10),
        rand(4, 8, seed=11),
        rand(4, seed=12),
    )
    h = F.linear(x, w1, b1)
    want = F.linear(0.5 * h * (1 + torch.erf(h / math.sqrt(2))), w2, b2)
    torch.testing.assert_close(dense_mlp(x, w1, b1, w2, b2), want, rtol=1e-14, atol=1e-14)


def test_dense_attention_matches_torch_multihead_attention() -> None:
    hidden, heads, seq = 8, 4, 5
    mha = torch.nn.MultiheadAttention(hidden, heads, batch_first=True, dtype=torch.float64)
    x = rand(2, seq, hidden, seed=13)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)  # True = may not attend
    want, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
    got = dense_attention(
        x, w_q, b_q, w_k, b_k, w_v, b_v, mha.out_proj.weight, mha.out_proj.bias, num_heads=heads
    )
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_dense_attention_is_causal() -> None:
    weights = [rand(8, 8, seed=20 + i) if i % 2 == 0 else rand(8, seed=20 + i) for i in range(8)]
    x = rand(1, 4, 8, seed=30)
    y = dense_attention(x, *weights, num_heads=2)
    x2 = x.clone()
    x2[:, 3] += 1.0  # changing the last position must not change the earlier outputs
    y2 = dense_attention(x2, *weights, num_heads=2)
    assert torch.equal(y[:, :3], y2[:, :3]) and not torch.equal(y[:, 3], y2[:, 3])
