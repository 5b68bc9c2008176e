"""Tiny dense models built from given weights: the single-device references of exercises 09 and 10.

The judge computes expected values with these; rank programs build the same models on every rank. Every
function takes its weights as arguments, so both sides start from bit-identical tensors.
Shapes: B batch, S sequence, H hidden, F ffn (MLP inner) size, nh heads, hd = H / nh head size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------------------
# exercise 09: a chain of Linear layers with tanh between them


class HeadFirstChain(nn.Module):
    """Two Linear layers whose registration order is the reverse of their use: `head` is registered first.

    backward produces `head`'s gradients first, while bucketing by reverse registration order puts `body`
    in bucket 0; that mismatch is what this model is for.
    """

    def __init__(self, body: nn.Linear, head: nn.Linear) -> None:
        super().__init__()
        self.head = head  # registered first, used last
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(x)))


def linear_chain(weights: list[torch.Tensor], *, head_first: bool = False) -> nn.Module:
    """Linear layers from [w0, b0, w1, b1, ...] (wi of shape (out, in)), with tanh between consecutive layers.

    Parameter order (model.parameters()) is w0, b0, w1, b1, ... unless `head_first`, which takes exactly two
    layers and registers the second one (the head) first: w1, b1, w0, b0. Weights are copied, never aliased.
    """
    if len(weights) % 2:
        raise ValueError("weights must alternate weight, bias")
    layers = []
    for w, b in zip(weights[::2], weights[1::2], strict=True):
        layer = nn.Linear(w.shape[1], w.shape[0], dtype=w.dtype, device=w.device)
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(b)
        layers.append(layer)
    if head_first:
        if len(layers) != 2:
            raise ValueError("head_first takes exactly two layers")
        return HeadFirstChain(body=layers[0], head=layers[1])
    chain: list[nn.Module] = []
    for layer in layers:
        chain += [layer, nn.Tanh()]
    return nn.Sequential(*chain[:-1])  # no tanh after the last layer


class SGD:
    """torch.optim.SGD's update (momentum, no dampening, no weight decay, not Nesterov), written out.

    v = g at the first step, then v = momentum * v + g; p -= lr * v. Parameters whose .grad is None are
    left alone. Written out because constructing torch.optim.SGD imports torch._dynamo: seconds of start-up
    in every fresh rank, which a 10 s per-test timeout on a loaded 2-core machine cannot afford.
    """

    def __init__(self, params: list[torch.Tensor], *, lr: float, momentum: float) -> None:
        self.params, self.lr, self.momentum = list(params), lr, momentum
        self.velocity: list[torch.Tensor | None] = [None] * len(self.params)

    @torch.no_grad()
    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            v = self.velocity[i]
            v = p.grad.clone() if v is None else v.mul_(self.momentum).add_(p.grad)
            self.velocity[i] = v
            p.add_(v, alpha=-self.lr)  # the same ops as torch's, so the same bits

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


def train_sgd(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, steps: int, lr: float, momentum: float
) -> list[torch.Tensor]:
    """`steps` full-batch SGD steps on the mean squared error; returns the parameters after the last step."""
    opt = SGD([p for p in model.parameters() if p.requires_grad], lr=lr, momentum=momentum)
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


# ---------------------------------------------------------------------------------------------------------
# exercise 10: a transformer MLP and a causal multi-head attention block, as plain functions


def dense_mlp(
    x: torch.Tensor, w_up: torch.Tensor, b_up: torch.Tensor, w_down: torch.Tensor, b_down: torch.Tensor
) -> torch.Tensor:
    """GELU(x A^T + a) B^T + b, the Megatron-LM MLP (Shoeybi et al. 2019, Sec. 3), exact (erf) GELU."""
    h = F.gelu(F.linear(x, w_up, b_up))  # (B, S, F)
    return F.linear(h, w_down, b_down)  # (B, S, H)


def dense_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    b_q: torch.Tensor,
    w_k: torch.Tensor,
    b_k: torch.Tensor,
    w_v: torch.Tensor,
    b_v: torch.Tensor,
    w_o: torch.Tensor,
    b_o: torch.Tensor,
    num_heads: int,
) -> torch.Tensor:
    """Causal multi-head self-attention: softmax(q k^T / sqrt(hd) + mask) v per head, heads concatenated.

    Head j owns features j*hd .. (j+1)*hd - 1 of q, k and v (output rows of w_q, w_k, w_v), as in
    torch.nn.MultiheadAttention. Position i attends to positions 0..i.
    """
    B, S, H = x.shape
    hd = H // num_heads

    def heads(t: torch.Tensor) -> torch.Tensor:  # (B, S, H) -> (B, nh, S, hd)
        return t.view(B, S, num_heads, hd).transpose(1, 2)

    q, k, v = (heads(F.linear(x, w, b)) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, nh, S, S)
    future = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)  # key j > query i
    probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1)  # (B, nh, S, S)
    o = (probs @ v).transpose(1, 2).reshape(B, S, H)  # (B, S, H), heads side by side
    return F.linear(o, w_o, b_o)  # (B, S, H)
