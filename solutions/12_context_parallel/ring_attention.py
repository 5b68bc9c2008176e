"""Ring attention: every rank keeps its queries and passes its key/value block around the ring.

Each of P ranks holds s = S/P tokens of q, k and v. At every step a rank attends its queries to the k/v
block it holds, merges the result with online softmax, and passes the block on to r+1 while it computes
(Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers", arXiv 2310.01889). After P-1
passes every query has seen every key, and no rank ever held more than two
blocks. Causal masking makes the work lopsided: with contiguous shards, rank 0's queries see only its own
block while rank P-1's see all P. The zig-zag layout cuts the sequence into 2P chunks and gives every rank an
early one and a late one, so that every rank does the same work at every step
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

    contiguous: rank*s .. rank*s + s - 1. zigzag: cut 0..S-1 into 2P equal chunks; rank r holds chunk r (its
    early chunk) and then one late chunk, chosen so that every rank does the same causal work at every ring
    step (README, "Causal load balance"). Raises ValueError if S does not divide evenly (by P, or by 2P for
    zigzag) or the layout is unknown.
    """
    ### BEGIN SOLUTION 12.load_balance
    if layout == "contiguous":
        if S % P:
            raise ValueError(f"S = {S} tokens do not split evenly over P = {P} ranks")
        s = S // P
        return torch.arange(rank * s, (rank + 1) * s)
    if layout == "zigzag":
        if S % (2 * P):
            raise ValueError(f"zigzag needs S = {S} divisible by 2P = {2 * P}")
        c = S // (2 * P)
        late = 2 * P - 1 - rank  # the chunk that mirrors chunk `rank` from the end
        return torch.cat([torch.arange(rank * c, (rank + 1) * c), torch.arange(late * c, (late + 1) * c)])
    raise ValueError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
    ### END SOLUTION


def causal_work(S: int, P: int, layout: str) -> list[list[int]]:
    """work[r][i]: the (query, key) pairs with key position <= query position between rank r's queries and
    the block it holds at ring step i (step 0: its own block; blocks move to r+1 between steps). The cost
    of step i on rank r."""
    ### BEGIN SOLUTION 12.load_balance
    pos = [shard_positions(S, P, r, layout) for r in range(P)]
    # each step ends when the SLOWEST rank finishes: the ring runs at the pace of max(work[.][i])
    return [[int((pos[(r - i) % P][None, :] <= pos[r][:, None]).sum()) for i in range(P)] for r in range(P)]
    ### END SOLUTION


def _global(group, rank: int) -> int:
    """Rank in `group` -> global rank, which is what dist.isend/irecv address."""
    return rank if group is None else dist.get_global_rank(group, rank)


def ring_send_recv(tensors: list[torch.Tensor], group=None) -> tuple[list[torch.Tensor], list]:
    """Start sending each tensor to rank r+1 and receiving one like it from rank r-1, without waiting.

    Returns (received buffers, requests). The buffers are valid, and the sent tensors may change, only after
    every request's .wait(). One isend and one irecv per tensor.
    """
    ### BEGIN SOLUTION 12.ring_forward
    p, r = dist.get_world_size(group), dist.get_rank(group)
    right, left = _global(group, (r + 1) % p), _global(group, (r - 1) % p)
    received = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    requests = []
    for t, buf in zip(tensors, received, strict=True):
        # everyone sends first: a blocking send would wait for a recv that nobody has posted yet
        requests.append(dist.isend(t.contiguous(), right, group=group))  # gloo sends contiguous memory
        requests.append(dist.irecv(buf, left, group=group))
    return received, requests
    ### END SOLUTION


def ring_attention_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, layout: str = "contiguous", group=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of this rank's queries over ALL S keys: returns (out (B, s, H, D), lse (B, s, H)).

    Blocks travel to r+1 (ring_send_recv); each k and v block is passed P-1 times in all, and a pass is
    started BEFORE computing on the block it carries. Skip the computation of a block that the causal mask
    hides entirely. Only isend/irecv, no collectives.
    """
    ### BEGIN SOLUTION 12.ring_forward
    p, r = dist.get_world_size(group), dist.get_rank(group)
    S = q.shape[1] * p
    q_pos = shard_positions(S, p, r, layout)  # (s,)
    out = torch.zeros_like(q)  # (B, s, H, D): nothing seen yet ...
    lse = torch.full(q.shape[:-1], NEG_INF, dtype=q.dtype, device=q.device)  # (B, s, H): ... weight 0
    for i in range(p):
        if i < p - 1:  # the last block stays: every rank already has what it needs
            (k_next, v_next), requests = ring_send_recv([k, v], group)  # on the wire while we compute
        k_pos = shard_positions(S, p, (r - i) % p, layout).to(q.device)  # whose block this is
        if not causal or k_pos.min() <= q_pos.max():  # some query here sees some key there
            block_out, block_lse = block_attention(q, k, v, q_pos.to(q.device), k_pos, causal=causal)
            out, lse = merge_attention(out, lse, block_out, block_lse)
        if i < p - 1:
            for req in requests:
                req.wait()
            k, v = k_next, v_next
    return out, lse
    ### END SOLUTION


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

    dk and dv of a block are summed over every rank's queries and must end on the block's owner. Budget: only
    messages to r+1 and from r-1, (2(P-1) + 2P) blocks of B*s*H*D elements sent per rank (k and v passed P-1
    times, as in forward). `_block_grads` does one (query block, key block) pair's arithmetic.
    """
    ### BEGIN SOLUTION 12.ring_backward
    p, r = dist.get_world_size(group), dist.get_rank(group)
    S = q.shape[1] * p
    q_pos = shard_positions(S, p, r, layout).to(q.device)
    delta = (dout * out).sum(dim=-1)  # (B, s, H): sum_j P_ij dP_ij per query row, used by every block
    dq = torch.zeros_like(q)
    dk_recv = dv_recv = None  # the accumulators that arrive from rank r-1
    dkv_requests = []
    for i in range(p):
        if i < p - 1:
            (k_next, v_next), kv_requests = ring_send_recv([k, v], group)
        k_pos = shard_positions(S, p, (r - i) % p, layout).to(q.device)
        if not causal or k_pos.min() <= q_pos.max():
            dq_i, dk_i, dv_i = _block_grads(dout, q, k, v, lse, delta, q_pos, k_pos, causal)
            dq += dq_i
        else:  # hidden block: no compute, but its accumulators must still move on
            dk_i, dv_i = torch.zeros_like(k), torch.zeros_like(v)
        if i == 0:
            dk_acc, dv_acc = dk_i, dv_i  # my own block: I am the first to contribute
        else:
            for req in dkv_requests:  # the accumulators of block (r - i) % p, from rank r-1
                req.wait()
            dk_acc, dv_acc = dk_recv + dk_i, dv_recv + dv_i
        # pass the accumulators on with the block; after the p-th pass they reach their owner
        (dk_recv, dv_recv), dkv_requests = ring_send_recv([dk_acc, dv_acc], group)
        if i < p - 1:
            for req in kv_requests:
                req.wait()
            k, v = k_next, v_next
    for req in dkv_requests:
        req.wait()
    return dq, dk_recv, dv_recv  # dk/dv of my own block, summed over every rank's queries
    ### END SOLUTION


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
