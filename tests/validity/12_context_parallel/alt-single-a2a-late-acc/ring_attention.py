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
    if layout == "contiguous":
        if S % P:
            raise ValueError(f"S = {S} does not divide by P = {P}")
        s = S // P
        return torch.arange(rank * s, rank * s + s)
    if layout == "zigzag":
        if S % (2 * P):
            raise ValueError(f"zig-zag needs S = {S} divisible by 2P = {2 * P}")
        c = S // (2 * P)
        idx = torch.arange(S).view(2 * P, c)
        return torch.cat([idx[rank], idx[2 * P - 1 - rank]])
    raise ValueError(f"unknown layout {layout!r}")


def causal_work(S: int, P: int, layout: str) -> list[list[int]]:
    """work[r][i]: the (query, key) pairs with key position <= query position between rank r's queries and
    the block it holds at ring step i (rank (r - i) mod P's keys). The cost of step i on rank r."""
    pos = torch.stack([shard_positions(S, P, r, layout) for r in range(P)])  # (P, s)
    seen = pos[:, None, :, None] >= pos[None, :, None, :]  # [r, j, query, key]: key of rank j visible
    pairs = seen.sum(dim=(2, 3))  # (P, P): pairs between rank r's queries and rank j's keys
    return [[int(pairs[r, (r - i) % P]) for i in range(P)] for r in range(P)]


def _global(group, rank: int) -> int:
    """Rank in `group` -> global rank, which is what dist.isend/irecv address."""
    return rank if group is None else dist.get_global_rank(group, rank)


def ring_send_recv(tensors: list[torch.Tensor], group=None) -> tuple[list[torch.Tensor], list]:
    """Start sending each tensor to rank r+1 and receiving one like it from rank r-1, without waiting.

    Returns (received buffers, requests). The buffers are valid, and the sent tensors may change, only after
    every request's .wait(). One isend and one irecv per tensor.
    """
    P, r = dist.get_world_size(group), dist.get_rank(group)
    bufs = [torch.empty_like(t) for t in tensors]
    recvs = [dist.irecv(b, _global(group, (r + P - 1) % P), group=group) for b in bufs]
    sends = [dist.isend(t, _global(group, (r + 1) % P), group=group) for t in tensors]
    return bufs, recvs + sends


def ring_attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, layout: str = "contiguous", group=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of this rank's queries over ALL S keys: returns (out (B, s, H, D), lse (B, s, H)).

    P steps; at step i hold the k/v block of rank (r - i) % P, attend to it and merge; start passing the
    block to r+1 (ring_send_recv) BEFORE computing on it, and pass it only P-1 times. Skip the computation
    of a block that the causal mask hides entirely. Only isend/irecv, no collectives.
    """
    P, r = dist.get_world_size(group), dist.get_rank(group)
    s = q.shape[1]
    q_pos = shard_positions(s * P, P, r, layout).to(q.device)
    out, lse = None, None
    cur = [k.contiguous(), v.contiguous()]
    for i in range(P):
        pending = ring_send_recv(cur, group) if i + 1 < P else None
        k_pos = shard_positions(s * P, P, (r - i) % P, layout).to(q.device)
        visible = (not causal) or bool((k_pos[None, :] <= q_pos[:, None]).any())
        if visible:
            o, lb = block_attention(q, cur[0], cur[1], q_pos, k_pos, causal=causal)
            out, lse = (o, lb) if out is None else merge_attention(out, lse, o, lb)
        if pending is not None:
            for req in pending[1]:
                req.wait()
            cur = pending[0]
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
    delta = torch.einsum("bshd,bshd->bsh", dout, out)
    dq = torch.zeros_like(q)
    k_cur, v_cur = k.contiguous(), v.contiguous()
    dk_acc, dv_acc = torch.zeros_like(k_cur), torch.zeros_like(v_cur)
    for i in range(P):
        k_pos = shard_positions(s * P, P, (r - i) % P, layout).to(q.device)
        if (not causal) or bool((k_pos[None, :] <= q_pos[:, None]).any()):
            gq, gk, gv = _block_grads(dout, q, k_cur, v_cur, lse, delta, q_pos, k_pos, causal)
            dq += gq
            dk_acc = dk_acc + gk
            dv_acc = dv_acc + gv
        # after the compute: k, v move on (not after the last step), the sums always do
        outgoing = [dk_acc, dv_acc] + ([k_cur, v_cur] if i < P - 1 else [])
        bufs, reqs = ring_send_recv(outgoing, group)
        for req in reqs:
            req.wait()
        dk_acc, dv_acc = bufs[0], bufs[1]
        if i < P - 1:
            k_cur, v_cur = bufs[2], bufs[3]
    return dq, dk_acc, dv_acc


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
