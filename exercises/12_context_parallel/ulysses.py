"""DeepSpeed-Ulysses: trade the sequence shard for a head shard with one all-to-all, attend, trade back.

Each of P ranks holds s = S/P tokens of all H heads. Attention mixes tokens but never heads, so after one
all-to-all that gives each rank ALL S tokens of H/P heads, attention runs locally, unchanged; a second
all-to-all returns the output to sequence shards (Jacobs et al. 2023, "DeepSpeed Ulysses", arXiv 2309.14509;
deepspeedai/DeepSpeed deepspeed/sequence/layer.py, which asserts that the heads divide by P).

    rank r: q, k, v (B, s, H, D) --all-to-all--> (B, S, H/P, D) --attention--> (B, S, H/P, D)
            --all-to-all--> out (B, s, H, D)

Traffic: an all-to-all keeps 1/P of each rank's tensor and sends the rest, so a rank sends
(P-1)/P * s*B*H*D elements per all-to-all, 4 all-to-alls forward (q, k, v in; out back). With N = S*B
tokens and h = H*D that is about 4Nh/P per rank, the DeepSpeed blog's per-link figure, where Megatron-SP's
all-gathers and reduce-scatters move 4Nh per link: Ulysses' traffic shrinks as P grows (ground-truth.md
§10.3). Check: `grade exercise 12`.
Shapes: B batch, S tokens, P ranks, s = S/P, H heads, D head dim; layout (B, S, H, D).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def seq_to_head(x: torch.Tensor, group=None) -> torch.Tensor:
    """(B, s, H, D), my tokens of every head -> (B, S, H/P, D), every token of my heads: head group r on rank
    r, rank j's tokens at rows j*s.. . One all-to-all (dist.all_to_all_single, or dist.all_to_all with lists).
    ValueError if H is not divisible by P."""
    raise NotImplementedError("TODO(12.ulysses_all_to_all): not implemented yet")


def head_to_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    """(B, S, H/P, D), every token of my heads -> (B, s, H, D), my tokens of every head. The inverse of
    seq_to_head. One all-to-all (dist.all_to_all_single, or dist.all_to_all with lists)."""
    raise NotImplementedError("TODO(12.ulysses_all_to_all): not implemented yet")


class SeqToHead(torch.autograd.Function):
    """Forward: seq_to_head. Backward: the gradient of the input (B, s, H, D)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        raise NotImplementedError("TODO(12.ulysses_all_to_all): not implemented yet")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        raise NotImplementedError("TODO(12.ulysses_all_to_all): not implemented yet")


class HeadToSeq(torch.autograd.Function):
    """Forward: head_to_seq. Backward: the gradient of the input (B, S, H/P, D)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        raise NotImplementedError("TODO(12.ulysses_all_to_all): not implemented yet")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        raise NotImplementedError("TODO(12.ulysses_all_to_all): not implemented yet")


def local_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> torch.Tensor:
    """Plain softmax attention over the whole sequence, (B, S, h, D) -> (B, S, h, D), scaled by 1/sqrt(D)."""
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * q.shape[-1] ** -0.5  # (B, h, S, S)
    if causal:
        S = q.shape[1]
        future = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)  # key after query
        scores = scores.masked_fill(future, float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", scores.softmax(dim=-1), v)


def ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, group=None):
    """Attention of this rank's tokens (B, s, H, D) over the whole sequence; returns (B, s, H, D).

    Differentiable (through SeqToHead / HeadToSeq). Contiguous shards: rank r holds tokens r*s .. r*s + s - 1.
    Raises ValueError, before any communication, if H is not divisible by P.
    """
    raise NotImplementedError("TODO(12.ulysses_attention): not implemented yet")
