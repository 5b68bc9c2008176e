"""Ring attention: every rank keeps its queries and passes its key/value block around the ring.

Each of P ranks holds s = S/P tokens of q, k and v. At step i (i = 0..P-1) rank r holds the k/v block of rank
(r - i) mod P: it attends its queries to that block, merges the result with online softmax, and passes the
block on to r+1 while it computes (Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers",
arXiv 2310.01889). After P-1 passes every query has seen every key, and no rank ever held more than two
blocks. Causal masking makes the work lopsided: with contiguous shards, rank 0's queries see only its own
block while rank P-1's see all P. The zig-zag layout cuts the sequence into 2P chunks and gives rank r chunks
r and 2P-1-r, an early one and a late one, so every rank does the same work at every step
(zhuzilin/ring-flash-attention, zigzag_ring_flash_attn.py; the HF Ultra-Scale Playbook, context parallelism).
Check: `grade exercise 12`.
Shapes: B batch, S tokens in all, P ranks, s = S/P, H heads, D head dim; q, k, v, out are (B, s, H, D), lse
(B, s, H). A rank's tokens are ordered as `shard_positions` lists them.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from online_softmax import NEG_INF, block_attention, merge_attention

LAYOUTS = ("contiguous", "zigzag")


def shard_positions(S: int, P: int, rank: int, layout: str) -> torch.Tensor:
    """Global positions (s,) int64 of rank `rank`'s tokens, in the order the rank stores them.

    contiguous: rank*s .. rank*s + s - 1. zigzag: cut 0..S-1 into 2P chunks of c = S/(2P); rank r holds
    chunk r, then chunk 2P-1-r. Raises ValueError if S does not divide evenly (by P, or by 2P for zigzag) or
    the layout is unknown.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
    parts = P if layout == "contiguous" else 2 * P
    if P < 1 or S % parts:
        raise ValueError(f"{S} tokens cannot be cut into {parts} equal chunks for layout {layout!r}")
    c = S // parts
    chunks = [rank] if layout == "contiguous" else [rank, 2 * P - 1 - rank]
    return torch.tensor([j * c + i for j in chunks for i in range(c)], dtype=torch.int64)


def causal_work(S: int, P: int, layout: str) -> list[list[int]]:
    """work[r][i]: the (query, key) pairs with key position <= query position between rank r's queries and
    the block it holds at ring step i (rank (r - i) mod P's keys). The cost of step i on rank r."""
    pos = [shard_positions(S, P, r, layout) for r in range(P)]
    table = []
    for r in range(P):
        row = []
        for i in range(P):
            kp = pos[(r - i) % P]
            row.append(int(sum(int((kp <= qp).sum()) for qp in pos[r])))
        table.append(row)
    return table


def _global(group, rank: int) -> int:
    """Rank in `group` -> global rank, which is what dist.isend/irecv address."""
    return rank if group is None else dist.get_global_rank(group, rank)


def ring_send_recv(tensors: list[torch.Tensor], group=None) -> tuple[list[torch.Tensor], list]:
    """Start sending each tensor to rank r+1 and receiving one like it from rank r-1, without waiting.

    Returns (received buffers, requests). The buffers are valid, and the sent tensors may change, only after
    every request's .wait(). One isend and one irecv per tensor.
    """
    P, r = dist.get_world_size(group), dist.get_rank(group)
    nxt, prv = _global(group, (r + 1) % P), _global(group, (r - 1) % P)
    received, requests = [], []
    for t in tensors:
        buf = torch.empty_like(t)
        requests.append(dist.isend(t.contiguous(), nxt, group=group))
        requests.append(dist.irecv(buf, prv, group=group))
        received.append(buf)
    return received, requests


