"""All-reduce three ways from point-to-point messages only, and the bounds they are measured against.

ring_allreduce                 Patarasuk & Yuan 2009: reduce-scatter then all-gather around a ring.
recursive_doubling_allreduce   Thakur, Rabenseifner & Gropp 2005: log2 rounds of whole-tensor exchanges.
binary_tree / tree_allreduce   a binary tree: reduce up, broadcast down, pipelined in pieces (NCCL's tree).
lower_bounds / bound_ratios    the latency and bandwidth lower bounds; how far each algorithm is from them.
Check: `grade exercise 02`.
Shapes: N = tensor.numel(), p = the size of `group`, r = this rank's rank in `group`.

`group` is None (the default group: the whole world) or any process group this rank belongs to, made by
dist.new_group: a sub-group whose members may be any ranks (not necessarily 0, 1, ..., nor adjacent). Ring
neighbours, partners and tree ranks are group ranks 0..p-1; dist.send/dist.recv address global ranks, which
`_global` gives (dist.get_global_rank; dist.get_group_rank goes back). Only members call these functions,
and no message may go to a rank outside `group`.
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
    """In-place sum all-reduce of a contiguous `tensor` (any shape, any dtype) over `group`, as a ring.

    Contract (what the grader checks):
    - afterwards every rank's `tensor` holds the elementwise sum over all ranks, added in its own dtype;
    - rank r sends only to one ring neighbour and receives only from the other, the same direction on every
      rank (either direction);
    - 2(p-1) sends and 2(p-1) receives per rank, each message one chunk of
      `torch.tensor_split(tensor.view(-1), p)` (so at most ceil(N/p) elements; empty chunks still travel);
    - per rank, about 2(p-1)/p * N elements sent: every chunk but one in each of the two phases.
    Which chunk moves at which step is yours to work out (README, "The ring").
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


def recursive_doubling_allreduce(tensor: torch.Tensor, group=None) -> None:
    """In-place sum all-reduce of `tensor` (any shape, any dtype) over `group` by recursive doubling.

    Contract (what the grader checks):
    - afterwards every rank's `tensor` holds the elementwise sum, added in its own dtype;
    - every message carries the whole tensor;
    - when p is a power of two, each rank sends and receives log2 p messages, and in each round the ranks
      pair off and swap;
    - when p is not, q = the largest power of two <= p: the p - q extra ranks each hand their tensor to a
      partner of their own and get the sum back from it (one message each way), while q ranks run the
      doubling among themselves. Which extra rank pairs with which partner is free.
    """
    ### BEGIN SOLUTION 02.recursive_doubling
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
# A real tree: reduce up a binary tree, broadcast down the same tree, pipelined in pieces (NCCL's TREE)
# ---------------------------------------------------------------------------------------------------------


