"""Three distributed programs that hang (or crash) as written, and their fixes.

Each `*_hangs` function is given as found in a training script: leave it as it is. Write the function below it
that computes the same thing and always finishes. To see a hang for yourself, make the fix call the broken
version and run `grade exercise 08`: the report names every stuck rank and the line it is blocked on.
Shapes: n_r elements on rank r; p ranks; everything 1-D.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

# ---------------------------------------------------------------------------------------------------------
# 1. Halo exchange on a ring: every rank sends before it receives


def halo_stencil_hangs(x: torch.Tensor) -> torch.Tensor:
    """GIVEN, deadlocks: y[i] = x[i-1] + x[i] + x[i+1] over the periodic array the ranks hold in order."""
    p, r = dist.get_world_size(), dist.get_rank()
    left, right = (r - 1) % p, (r + 1) % p
    halo_left, halo_right = torch.empty_like(x[:1]), torch.empty_like(x[:1])
    dist.send(x[-1:].clone(), right)  # my last element is my right neighbour's left halo
    dist.send(x[:1].clone(), left)  # my first element is my left neighbour's right halo
    dist.recv(halo_left, left)
    dist.recv(halo_right, right)
    padded = torch.cat([halo_left, x, halo_right])  # (n_r + 2,)
    return padded[:-2] + padded[1:-1] + padded[2:]  # (n_r,)


def halo_stencil(x: torch.Tensor) -> torch.Tensor:
    """The same stencil, on any number of ranks >= 2 (2 and 3 included: left may be right, p may be odd).

    Exactly one message to each neighbour and one from each, of one element: x[-1:] to the right, x[:1] to
    the left. Send/recv only (isend/irecv allowed); no collective.
    """
    ### BEGIN SOLUTION 08.halo_exchange
    r, p = dist.get_rank(), dist.get_world_size()
    right, left = (r + 1) % p, (r - 1) % p
    halo_left = torch.empty_like(x[:1])  # (1,): the left neighbour's last element
    halo_right = torch.empty_like(halo_left)  # (1,): the right neighbour's first element
    # Every rank sends first, so the sends must not block: post them, then receive, then wait. The tags
    # keep the two messages apart when left == right (p = 2): tag 0 travels rightwards, tag 1 leftwards.
    sends = [dist.isend(x[-1:].clone(), right, tag=0), dist.isend(x[:1].clone(), left, tag=1)]
    dist.recv(halo_left, left, tag=0)  # the left neighbour's last element
    dist.recv(halo_right, right, tag=1)  # the right neighbour's first element
    for request in sends:
        request.wait()
    y = torch.cat([halo_left, x, halo_right])  # (n_r + 2,): x with one halo element on each side
    return y[:-2] + y[1:-1] + y[2:]  # (n_r,)
    ### END SOLUTION


# ---------------------------------------------------------------------------------------------------------
# 2. Uneven micro-batches: a rank that runs out of data skips the remaining all-reduces


def sum_microbatches_hangs(grads: list[torch.Tensor], like: torch.Tensor) -> list[torch.Tensor]:
    """GIVEN, hangs when ranks hold different numbers of micro-batches: each one's grad summed over ranks."""
    out = []
    for g in grads:
        g = g.clone()
        dist.all_reduce(g)  # a rank with fewer micro-batches stops calling this: the others wait forever
        out.append(g)
    return out


def sum_microbatches(grads: list[torch.Tensor], like: torch.Tensor) -> list[torch.Tensor]:
    """Rank r holds len(grads) gradients (maybe none); `like` is a zero tensor of their shape and dtype.

    Return, on every rank, one tensor per micro-batch index i < max over ranks of len(grads): the sum over
    ranks of grads[i], where a rank without an i-th gradient contributes zeros. Every rank must issue the same
    collectives in the same order.
    """
    ### BEGIN SOLUTION 08.uneven_microbatches
    # Agree on the number of steps first: one all-reduce (MAX) that every rank makes, whatever its data.
    steps = torch.tensor([len(grads)])
    dist.all_reduce(steps, op=dist.ReduceOp.MAX)
    out = []
    for i in range(int(steps)):
        g = grads[i].clone() if i < len(grads) else torch.zeros_like(like)  # out of data: contribute zeros
        dist.all_reduce(g)  # now every rank makes exactly `steps` of these
        out.append(g)
    return out
    ### END SOLUTION


# ---------------------------------------------------------------------------------------------------------
# 3. Uneven shards: all_gather with a different length on every rank


def gather_uneven_hangs(x: torch.Tensor) -> torch.Tensor:
    """GIVEN, breaks when lengths differ: every rank's x, concatenated in rank order."""
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]  # assumes everyone has len(x)
    dist.all_gather(parts, x)
    return torch.cat(parts)


def gather_uneven(x: torch.Tensor) -> torch.Tensor:
    """The concatenation of every rank's x (n_r elements, n_r >= 0, different on each rank), in rank order.

    Collectives only, and at most two of them, each dist.all_gather or dist.all_gather_into_tensor; no
    send/recv and no *_object collective. The result keeps x's dtype.
    """
    ### BEGIN SOLUTION 08.uneven_gather
    p = dist.get_world_size()
    n = torch.tensor([x.numel()])
    lengths = [torch.zeros_like(n) for _ in range(p)]
    dist.all_gather(lengths, n)  # 1. everyone learns everyone's n_r: (1,) each
    longest = max(int(m) for m in lengths)
    padded = torch.zeros(longest, dtype=x.dtype)  # (max n_r,): the same shape on every rank
    padded[: x.numel()] = x
    parts = [torch.empty_like(padded) for _ in range(p)]
    dist.all_gather(parts, padded)  # 2. now the shapes agree
    return torch.cat([part[: int(m)] for part, m in zip(parts, lengths, strict=True)])  # (sum n_r,)
    ### END SOLUTION
