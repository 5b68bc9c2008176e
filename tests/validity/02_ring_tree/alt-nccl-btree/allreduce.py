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
    left, right = _global(group, (r - 1) % p), _global(group, (r + 1) % p)
    scratch = torch.empty_like(chunks[0])
    # counter-clockwise ring: send to the LEFT neighbour, receive from the RIGHT one
    for s in range(p - 1):
        send_i, recv_i = (r + s) % p, (r + s + 1) % p
        req = dist.isend(chunks[send_i], left)
        got = scratch[: chunks[recv_i].numel()]
        dist.recv(got, right)
        req.wait()
        chunks[recv_i].add_(got)
    # rank r now owns chunk (r - 1) % p
    for s in range(p - 1):
        send_i, recv_i = (r - 1 + s) % p, (r + s) % p
        req = dist.isend(chunks[send_i], left)
        dist.recv(chunks[recv_i], right)
        req.wait()


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
# Tree all-reduce on NCCL's binary tree (ncclGetBtree, src/graph/trees.cc): rank 0 is the root with one child.
# Pieces are ceil(N/k)-element slices (the last ones shorter or empty). The broadcast runs one piece behind
# the reduce in the same loop: at step t a rank sends piece t up, then passes piece t-1 down.
# ---------------------------------------------------------------------------------------------------------


def binary_tree(p: int) -> list[int]:
    parents = [-1] * p
    for rank in range(1, p):
        bit = rank & -rank  # lowest set bit
        up = (rank ^ bit) | (bit << 1)
        if up >= p:
            up = rank ^ bit
        parents[rank] = up
    return parents


def tree_allreduce(tensor: torch.Tensor, group=None, num_chunks: int = 4) -> None:
    p, me = dist.get_world_size(group), dist.get_rank(group)
    parents = binary_tree(p)
    up = parents[me]
    kids = [c for c in range(p) if parents[c] == me]
    flat = tensor.view(-1)
    size = -(-flat.numel() // num_chunks)
    pieces = [flat[j * size : (j + 1) * size] for j in range(num_chunks)]
    scratch = [torch.empty_like(flat[:size]) for _ in kids]

    def reduce_piece(piece: torch.Tensor) -> None:
        reqs = [
            dist.irecv(scratch[i][: piece.numel()], _global(group, kid), group=group)
            for i, kid in enumerate(kids)
        ]
        for i, req in enumerate(reqs):
            req.wait()
            piece += scratch[i][: piece.numel()]
        if up >= 0:
            dist.isend(piece, _global(group, up), group=group).wait()

    def broadcast_piece(piece: torch.Tensor) -> None:
        if up >= 0:
            dist.irecv(piece, _global(group, up), group=group).wait()
        reqs = [dist.isend(piece, _global(group, kid), group=group) for kid in kids]
        for req in reqs:
            req.wait()

    for t in range(num_chunks + 1):
        if t < num_chunks:
            reduce_piece(pieces[t])
        if t >= 1:
            broadcast_piece(pieces[t - 1])


# ---------------------------------------------------------------------------------------------------------
# Lower bounds
# ---------------------------------------------------------------------------------------------------------


def lower_bounds(p: int, nbytes: float, alpha: float, beta: float) -> dict[str, float]:
    lat = 0
    while (1 << lat) < p:  # rounds until the holders of one rank's data cover all p
        lat += 1
    return {"latency": lat * alpha, "bandwidth": (p - 1) * 2 / p * nbytes * beta}


def bound_ratios(algorithm: str, p: int) -> dict[str, float]:
    n, alpha, beta = 1.0, 1.0, 1.0
    bound = lower_bounds(p, n, alpha, beta)
    if algorithm == "ring":
        t_alpha, t_beta = 2 * (p - 1) * alpha, 2 * (p - 1) / p * n * beta
    elif algorithm == "recursive_doubling":
        q = 1
        while 2 * q <= p:
            q *= 2
        msgs = q.bit_length() - 1 + (0 if q == p else 2)  # + fold and unfold
        t_alpha, t_beta = msgs * alpha, msgs * n * beta
    elif algorithm == "rabenseifner":
        t_alpha, t_beta = 2 * math.log2(p) * alpha, 2 * (p - 1) / p * n * beta
    else:  # reduce_broadcast
        t_alpha, t_beta = 2 * bound["latency"], 2 * bound["latency"] * n * beta
    return {"latency": t_alpha / bound["latency"], "bandwidth": t_beta / bound["bandwidth"]}


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