def binary_tree(p: int) -> list[int]:
    """A binary tree over ranks 0..p-1 (p >= 1): parents[r] is rank r's parent, -1 for the one root.

    Contract: following parents from any rank reaches the root without a cycle; no rank is the parent of
    more than two ranks; no rank is more than ceil(log2 p) hops from the root. Any such tree is fine
    (heap-numbered, in-order, NCCL's): the choice of root and numbering is yours.
    """
    ### BEGIN SOLUTION 02.binary_tree
    # Heap numbering: rank i's children are 2i+1 and 2i+2, so its parent is (i-1)//2, and rank 0 is the root.
    # Level d holds ranks 2^d - 1 .. 2^(d+1) - 2, so the deepest rank, p - 1, sits floor(log2 p) levels down.
    return [-1] + [(i - 1) // 2 for i in range(1, p)]
    ### END SOLUTION


def tree_allreduce(tensor: torch.Tensor, group=None, num_chunks: int = 4) -> None:
    """In-place sum all-reduce of a contiguous `tensor` (any shape, any dtype) over `group`, along a binary
    tree: a reduce up the tree, then a broadcast down the same tree, pipelined in `num_chunks` pieces.

    Contract (what the grader checks):
    - afterwards every rank's `tensor` holds the elementwise sum, bitwise identical on every rank;
    - the messages form one binary tree over the ranks (a rank talks only to its parent and at most two
      children; no rank more than ceil(log2 p) hops from the root), the same tree up and down;
    - the flat tensor travels in exactly `num_chunks` pieces of at most ceil(N/num_chunks) elements (some
      empty when N < num_chunks): each tree edge carries each piece once up and once down, so a rank sends
      at most three times N elements;
    - a rank sends to its parent before it receives from it (the reduce goes up before the sum comes down);
    - pipelined, with two or more pieces: a rank passes its first piece on before it posts the receive of
      its last one, in the reduce (to its parent) and in the broadcast (to its children); and the reduce
      does not wait for the broadcast: a rank sends its second piece up before it receives its first back.
    You may use your own `binary_tree`.
    """
    ### BEGIN SOLUTION 02.tree_allreduce
    p, r = dist.get_world_size(group), dist.get_rank(group)
    if p == 1:
        return
    parents = binary_tree(p)
    parent = parents[r]  # -1 on the root
    children = [c for c in range(p) if parents[c] == r]  # 0, 1 or 2 ranks
    # num_chunks views into the caller's storage: adding into a piece, or receiving into it, is in place
    pieces = list(torch.tensor_split(tensor.view(-1), num_chunks))  # k x (ceil(N/k) | floor(N/k),)
    buf = torch.empty_like(pieces[0])  # (ceil(N/k),): one child's partial sum of one piece

    # Reduce, piece by piece: as soon as piece j holds my whole subtree's sum it goes up, and only then do
    # I wait for piece j+1. So all levels of the tree work at once, each on another piece (a pipeline):
    # the last piece reaches the root about (depth + k) piece-times after the start, not depth * k.
    for piece in pieces:
        incoming = buf[: piece.numel()]
        for child in children:
            dist.recv(incoming, _global(group, child), group=group)  # child's subtree sum of this piece
            piece += incoming
        if parent >= 0:
            # Blocking is safe: in the reduce data only flows up, so my parent is (or will be) receiving.
            dist.send(piece, _global(group, parent), group=group)

    # Broadcast down the same tree, piece by piece: the root's pieces hold the sum; everyone else's are
    # overwritten with it. Every rank ends with the root's bytes: bitwise identical everywhere.
    for piece in pieces:
        if parent >= 0:
            dist.recv(piece, _global(group, parent), group=group)
        for child in children:
            dist.send(piece, _global(group, child), group=group)
    ### END SOLUTION


# ---------------------------------------------------------------------------------------------------------
# Lower bounds (alpha-beta model): how close does each algorithm get?
# ---------------------------------------------------------------------------------------------------------

ALGORITHMS = ("ring", "recursive_doubling", "rabenseifner", "reduce_broadcast")
"""ring and recursive_doubling as in this file (recursive doubling with its fold when p is not a power of
two); rabenseifner (p a power of two); reduce_broadcast: exercise 01's binomial reduce then binomial
broadcast."""


def lower_bounds(p: int, nbytes: float, alpha: float, beta: float) -> dict[str, float]:
    """The two lower bounds on the time of an all-reduce of `nbytes` bytes per rank over p >= 2 ranks, in
    seconds, under the alpha-beta model (alpha s per message, beta s per byte):
    {"latency": the least time spent on message start-ups, "bandwidth": the least time spent moving bytes}.
    See the README ("The bandwidth bound", "The latency bound") and ../shared/reference/ground-truth.md,
    sections 1 and 2.
    """
    ### BEGIN SOLUTION 02.lower_bounds
    # Latency: the last rank's data must reach everyone, and the number of ranks that can know it at most
    # doubles per message round: ceil(log2 p) rounds (only the alpha terms count here).
    latency = math.ceil(math.log2(p)) * alpha
    # Bandwidth: nccl-tests' bound, each rank sends and receives at least 2(p-1)/p of the tensor.
    bandwidth = 2 * (p - 1) / p * nbytes * beta
    return {"latency": latency, "bandwidth": bandwidth}
    ### END SOLUTION


def bound_ratios(algorithm: str, p: int) -> dict[str, float]:
    """How far `algorithm` (one of ALGORITHMS) is from each bound on p >= 2 ranks:
    {"latency": its alpha term / the latency bound, "bandwidth": its beta term / the bandwidth bound}.

    1.0 means the algorithm reaches that bound. Its terms are the alpha-beta costs in the README's table;
    where the table has none (recursive doubling when p is not a power of two), count the messages and
    bytes of your own schedule. Both ratios depend on p only, not on the size, alpha or beta.
    """
    ### BEGIN SOLUTION 02.lower_bounds
    rounds = math.ceil(math.log2(p))  # the latency bound, in units of alpha
    volume = 2 * (p - 1) / p  # the bandwidth bound, in units of n * beta
    if algorithm == "ring":
        alphas, betas = 2 * (p - 1), volume  # 2(p-1) steps of n/p bytes each
    elif algorithm == "recursive_doubling":
        q = 1 << (p.bit_length() - 1)  # the ranks that run the doubling
        # log2 q whole-tensor exchanges, plus the fold and the unfold on the critical path when p > q
        steps = (q.bit_length() - 1) + (2 if p > q else 0)
        alphas, betas = steps, steps
    elif algorithm == "rabenseifner":
        if p & (p - 1):
            raise ValueError(f"rabenseifner: p={p} is not a power of two")
        alphas, betas = 2 * rounds, volume  # halving then doubling, log2 p steps each
    elif algorithm == "reduce_broadcast":
        alphas, betas = 2 * rounds, 2 * rounds  # the whole tensor down each of 2 ceil(log2 p) levels
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    return {"latency": alphas / rounds, "bandwidth": betas / volume}
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
