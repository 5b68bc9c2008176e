"""All-reduce two ways, from point-to-point messages only: a ring and recursive doubling.

Ring (Patarasuk & Yuan 2009): reduce-scatter then all-gather around the ring, 2(p-1) steps of one chunk each.
Every rank sends 2(p-1)/p * N elements, the bandwidth lower bound for any p, but pays 2(p-1) latencies.
Recursive doubling (Thakur, Rabenseifner & Gropp 2005): log2(p) rounds, each swapping the WHOLE tensor.
Few latencies, N * log2(p) elements sent: it wins on small messages, the ring wins on large ones.
Check: `grade exercise 02`.
Shapes: N = tensor.numel(), p = world size, r = this rank; a chunk holds ceil(N/p) or floor(N/p) elements.
"""

from __future__ import annotations

import math
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
    p = dist.get_world_size(group)
    r = dist.get_rank(group)
    chunks = torch.tensor_split(tensor.view(-1), p)
    right, left = _global(group, (r + 1) % p), _global(group, (r - 1) % p)
    for phase in ("reduce", "gather"):
        for s in range(p - 1):
            if phase == "reduce":
                send_i, recv_i = (r - s) % p, (r - s - 1) % p
            else:
                send_i, recv_i = (r + 1 - s) % p, (r - s) % p
            # post the receive first, then the send: neither blocks the other
            incoming = torch.empty_like(chunks[recv_i])
            rreq = dist.irecv(incoming, left)
            sreq = dist.isend(chunks[send_i], right)
            rreq.wait()
            sreq.wait()
            if phase == "reduce":
                chunks[recv_i].add_(incoming)
            else:
                chunks[recv_i].copy_(incoming)


def recursive_doubling_allreduce(tensor: torch.Tensor, group=None) -> None:
    """In-place sum all-reduce of `tensor` over `group` by recursive doubling.

    Let q be the largest power of two <= p and e = p - q the extra ranks.
    1. Fold: extra rank r >= q sends its tensor to r - q, which adds it in.
    2. Ranks 0..q-1 run log2(q) rounds: in round k swap the whole tensor with r XOR 2^k and add.
    3. Unfold: rank r < e sends the result back to r + q.
    Messages per rank (each one the whole tensor): log2(q) sends and log2(q) recvs on ranks e..q-1,
    log2(q) + 1 of each on ranks 0..e-1, one of each on the extra ranks q..p-1.
    """
    p = dist.get_world_size(group)
    r = dist.get_rank(group)
    flat = tensor.view(-1)
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    tmp = torch.empty_like(flat)
    # MPICH allreduce_intra_recursive_doubling.c: among ranks 0..2*rem-1, even ranks fold onto odd ones
    if r < 2 * rem:
        if r % 2 == 0:
            dist.send(flat, _global(group, r + 1))
            newrank = -1
        else:
            dist.recv(tmp, _global(group, r - 1))
            flat.add_(tmp)
            newrank = r // 2
    else:
        newrank = r - rem
    if newrank != -1:
        mask = 1
        while mask < pof2:
            newdst = newrank ^ mask
            dst = newdst * 2 + 1 if newdst < rem else newdst + rem  # virtual rank -> real rank
            req = dist.isend(flat.clone(), _global(group, dst))
            dist.recv(tmp, _global(group, dst))
            req.wait()
            flat.add_(tmp)
            mask <<= 1
    if r < 2 * rem:  # unfold
        if r % 2:
            dist.send(flat, _global(group, r - 1))
        else:
            dist.recv(flat, _global(group, r + 1))


# ---------------------------------------------------------------------------------------------------------
# Tree all-reduce on an in-order binary tree: the middle rank of 0..p-1 is the root, the middle of each half
# its children, and so on. Both children's pieces are received at once; the broadcast isends to both.
# ---------------------------------------------------------------------------------------------------------


def binary_tree(p: int) -> list[int]:
    parents = [-1] * p
    todo = [(0, p, -1)]  # (lo, hi, parent of the middle of lo..hi-1)
    while todo:
        lo, hi, parent = todo.pop()
        if lo < hi:
            mid = (lo + hi) // 2
            parents[mid] = parent
            todo += [(lo, mid, mid), (mid + 1, hi, mid)]
    return parents


def tree_allreduce(tensor: torch.Tensor, group=None, num_chunks: int = 4) -> None:
    p, me = dist.get_world_size(group), dist.get_rank(group)
    if p == 1:
        return
    parents = binary_tree(p)
    parent = parents[me]
    children = [c for c in range(p) if parents[c] == me]
    pieces = torch.tensor_split(tensor.reshape(-1), num_chunks)
    for piece in pieces:
        bufs = [torch.empty_like(piece) for _ in children]
        works = [dist.irecv(b, _global(group, c), group=group) for b, c in zip(bufs, children, strict=True)]
        for w in works:
            w.wait()
        for b in bufs:
            piece += b
        if parent != -1:
            dist.send(piece, _global(group, parent), group=group)
    for piece in pieces:
        if parent != -1:
            dist.recv(piece, _global(group, parent), group=group)
        works = [dist.isend(piece, _global(group, c), group=group) for c in children]
        for w in works:
            w.wait()


# ---------------------------------------------------------------------------------------------------------
# Lower bounds
# ---------------------------------------------------------------------------------------------------------


def lower_bounds(p: int, nbytes: float, alpha: float, beta: float) -> dict[str, float]:
    return {"latency": alpha * math.ceil(math.log2(p)), "bandwidth": beta * nbytes * 2 * (p - 1) / p}


def bound_ratios(algorithm: str, p: int) -> dict[str, float]:
    lg = math.ceil(math.log2(p))
    bw = 2 * (p - 1) / p
    if algorithm == "ring":
        return {"latency": 2 * (p - 1) / lg, "bandwidth": 1.0}
    if algorithm == "rabenseifner":
        return {"latency": 2.0, "bandwidth": 1.0}
    if algorithm == "reduce_broadcast":
        return {"latency": 2.0, "bandwidth": 2 * lg / bw}
    k = int(math.log2(p))
    steps = k if 2**k == p else k + 2
    return {"latency": steps / lg, "bandwidth": steps / bw}


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
