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
    ### BEGIN SOLUTION 12.online_softmax
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * q.shape[-1] ** -0.5  # (B, H, Sq, Sk)
    if causal:
        hidden = k_pos[None, :] > q_pos[:, None]  # (Sq, Sk): the key is in this query's future
        scores = scores.masked_fill(hidden, NEG_INF)
    lse = torch.logsumexp(scores, dim=-1)  # (B, H, Sq); -inf for a row whose keys are all masked
    # softmax = exp(z - lse). On an all-masked row that is exp(-inf - (-inf)) = exp(nan): subtract 0
    # there instead, and every exp(-inf) is an honest 0.
    probs = torch.exp(scores - lse.masked_fill(lse == NEG_INF, 0.0)[..., None])  # (B, H, Sq, Sk)
    out = torch.einsum("bhqk,bkhd->bqhd", probs, v)  # (B, Sq, H, D)
    return out, lse.transpose(1, 2)  # lse (B, Sq, H), like out without D
    ### END SOLUTION


def merge_attention(
    out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor, block_lse: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge a block's (block_out, block_lse) into the running (out, lse); returns the new (out, lse).

    out and block_out are (B, S, H, D), lse and block_lse (B, S, H). Either side may be empty for some rows
    (lse = -inf, out = 0): the result must then be the other side exactly, and (0, -inf) if both are empty.
    """
    ### BEGIN SOLUTION 12.online_softmax
    new_lse = torch.logaddexp(lse, block_lse)  # (B, S, H); stable, and -inf only if both are -inf
    safe = new_lse.masked_fill(new_lse == NEG_INF, 0.0)  # so that -inf - (-inf) never happens below
    # each side's weight is its share of the new normaliser: exp(lse_side - new_lse), in [0, 1]
    out = torch.exp(lse - safe)[..., None] * out + torch.exp(block_lse - safe)[..., None] * block_out
    return out, new_lse
    ### END SOLUTION
