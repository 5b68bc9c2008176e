"""Attention over one block of keys, and the log-sum-exp merge that lets the blocks arrive one at a time.

For the queries q and one block j of keys and values, with scores z = q k_j^T / sqrt(D):
    out_j = softmax(z) v_j        lse_j = log sum_k exp(z_k)        (per query row, per head)
Softmax over the union of two blocks a and b weighs each block by its share of the normaliser, so
    lse = log(exp(lse_a) + exp(lse_b))        out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b
is EXACT, in any order (online softmax: Milakov & Gimelshein 2018, arXiv 1805.02867; FlashAttention, Dao
et al. 2022, arXiv 2205.14135, §3.1). Ring attention (Liu et al. 2023, arXiv 2310.01889) merges P blocks so.
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
    scale = 1.0 / q.shape[-1] ** 0.5
    z = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale  # (B, H, Sq, Sk)
    if causal:
        z = z.masked_fill(k_pos.view(1, -1) > q_pos.view(-1, 1), NEG_INF)
    m = z.amax(dim=-1, keepdim=True)  # row max; -inf for a row that sees nothing
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(z - m)  # exactly 0 where masked
    den = e.sum(dim=-1)  # (B, H, Sq)
    safe = torch.where(den > 0, den, torch.ones_like(den))
    out = torch.einsum("bhqk,bkhd->bqhd", e / safe[..., None], v)
    lse = torch.log(den) + m[..., 0]  # log 0 = -inf for empty rows
    return out, lse.transpose(1, 2)


def merge_attention(
    out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor, block_lse: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge a block's (block_out, block_lse) into the running (out, lse); returns the new (out, lse).

    out and block_out are (B, S, H, D), lse and block_lse (B, S, H). Either side may be empty for some rows
    (lse = -inf, out = 0): the result must then be the other side exactly, and (0, -inf) if both are empty.
    """
    m = torch.maximum(lse, block_lse)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # both empty: keep the arithmetic finite
    wa, wb = torch.exp(lse - m), torch.exp(block_lse - m)
    total = wa + wb
    new_lse = m + torch.log(total)
    safe = torch.where(total > 0, total, torch.ones_like(total))
    new_out = (wa[..., None] * out + wb[..., None] * block_out) / safe[..., None]
    return new_out, new_lse
