"""All-reduce two ways, from point-to-point messages only: a ring and recursive doubling.

Ring (Patarasuk & Yuan 2009): reduce-scatter then all-gather around the ring, 2(p-1) steps of one chunk each.
Every rank sends 2(p-1)/p * N elements, the bandwidth lower bound for any p, but pays 2(p-1) latencies.
Recursive doubling (Thakur, Rabenseifner & Gropp 2005): log2(p) rounds, each swapping the WHOLE tensor.
Few latencies, N * log2(p) elements sent: it wins on small messages, the ring wins on large ones.
Check: `grade exercise 02`.
Shapes: N = tensor.numel(), p = world size, r = this rank; a chunk holds ceil(N/p) or floor(N/p) elements.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist


def _global(group, rank: int) -> int:
    """Rank in `group` -> global rank, which is what dist.send/recv address."""
    return rank if group is None else dist.get_global_rank(group, rank)


def ring_allreduce(tensor: torch.Tensor, group=None) -> None:
    """In-place sum all-reduce of a contiguous `tensor` over `group`, as a ring.

    Chunks: `torch.tensor_split(tensor.view(-1), p)`, so chunk i has ceil(N/p) elements if i < N % p, else
    floor(N/p) (some are empty when N < p). Rank r sends only to (r+1) % p and receives only from (r-1) % p.
    Reduce-scatter, steps s = 0..p-2: send chunk (r - s) % p, receive chunk (r - s - 1) % p and ADD it in.
    After it, rank r holds the full sum of chunk (r + 1) % p.
    All-gather, steps s = 0..p-2: send chunk (r + 1 - s) % p, receive chunk (r - s) % p and COPY it in.
    """
    ### BEGIN SOLUTION 02.ring_allreduce
    p, r = dist.get_world_size(group), dist.get_rank(group)
    if p == 1:
        return
    right, left = _global(group, (r + 1) % p), _global(group, (r - 1) % p)
    # p views into the caller's storage: writing chunks[i] writes `tensor` itself (in place, no copy back)
    chunks = list(torch.tensor_split(tensor.view(-1), p))  # p x (ceil(N/p) | floor(N/p),)
    buf = torch.empty_like(chunks[0])  # (ceil(N/p),) scratch: the biggest chunk is chunk 0

    # Reduce-scatter. At step s every rank passes one partial sum to the right: chunk (r - s) already has
    # s+1 contributions on rank r, and the right neighbour adds its own, making s+2. After p-1 steps
    # chunk (r + 1) % p has all p contributions on rank r.
    for s in range(p - 1):  # reduce-scatter
        send_i, recv_i = (r - s) % p, (r - s - 1) % p
        incoming = buf[: chunks[recv_i].numel()]  # (numel of chunk recv_i,)
        # gloo's send blocks until the peer posts its recv; every rank sends first, so post it async
        req = dist.isend(chunks[send_i], right, group=group)
        dist.recv(incoming, left, group=group)  # left's partial sum of chunk recv_i
        req.wait()  # chunks[send_i] must not change while it is still on the wire
        chunks[recv_i] += incoming  # one more rank's contribution

    # All-gather. Same ring, one step behind: rank r starts with its finished chunk (r + 1) % p and
    # each step forwards the finished chunk it received last. Received chunks are final: overwrite.
    for s in range(p - 1):  # all-gather
        send_i, recv_i = (r + 1 - s) % p, (r - s) % p
        req = dist.isend(chunks[send_i], right, group=group)
        dist.recv(chunks[recv_i], left, group=group)  # lands straight in the caller's tensor
        req.wait()
    ### END SOLUTION


def tree_allreduce(tensor: torch.Tensor, group=None) -> None:
    """In-place sum all-reduce of `tensor` over `group` by recursive doubling.

    Let q be the largest power of two <= p and e = p - q the extra ranks.
    1. Fold: extra rank r >= q sends its tensor to r - q, which adds it in.
    2. Ranks 0..q-1 run log2(q) rounds: in round k swap the whole tensor with r XOR 2^k and add.
    3. Unfold: rank r < e sends the result back to r + q.
    Messages per rank (each one the whole tensor): log2(q) sends and log2(q) recvs on ranks e..q-1,
    log2(q) + 1 of each on ranks 0..e-1, one of each on the extra ranks q..p-1.
    """
    ### BEGIN SOLUTION 02.tree_allreduce
    p, r = dist.get_world_size(group), dist.get_rank(group)
    q = 1 << (p.bit_length() - 1)  # largest power of two <= p
    extra = p - q
    buf = torch.empty_like(tensor)  # same shape as tensor: every message here is the whole thing

    # 1. Fold the extra ranks in, so the core is a power of two. The extra rank then just waits.
    if r >= q:
        dist.send(tensor, _global(group, r - q), group=group)  # partner is receiving: no deadlock
        dist.recv(tensor, _global(group, r - q), group=group)  # the final sum, in place
        return
    if r < extra:
        dist.recv(buf, _global(group, r + q), group=group)
        tensor += buf  # now holds ranks r and r + q

    # 2. Recursive doubling: after round k, rank r holds the sum over the 2^(k+1) core ranks that agree
    # with r on every bit above k. After log2(q) rounds that is all of them.
    mask = 1
    while mask < q:
        partner = _global(group, r ^ mask)
        req = dist.isend(tensor, partner, group=group)  # both partners send first: async
        dist.recv(buf, partner, group=group)
        req.wait()  # tensor is about to change: the send must be finished
        tensor += buf  # both partners now hold the same partial sum
        mask <<= 1

    # 3. Unfold: hand the finished sum back to the extra rank that we folded in.
    if r < extra:
        dist.send(tensor, _global(group, r + q), group=group)
    ### END SOLUTION


# ---------------------------------------------------------------------------------------------------------
# Measuring (ungraded). nccl-tests convention, doc/PERFORMANCE.md: algbw = S / t with S = N * element size
# and GB = 1e9 bytes; busbw = algbw * 2(p-1)/p, the fraction of S each rank must move at the very least.
# ---------------------------------------------------------------------------------------------------------


def bus_bandwidth(nbytes: int, seconds: float, world_size: int) -> float:
    """All-reduce bus bandwidth in GB/s (1e9 bytes), as nccl-tests reports it."""
    algbw = nbytes / seconds / 1e9
    return algbw * 2 * (world_size - 1) / world_size


def time_allreduce(fn, numel: int, *, iters: int = 10, warmup: int = 2, group=None) -> float:
    """Median seconds per call of `fn(tensor, group=group)` on a float32 tensor of `numel` elements."""
    x = torch.ones(numel)  # (N,)
    times = []
    for i in range(warmup + iters):
        dist.barrier(group=group)  # start together, or we time the slowest rank's arrival
        t0 = time.perf_counter()
        fn(x, group=group)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]
