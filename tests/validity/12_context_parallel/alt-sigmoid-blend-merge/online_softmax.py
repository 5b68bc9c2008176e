"""Attention over one block of keys, and the log-sum-exp merge that lets the blocks arrive one at a time.

For the queries q and one block j of keys and values, with scores z = q k_j^T / sqrt(D):
    out_j = softmax(z) v_j        lse_j = log sum_k exp(z_k)        (per query row, per head)
Softmax over the union of two blocks weighs each block by its share of the joint normaliser, so two partial
results merge EXACTLY, in any order, from their (out, lse) alone (online softmax: Milakov & Gimelshein 2018,
arXiv 1805.02867; FlashAttention, Dao et al. 2022, arXiv 2205.14135, §3.1). Ring attention (Liu et al. 2023,
arXiv 2310.01889) merges P blocks so.
Check: `grade exercise 12`.
Shapes: B batch, Sq / Sk query / key tokens, H heads, D head dim; tensors are (B, S, H, D), flash-attn's
layout. lse is (B, Sq, H). q_pos (Sq,) and k_pos (Sk,) are GLOBAL token indices: with a causal mask, query i
sees key j iff k_pos[j] <= q_pos[i].
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def block_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    *,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention of q (B, Sq, H, D) over one block k, v (B, Sk, H, D), scaled by 1/sqrt(D).

    Returns (out (B, Sq, H, D), lse (B, Sq, H)). A query row that sees no key of this block (every key masked)
    gets out = 0 and lse = -inf, never NaN: with a causal mask and a zig-zag layout that happens all the time.
    """
    # Unnormalised weights with the row maximum shifted out; normalise after the matmul (not before).
    z = torch.einsum("bqhd,bkhd->bhqk", q, k) * (q.shape[-1] ** -0.5)
    if causal:
        hidden = k_pos.to(z.device).view(1, -1) > q_pos.to(z.device).view(-1, 1)  # (Sq, Sk)
        z = z.masked_fill(hidden, NEG_INF)
    m = z.amax(dim=-1, keepdim=True)  # (B, H, Sq, 1); -inf for a row that sees nothing
    seen = torch.isfinite(m)
    m0 = torch.where(seen, m, torch.zeros_like(m))
    e = torch.exp(z - m0)  # masked entries -> exactly 0, the others in (0, 1]
    s = e.sum(dim=-1, keepdim=True)  # >= 1 for a seen row, 0 otherwise
    num = torch.einsum("bhqk,bkhd->bqhd", e, v)
    denom = torch.where(seen, s, torch.ones_like(s)).squeeze(-1).transpose(1, 2)  # (B, Sq, H)
    out = num / denom.unsqueeze(-1)
    lse = torch.where(seen, m0 + torch.log(torch.where(seen, s, torch.ones_like(s))), m)
    return out, lse.squeeze(-1).transpose(1, 2).contiguous()


def merge_attention(
    out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor, block_lse: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge a block's (block_out, block_lse) into the running (out, lse); returns the new (out, lse).

    out and block_out are (B, S, H, D), lse and block_lse (B, S, H). Either side may be empty for some rows
    (lse = -inf, out = 0): the result must then be the other side exactly, and (0, -inf) if both are empty.
    """
    # Interpolation form: the block's share of the joint normaliser is sigmoid(lse_b - lse_a), so
    #   out = out_a + sigmoid(lse_b - lse_a) * (out_b - out_a),
    #   lse = max(lse_a, lse_b) + log1p(exp(-|lse_a - lse_b|)).
    # Only differences of lse's are ever exponentiated; the both-empty rows (-inf - -inf) are guarded.
    both_empty = torch.isneginf(lse) & torch.isneginf(block_lse)
    a = torch.where(both_empty, torch.zeros_like(lse), lse)
    b = torch.where(both_empty, torch.zeros_like(block_lse), block_lse)
    diff = b - a  # +-inf when exactly one side is empty, finite otherwise
    share = torch.sigmoid(diff)  # in [0, 1]: exactly 1 if a is empty, exactly 0 if b is empty
    new_out = out + share.unsqueeze(-1) * (block_out - out)
    new_lse = torch.maximum(a, b) + torch.log1p(torch.exp(-diff.abs()))
    new_lse = torch.where(both_empty, lse, new_lse)
    new_out = torch.where(both_empty.unsqueeze(-1), torch.zeros_like(new_out), new_out)
    return new_out, new_lse
