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
    p = dist.get_world_size(group)
    r = dist.get_rank(group)
    chunks = torch.tensor_split(tensor.view(-1), p)
    src, dst = _global(group, (r - 1) % p), _global(group, (r + 1) % p)
    # MPICH allreduce_intra_ring.c: send (r-1-i), receive (r-2-i); rank r ends owning chunk r
    for i in range(p - 1):
        send_i, recv_i = (r - 1 - i) % p, (r - 2 - i) % p
        tmp = torch.empty_like(chunks[recv_i])
        reqs = [dist.irecv(tmp, src), dist.isend(chunks[send_i], dst)]
        for q in reqs:
            q.wait()
        chunks[recv_i].add_(tmp)
    # allgatherv ring: send own chunk r first, then the ones received
    for i in range(p - 1):
        send_i, recv_i = (r - i) % p, (r - 1 - i) % p
        reqs = [dist.irecv(chunks[recv_i], src), dist.isend(chunks[send_i], dst)]
        for q in reqs:
            q.wait()


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
    q = 1 << (p.bit_length() - 1)
    extra = p - q
    buf = torch.empty_like(flat)
    if r >= q:  # extra rank: fold onto r - q, then wait for the result
        dist.send(flat, _global(group, r - q))
        dist.recv(flat, _global(group, r - q))
        return
    if r < extra:
        dist.recv(buf, _global(group, r + q))
        flat += buf
    mask = 1
    while mask < q:
        peer = _global(group, r ^ mask)
        req = dist.isend(flat.clone(), peer)
        dist.recv(buf, peer)
        req.wait()
        flat += buf
        mask <<= 1
    if r < extra:
        dist.send(flat, _global(group, r + q))


# ---------------------------------------------------------------------------------------------------------
# Tree all-reduce: a heap-numbered binary tree hung from the LAST rank, blocking send/recv, two phases.
# ---------------------------------------------------------------------------------------------------------


def binary_tree(p: int) -> list[int]:
    # Heap positions counted from the last rank: position h = p - 1 - rank, children 2h+1 and 2h+2.
    parents = []
    for rank in range(p):
        h = p - 1 - rank
        parents.append(-1 if h == 0 else p - 1 - (h - 1) // 2)
    return parents


def tree_allreduce(tensor: torch.Tensor, group=None, num_chunks: int = 4) -> None:
    p, me = dist.get_world_size(group), dist.get_rank(group)
    parents = binary_tree(p)
    up = parents[me]
    kids = [c for c in reversed(range(p)) if parents[c] == me]
    flat = tensor.view(-1)
    pieces = torch.tensor_split(flat, num_chunks)
    for piece in pieces:  # reduce, one piece at a time
        for kid in kids:
            tmp = torch.empty_like(piece)
            dist.recv(tmp, _global(group, kid), group=group)
            piece.add_(tmp)
        if up != -1:
            dist.send(piece, _global(group, up), group=group)
    for piece in pieces:  # broadcast, one piece at a time
        if up != -1:
            dist.recv(piece, _global(group, up), group=group)
        for kid in kids:
            dist.send(piece, _global(group, kid), group=group)


# ---------------------------------------------------------------------------------------------------------
# Lower bounds, from a table of (alpha count, beta count in units of n) per algorithm.
# ---------------------------------------------------------------------------------------------------------


def lower_bounds(p: int, nbytes: float, alpha: float, beta: float) -> dict[str, float]:
    rounds = (p - 1).bit_length()  # ceil(log2 p) without floats
    return {"latency": rounds * alpha, "bandwidth": 2.0 * (p - 1) * nbytes * beta / p}


def bound_ratios(algorithm: str, p: int) -> dict[str, float]:
    lg = (p - 1).bit_length()
    floor_lg = p.bit_length() - 1
    extra = 0 if p == 1 << floor_lg else 2
    table = {
        "ring": (2 * (p - 1), 2 * (p - 1) / p),
        "recursive_doubling": (floor_lg + extra, floor_lg + extra),
        "rabenseifner": (2 * lg, 2 * (p - 1) / p),
        "reduce_broadcast": (2 * lg, 2 * lg),
    }
    a, b = table[algorithm]
    bounds = lower_bounds(p, 1.0, 1.0, 1.0)
    return {"latency": a / bounds["latency"], "bandwidth": b / bounds["bandwidth"]}


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