def ring_attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, layout: str = "contiguous", group=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of this rank's queries over ALL S keys: returns (out (B, s, H, D), lse (B, s, H)).

    P steps; at step i hold the k/v block of rank (r - i) % P, attend to it and merge; start passing the
    block to r+1 (ring_send_recv) BEFORE computing on it, and pass it only P-1 times. Skip the computation
    of a block that the causal mask hides entirely. Only isend/irecv, no collectives.
    """
    P, r = dist.get_world_size(group), dist.get_rank(group)
    B, s, H, _ = q.shape
    q_pos = shard_positions(s * P, P, r, layout).to(q.device)
    out = torch.zeros_like(q)
    lse = torch.full((B, s, H), NEG_INF, dtype=q.dtype, device=q.device)
    kv = torch.stack([k, v])  # one message per step: k and v packed together
    for i in range(P):
        reqs = []
        if i < P - 1:
            (nxt_kv,), reqs = ring_send_recv([kv], group)  # start the pass before the compute
        src = (r - i) % P
        k_pos = shard_positions(s * P, P, src, layout).to(q.device)
        if not causal or bool(k_pos.min() <= q_pos.max()):
            o, lb = block_attention(q, kv[0], kv[1], q_pos, k_pos, causal=causal)
            out, lse = merge_attention(out, lse, o, lb)
        for req in reqs:
            req.wait()
        if i < P - 1:
            kv = nxt_kv
    return out, lse


def _block_grads(dout, q, k, v, lse, delta, q_pos, k_pos, causal):
    """One block's share of attention's backward, from the FINAL lse: (dq, dk, dv) for q and this block."""
    scale = q.shape[-1] ** -0.5
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale  # (B, H, s, s)
    if causal:
        scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], NEG_INF)
    probs = torch.exp(scores - lse.transpose(1, 2)[..., None])  # the full softmax's entries for this block
    dv = torch.einsum("bhqk,bqhd->bkhd", probs, dout)  # (B, s, H, D)
    dprobs = torch.einsum("bqhd,bkhd->bhqk", dout, v)  # (B, H, s, s)
    dscores = probs * (dprobs - delta.transpose(1, 2)[..., None])  # softmax backward, delta = rowsum(dP * P)
    dq = torch.einsum("bhqk,bkhd->bqhd", dscores, k) * scale
    dk = torch.einsum("bhqk,bqhd->bkhd", dscores, q) * scale
    return dq, dk.contiguous(), dv.contiguous()  # contiguous: dk and dv go on the wire


def ring_attention_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    *,
    causal: bool,
    layout: str = "contiguous",
    group=None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (dq, dk, dv), each (B, s, H, D), for THIS rank's q, k and v, given the forward's out and lse.

    k/v travel the ring as in forward (P-1 passes). dk/dv of a block are summed over every rank's queries:
    each rank adds its share to an accumulator that travels with the block, and one last pass (P in all)
    hands the finished sums of block r to rank r. `_block_grads` does one block's arithmetic.
    """
    P, r = dist.get_world_size(group), dist.get_rank(group)
    s = q.shape[1]
    q_pos = shard_positions(s * P, P, r, layout).to(q.device)
    delta = (dout * out).sum(dim=-1)  # (B, s, H)
    dq = torch.zeros_like(q)
    kv = torch.stack([k, v])
    acc = torch.zeros_like(kv)  # dk, dv of the block I hold, summed over the ranks it has visited
    for i in range(P):
        kv_reqs = []
        if i < P - 1:
            (nxt_kv,), kv_reqs = ring_send_recv([kv], group)
        src = (r - i) % P
        k_pos = shard_positions(s * P, P, src, layout).to(q.device)
        if not causal or bool(k_pos.min() <= q_pos.max()):
            dq_i, dk_i, dv_i = _block_grads(dout, q, kv[0], kv[1], lse, delta, q_pos, k_pos, causal)
            dq = dq + dq_i
            acc = acc + torch.stack([dk_i, dv_i])
        (acc,), acc_reqs = ring_send_recv([acc], group)  # P passes: the last one reaches the owner
        for req in kv_reqs + acc_reqs:
            req.wait()
        if i < P - 1:
            kv = nxt_kv
    return dq, acc[0].contiguous(), acc[1].contiguous()


class RingAttention(torch.autograd.Function):
    """Forward: ring_attention_forward. Backward: ring_attention_backward from the saved out and lse."""

    @staticmethod
    def forward(ctx, q, k, v, causal: bool, layout: str, group):
        out, lse = ring_attention_forward(q, k, v, causal=causal, layout=layout, group=group)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.layout, ctx.group = causal, layout, group
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        grads = ring_attention_backward(
            dout, q, k, v, out, lse, causal=ctx.causal, layout=ctx.layout, group=ctx.group
        )
        return (*grads, None, None, None)


def ring_attention(q, k, v, *, causal: bool, layout: str = "contiguous", group=None) -> torch.Tensor:
    """Differentiable ring attention on this rank's (B, s, H, D) shards."""
    return RingAttention.apply(q, k, v, causal, layout, group)
